"""Consumable capacity: devices with ``allowMultipleAllocations`` shared by several claims.

Cases ported from upstream's ``structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.37.2), named as there. Upstream's helpers: capacities
``one``/``two``/``four`` are integers; ``withCapacityRequestPolicyRange`` is default 2, range
2..4 step 2; ``withCapacityRequestPolicyValidValues(d, ...)`` is default ``d`` and valid values
``d`` plus the extra ones; a request's capacity is for ``capacity-0``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kubedevice.dra.models import DeviceClass, from_document
from kubedevice.dra.structured import (
    AllocationError,
    ClaimAllocation,
    DeviceID,
    SharedDevice,
    Unallocatable,
    allocate,
    allocated_devices,
)

from .allocator_builders import (
    DRIVER_A,
    NODE_1,
    POOL_1,
    claim,
    consumes,
    counter_set,
    device,
    picked,
    request,
    resource_class,
    resource_slice,
)


def shared_class() -> DeviceClass:
    """``classWithAllowMultipleAllocations(classA, driverA, true)``."""
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "class-a"},
            "spec": {
                "selectors": [
                    {"cel": {"expression": f'device.driver == "{DRIVER_A}" && device.allowMultipleAllocations == true'}}
                ]
            },
        }
    )
    assert isinstance(obj, DeviceClass)
    return obj


SHARED = shared_class()


def shared(name: str, capacity: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return device(name, allowMultipleAllocations=True, capacity=capacity or {}, **fields)


def ranged(value: str) -> dict[str, Any]:
    """``withCapacityRequestPolicyRange``: default 2, min 2, step 2, max 4."""
    return {
        "capacity-0": {
            "value": value,
            "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
        }
    }


def valid_values(default: str, value: str, *more: str) -> dict[str, Any]:
    policy = {"default": default, "validValues": [default, *more]}
    return {"capacity-0": {"value": value, "requestPolicy": policy}}


def asks(amount: str | None = None, name: str = "req-0", **fields: Any) -> dict[str, Any]:
    extra = {"capacity": {"requests": {"capacity-0": amount}}} if amount is not None else {}
    return request(name, **extra, **fields)


def run(claims: list[Any], devices: list[dict[str, Any]], **kwargs: Any) -> list[ClaimAllocation]:
    return allocate(claims, [SHARED], [resource_slice("slice-1", devices)], NODE_1, **kwargs)


def consumed(allocation: ClaimAllocation) -> list[tuple[str, str, dict[str, str]]]:
    return [(r.request, r.id.device, dict(r.consumed_capacity)) for r in allocation.results]


def test_consumable_capacity_disabled_feature() -> None:
    with pytest.raises(
        AllocationError,
        match="claim default/claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is "
        "disabled",
    ):
        run([claim(asks("1"))], [device("device-1")], features={"DRAConsumableCapacity": False})


def test_consumable_capacity_disabled_feature_with_prioritized_list() -> None:
    subs = [
        {"name": "subReq-0", "deviceClassName": "class-a", "capacity": {"requests": {"capacity-0": "1"}}},
        {"name": "subReq-1", "deviceClassName": "class-a", "capacity": {"requests": {"capacity-0": "1"}}},
    ]
    with pytest.raises(
        AllocationError,
        match="claim default/claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity "
        "feature is disabled",
    ):
        run(
            [claim({"name": "req-0", "firstAvailable": subs})],
            [device("device-1")],
            features={"DRAConsumableCapacity": False},
        )


def test_consumable_capacity_multi_allocatable_device_with_missing_capacity_request() -> None:
    """A request for a capacity the device does not have rules the device out."""
    with pytest.raises(Unallocatable, match=r"ruled out: 1 by capacity"):
        allocate(
            [claim(asks("1"))],
            [resource_class()],
            [resource_slice("s", [shared("device-1", {"capacity-1": {"value": "1"}})])],
            NODE_1,
        )


def test_allocation_mode_all_with_missing_capacity_request() -> None:
    all_mode = {
        "name": "req-0",
        "exactly": {
            "deviceClassName": "class-a",
            "allocationMode": "All",
            "capacity": {"requests": {"capacity-0": "1"}},
        },
    }
    with pytest.raises(Unallocatable, match="asks for all devices of class class-a, but none on node node-1 match"):
        run([claim(all_mode)], [shared("device-1", {"capacity-1": {"value": "1"}})])


def test_without_capacity_without_capacity_request_both_share_the_device() -> None:
    found = run([claim(asks(), name="claim-0"), claim(asks(), name="claim-1")], [shared("device-1")])
    assert [consumed(a) for a in found] == [[("req-0", "device-1", {})], [("req-0", "device-1", {})]]
    share_ids = [a.results[0].share_id for a in found]
    assert all(s is not None and uuid.UUID(s).version == 5 for s in share_ids)
    assert share_ids[0] != share_ids[1]
    status = found[0].as_status("node-1")["devices"]["results"][0]
    assert status["shareID"] == share_ids[0] and "consumedCapacity" not in status


def test_without_policy_without_capacity_request_each_takes_the_whole_device() -> None:
    one = {"capacity-0": {"value": "1"}}
    found = run(
        [claim(asks(), name="claim-0"), claim(asks(), name="claim-1")],
        [shared("device-1", one), shared("device-2", one)],
    )
    assert [consumed(a) for a in found] == [
        [("req-0", "device-1", {"capacity-0": "1"})],
        [("req-0", "device-2", {"capacity-0": "1"})],
    ]


def test_without_policy_without_capacity_request_block() -> None:
    with pytest.raises(Unallocatable):
        run(
            [claim(asks(), name="claim-0"), claim(asks(), name="claim-1")],
            [shared("device-1", {"capacity-0": {"value": "2"}})],
        )


def test_without_policy_with_capacity_request() -> None:
    found = run(
        [claim(asks("1"), name="claim-0"), claim(asks("1"), name="claim-1")],
        [shared("device-1", {"capacity-0": {"value": "2"}})],
    )
    assert [consumed(a) for a in found] == [[("req-0", "device-1", {"capacity-0": "1"})]] * 2
    assert found[0].as_status("node-1")["devices"]["results"][0]["consumedCapacity"] == {"capacity-0": "1"}


def test_with_policy_without_capacity_request_takes_the_default() -> None:
    found = run([claim(asks(), name="claim-0"), claim(asks(), name="claim-1")], [shared("device-1", ranged("4"))])
    assert [consumed(a) for a in found] == [[("req-0", "device-1", {"capacity-0": "2"})]] * 2


def test_with_zero_request_policy() -> None:
    found = run(
        [claim(asks(), name="claim-0"), claim(asks(), name="claim-1")], [shared("device-1", valid_values("0", "1"))]
    )
    assert [consumed(a) for a in found] == [[("req-0", "device-1", {"capacity-0": "0"})]] * 2


def test_violates_zero_request_policy() -> None:
    with pytest.raises(Unallocatable, match="by capacity"):
        run([claim(asks("1"))], [shared("device-1", valid_values("0", "1"))])


def test_with_range_policy_with_capacity_request_rounds_up_to_the_minimum() -> None:
    found = run([claim(asks("1"), name="claim-0"), claim(asks("1"), name="claim-1")], [shared("device-1", ranged("4"))])
    assert [consumed(a) for a in found] == [[("req-0", "device-1", {"capacity-0": "2"})]] * 2


def test_with_range_policy_step() -> None:
    [found] = run([claim(asks("3"))], [shared("device-1", ranged("4"))])
    assert consumed(found) == [("req-0", "device-1", {"capacity-0": "4"})]


@pytest.mark.parametrize(
    ("asked", "step", "written"),
    [
        ("20Gi", "1Gi", "20Gi"),  # a 1.37 differential's case: we wrote 21474836480, the scheduler 20Gi
        ("19500Mi", "1Gi", "20Gi"),  # rounded up to the next step
        ("1500M", "1G", "2G"),
        ("20Gi", "1", "21474836480"),  # a step without a suffix is DecimalSI
        ("12e3", "1e3", "12e3"),
    ],
)
def test_a_request_rounded_by_a_step_is_written_in_the_steps_format(asked: str, step: str, written: str) -> None:
    """``roundUpRange`` returns ``resource.NewQuantity(value, validRange.Step.Format)``, which
    ``consumedCapacity`` then writes in the canonical form of that format."""
    policy = {"default": step, "validRange": {"min": step, "step": step}}
    device_1 = shared("device-1", {"capacity-0": {"value": "80Gi", "requestPolicy": policy}})
    [found] = run([claim(asks(asked))], [device_1])
    assert consumed(found) == [("req-0", "device-1", {"capacity-0": written})]


@pytest.mark.parametrize(
    ("asked", "written"),
    [("100000", "100k"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("3Mi", "3Mi"), ("+5", "+5"), ("0.500k", "500")],
)
def test_a_request_taken_as_it_is_is_written_as_kubernetes_writes_it(asked: str, written: str) -> None:
    """The request's own quantity: its text where ``ParseQuantity`` keeps it (text already in
    canonical form, as the scheduler's JSON encoding then writes it back), else the canonical form."""
    [found] = run([claim(asks(asked))], [shared("device-1", {"capacity-0": {"value": "80Gi"}})])
    assert consumed(found) == [("req-0", "device-1", {"capacity-0": written})]


