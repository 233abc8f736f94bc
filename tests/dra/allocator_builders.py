"""Builders for allocator tests, named after upstream's (``structured/internal/allocatortesting``).

Each builds a real API document and decodes it with :func:`from_document`, as the CLI does, so
the tests go through the same models, defaulting and conversion as users' files.
"""

from __future__ import annotations

from typing import Any

from kubedevice.dra.models import DeviceClass, ResourceClaim, ResourceSlice, from_document
from kubedevice.dra.structured import ClaimAllocation, Node

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL_1, POOL_2 = "pool-1", "pool-2"
NODE_1 = Node("node-1", {"region": "region-1"})
NODE_2 = Node("node-2", {"region": "region-2"})


def resource_class(name: str = "class-a", driver: str = DRIVER_A) -> DeviceClass:
    """``class(name, driver)``: a class selecting every device of one driver."""
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
    )
    assert isinstance(obj, DeviceClass)
    return obj


def device(name: str, **fields: Any) -> dict[str, Any]:
    """A device; ``fields`` are the API's (``consumesCounters``, ``capacity``, ``taints``, ...)."""
    return {"name": name, **fields}


def consumes(counter_set: str, **counters: str) -> dict[str, Any]:
    """``deviceCounterConsumption``."""
    return {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in counters.items()}}


def counter_set(name: str, **counters: str) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}


def resource_slice(
    name: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    node: str | None = "node-1",
    pool: str = POOL_1,
    count: int = 1,
    driver: str = DRIVER_A,
    generation: int = 1,
    counters: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> ResourceSlice:
    """``sliceWithDevices`` / ``sliceWithCounterSets``: node fields from ``node`` unless ``spec`` sets them."""
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        **spec,
    }
    if node is not None and not {"nodeSelector", "allNodes", "perDeviceNodeSelection"} & set(spec):
        body["nodeName"] = node
    if devices is not None:
        body["devices"] = devices
    if counters is not None:
        body["sharedCounters"] = counters
    obj = from_document(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def request(name: str, cls: str = "class-a", count: int = 1, **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, **fields}}


def claim(
    *requests: dict[str, Any],
    name: str = "claim-0",
    constraints: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    doc: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": devices},
    }
    if status is not None:
        doc["status"] = status
    obj = from_document(doc)
    assert isinstance(obj, ResourceClaim)
    return obj


def picked(allocation: ClaimAllocation) -> list[tuple[str, str]]:
    """(request, device) per result: what upstream's ``deviceAllocationResult`` pins."""
    return [(r.request, r.id.device) for r in allocation.results]


LOCAL_NODE_1 = {
    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]
}


def counter_device(name: str, counter_set_name: str, **counters: str) -> dict[str, Any]:
    """``device(name, fromCounters, nil).withDeviceCounterConsumption(...)``: capacity mirrors the counters."""
    return device(
        name,
        consumesCounters=[consumes(counter_set_name, **counters)],
        capacity={k: {"value": v} for k, v in counters.items()},
    )
