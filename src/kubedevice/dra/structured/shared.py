"""What several ``allocate`` calls over the same DeviceClasses and slices work out once: each
device's CEL view and whether a class's and a request's selectors hold for it
(``selectorsMatch``, which ``isSelectable`` calls).

``dra explain pod/NAME`` runs the allocator once per node, 1,000 times for 1,000 nodes. A
device of a pool that may serve any node (``allNodes``, a node selector) is met by every run,
and so is a device the cluster's slices repeat, which their decoding makes one object
(:mod:`kubedevice.dra.live.interning`). What CEL sees of a device (its driver, attributes and
capacity) and what selectors say of it depend on neither the node nor what is allocated, so
they are kept here, by the device object, across the calls that share one :class:`Shared`.
What does depend on them (a ``perDeviceNodeSelection`` device's own node, the
binding-conditions gate, capacity, counters, taints) is judged in each call as before.

A CEL error is never kept: each call raises its own, naming its claim, as the scheduler would.
Without a ``Shared`` from the caller, each call makes its own: a class's verdicts then serve
that call's claims, as they did when the allocator kept them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import cel
from ..models import Device, DeviceSelector, ResourceClaim
from .pools import device_input
from .types import AllocationError, RequestData, claim_ref

if TYPE_CHECKING:
    from .pools import DeviceWithID


class Shared:
    """Views, compiled selectors and their verdicts; for calls over the same DeviceClasses."""

    def __init__(self) -> None:
        self._views: dict[tuple[str, int], tuple[Device, cel.DeviceInput]] = {}
        self._verdicts: dict[tuple[tuple[tuple[str, ...], tuple[str, ...]], int], bool] = {}
        self._compiled: dict[str, cel.Selector | cel.CompileError] = {}

    def view(self, driver: str, device: Device) -> cel.DeviceInput:
        """The device as CEL sees it, made on first use (the device is kept, so its ``id`` stays its own)."""
        key = (driver, id(device))
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = (device, device_input(driver, device))
        return found[1]

    def selectors_hold(self, request: RequestData, claim: ResourceClaim, candidate: DeviceWithID) -> bool:
        """The class's selectors, then the request's, hold for the device; kept per expressions and view."""
        device_class = request.device_class
        if not device_class.spec.selectors and not request.spec.selectors:
            return True
        key = (request.expressions, id(candidate.view))
        held = self._verdicts.get(key)
        if held is None:
            held = self._verdicts[key] = self._match(
                "class", device_class.metadata.name, device_class.spec.selectors, candidate
            ) and self._match("claim", claim_ref(claim), request.spec.selectors, candidate)
        return held

    def _match(self, kind: str, owner: str, selectors: Sequence[DeviceSelector], candidate: DeviceWithID) -> bool:
        """``selectorsMatch``: every selector of the class or the request holds for the device.
        Errors name the ``kind`` ("class", "claim") and the ``owner``."""
        for i, selector in enumerate(selectors):
            compiled = self._compile(selector.cel.expression if selector.cel else "")
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

    def _compile(self, expression: str) -> cel.Selector | cel.CompileError:
        """The expression compiled (or why not) in the scheduler's environment, kept per expression."""
        compiled = self._compiled.get(expression)
        if compiled is None:
            try:
                compiled = cel.compile_selector(expression, env="StoredExpressions")
            except cel.CompileError as error:
                compiled = error
            self._compiled[expression] = compiled
        return compiled
