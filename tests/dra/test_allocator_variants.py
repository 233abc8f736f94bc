"""Feature gates pick the scheduler's allocator variant, and the variant changes answers.

``structured.NewAllocator`` runs ``internal/stable`` when every enabled feature is one it
supports (admin access, prioritized lists, partitionable devices, taints: 1.34's and 1.35's
defaults), else ``internal/incubating`` (1.36's and 1.37's), else ``internal/experimental``.
The stable variant knows no capacity, binding conditions or ``distinctAttribute``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.dra.structured import AllocationError, DeviceID, SharedDevice, Unallocatable, allocate
from kubedevice.dra.structured.gates import FEATURE_DEFAULTS, Features, release_of

from .allocator_builders import (
    DRIVER_A,
    DRIVER_B,
    LOCAL_NODE_1,
    NODE_1,
    POOL_1,
    claim,
    counter_set,
    device,
    picked,
    request,
    resource_class,
    resource_slice,
)

STABLE = {"DRAConsumableCapacity": False, "DRADeviceBindingConditions": False}
CLASS_A = resource_class()


@pytest.mark.parametrize(
    ("gates", "stable"),
    [
        ({}, False),
        (STABLE, True),
        ({**STABLE, "DRAListTypeAttributes": True}, False),
        ({"DRAConsumableCapacity": False, "DRAResourceClaimDeviceStatus": False}, True),
        ({"DRAConsumableCapacity": False}, False),
    ],
)
def test_which_variant(gates: dict[str, bool], stable: bool) -> None:
    assert Features.of(gates).stable is stable


def test_defaults_are_the_1_37_gates() -> None:
    assert Features.of(None) == Features()
    assert not FEATURE_DEFAULTS["DRAListTypeAttributes"]


def test_stable_refuses_distinct_attribute() -> None:
    devices = [device(f"d{i}", attributes={"model": {"string": str(i)}}) for i in range(2)]
    c = claim(request("req-0", count=2), constraints=[{"distinctAttribute": f"{DRIVER_A}/model"}])
    with pytest.raises(AllocationError, match=r"constraint #0: empty constraint \(unsupported constraint type\?\)"):
        allocate([c], [CLASS_A], [resource_slice("s", devices)], NODE_1, features=STABLE)
    [result] = allocate([c], [CLASS_A], [resource_slice("s", devices)], NODE_1)
    assert picked(result) == [("req-0", "d0"), ("req-0", "d1")]


def test_stable_ignores_capacity_requests_incubating_refuses_them() -> None:
    small = [device("d", capacity={"memory": {"value": "1Gi"}})]
    c = claim(request("req-0", capacity={"requests": {"memory": "2Gi"}}))
    [result] = allocate([c], [CLASS_A], [resource_slice("s", small)], NODE_1, features=STABLE)
    assert picked(result) == [("req-0", "d")]
    with pytest.raises(
        AllocationError, match="has capacity requests, but the DRAConsumableCapacity feature is disabled"
    ):
        allocate([c], [CLASS_A], [resource_slice("s", small)], NODE_1, features={"DRAConsumableCapacity": False})
    with pytest.raises(Unallocatable, match="by capacity"):
        allocate([c], [CLASS_A], [resource_slice("s", small)], NODE_1)


def test_stable_ignores_binds_to_node_and_shares() -> None:
    region = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]
    }
    slices = [resource_slice("s", [device("d", bindsToNode=True)], nodeSelector=region)]
    [stable] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, features=STABLE)
    assert stable.as_status("node-1")["nodeSelector"] == region
    [incubating] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert incubating.as_status("node-1")["nodeSelector"] == LOCAL_NODE_1


def test_stable_counts_no_shares_against_counters() -> None:
    """Stable gets only the exclusively allocated devices (``AllocatedState.AllocatedDevices``)."""
    consuming: dict[str, Any] = {"consumesCounters": [{"counterSet": "set-1", "counters": {"m": {"value": "1"}}}]}
    slices = [
        resource_slice("s-1", [device("shared", **consuming), device("other", **consuming)], count=2),
        resource_slice("s-2", None, count=2, counters=[counter_set("set-1", m="1")]),
    ]
    share = SharedDevice(DeviceID(DRIVER_A, POOL_1, "shared"), "00000000-0000-0000-0000-000000000001")
    with pytest.raises(Unallocatable, match="by counters"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, [share])
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, [share], features=STABLE)
    assert picked(result) == [("req-0", "shared")]


def test_stable_takes_counter_slices_of_any_node() -> None:
    """``pools_stable.go`` adds every counter-set slice; incubating only those targeting the node."""
    slices = [
        resource_slice(
            "s-1", [device("d", consumesCounters=[{"counterSet": "set-1", "counters": {"m": {"value": "1"}}}])]
        ),
        resource_slice("s-2", None, node="node-2", counters=[counter_set("set-1", m="1")]),
    ]
    # Both slices claim to be the pool's only slice: stable sees two and calls the pool incomplete.
    with pytest.raises(Unallocatable, match="is being updated"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, features=STABLE)
    with pytest.raises(Unallocatable, match="counter set set-1 not found"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)


def test_1_36_takes_counter_slices_of_any_node_1_37_only_those_for_the_node() -> None:
    """v0.36.3's ``GatherPools`` always adds counter-set slices; v0.37.2 only those targeting the node.

    With a stale generation on this node and the newer one elsewhere, 1.36 sees a second
    generation via the counter slice and replaces the pool; 1.37 keeps the stale slice alone.
    """
    slices = [
        resource_slice("old", [device("old-0")], generation=1),
        resource_slice("new", [device("new-0")], node="node-2", generation=2, count=2),
        resource_slice("counters", None, node=None, generation=2, count=2, counters=[counter_set("set-0", m="1")]),
    ]
    [newest] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert picked(newest) == [("req-0", "old-0")]
    [explicit] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, release="1.37")
    assert picked(explicit) == [("req-0", "old-0")]
    with pytest.raises(Unallocatable):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, release="1.36")


@pytest.mark.parametrize(
    ("gates", "release"),
    [
        (None, "1.37"),
        ({}, "1.37"),
        ({"DRAConsumableCapacity": True}, "1.36"),
        ({"DRADerivedAttributes": False}, "1.37"),
    ],
)
def test_the_release_of_a_gate_table(gates: dict[str, bool] | None, release: str) -> None:
    assert release_of(gates) == release


def test_gates_that_are_off_abort_as_upstream() -> None:
    slices = [resource_slice("s", [device("d")])]
    admin = claim(request("req-0", adminAccess=True))
    with pytest.raises(AllocationError, match="admin access is requested, but the feature is disabled"):
        allocate([admin], [CLASS_A], slices, NODE_1, features={"DRAAdminAccess": False})
    subs = claim({"name": "req-0", "firstAvailable": [{"name": "a", "deviceClassName": "class-a"}]})
    with pytest.raises(AllocationError, match="has subrequests, but the DRAPrioritizedList feature is disabled"):
        allocate([subs], [CLASS_A], slices, NODE_1, features={"DRAPrioritizedList": False})


def test_1_36_keys_counters_by_pool_name_alone() -> None:
    """``partitionable-devices-counter-cache-not-crossed-between-driver-schemas``, fixed in v0.37."""
    classes = [CLASS_A, resource_class("class-b", DRIVER_B)]
    consuming = {"consumesCounters": [{"counterSet": "set-1", "counters": {"m": {"value": "1"}}}]}
    slices = [
        resource_slice("a-devices", [device("d", **consuming)], count=2),
        resource_slice("a-counters", None, count=2, counters=[counter_set("set-1", m="1")]),
        resource_slice("b-devices", [device("d", **consuming)], count=2, driver=DRIVER_B),
        resource_slice("b-counters", None, count=2, driver=DRIVER_B, counters=[counter_set("set-1", m="1")]),
    ]
    c = claim(request("req-0"), request("req-1", "class-b"))
    [result] = allocate([c], classes, slices, NODE_1, release="1.37")
    assert [(r.id.driver, r.id.device) for r in result.results] == [(DRIVER_A, "d"), (DRIVER_B, "d")]
    with pytest.raises(Unallocatable):
        allocate([c], classes, slices, NODE_1, release="1.36")
