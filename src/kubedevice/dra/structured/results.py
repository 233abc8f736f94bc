"""The allocation results once the search has found a solution: the tail of ``Allocate`` in
``allocator_incubating.go`` (results, configs) and ``createNodeSelector``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..models import ResourceClaim
from .types import AllocationError, ClaimAllocation, DeviceResult

if TYPE_CHECKING:
    from .allocator import Allocator
    from .types import Pick


def allocation_results(alloc: Allocator) -> list[ClaimAllocation]:
    """One ``AllocationResult`` per claim, in the claims' order."""
    found = []
    for ci, claim in enumerate(alloc.claims):
        results = tuple(device_result(alloc, pick) for pick in alloc.results[ci])
        local, requirements = create_node_selector(alloc, claim, results)
        found.append(ClaimAllocation(claim, results, tuple(allocation_config(alloc, ci, claim)), local, requirements))
    return found


def device_result(alloc: Allocator, pick: Pick) -> DeviceResult:
    """The result of a device the search picked, built once the search is done: the many
    picks it takes back cost nothing then (a frozen dataclass is slow to make)."""
    request, device, binding = pick.request, pick.candidate.device, alloc.features.binding_conditions
    return DeviceResult(
        request.name,
        pick.candidate.id,
        True if request.spec.admin_access else None,
        request.tolerations,
        tuple(device.binding_conditions or []) if binding else (),
        tuple(device.binding_failure_conditions or []) if binding else (),
        pick.share_id,
        pick.consumed,
    )


def create_node_selector(
    alloc: Allocator, claim: ResourceClaim, results: Sequence[DeviceResult]
) -> tuple[bool, dict[str, Any] | None]:
    """``createNodeSelector``: this node only, or the devices' node selector requirements, or none.

    A device local to one node (``nodeName``) or one that ``bindsToNode`` (not in the stable
    variant) pins the claim to the node; the one term of each device's ``nodeSelector`` adds
    its requirements that are not already there; ``allNodes`` adds nothing.
    """
    term: dict[str, list[dict[str, Any]]] = {"matchExpressions": [], "matchFields": []}
    for result in results:
        candidate = alloc.by_id[result.id]
        spec, device = candidate.slice_.spec, candidate.device
        node_name, selector = (
            (device.node_name, device.node_selector)
            if candidate.per_device_node
            else (spec.node_name, spec.node_selector)
        )
        if node_name is not None or (device.binds_to_node and not alloc.features.stable):
            return True, None
        if selector is None or not selector.node_selector_terms:
            continue
        if len(selector.node_selector_terms) > 1:
            raise AllocationError(
                f"create NodeSelector for claim {claim.metadata.name}: unsupported ResourceSlice.NodeSelector "
                f"with {len(selector.node_selector_terms)} terms"
            )
        first = selector.node_selector_terms[0]
        add_new_node_selector_requirements(first.match_fields, term["matchFields"])
        add_new_node_selector_requirements(first.match_expressions, term["matchExpressions"])
    kept = {k: v for k, v in term.items() if v}
    return False, kept or None


def add_new_node_selector_requirements(source: Sequence[Any], into: list[dict[str, Any]]) -> None:
    """``addNewNodeSelectorRequirements``: a requirement is new unless key, operator and value set match."""
    for requirement in source:
        known = any(
            r["key"] == requirement.key
            and r["operator"] == requirement.operator
            and set(r.get("values", [])) == set(requirement.values)
            for r in into
        )
        if not known:
            entry: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
            if requirement.values:
                entry["values"] = list(requirement.values)
            into.append(entry)


def allocation_config(alloc: Allocator, ci: int, claim: ResourceClaim) -> list[dict[str, Any]]:
    """Class configs once per class, then the claim's configs (as ``Allocate`` builds them)."""
    config: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    chosen = [alloc.plan[ci][ri][alloc.chosen.get((ci, ri), 0)] for ri in range(len(alloc.plan[ci]))]
    for request in chosen:
        name = request.device_class.metadata.name
        if name in by_class:
            for entry in by_class[name]:
                entry["requests"].append(request.name)
            continue
        entries = [
            {"source": "FromClass", "requests": [request.name], "opaque": c.opaque.model_dump(by_alias=True)}
            for c in request.device_class.spec.config
            if c.opaque is not None
        ]
        by_class[name] = entries
        config += entries
    chosen_names = {r.name for r in chosen} | {r.base for r in chosen}
    for claim_config in claim.spec.devices.config:
        if claim_config.opaque is None or (
            claim_config.requests and not chosen_names.intersection(claim_config.requests)
        ):
            continue
        config.append(
            {
                "source": "FromClaim",
                "requests": list(claim_config.requests),
                "opaque": claim_config.opaque.model_dump(by_alias=True),
            }
        )
    for entry in config:
        if len(entry["requests"]) == len(claim.spec.devices.requests):
            entry["requests"] = []
    return [{k: v for k, v in e.items() if v != []} for e in config]
