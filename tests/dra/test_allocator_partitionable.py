"""Partitionable devices: shared counters, ``consumesCounters``, per-device node selection.

Cases ported from upstream's ``structured/internal/allocatortesting/allocator_testing.go``
(k8s.io/dynamic-resource-allocation v0.37.2), named as there; inputs and expected devices are
upstream's, with ``ResourceClaim``/``ResourceSlice`` documents in place of Go builders.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubedevice.dra.models import ResourceSlice
from kubedevice.dra.structured import DeviceID, Unallocatable, allocate, gather_pools

from .allocator_builders import (
    DRIVER_A,
    DRIVER_B,
    LOCAL_NODE_1,
    NODE_1,
    POOL_1,
    POOL_2,
    claim,
    consumes,
    counter_device,
    counter_set,
    device,
    picked,
    request,
    resource_class,
    resource_slice,
)

CLASS_A = resource_class()
OFF = {"DRAPartitionableDevices": False}


def counters_slice(name: str, *sets: dict[str, Any], pool: str = POOL_1, count: int = 2, **spec: Any) -> ResourceSlice:
    return resource_slice(name, None, pool=pool, count=count, counters=list(sets), **spec)


def test_partitionable_devices_single_device() -> None:
    slices = [
        resource_slice("slice-1", [device("device-1", consumesCounters=[consumes("set-1", memory="4Gi")])], count=2),
        counters_slice("slice-2", counter_set("set-1", memory="8Gi")),
    ]
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-1")]
    assert result.as_status("node-1")["nodeSelector"] == LOCAL_NODE_1


def test_partitionable_devices_counter_quantities_are_not_modified() -> None:
    # device-1, allocated, consumes 9e18 of 1e19: device-2's 1 still fits, past int64.
    slices = [
        resource_slice(
            "slice-1",
            [
                device("device-1", consumesCounters=[consumes("set-1", c="9000000000000000000")]),
                device("device-2", consumesCounters=[consumes("set-1", c="1")]),
            ],
            count=2,
        ),
        counters_slice("slice-2", counter_set("set-1", c="10000000000000000000")),
    ]
    held = [DeviceID(DRIVER_A, POOL_1, "device-1")]
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, held)
    assert picked(result) == [("req-0", "device-2")]


def test_partitionable_devices_multiple_devices() -> None:
    # 4Gi + 6Gi exceeds 8Gi, so req-1 skips device-2 for device-3.
    slices = [
        resource_slice(
            "slice-1",
            [
                counter_device("device-1", "set-1", memory="4Gi"),
                counter_device("device-2", "set-1", memory="6Gi"),
                counter_device("device-3", "set-1", memory="4Gi"),
            ],
            count=2,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="8Gi")),
    ]
    [result] = allocate([claim(request("req-0"), request("req-1"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-1"), ("req-1", "device-3")]


def test_partitionable_devices_multiple_counters() -> None:
    def two_sets(name: str, a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
        return device(
            name,
            consumesCounters=[
                consumes("set-1", memory=a[0], cpus=a[1]),
                consumes("set-2", memory=b[0], cpus=b[1]),
            ],
        )

    slices = [
        resource_slice(
            "slice-1",
            [
                two_sets("device-1", ("4Gi", "6"), ("2Gi", "4")),
                two_sets("device-2", ("6Gi", "4"), ("6Gi", "6")),
                two_sets("device-3", ("4Gi", "4"), ("4Gi", "4")),
            ],
            count=2,
        ),
        counters_slice(
            "slice-2", counter_set("set-1", cpus="8", memory="18Gi"), counter_set("set-2", cpus="12", memory="18Gi")
        ),
    ]
    [result] = allocate([claim(request("req-0"), request("req-1"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-2"), ("req-1", "device-3")]


def test_partitionable_devices_multiple_pools() -> None:
    def pool_devices(cpus_memory: list[tuple[str, str]]) -> list[dict[str, Any]]:
        return [
            device(f"device-{i + 1}", consumesCounters=[consumes("set-1", cpus=c, memory=m)])
            for i, (c, m) in enumerate(cpus_memory)
        ]

    slices = [
        resource_slice("slice-1", pool_devices([("6", "4Gi"), ("4", "6Gi"), ("4", "4Gi")]), count=2),
        counters_slice("slice-2", counter_set("set-1", cpus="8", memory="18Gi")),
        resource_slice("slice-3", pool_devices([("6", "4Gi"), ("1", "7Gi"), ("1", "7Gi")]), pool=POOL_2, count=2),
        counters_slice("slice-4", counter_set("set-1", cpus="8", memory="18Gi"), pool=POOL_2),
    ]
    held = [
        DeviceID(DRIVER_A, POOL_1, "device-2"),
        DeviceID(DRIVER_A, POOL_1, "device-3"),
        DeviceID(DRIVER_A, POOL_2, "device-1"),
    ]
    [result] = allocate([claim(request("req-0"), request("req-1"))], [CLASS_A], slices, NODE_1, held)
    assert [(r.request, r.id.pool, r.id.device) for r in result.results] == [
        ("req-0", POOL_2, "device-2"),
        ("req-1", POOL_2, "device-3"),
    ]


def test_partitionable_devices_unused_counters_in_counter_set() -> None:
    slices = [
        resource_slice(
            "slice-1",
            [
                device("device-1", consumesCounters=[consumes("set-1", memory="5Gi")]),
                device("device-2", consumesCounters=[consumes("set-1", memory="4Gi")]),
                device("device-3", consumesCounters=[consumes("set-1", memory="4Gi")]),
            ],
            count=2,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="8Gi", unused="1Gi")),
    ]
    [result] = allocate([claim(request("req-0", count=2))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-2"), ("req-0", "device-3")]


@pytest.mark.parametrize(
    ("big", "total"),
    [("16Gi", "18Gi"), ("20Gi", "18Gi")],
    ids=["partitionable-devices-no-capacity-available", "partitionable-devices-overallocated-capacity-pool"],
)
def test_counters_used_by_allocated_devices_are_not_available(big: str, total: str) -> None:
    slices = [
        resource_slice(
            "slice-1",
            [counter_device("device-1", "set-1", memory="4Gi"), counter_device("device-2", "set-1", memory=big)],
            count=2,
        ),
        counters_slice("slice-2", counter_set("set-1", memory=total)),
    ]
    held = [DeviceID(DRIVER_A, POOL_1, "device-2")]
    with pytest.raises(Unallocatable, match=r"\(ruled out: 1 in use; 1 by counters\)"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, held)
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-1")]


def test_partitionable_devices_disabled_device_consumes_counters() -> None:
    slices = [
        resource_slice("slice-1", [device("device-1", consumesCounters=[consumes("set-1", memory="4Gi")])], count=2),
        counters_slice("slice-2", counter_set("set-1", memory="18Gi")),
    ]
    with pytest.raises(Unallocatable, match=r"consume counters \(DRAPartitionableDevices is off\)"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, features=OFF)


def test_partitionable_devices_disabled_other_device_do_not_consume_counters() -> None:
    slices = [
        resource_slice(
            "slice-1",
            [device("device-1", consumesCounters=[consumes("set-1", memory="4Gi")]), device("device-2")],
            count=2,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="18Gi")),
    ]
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, features=OFF)
    assert picked(result) == [("req-0", "device-2")]


def test_partitionable_devices_disabled_per_device_node_selection() -> None:
    slices = [resource_slice("slice-1", [device("device-2", nodeName="node-1")], perDeviceNodeSelection=True)]
    with pytest.raises(Unallocatable, match="no ResourceSlice targets node node-1"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, features=OFF)
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-2")]


def per_device(name: str, counters: dict[str, str], **node: object) -> dict[str, Any]:
    return {**counter_device(name, "set-1", **counters), **node}


def test_partitionable_devices_per_device_node_selection_nodename() -> None:
    sub = [
        {
            "name": "subreq-0",
            "deviceClassName": "class-a",
            "selectors": [
                {"cel": {"expression": f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("6Gi")) >= 0'}}
            ],
        },
        {
            "name": "subreq-1",
            "deviceClassName": "class-a",
            "selectors": [
                {"cel": {"expression": f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("4Gi")) >= 0'}}
            ],
        },
    ]
    slices = [
        resource_slice(
            "slice-1",
            [
                per_device("device-1", {"memory": "4Gi"}, nodeName="node-1"),
                per_device("device-2", {"memory": "6Gi"}, nodeName="node-2"),
            ],
            count=2,
            perDeviceNodeSelection=True,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="18Gi"), perDeviceNodeSelection=True),
    ]
    [result] = allocate([claim({"name": "req-0", "firstAvailable": sub})], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0/subreq-1", "device-1")]
    assert result.as_status("node-1")["nodeSelector"] == LOCAL_NODE_1


REGION_1 = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["region-1"]}]}]}


def test_partitionable_devices_per_device_node_selection_node_selector() -> None:
    slices = [
        resource_slice(
            "slice-1",
            [per_device("device-1", {"memory": "4Gi"}, nodeSelector=REGION_1)],
            count=2,
            perDeviceNodeSelection=True,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="18Gi"), perDeviceNodeSelection=True),
    ]
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-1")]
    assert result.as_status("node-1")["nodeSelector"] == REGION_1


def test_partitionable_devices_per_device_node_selection_node_selector_multiple_devices() -> None:
    # One device local to node-1 makes the whole claim local to it (createNodeSelector).
    slices = [
        resource_slice(
            "slice-1",
            [
                per_device("device-1", {"memory": "4Gi"}, nodeSelector=REGION_1),
                per_device("device-2", {"memory": "4Gi"}, nodeName="node-1"),
                per_device("device-3", {"memory": "4Gi"}, allNodes=True),
            ],
            count=2,
            perDeviceNodeSelection=True,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="18Gi"), perDeviceNodeSelection=True),
        resource_slice(
            "slice-3",
            [counter_device(f"device-{i}", "set-2", memory="4Gi") for i in (1, 2, 3)],
            pool=POOL_2,
            count=2,
            driver=DRIVER_B,
        ),
        counters_slice("slice-4", counter_set("set-2", memory="12Gi"), pool=POOL_2, driver=DRIVER_B),
    ]
    classes = [CLASS_A, resource_class("class-b", DRIVER_B)]
    c = claim(request("req-0", count=3), request("req-1", "class-b", count=3))
    [result] = allocate([c], classes, slices, NODE_1)
    assert [(r.request, r.id.driver, r.id.device) for r in result.results] == [
        ("req-0", DRIVER_A, "device-1"),
        ("req-0", DRIVER_A, "device-2"),
        ("req-0", DRIVER_A, "device-3"),
        ("req-1", DRIVER_B, "device-1"),
        ("req-1", DRIVER_B, "device-2"),
        ("req-1", DRIVER_B, "device-3"),
    ]
    assert result.as_status("node-1")["nodeSelector"] == LOCAL_NODE_1


def test_counter_slice_on_another_node_still_provides_the_counters() -> None:
    """A pool's counters may sit in a slice of another node: completeness fetches it (GatherPools)."""
    slices = [
        resource_slice("slice-1", [counter_device("device-1", "set-1", memory="4Gi")], count=2),
        counters_slice("slice-2", counter_set("set-1", memory="4Gi"), node="node-2"),
    ]
    [result] = allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-1")]


