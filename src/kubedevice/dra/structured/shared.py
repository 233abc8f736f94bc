"""What several ``allocate`` calls over the same DeviceClasses and slices work out once: each
device's CEL view, the selectors compiled, and whether a class's and a request's selectors hold
for a device (``selectorsMatch``, which ``isSelectable`` calls).

``dra explain pod/NAME`` runs the allocator once per node, 1,000 times for 1,000 nodes. A
device of a pool that may serve any node (``allNodes``, a node selector) is met by every run,
and so is a device the cluster's slices repeat, which their decoding makes one object
(:mod:`kubedevice.dra.live.interning`). What CEL sees of a device (its driver, attributes and
capacity) and what selectors say of it depend on neither the node nor what is allocated, so
they are kept here, by the device object, across the calls that share one :class:`Shared`.
What does depend on them (a ``perDeviceNodeSelection`` device's own node, the
binding-conditions gate, capacity, counters, taints) is judged in each call as before.

A CEL error is never kept: each call raises its own, naming its claim, as the scheduler would.
Without a ``Shared`` from the caller, each call makes its own (:class:`OneCall`): a class's
verdicts then serve that call's claims, as they did when the allocator kept them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import cel
from ..models import Device, ResourceClaim
from .deviceview import device_input
from .types import AllocationError, RequestData, claim_ref

if TYPE_CHECKING:
    from .pools import DeviceWithID

Expressions = tuple[tuple[str, ...], tuple[str, ...]]
"""A class's selector expressions and a request's (:attr:`~.types.RequestData.expressions`)."""
Program = cel.Selector | cel.CompileError


class Shared:
    """Views, compiled selectors and their verdicts; for calls over the same DeviceClasses."""

    def __init__(self) -> None:
        self._views: dict[tuple[str, int], tuple[Device, cel.DeviceInput]] = {}
        self._verdicts: dict[Expressions, dict[int, bool]] = {}
        self._compiled: dict[Expressions, tuple[list[Program], list[Program]]] = {}

    def view(self, driver: str, device: Device) -> cel.DeviceInput:
        """The device as CEL sees it, made on first use (the device is kept, so its ``id`` stays its own)."""
        key = (driver, id(device))
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = (device, device_input(driver, device))
        return found[1]

    def verdicts(self, expressions: Expressions) -> dict[int, bool]:
        """Where whether ``expressions`` hold is kept, by the ``id`` of a device's :meth:`view`
        (the view lives as long as the verdicts: kept here, or by the call's devices)."""
        found = self._verdicts.get(expressions)
        if found is None:
            found = self._verdicts[expressions] = {}
        return found

    def selectors_hold(self, request: RequestData, claim: ResourceClaim, candidate: DeviceWithID) -> bool:
        """The class's selectors, then the request's, hold for the device (``selectorsMatch`` twice)."""
        device_class = request.device_class
        if device_class.spec.selectors and not self._match("class", device_class.metadata.name, candidate, 0, request):
            return False
        return not request.spec.selectors or self._match("claim", claim_ref(claim), candidate, 1, request)

    def _match(self, kind: str, owner: str, candidate: DeviceWithID, which: int, request: RequestData) -> bool:
        """``selectorsMatch``: every selector of the class (``which`` 0) or the request (1) holds
        for the device. Errors name the ``kind`` ("class", "claim") and the ``owner``."""
        for i, compiled in enumerate(self._programs(request.expressions)[which]):
            if isinstance(compiled, cel.CompileError):
                raise AllocationError(f"{kind} {owner}: selector #{i}: CEL compile error: {compiled.message}")
            try:
                if not compiled.matches(candidate.view):
                    return False
            except cel.EvalError as error:
                raise AllocationError(
                    f"{kind} {owner}: selector #{i} on device {candidate.id}: CEL runtime error: {error.message}"
                ) from None
        return True

    def _programs(self, expressions: Expressions) -> tuple[list[Program], list[Program]]:
        """Each expression compiled (or why not) in the scheduler's environment, kept per expressions."""
        found = self._compiled.get(expressions)
        if found is None:
            found = self._compiled[expressions] = (
                [_compile(e) for e in expressions[0]],
                [_compile(e) for e in expressions[1]],
            )
        return found


class OneCall(Shared):
    """What ``allocate`` uses when the caller shares nothing: each device's view is kept by the
    search's own record of it (:class:`~.pools.DeviceWithID`), which lives as long as the call,
    so it is not kept twice."""

    def view(self, driver: str, device: Device) -> cel.DeviceInput:
        return device_input(driver, device)


def _compile(expression: str) -> Program:
    try:
        return cel.compile_selector(expression, env="StoredExpressions")
    except cel.CompileError as error:
        return error
