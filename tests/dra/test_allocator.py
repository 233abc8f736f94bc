"""The one-node allocator: scheduler semantics (ExactCount/All, matchAttribute, DFS, limits)."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from kubedevice.dra.models import DeviceClass, ResourceClaim, ResourceSlice, from_document
from kubedevice.dra.structured import (
    AllocationError,
    DeviceID,
    Node,
    Unallocatable,
    allocate,
    allocated_devices,
    gather_pools,
)

DRIVER = "gpu.example.com"
NODE = Node("node-1", {"zone": "a"})


def gpu_class(name: str = "gpu", selectors: list[str] | None = None, config: bool = False) -> DeviceClass:
    spec: dict[str, Any] = {
        "selectors": [{"cel": {"expression": e}} for e in selectors or [f'device.driver == "{DRIVER}"']]
    }
    if config:
        spec["config"] = [{"opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}}]
    obj = from_document(
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    )
    assert isinstance(obj, DeviceClass)
    return obj


def gpu_slice(
    devices: list[tuple[str, str]], node: str = "node-1", pool: str = "node-1", **pool_fields: Any
) -> ResourceSlice:
    """Devices as (name, model)."""
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{pool}-slice"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": pool, "resourceSliceCount": 1, **pool_fields},
                "devices": [{"name": n, "attributes": {"model": {"string": m}}} for n, m in devices],
            },
        }
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def claim(
    requests: list[dict[str, Any]], name: str = "claim", constraints: list[dict[str, Any]] | None = None
) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": devices},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


def exact(
    name: str, count: int = 1, cls: str = "gpu", selectors: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count, **extra}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def devices_of(result: Any) -> list[tuple[str, str]]:
    return [(r.request, r.id.device) for r in result.results]


SLICE = gpu_slice([("gpu-0", "a100"), ("gpu-1", "h100"), ("gpu-2", "a100"), ("gpu-3", "h100")])


def test_exact_count_takes_the_first_matching_devices_in_slice_order() -> None:
    [result] = allocate([claim([exact("gpus", 2)])], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("gpus", "gpu-0"), ("gpus", "gpu-1")]
    status = result.as_status("node-1")
    assert status["devices"]["results"][0] == {"request": "gpus", "driver": DRIVER, "pool": "node-1", "device": "gpu-0"}
    assert status["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-1"]


def test_request_selectors_narrow_the_class() -> None:
    req = exact("gpus", 2, selectors=[f'device.attributes["{DRIVER}"].model == "h100"'])
    [result] = allocate([claim([req])], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("gpus", "gpu-1"), ("gpus", "gpu-3")]


def test_match_attribute_backtracks_to_a_consistent_set() -> None:
    # First pick gpu-0 (a100) then gpu-1 (h100) violates the constraint: DFS must backtrack to gpu-2.
    c = claim([exact("a", 1), exact("b", 1)], constraints=[{"matchAttribute": f"{DRIVER}/model"}])
    [result] = allocate([c], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("a", "gpu-0"), ("b", "gpu-2")]


def test_match_attribute_limited_to_named_requests() -> None:
    c = claim(
        [exact("a", 1), exact("b", 1), exact("c", 1)],
        constraints=[{"requests": ["a", "c"], "matchAttribute": f"{DRIVER}/model"}],
    )
    [result] = allocate([c], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("a", "gpu-0"), ("b", "gpu-1"), ("c", "gpu-2")]


def test_all_mode_takes_every_matching_device() -> None:
    req = {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}
    [result] = allocate(
        [claim([req])], [gpu_class(selectors=[f'device.attributes["{DRIVER}"].model == "a100"'])], [SLICE], NODE
    )
    assert devices_of(result) == [("all", "gpu-0"), ("all", "gpu-2")]


def test_all_mode_fails_when_one_is_in_use_or_none_match() -> None:
    req = {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}
    with pytest.raises(Unallocatable):
        allocate([claim([req])], [gpu_class()], [SLICE], NODE, in_use=[DeviceID(DRIVER, "node-1", "gpu-3")])
    with pytest.raises(Unallocatable, match="asks for all devices of class gpu, but none on node node-1 match"):
        allocate([claim([req])], [gpu_class(selectors=["false"])], [SLICE], NODE)


def test_devices_are_not_shared_between_claims_and_in_use_devices_are_skipped() -> None:
    claims = [claim([exact("g", 2)], name="one"), claim([exact("g", 1)], name="two")]
    first, second = allocate(claims, [gpu_class()], [SLICE], NODE, in_use=[DeviceID(DRIVER, "node-1", "gpu-0")])
    assert devices_of(first) == [("g", "gpu-1"), ("g", "gpu-2")]
    assert devices_of(second) == [("g", "gpu-3")]


def test_not_enough_devices_names_the_request() -> None:
    with pytest.raises(
        Unallocatable, match=r"claim default/claim, request gpus: needs 5 device\(s\) of class gpu, but only 4"
    ):
        allocate([claim([exact("gpus", 5)])], [gpu_class()], [SLICE], NODE)


def test_unsatisfiable_constraint_is_named() -> None:
    c = claim([exact("a", 3)], constraints=[{"matchAttribute": f"{DRIVER}/model"}])
    with pytest.raises(Unallocatable, match=f"matchAttribute {DRIVER}/model"):
        allocate([c], [gpu_class()], [SLICE], NODE)


def test_contention_between_requests() -> None:
    c = claim([exact("a", 3), exact("b", 2)])
    with pytest.raises(Unallocatable, match="contended"):
        allocate([c], [gpu_class()], [SLICE], NODE)


def test_the_32_device_claim_limit() -> None:
    big = gpu_slice([(f"gpu-{i}", "a100") for i in range(40)])
    with pytest.raises(AllocationError, match="number of requested devices 33 exceeds the claim limit of 32"):
        allocate([claim([exact("g", 33)])], [gpu_class()], [big], NODE)
    [result] = allocate([claim([exact("g", 32)])], [gpu_class()], [big], NODE)
    assert len(result.results) == 32


def test_first_available_falls_back_to_a_later_subrequest() -> None:
    req = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu", "count": 8},
            {"name": "small", "deviceClassName": "gpu", "count": 2},
        ],
    }
    [result] = allocate([claim([req])], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("gpu/small", "gpu-0"), ("gpu/small", "gpu-1")]


def test_missing_class_and_cel_runtime_errors_abort_like_the_scheduler() -> None:
    with pytest.raises(
        AllocationError, match=r'could not retrieve device class nope: deviceclass\.resource\.k8s\.io "nope" not found'
    ):
        allocate([claim([exact("g", 1, cls="nope")])], [gpu_class()], [SLICE], NODE)
    broken = gpu_class(selectors=[f'device.attributes["{DRIVER}"].nosuch == "x"'])
    with pytest.raises(
        AllocationError, match=r"class gpu: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error"
    ):
        allocate([claim([exact("g", 1)])], [broken], [SLICE], NODE)


def test_slices_of_other_nodes_and_old_generations_are_ignored() -> None:
    other = gpu_slice([("x-0", "a100")], node="node-2", pool="node-2")
    old = gpu_slice([("old-0", "a100")], pool="p", generation=1)
    new = gpu_slice([("new-0", "a100")], pool="p", generation=2)
    pools = gather_pools([other, old, new], NODE)
    assert [(p.name, [d.name for s in p.slices for d in s.spec.devices]) for p in pools] == [("p", ["new-0"])]
    with pytest.raises(Unallocatable, match="no ResourceSlice targets node node-1"):
        allocate([claim([exact("g", 1)])], [gpu_class()], [other], NODE)


def test_incomplete_pool_is_not_used() -> None:
    partial = gpu_slice([("gpu-0", "a100")], resourceSliceCount=2)
    with pytest.raises(Unallocatable):
        allocate([claim([exact("g", 1)])], [gpu_class()], [partial], NODE)


def test_node_selector_slices_match_labels() -> None:
    doc = SLICE.model_dump(by_alias=True, exclude_none=True)
    del doc["spec"]["nodeName"]
    doc["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
    selected = from_document(doc)
    assert isinstance(selected, ResourceSlice)
    [result] = allocate([claim([exact("g", 1)])], [gpu_class()], [selected], NODE)
    # createNodeSelector: the slice's one term becomes the allocation's node selector.
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert result.as_status("node-1")["nodeSelector"] == {"nodeSelectorTerms": [term]}
    with pytest.raises(Unallocatable):
        allocate([claim([exact("g", 1)])], [gpu_class()], [selected], Node("node-1", {"zone": "b"}))


def test_tainted_devices_need_a_toleration() -> None:
    doc = SLICE.model_dump(by_alias=True, exclude_none=True)
    for device in doc["spec"]["devices"]:
        device["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    tainted = from_document(doc)
    assert isinstance(tainted, ResourceSlice)
    with pytest.raises(Unallocatable):
        allocate([claim([exact("g", 1)])], [gpu_class()], [tainted], NODE)
    tolerant = exact("g", 1, tolerations=[{"key": "broken", "operator": "Exists"}])
    [result] = allocate([claim([tolerant])], [gpu_class()], [tainted], NODE)
    assert devices_of(result) == [("g", "gpu-0")]


def test_class_and_claim_config_are_carried_into_the_result() -> None:
    c = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c"},
            "spec": {
                "devices": {
                    "requests": [exact("a"), exact("b")],
                    "config": [{"requests": ["b"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}}],
                }
            },
        }
    )
    assert isinstance(c, ResourceClaim)
    [result] = allocate([c], [gpu_class(config=True)], [SLICE], NODE)
    assert result.config == (
        {"source": "FromClass", "opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}},
        {"source": "FromClaim", "requests": ["b"], "opaque": {"driver": DRIVER, "parameters": {"x": 1}}},
    )


# --- issue 21: agreeing with the scheduler (``internal/incubating``) on the 1.34-era classes ---


def distinct(*requests: str) -> dict[str, Any]:
    constraint: dict[str, Any] = {"distinctAttribute": f"{DRIVER}/model"}
    if requests:
        constraint["requests"] = list(requests)
    return constraint


def test_distinct_attribute_picks_devices_that_differ() -> None:
    c = claim([exact("a", 1), exact("b", 1)], constraints=[distinct()])
    [result] = allocate([c], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("a", "gpu-0"), ("b", "gpu-1")]


def test_distinct_attribute_across_three_requests_of_two_models_is_unallocatable() -> None:
    c = claim([exact("a", 1), exact("b", 1), exact("c", 1)], constraints=[distinct("a", "b", "c")])
    with pytest.raises(Unallocatable, match=f"satisfies the constraints \\(distinctAttribute {DRIVER}/model\\)"):
        allocate([c], [gpu_class()], [SLICE], NODE)


def test_distinct_attribute_compares_the_devices_of_one_request_too() -> None:
    # v0.37's constraint keeps every value (v0.36.3 kept one per request name and took a100,
    # h100, a100 here); two models give at most two devices.
    [result] = allocate([claim([exact("a", 2)], constraints=[distinct()])], [gpu_class()], [SLICE], NODE)
    assert devices_of(result) == [("a", "gpu-0"), ("a", "gpu-1")]
    with pytest.raises(Unallocatable, match="distinctAttribute"):
        allocate([claim([exact("a", 3)], constraints=[distinct()])], [gpu_class()], [SLICE], NODE)


def test_distinct_attribute_needs_the_attribute() -> None:
    c = claim([exact("a", 1)], constraints=[{"distinctAttribute": f"{DRIVER}/nosuch"}])
    with pytest.raises(Unallocatable):
        allocate([c], [gpu_class()], [SLICE], NODE)


def allocated_claim(results: list[dict[str, Any]]) -> ResourceClaim:
    doc = claim([exact("g", len(results))], name="done").model_dump(by_alias=True, exclude_none=True)
    doc["status"] = {"allocation": {"devices": {"results": results}}}
    obj = from_document(doc)
    assert isinstance(obj, ResourceClaim)
    return obj


def test_admin_access_results_do_not_make_devices_busy() -> None:
    result = {"request": "g", "driver": DRIVER, "pool": "node-1"}
    done = allocated_claim([{**result, "device": "gpu-0", "adminAccess": True}, {**result, "device": "gpu-1"}])
    in_use = allocated_devices([done])
    assert in_use == [DeviceID(DRIVER, "node-1", "gpu-1")]
    [fresh] = allocate([claim([exact("g", 2)])], [gpu_class()], [SLICE], NODE, in_use)
    assert devices_of(fresh) == [("g", "gpu-0"), ("g", "gpu-2")]


def pool_slice(name: str, node: str, devices: list[str], pool: str = "shared", **pool_fields: Any) -> ResourceSlice:
    doc = gpu_slice([(d, "a100") for d in devices], node=node, pool=pool, **pool_fields)
    doc.metadata.name = name
    return doc


def test_pool_completeness_counts_the_slices_of_every_node() -> None:
    mine = pool_slice("s-1", "node-1", ["gpu-0"], resourceSliceCount=2)
    theirs = pool_slice("s-2", "node-2", ["gpu-9"], resourceSliceCount=2)
    [pool] = gather_pools([mine, theirs], NODE)
    assert not pool.incomplete
    [result] = allocate([claim([exact("g", 1)])], [gpu_class()], [mine, theirs], NODE)
    assert devices_of(result) == [("g", "gpu-0")]
    missing = pool_slice("s-2", "node-2", ["gpu-9"], resourceSliceCount=3)
    [pool] = gather_pools([pool_slice("s-1", "node-1", ["gpu-0"], resourceSliceCount=3), missing], NODE)
    assert pool.incomplete


def test_a_pool_replaced_by_a_newer_generation_elsewhere_is_ignored_not_incomplete() -> None:
    stale = pool_slice("s-old", "node-1", ["old-0"], generation=1, resourceSliceCount=2)
    newer = pool_slice("s-new", "node-2", ["new-0"], generation=2, resourceSliceCount=1)
    good = pool_slice("p-1", "node-1", ["gpu-0"], pool="other")
    assert [p.name for p in gather_pools([stale, newer, good], NODE)] == ["other"]
    req = {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}
    [result] = allocate([claim([req])], [gpu_class()], [stale, newer, good], NODE)
    assert devices_of(result) == [("all", "gpu-0")]


def per_device_slice(devices: dict[str, str]) -> ResourceSlice:
    """Devices by name with the node each one names."""
    obj = from_document(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "per-device"},
            "spec": {
                "driver": DRIVER,
                "perDeviceNodeSelection": True,
                "pool": {"name": "fabric", "resourceSliceCount": 1},
                "devices": [{"name": n, "nodeName": node} for n, node in devices.items()],
            },
        }
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def test_per_device_node_selection_checks_each_device() -> None:
    fabric = per_device_slice({"far-0": "node-2", "near-0": "node-1", "far-1": "node-2"})
    [result] = allocate([claim([exact("g", 1)])], [gpu_class()], [fabric], NODE)
    assert devices_of(result) == [("g", "near-0")]
    assert result.as_status("node-1")["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-1"]
    with pytest.raises(Unallocatable, match=r"only 1 on node node-1 .* \(ruled out: 2 on other nodes\)"):
        allocate([claim([exact("g", 2)])], [gpu_class()], [fabric], NODE)


def test_search_order_is_pools_by_driver_and_name_then_slices_by_name() -> None:
    slices = [
        pool_slice("z-slice", "node-1", ["b-z"], pool="b", resourceSliceCount=2),
        pool_slice("a-slice", "node-1", ["b-a"], pool="b", resourceSliceCount=2),
        pool_slice("only", "node-1", ["a-0"], pool="a"),
    ]
    [result] = allocate([claim([exact("g", 3)])], [gpu_class()], slices, NODE)
    assert [str(r.id) for r in result.results] == [f"{DRIVER}/a/a-0", f"{DRIVER}/b/b-a", f"{DRIVER}/b/b-z"]


def with_bare_device(slice_: ResourceSlice) -> ResourceSlice:
    """The slice plus a device "bare" without attributes, on which a ``model`` selector fails."""
    doc = slice_.model_dump(by_alias=True, exclude_none=True)
    doc["spec"]["devices"].append({"name": "bare"})
    obj = from_document(doc)
    assert isinstance(obj, ResourceSlice)
    return obj


def test_a_cel_error_on_a_device_the_search_does_not_reach_is_not_raised() -> None:
    with_bare = with_bare_device(gpu_slice([("gpu-0", "a100"), ("gpu-1", "a100")]))
    picky = gpu_class(selectors=[f'device.attributes["{DRIVER}"].model == "a100"'])
    [result] = allocate([claim([exact("g", 2)])], [picky], [with_bare], NODE)
    assert devices_of(result) == [("g", "gpu-0"), ("g", "gpu-1")]
    with pytest.raises(AllocationError, match=f"on device {DRIVER}/node-1/bare: CEL runtime error"):
        allocate([claim([exact("g", 3)])], [picky], [with_bare], NODE)


def timed_unallocatable(claims: list[ResourceClaim], slices: list[ResourceSlice]) -> float:
    started = time.perf_counter()
    with pytest.raises(Unallocatable):
        allocate(claims, [gpu_class()], slices, NODE)
    return time.perf_counter() - started


def test_infeasible_counts_answer_at_once() -> None:
    # Before sets and pruning these took minutes (11 of 10: 123 s); the scheduler answers at once.
    ten = [gpu_slice([(f"gpu-{i}", "a100") for i in range(10)])]
    assert timed_unallocatable([claim([exact("g", 11)])], ten) < 1.0
    assert timed_unallocatable([claim([exact("a", 5), exact("b", 6)])], ten) < 1.0
    split = [gpu_slice([(f"gpu-{i}", "a100" if i < 9 else "h100") for i in range(10)])]
    matched = claim([exact("a", 4), exact("b", 6)], constraints=[{"matchAttribute": f"{DRIVER}/model"}])
    assert timed_unallocatable([matched], split) < 1.0
    thirty = [gpu_slice([(f"gpu-{i}", "a100") for i in range(30)])]
    assert timed_unallocatable([claim([exact("a", 15), exact("b", 16)])], thirty) < 1.0


def test_two_claims_contending_for_ten_devices_answer_at_once() -> None:
    ten = [gpu_slice([(f"gpu-{i}", "a100") for i in range(10)])]
    claims = [claim([exact("g", 5)], name="one"), claim([exact("g", 6)], name="two")]
    assert timed_unallocatable(claims, ten) < 1.0


def test_pruning_keeps_the_cel_errors_the_scheduler_walks_into() -> None:
    # a takes gpu-0; b then needs 2 of the one left, whose selector fails: the scheduler's walk
    # still evaluates it and aborts, so cutting the branch on counts must not hide that.
    with_bare = with_bare_device(gpu_slice([("gpu-0", "a100")]))
    picky = f'device.attributes["{DRIVER}"].model == "a100"'
    c = claim([exact("a", 1), exact("b", 2, selectors=[picky])])
    error = rf"claim default/claim: selector #0 on device {DRIVER}/node-1/bare: CEL runtime error"
    with pytest.raises(AllocationError, match=error):
        allocate([c], [gpu_class()], [with_bare], NODE)


def test_an_allocation_leaves_no_reference_cycles() -> None:
    """``allocate`` pauses the cyclic collector (``collector_paused``): all it makes must be freed by
    refcounting alone, or each allocation would leave its search for a full collection to find."""
    slices = [gpu_slice([(f"gpu-{i}", "a100" if i % 2 else "h100") for i in range(8)])]
    matched = [{"matchAttribute": f"{DRIVER}/model"}]
    claims = [claim([exact("g", 2)], name=f"c{i}", constraints=matched) for i in range(3)]
    gc.collect()
    found = allocate(claims, [gpu_class()], slices, NODE)
    assert len(found) == 3
    with pytest.raises(Unallocatable):
        allocate([*claims, claim([exact("g", 3)], name="more", constraints=matched)], [gpu_class()], slices, NODE)
    assert gc.collect() == 0


def test_the_collector_is_as_it_was_after_an_allocation() -> None:
    slices = [gpu_slice([("gpu-0", "a100")])]
    assert gc.isenabled()
    allocate([claim([exact("g", 1)])], [gpu_class()], slices, NODE)
    assert gc.isenabled()
    with pytest.raises(Unallocatable):
        allocate([claim([exact("g", 2)])], [gpu_class()], slices, NODE)
    assert gc.isenabled()
    gc.disable()
    try:
        allocate([claim([exact("g", 1)])], [gpu_class()], slices, NODE)
        assert not gc.isenabled()
    finally:
        gc.enable()
