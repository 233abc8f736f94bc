"""Why a device does or does not match a DeviceClass (and a claim's requests).

The scheduler only says "cannot allocate"; this evaluates every selector on every device
with the same CEL semantics and, for a miss, names the first clause of a top-level ``&&``
that is false or fails, which is usually the one attribute that differs. With a claim, it also
names what else keeps a device from each request of the class on its own, as the allocator
checks it: a taint the request does not tolerate, capacity the device does not have or its
``requestPolicy`` does not allow, and binding conditions or shared counters whose feature gate
is off. (Counters used up by other claims depend on what is allocated: ``allocate`` names those.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import cel
from .models import Device, DeviceClass, DeviceSelector, ExactDeviceRequest, ResourceClaim, ResourceSlice
from .structured import consumable_capacity as cap
from .structured.deviceview import device_input
from .structured.gates import Features
from .structured.taints import describe, untolerated


@dataclass(frozen=True)
class SelectorVerdict:
    """One selector on one device; ``clause`` is the first failing clause of a miss.

    ``compiles`` is false when the selector itself is broken: the same ``error`` then holds for
    every device, and :func:`render` says it once.
    """

    origin: str
    expression: str
    matched: bool
    clause: str | None = None
    error: str | None = None
    compiles: bool = True


@dataclass(frozen=True)
class DeviceVerdict:
    driver: str
    pool: str
    device: str
    selectors: tuple[SelectorVerdict, ...]
    ruled_out: tuple[str, ...] = ()  # "request R: why", beyond the selectors

    @property
    def matched(self) -> bool:
        return all(s.matched for s in self.selectors)


def _first_failing_clause(expression: str, device: cel.DeviceInput) -> tuple[str | None, str | None]:
    """The first top-level ``&&`` operand that is false or fails, with its error, if any."""
    clauses = cel.top_level_clauses(expression)
    if len(clauses) < 2:
        return None, None
    for clause in clauses:
        try:
            if not cel.compile_selector(clause, env="StoredExpressions").matches(device):
                return clause, None
        except cel.CELError as error:
            return clause, error.message
    return None, None


def evaluate(origin: str, expression: str, device: cel.DeviceInput) -> SelectorVerdict:
    """Evaluate one selector; a compile or runtime error is a miss carrying the error."""
    try:
        if cel.compile_selector(expression, env="StoredExpressions").matches(device):
            return SelectorVerdict(origin, expression, True)
    except cel.CompileError as error:
        return SelectorVerdict(origin, expression, False, None, f"CEL compile error: {error.message}", compiles=False)
    except cel.EvalError as error:
        clause, _ = _first_failing_clause(expression, device)
        return SelectorVerdict(origin, expression, False, clause, f"CEL runtime error: {error.message}")
    clause, clause_error = _first_failing_clause(expression, device)
    return SelectorVerdict(origin, expression, False, clause, clause_error)


def selectors_of(device_class: DeviceClass, claim: ResourceClaim | None) -> list[tuple[str, DeviceSelector]]:
    """The class's selectors, then those of each claim request that uses this class."""
    name = device_class.metadata.name
    found = [(f"class {name} selector #{i}", s) for i, s in enumerate(device_class.spec.selectors)]
    if claim is None:
        return found
    for request in claim.spec.devices.requests:
        subs = [(request.name, request.exactly)] if request.exactly else []
        subs += [(f"{request.name}/{s.name}", s) for s in request.first_available]
        for label, sub in subs:
            if sub is not None and sub.device_class_name == name:
                found += [(f"request {label} selector #{i}", s) for i, s in enumerate(sub.selectors)]
    return found


def requests_using(device_class: DeviceClass, claim: ResourceClaim) -> list[str]:
    """Names of the claim's requests (and subrequests) that ask for this class."""
    name = device_class.metadata.name
    found = []
    for request in claim.spec.devices.requests:
        if request.exactly is not None and request.exactly.device_class_name == name:
            found.append(request.name)
        found += [f"{request.name}/{s.name}" for s in request.first_available if s.device_class_name == name]
    return found


def _devices(slices: Sequence[ResourceSlice]) -> Iterator[tuple[ResourceSlice, Device]]:
    for slice_ in slices:
        for device in slice_.spec.devices:
            yield slice_, device


def _requests_of(device_class: DeviceClass, claim: ResourceClaim) -> list[tuple[str, ExactDeviceRequest]]:
    """(name, request) for each request and subrequest of the claim that asks for this class."""
    name = device_class.metadata.name
    found: list[tuple[str, ExactDeviceRequest]] = []
    for request in claim.spec.devices.requests:
        if request.exactly is not None and request.exactly.device_class_name == name:
            found.append((request.name, request.exactly))
        found += [(f"{request.name}/{s.name}", s) for s in request.first_available if s.device_class_name == name]
    return found


