"""Why claims cannot be allocated on a node: kubedevice's own (the scheduler only says it cannot).

The first request that cannot be met on its own, naming what rules devices out (selectors,
taints, counters, capacity, unusable pools), else the claim's constraints, else contention
between requests. Each device is judged by the allocator's own checks, in its order
(:func:`first_refusal`), with nothing allocated for the claims being explained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import ResourceClaim
from .pools import device_matches_node
from .prune import GATE_REFUSAL, refusal
from .types import AllocationError, Node, claim_ref

if TYPE_CHECKING:
    from .allocator import Allocator
    from .pools import DeviceWithID
    from .types import RequestData

REFUSALS = (
    "in use",
    "by selectors",
    "by a selector error",
    "on other nodes",
    "have binding conditions (DRADeviceBindingConditions is off)",
    GATE_REFUSAL,
    "by capacity",
    "by a capacity error",
    "by counters",
    "by taints",
)
"""What rules a device out for a request on its own, in the order explanations list them."""


def reason(alloc: Allocator, node: Node) -> str:
    """The first request that cannot be met on its own, else the constraints, else contention."""
    if not alloc.pools:
        return f"no ResourceSlice targets node {node.name}"
    for ci, claim in enumerate(alloc.claims):
        for alternatives in alloc.plan[ci]:
            problem = _request_problem(alloc, ci, claim, alternatives, node)
            if problem:
                return problem
        if claim.spec.devices.constraints:
            names = ", ".join(
                f"matchAttribute {c.match_attribute}"
                if c.match_attribute is not None
                else f"distinctAttribute {c.distinct_attribute}"
                for c in claim.spec.devices.constraints
            )
            return (
                f"claim {claim_ref(claim)}: enough devices match each request, but no combination of them "
                f"satisfies the constraints ({names})"
            )
    return (
        "enough devices match each request on its own, but not all requests together: devices, "
        "their shared counters or their capacity are contended"
    )


def _request_problem(
    alloc: Allocator, ci: int, claim: ResourceClaim, alternatives: list[RequestData], node: Node
) -> str:
    problems = []
    for request in alternatives:
        free, ruled_out = tally(alloc, ci, request)
        note = f" (ruled out: {'; '.join(ruled_out)})" if ruled_out else ""
        where = f"claim {claim_ref(claim)}, request {request.name}"
        class_name = request.device_class.metadata.name
        if request.all_devices is not None and not request.all_devices:
            problems.append(
                f"{where}: asks for all devices of class {class_name}, but none on node {node.name} match{note}"
            )
        elif free < request.count:
            problems.append(
                f"{where}: needs {request.count} device(s) of class {class_name}, but only {free} "
                f"on node {node.name} match its selectors and are free{note}"
            )
        else:
            return ""
    return "; ".join(problems)


def tally(alloc: Allocator, ci: int, request: RequestData) -> tuple[int, list[str]]:
    """Devices free for the request on their own, and which check rules out how many (the first that does).

    Unusable pools are named too: their devices are never candidates.
    """
    counts = dict.fromkeys(REFUSALS, 0)
    free = 0
    for candidate in alloc.order:
        check = first_refusal(alloc, ci, request, candidate)
        if check:
            counts[check] += 1
        else:
            free += 1
    ruled_out = [f"{n} {check}" for check, n in counts.items() if n]
    ruled_out += [
        f"pool {p.driver}/{p.name} {'is being updated' if p.incomplete else 'is invalid: ' + p.invalid}"
        for p in alloc.pools
        if p.incomplete or p.invalid
    ]
    return free, ruled_out


def first_refusal(alloc: Allocator, ci: int, request: RequestData, candidate: DeviceWithID) -> str:
    """The first check, in the scheduler's order, that keeps the device from the request on its own."""
    if alloc.ledger.device_in_use(candidate.id) and not request.spec.admin_access:
        return "in use"
    if alloc.selectable_or_error(ci, request, candidate) is None:
        return "by a selector error"
    if not alloc.is_selectable(ci, request, candidate):
        if candidate.device.binding_conditions and not alloc.features.binding_conditions:
            return "have binding conditions (DRADeviceBindingConditions is off)"
        if candidate.per_device_node and not device_matches_node(candidate.device, alloc.node):
            return "on other nodes"
        return "by selectors"
    try:
        refused = refusal(alloc, ci, request, candidate)
    except AllocationError:
        return "by a capacity error"
    return "" if refused == "by constraints" else refused
