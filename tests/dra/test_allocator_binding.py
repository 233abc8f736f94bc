"""Device taints and tolerations, binding conditions and ``allocation.nodeSelector``.

Cases ported from upstream's ``structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.37.2), named as there: which device is picked, and what
the result carries (``tolerations``, ``bindingConditions``, ``bindingFailureConditions``, the
node selector of ``createNodeSelector``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.dra.structured import AllocationError, DeviceID, Node, Unallocatable, allocate

from .allocator_builders import (
    DRIVER_A,
    DRIVER_B,
    LOCAL_NODE_1,
    NODE_1,
    POOL_1,
    claim,
    device,
    picked,
    request,
    resource_class,
    resource_slice,
)

CLASS_A, CLASS_B = resource_class(), resource_class("class-b", DRIVER_B)
TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TOLERATE_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {"operator": "Equal", "key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
NO_TAINTS = {"DRADeviceTaints": False}


def tainted(name: str, *taints: dict[str, Any]) -> dict[str, Any]:
    return device(name, taints=list(taints))


def status(slices: list[Any], *requests: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    [result] = allocate([claim(*requests)], [CLASS_A, CLASS_B], slices, NODE_1, **kwargs)
    return result.as_status("node-1")


def results(allocation: dict[str, Any]) -> list[dict[str, Any]]:
    return list(allocation["devices"]["results"])


def entry(req: str, dev: str, **fields: Any) -> dict[str, Any]:
    return {"request": req, "driver": DRIVER_A, "pool": POOL_1, "device": dev, **fields}


@pytest.mark.parametrize(
    "devices",
    [
        [tainted("device-1", TAINT_NO_SCHEDULE), tainted("device-2", TAINT_NO_EXECUTE)],
        [tainted("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)],
    ],
    ids=["tainted-two-devices", "tainted-one-device-two-taints"],
)
def test_untolerated_taints_leave_nothing(devices: list[dict[str, Any]]) -> None:
    with pytest.raises(Unallocatable, match=r"ruled out: \d by taints"):
        status([resource_slice("slice-1", devices)], request("req-0"))


def test_tainted_two_devices_tolerated() -> None:
    slices = [
        resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE), tainted("device-2", TAINT_NO_EXECUTE)])
    ]
    found = status(slices, request("req-0", tolerations=[TOLERATE_NO_EXECUTE]))
    assert results(found) == [entry("req-0", "device-2", tolerations=[TOLERATE_NO_EXECUTE])]
    assert found["nodeSelector"] == LOCAL_NODE_1


def test_tainted_two_devices_prioritized_list_tolerated() -> None:
    slices = [
        resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE), tainted("device-2", TAINT_NO_EXECUTE)])
    ]
    subs = [
        {"name": "subreq-0", "deviceClassName": "class-a"},
        {"name": "subreq-1", "deviceClassName": "class-a", "tolerations": [TOLERATE_NO_EXECUTE]},
    ]
    found = status(slices, {"name": "req-0", "firstAvailable": subs})
    assert results(found) == [entry("req-0/subreq-1", "device-2", tolerations=[TOLERATE_NO_EXECUTE])]


def test_tainted_no_effect() -> None:
    assert results(status([resource_slice("slice-1", [tainted("device-1", TAINT_NONE)])], request("req-0"))) == [
        entry("req-0", "device-1")
    ]


def test_tainted_one_device_two_taints_both_tolerated() -> None:
    slices = [resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)])]
    both = [TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]
    assert results(status(slices, request("req-0", tolerations=both))) == [entry("req-0", "device-1", tolerations=both)]


def test_tainted_disabled() -> None:
    slices = [resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)])]
    assert results(status(slices, request("req-0"), features=NO_TAINTS)) == [entry("req-0", "device-1")]


@pytest.mark.parametrize(("features", "found"), [(None, []), (NO_TAINTS, ["req-0/subreq-1"])])
def test_tainted_prioritized_list(features: dict[str, bool] | None, found: list[str]) -> None:
    slices = [resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE)])]
    subs = [{"name": "subreq-0", "deviceClassName": "class-b"}, {"name": "subreq-1", "deviceClassName": "class-a"}]
    c = claim({"name": "req-0", "firstAvailable": subs})
    if not found:
        with pytest.raises(Unallocatable):
            allocate([c], [CLASS_A, CLASS_B], slices, NODE_1, features=features)
        return
    [result] = allocate([c], [CLASS_A, CLASS_B], slices, NODE_1, features=features)
    assert [r.request for r in result.results] == found


@pytest.mark.parametrize(("features", "allocates"), [(None, False), (NO_TAINTS, True)])
def test_tainted_admin_access(features: dict[str, bool] | None, allocates: bool) -> None:
    """Admin access ignores "in use" but not taints; its result says ``adminAccess: true``."""
    slices = [resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE)])]
    held = [DeviceID(DRIVER_A, POOL_1, "device-1"), DeviceID(DRIVER_A, POOL_1, "device-2")]
    c = claim(request("req-0", adminAccess=True))
    if not allocates:
        with pytest.raises(Unallocatable):
            allocate([c], [CLASS_A], slices, NODE_1, held, features=features)
        return
    [result] = allocate([c], [CLASS_A], slices, NODE_1, held, features=features)
    assert results(result.as_status("node-1")) == [entry("req-0", "device-1", adminAccess=True)]


@pytest.mark.parametrize(("features", "allocates"), [(None, False), (NO_TAINTS, True)])
def test_tainted_all_devices_single(features: dict[str, bool] | None, allocates: bool) -> None:
    slices = [resource_slice("slice-1", [tainted("device-1", TAINT_NO_SCHEDULE)])]
    c = claim({"name": "req-0", "exactly": {"deviceClassName": "class-a", "allocationMode": "All"}})
    if not allocates:
        with pytest.raises(Unallocatable):
            allocate([c], [CLASS_A], slices, NODE_1, features=features)
        return
    [result] = allocate([c], [CLASS_A], slices, NODE_1, features=features)
    assert picked(result) == [("req-0", "device-1")]


def bound(name: str, n: str = "") -> dict[str, Any]:
    return device(name, bindingConditions=[f"IsPrepare{n}"], bindingFailureConditions=[f"BindingFailed{n}"])


def test_device_binding_conditions() -> None:
    found = status([resource_slice("slice-1", [bound("device-1")])], request("req-0"))
    assert results(found) == [
        entry("req-0", "device-1", bindingConditions=["IsPrepare"], bindingFailureConditions=["BindingFailed"])
    ]
    assert found["nodeSelector"] == LOCAL_NODE_1


def test_binding_conditions_multiple_devices() -> None:
    slices = [resource_slice("slice-1", [bound("device-1"), bound("device-2", "2"), bound("device-3", "3")])]
    found = status(slices, request("req-0", count=2), request("req-1"))
    assert [(r["request"], r["device"], r["bindingConditions"]) for r in results(found)] == [
        ("req-0", "device-1", ["IsPrepare"]),
        ("req-0", "device-2", ["IsPrepare2"]),
        ("req-1", "device-3", ["IsPrepare3"]),
    ]


def test_binding_conditions_with_and_without() -> None:
    found = status(
        [resource_slice("slice-1", [device("device-1"), bound("device-2")])], request("req-0"), request("req-1")
    )
    assert results(found) == [
        entry("req-0", "device-1"),
        entry("req-1", "device-2", bindingConditions=["IsPrepare"], bindingFailureConditions=["BindingFailed"]),
    ]


@pytest.mark.parametrize("gate", ["DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"])
def test_binding_conditions_without_feature_gate(gate: str) -> None:
    """Both gates are needed (the scheduler's ``AllocatorFeatures``); explain names the gate."""
    with pytest.raises(
        Unallocatable, match=r"ruled out: 1 have binding conditions \(DRADeviceBindingConditions is off\)"
    ):
        status([resource_slice("slice-1", [bound("device-1")])], request("req-0"), features={gate: False})


def test_pools_with_binding_conditions_are_tried_last() -> None:
    """``poolHasBindingConditions``: a pool named first still comes after pools without conditions."""
    slices = [
        resource_slice("a", [bound("device-1")], pool="a-pool"),
        resource_slice("b", [device("device-1")], pool="b-pool"),
    ]
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert result.results[0].id.pool == "b-pool"


def test_node_restriction() -> None:
    """``bindsToNode`` pins the claim to the node even on a slice for a node selector."""
    earth = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "planet", "operator": "In", "values": ["earth"]}]}]}
    slices = [resource_slice("slice-1", [device("device-1", bindsToNode=True)], nodeSelector=earth)]
    node = Node("node-1", {"region": "region-1", "planet": "earth"})
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, node)
    assert result.as_status("node-1")["nodeSelector"] == LOCAL_NODE_1