def _capacity_problem(device: Device, request: ExactDeviceRequest) -> str:
    """Why the device cannot take the request even with no other share held (``CmpRequestOverCapacity``)."""
    wanted = request.capacity.requests if request.capacity is not None else {}
    missing = [name for name in wanted if name not in device.capacity]
    if missing:
        return f"asks for capacity {missing[0]}, which the device does not have"
    try:
        if cap.cmp_request_over_capacity(
            cap.requested(wanted, "request"), cap.capacities_of(device.capacity, "capacity"), {}
        ):
            return ""
    except cap.CapacityError as error:
        return f"capacity: {error}"
    return "asks for more capacity than the device has or its requestPolicy allows"


def obstacles(device: Device, request: ExactDeviceRequest, features: Features) -> list[str]:
    """What keeps a device that matches the selectors from the request on its own, in the allocator's order."""
    found = []
    if device.binding_conditions and not features.binding_conditions:
        found.append("has binding conditions, but DRADeviceBindingConditions is off")
    if device.consumes_counters and not features.partitionable_devices:
        found.append("consumes shared counters, but DRAPartitionableDevices is off")
    if features.consumable_capacity and (problem := _capacity_problem(device, request)):
        found.append(problem)
    if features.device_taints:
        found += [f"taint {describe(t)} is not tolerated" for t in untolerated(device, request)]
    return found


def explain(
    device_class: DeviceClass,
    slices: Sequence[ResourceSlice],
    claim: ResourceClaim | None = None,
    features: Mapping[str, bool] | None = None,
) -> list[DeviceVerdict]:
    """A verdict per device of every slice, in slice order.

    ``features`` are Kubernetes feature gates by name, as for ``allocate``.
    """
    selectors = selectors_of(device_class, claim)
    requests = _requests_of(device_class, claim) if claim is not None else []
    enabled = Features.of(features)
    verdicts = []
    for slice_, device in _devices(slices):
        view = device_input(slice_.spec.driver, device)
        results = tuple(evaluate(origin, s.cel.expression if s.cel else "", view) for origin, s in selectors)
        ruled_out = tuple(f"request {name}: {why}" for name, r in requests for why in obstacles(device, r, enabled))
        verdicts.append(DeviceVerdict(slice_.spec.driver, slice_.spec.pool.name, device.name, results, ruled_out))
    return verdicts


def compile_errors(verdicts: Sequence[DeviceVerdict]) -> dict[str, str]:
    """Each selector that does not compile, by origin, with its error (the same on every device)."""
    return {s.origin: s.error or "" for v in verdicts for s in v.selectors if not s.compiles}


def render(verdicts: Sequence[DeviceVerdict]) -> str:
    """Plain text: broken selectors once, then one block per device with each selector's outcome."""
    lines = [f"{origin}: {error}" for origin, error in compile_errors(verdicts).items()]
    for verdict in verdicts:
        status = "matches" if verdict.matched else "does not match"
        lines.append(f"{verdict.driver}/{verdict.pool}/{verdict.device}: {status}")
        if not verdict.selectors:
            lines.append("  (no selectors: every device of the class matches)")
        for s in verdict.selectors:
            broken = "" if s.compiles else " (does not compile)"
            lines.append(f"  {s.origin}: {'true' if s.matched else 'false'}{broken}")
            if s.clause is not None:
                lines.append(f"    first failing clause: {s.clause}")
            if s.error is not None and s.compiles:
                lines.append(f"    error: {s.error}")
        lines += [f"  ruled out for {reason}" for reason in verdict.ruled_out]
    matched = sum(v.matched for v in verdicts)
    lines.append(f"{matched} of {len(verdicts)} devices match")
    return "\n".join(lines) + "\n"


def verdicts_json(device_class: DeviceClass, verdicts: Sequence[DeviceVerdict]) -> dict[str, Any]:
    """``--json`` of ``dra explain`` and ``explain --pod``: per device and selector as in the text; a
    compile error sits once on the class, not on each device."""
    devices = [
        {
            "driver": v.driver,
            "pool": v.pool,
            "device": v.device,
            "matches": v.matched,
            "selectors": [_selector_json(s) for s in v.selectors],
        }
        for v in verdicts
    ]
    report: dict[str, Any] = {"class": device_class.metadata.name, "devices": devices}
    if broken := compile_errors(verdicts):
        report["compileErrors"] = broken
    return report


def _selector_json(verdict: SelectorVerdict) -> dict[str, Any]:
    shown = {k: v for k, v in vars(verdict).items() if v is not None and k != "compiles"}
    if not verdict.compiles:
        shown["compiles"] = False
        del shown["error"]
    return shown