@pytest.mark.parametrize(
    ("amount", "devices"),
    [
        ("18446744073709551616", [shared("device-1", ranged("4"))]),
        ("9223372036854775807", [shared("device-1", ranged("4"))]),
        (
            "18446744073709551616",
            [shared("device-1", ranged("4")), shared("device-2", {"capacity-0": {"value": "36893488147419103232"}})],
        ),
    ],
    ids=[
        "consumable-capacity-range-policy-request-above-int64-rejected",
        "consumable-capacity-range-policy-rounded-value-overflow-rejected",
        "consumable-capacity-range-policy-overflow-aborts-not-skip",
    ],
)
def test_requests_that_cannot_be_represented_abort(amount: str, devices: list[dict[str, Any]]) -> None:
    with pytest.raises(AllocationError, match="cannot be represented"):
        run([claim(asks(amount))], devices)


def test_range_policy_allocation_mode_all_overflow_aborts() -> None:
    all_mode = {
        "name": "req-0",
        "exactly": {
            "deviceClassName": "class-a",
            "allocationMode": "All",
            "capacity": {"requests": {"capacity-0": "18446744073709551616"}},
        },
    }
    with pytest.raises(AllocationError, match=r"checking capacity for device device-1: .*cannot be represented"):
        run([claim(all_mode)], [shared("device-1", ranged("4"))])