def test_allocated_devices_of_other_nodes_consume_the_pool_counters() -> None:
    """``DeviceSlicesNotTargetingNode``: a device on node-2, allocated, uses the shared counters."""
    slices = [
        resource_slice("slice-1", [counter_device("near", "set-1", memory="4Gi")], count=3),
        resource_slice("slice-2", [counter_device("far", "set-1", memory="4Gi")], node="node-2", count=3),
        counters_slice("slice-3", counter_set("set-1", memory="6Gi"), count=3, allNodes=True),
    ]
    held = [DeviceID(DRIVER_A, POOL_1, "far")]
    with pytest.raises(Unallocatable, match=r"ruled out: 1 by counters"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1, held)
    [pool] = gather_pools(slices, NODE_1)
    assert [s.metadata.name for s in pool.elsewhere] == ["slice-2"]


@pytest.mark.parametrize(
    ("consumed", "sets", "reason"),
    [
        (consumes("missing", memory="1"), [counter_set("set-1", memory="1")], "counter set missing not found"),
        (
            consumes("set-1", cpus="1"),
            [counter_set("set-1", memory="1")],
            "counter cpus not found in counter set set-1",
        ),
        (
            consumes("set-1", memory="1"),
            [counter_set("set-1", memory="1"), counter_set("set-1", memory="2")],
            "duplicate counter set name set-1",
        ),
    ],
)
def test_inconsistent_counters_make_the_pool_invalid(
    consumed: dict[str, Any], sets: list[dict[str, Any]], reason: str
) -> None:
    """``validateDeviceCounterConsumption`` and ``getAndValidateCounterSets``, word for word."""
    slices = [
        resource_slice("slice-1", [device("device-1", consumesCounters=[consumed])], count=2),
        counters_slice("slice-2", *sets),
    ]
    with pytest.raises(Unallocatable, match=f"invalid resource pools were encountered: {DRIVER_A}/{POOL_1}: {reason}"):
        allocate([claim(request("req-0"))], [CLASS_A], slices, NODE_1)


def test_backtracking_releases_counters() -> None:
    """``partitionable-devices-constraint-releases-counter``: a device a constraint refuses frees its counters."""
    attrs = {"a": {"model": {"string": "x"}}, "b": {"model": {"string": "y"}}}
    slices = [
        resource_slice(
            "slice-1",
            [
                device("device-1", attributes=attrs["a"], consumesCounters=[consumes("set-1", memory="4Gi")]),
                device("device-2", attributes=attrs["b"], consumesCounters=[consumes("set-1", memory="4Gi")]),
                device("device-3", attributes=attrs["b"], consumesCounters=[consumes("set-1", memory="4Gi")]),
            ],
            count=2,
        ),
        counters_slice("slice-2", counter_set("set-1", memory="8Gi")),
    ]
    c = claim(request("req-0"), request("req-1"), constraints=[{"matchAttribute": f"{DRIVER_A}/model"}])
    [result] = allocate([c], [CLASS_A], slices, NODE_1)
    assert picked(result) == [("req-0", "device-2"), ("req-1", "device-3")]
