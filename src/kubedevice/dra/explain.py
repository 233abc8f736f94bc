"""Why a device does or does not match a DeviceClass (and a claim's requests).

The scheduler only says "cannot allocate"; this evaluates every selector on every device
with the same CEL semantics and, for a miss, names the first clause of a top-level ``&&``
that is false or fails, which is usually the one attribute that differs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from . import cel
from .models import Device, DeviceClass, DeviceSelector, ResourceClaim, ResourceSlice


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

    @property
    def matched(self) -> bool:
        return all(s.matched for s in self.selectors)


def device_input(driver: str, device: Device) -> cel.DeviceInput:
    """The CEL view of a ResourceSlice device (``device.driver/attributes/capacity``)."""
    return cel.DeviceInput(
        driver=driver,
        attributes={name: attribute.as_value() for name, attribute in device.attributes.items()},
        capacity={name: capacity.value for name, capacity in device.capacity.items()},
        allow_multiple_allocations=device.allow_multiple_allocations,
    )


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


def explain(
    device_class: DeviceClass, slices: Sequence[ResourceSlice], claim: ResourceClaim | None = None
) -> list[DeviceVerdict]:
    """A verdict per device of every slice, in slice order."""
    selectors = selectors_of(device_class, claim)
    verdicts = []
    for slice_, device in _devices(slices):
        view = device_input(slice_.spec.driver, device)
        results = tuple(evaluate(origin, s.cel.expression if s.cel else "", view) for origin, s in selectors)
        verdicts.append(DeviceVerdict(slice_.spec.driver, slice_.spec.pool.name, device.name, results))
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
    matched = sum(v.matched for v in verdicts)
    lines.append(f"{matched} of {len(verdicts)} devices match")
    return "\n".join(lines) + "\n"