def test_consumable_capacity_negative_request_aborts() -> None:
    with pytest.raises(AllocationError, match='capacity "capacity-0": capacity value is negative'):
        run([claim(asks("-5"))], [shared("device-1", {"capacity-0": {"value": "10"}})])


def test_with_valid_values_policy() -> None:
    [found] = run([claim(asks("2"))], [shared("device-1", valid_values("1", "4", "2"))])
    assert consumed(found) == [("req-0", "device-1", {"capacity-0": "2"})]


def test_with_valid_values_policy_round_up() -> None:
    [found] = run([claim(asks("2"))], [shared("device-1", valid_values("1", "3", "3"))])
    assert consumed(found) == [("req-0", "device-1", {"capacity-0": "3"})]


def test_with_exceeded_consumable_capacity_request() -> None:
    with pytest.raises(Unallocatable, match="capacity"):
        run([claim(asks("1"), name="claim-0"), claim(asks("2"), name="claim-1")], [shared("device-1", ranged("2"))])


def test_with_request_over_max_sharing_policy() -> None:
    with pytest.raises(Unallocatable, match="by capacity"):
        run([claim(asks("6"))], [shared("device-1", ranged("10"))])


def held_share(dev: str, amount: str) -> SharedDevice:
    return SharedDevice(DeviceID(DRIVER_A, POOL_1, dev), "00000000-0000-0000-0000-000000000001", {"capacity-0": amount})


def test_with_allocated_capacity_use_remaining() -> None:
    [found] = run([claim(asks("2"))], [shared("device-1", ranged("4"))], in_use=[held_share("device-1", "2")])
    assert consumed(found) == [("req-0", "device-1", {"capacity-0": "2"})]


def test_with_allocated_capacity_next_device() -> None:
    devices = [shared("device-1", ranged("2")), shared("device-2", ranged("2"))]
    [found] = run([claim(asks("2"))], devices, in_use=[held_share("device-1", "2")])
    assert picked(found) == [("req-0", "device-2")]


def test_with_no_available_consumable_capacity() -> None:
    with pytest.raises(Unallocatable, match=r"ruled out: 1 by capacity"):
        run([claim(asks("2"))], [shared("device-1", ranged("2"))], in_use=[held_share("device-1", "2")])


def test_consumed_capacity_of_allocated_claims_is_read_from_their_status() -> None:
    """``allocated_devices`` turns results with a ``shareID`` into shares with their capacity."""
    done = claim(
        asks("2"),
        name="done",
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "req-0",
                            "driver": DRIVER_A,
                            "pool": POOL_1,
                            "device": "device-1",
                            "shareID": "00000000-0000-0000-0000-000000000001",
                            "consumedCapacity": {"capacity-0": "2"},
                        }
                    ]
                }
            }
        },
    )
    held = allocated_devices([done])
    assert held == [
        SharedDevice(
            DeviceID(DRIVER_A, POOL_1, "device-1"), "00000000-0000-0000-0000-000000000001", {"capacity-0": "2"}
        )
    ]
    with pytest.raises(Unallocatable):
        run([claim(asks("2"))], [shared("device-1", ranged("2"))], in_use=held)
    [found] = run([claim(asks("2"))], [shared("device-1", ranged("4"))], in_use=held)
    assert picked(found) == [("req-0", "device-1")]