def selector(*requirements: tuple[str, str, list[str]], fields: bool = False) -> dict[str, Any]:
    key = "matchFields" if fields else "matchExpressions"
    term = {key: [{"key": k, "operator": op, "values": v} for k, op, v in requirements]}
    return {"nodeSelectorTerms": [term]}


def test_node_selectors_of_the_devices_are_merged_without_repeats() -> None:
    """``createNodeSelector``: one term, each device's requirements added unless already there."""
    region = ("region", "In", ["region-1"])
    slices = [
        resource_slice("s-1", [device("device-1")], nodeSelector=selector(region), pool="p-1"),
        resource_slice("s-2", [device("device-2")], nodeSelector=selector(region, ("gpu", "Exists", [])), pool="p-2"),
        resource_slice("s-3", [device("device-3")], allNodes=True, pool="p-3"),
    ]
    [result] = allocate(
        [claim(request("req-0", count=3))], [CLASS_A], slices, Node("node-1", {"region": "region-1", "gpu": ""})
    )
    expressions = [{"key": "region", "operator": "In", "values": ["region-1"]}, {"key": "gpu", "operator": "Exists"}]
    assert result.as_status("node-1")["nodeSelector"] == {"nodeSelectorTerms": [{"matchExpressions": expressions}]}


def test_all_nodes_devices_need_no_node_selector() -> None:
    [result] = allocate(
        [claim(request("req-0"))], [CLASS_A], [resource_slice("s", [device("d")], allNodes=True)], NODE_1
    )
    assert "nodeSelector" not in result.as_status("node-1")


def test_a_slice_selector_with_two_terms_is_refused_as_upstream() -> None:
    two = {"nodeSelectorTerms": selector(("region", "In", ["region-1"]))["nodeSelectorTerms"] * 2}
    with pytest.raises(
        AllocationError,
        match=r"create NodeSelector for claim claim-0: unsupported ResourceSlice\.NodeSelector with 2 terms",
    ):
        allocate([claim(request("req-0"))], [CLASS_A], [resource_slice("s", [device("d")], nodeSelector=two)], NODE_1)