def test_with_multi_allocatable_device_backtrack() -> None:
    attr = "stringAttribute"
    devices = [
        shared("device-2", ranged("2"), attributes={attr: {"string": "stringAttributeValue1"}}),
        shared("device-1", ranged("4"), attributes={attr: {"string": "stringAttributeValue2"}}),
    ]
    claims = [
        claim(
            asks("2", "req-0"),
            asks("2", "req-1"),
            name="claim-0",
            constraints=[{"matchAttribute": f"{DRIVER_A}/{attr}"}],
        ),
        claim(asks("2"), name="claim-1"),
    ]
    found = allocate(claims, [resource_class()], [resource_slice("slice-1", devices)], NODE_1)
    assert [consumed(a) for a in found] == [
        [("req-0", "device-1", {"capacity-0": "2"}), ("req-1", "device-1", {"capacity-0": "2"})],
        [("req-0", "device-2", {"capacity-0": "2"})],
    ]


def test_with_subrequest() -> None:
    subs = [
        {"name": "subReq-0", "deviceClassName": "class-a", "capacity": {"requests": {"capacity-0": "4"}}},
        {"name": "subReq-1", "deviceClassName": "class-a", "capacity": {"requests": {"capacity-0": "2"}}},
    ]
    [found] = run([claim({"name": "req-0", "firstAvailable": subs})], [shared("device-1", ranged("2"))])
    assert consumed(found) == [("req-0/subReq-1", "device-1", {"capacity-0": "2"})]


def test_dedicated_device_with_consumable_capacity_request() -> None:
    """``consumable-capacity-dedicated-device-with-consumable-capacity-request``: exclusive devices too."""
    devices = [
        device("device-1", capacity={"capacity-0": {"value": "1"}}),
        device("device-2", capacity={"capacity-0": {"value": "2"}}),
    ]
    [found] = allocate([claim(asks("2"))], [resource_class()], [resource_slice("slice-1", devices)], NODE_1)
    assert consumed(found) == [("req-0", "device-2", {})]
    assert found.results[0].share_id is None


def test_a_shared_device_charges_its_counters_once() -> None:
    """``partitionable-consumable-capacity-shared-device-counter-not-recharged``: counters are charged once."""
    slices = [
        resource_slice(
            "slice-1",
            [shared("device-1", {"capacity-0": {"value": "2"}}, consumesCounters=[consumes("set-1", memory="4Gi")])],
            count=2,
        ),
        resource_slice("slice-2", None, count=2, counters=[counter_set("set-1", memory="4Gi")]),
    ]
    claims = [claim(asks("1"), name="claim-0"), claim(asks("1"), name="claim-1")]
    found = allocate(claims, [SHARED], slices, NODE_1)
    assert [picked(a) for a in found] == [[("req-0", "device-1")]] * 2


def test_too_little_capacity_in_total_answers_at_once() -> None:
    """21 units asked of 10 shared devices of 2: counting devices cannot see it, the capacity cut does."""
    devices = [shared(f"d{i}", {"m": {"value": "2"}}) for i in range(10)]
    requests = [request(f"r{j}", count=3, capacity={"requests": {"m": "1"}}) for j in range(7)]
    started = time.perf_counter()
    with pytest.raises(Unallocatable, match="their capacity are contended"):
        allocate([claim(*requests)], [resource_class()], [resource_slice("s", devices)], NODE_1)
    assert time.perf_counter() - started < 2.0
    [found] = allocate([claim(*requests[:6])], [resource_class()], [resource_slice("s", devices)], NODE_1)
    assert len(found.results) == 18


def test_a_bad_consumed_capacity_of_an_allocated_claim_is_an_allocation_error() -> None:
    """Read when allocating, so the caller's error handling names it instead of a traceback."""
    held = [SharedDevice(DeviceID(DRIVER_A, POOL_1, "device-1"), "00000000-0000-0000-0000-000000000001", {"m": "x"})]
    with pytest.raises(AllocationError, match=f"consumedCapacity of {DRIVER_A}/{POOL_1}/device-1: m"):
        run([claim(asks("2"))], [shared("device-1", ranged("4"))], in_use=held)
