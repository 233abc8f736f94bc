"""A claim's constraints: ``matchAttributeConstraint`` (``allocator_incubating.go``) and
``distinctAttributeConstraint`` (``internal/incubating/constraint.go``), with the set semantics of
``internal/experimental/constraint.go`` where ``DRAListTypeAttributes`` is on (``attributeAsSet``).

Each is a stack the search pushes a device onto (``add``, false when the device would break the
constraint) and pops it from (``remove``) in LIFO order. ``admits`` is kubedevice's own: whether
``add`` could accept the device now, without changing anything, for the cuts of :mod:`.prune`
and the reasons of :mod:`.reasons`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pools import DeviceWithID

_SCALAR_KINDS = ("string", "int", "bool", "version")
_LIST_KINDS = {"strings": "string", "ints": "int", "bools": "bool", "versions": "version"}


def attribute_set(value: Mapping[str, Any]) -> tuple[str, frozenset[Any]] | None:
    """``attributeAsSet`` (``internal/experimental``): a scalar or non-empty list as (kind, set).

    None for an empty list, which matches nothing.
    """
    kind, item = next(iter(value.items()), ("", None))
    if kind in _SCALAR_KINDS:
        return kind, frozenset([item])
    if kind in _LIST_KINDS and item:
        return _LIST_KINDS[kind], frozenset(item)
    return None


def _intersection(a: tuple[str, frozenset[Any]], b: tuple[str, frozenset[Any]]) -> tuple[str, frozenset[Any]] | None:
    """Common values of one kind; None when the kinds differ or nothing is common."""
    common = a[1] & b[1] if a[0] == b[0] else frozenset()
    return (a[0], common) if common else None


class _AttributeConstraint:
    """What ``matchAttribute`` and ``distinctAttribute`` share: which requests they govern."""

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool) -> None:
        self.attribute = attribute
        self.requests = set(requests)
        self.list_types = list_types
        # How many adds may have narrowed what ``admits`` accepts; never goes down, so the count
        # cut can tell that nothing narrowed since it last counted (prune.Pruner.walk_start).
        self.narrowed = 0

    def matches(self, base: str, full: str) -> bool:
        """``matches``: the constraint governs the request (all requests when it names none)."""
        return not self.requests or base in self.requests or full in self.requests


class MatchAttribute(_AttributeConstraint):
    """All devices of the constrained requests share one value of the attribute.

    Scalars compare by equality and a list value matches nothing after the first device
    (``internal/incubating``). With ``DRAListTypeAttributes`` (``internal/experimental``) every
    value is a set and the devices must have a value in common: a stack of intersections,
    narrowed by each device added and popped when it is removed.
    """

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool = False) -> None:
        super().__init__(attribute, requests, list_types)
        self.value: Mapping[str, Any] | None = None
        self.scalar = False  # the value is of a scalar kind (a list value matches nothing)
        self.stack: list[tuple[str, frozenset[Any]]] = []
        self.count = 0

    def _next(self, value: Mapping[str, Any]) -> tuple[str, frozenset[Any]] | bool:
        """What adding ``value`` pushes (list types), or whether it is accepted (False: refused)."""
        if self.list_types:
            as_set = attribute_set(value)
            narrowed = as_set if as_set is None or not self.count else _intersection(self.stack[-1], as_set)
            return False if narrowed is None else narrowed
        if not self.count:
            return True
        return self.scalar and value == self.value

    def add(self, base: str, full: str, candidate: DeviceWithID) -> bool:
        if not self.matches(base, full):
            return True
        value = candidate.attribute(self.attribute)
        if value is None:
            return False
        pushed = self._next(value)
        if pushed is False:
            return False
        if isinstance(pushed, tuple):
            self.narrowed += not self.stack or pushed != self.stack[-1]
            self.stack.append(pushed)
        elif not self.count:
            self.value = value
            self.scalar = next(iter(value), "") in _SCALAR_KINDS
            self.narrowed += 1
        self.count += 1
        return True

    def admits(self, base: str, full: str, candidate: DeviceWithID) -> bool:
        """Whether ``add`` could accept the device now; it stays false deeper in the search."""
        if not self.matches(base, full):
            return True
        value = candidate.attribute(self.attribute)
        return value is not None and self._next(value) is not False

    def remove(self, base: str, full: str) -> None:
        if self.matches(base, full):
            self.count -= 1
            if self.list_types:
                self.stack.pop()


class DistinctAttribute(_AttributeConstraint):
    """Every device of the constrained requests has its own value of the attribute.

    As ``distinctAttributeConstraint`` in ``internal/incubating/constraint.go`` of
    ``k8s.io/dynamic-resource-allocation`` v0.37: the values are a stack (the search adds and
    removes devices in LIFO order). Only a value of the same scalar type can be a duplicate; a
    list-typed value is refused once any value is held. (v0.36.3 kept one value per request
    name, so a request's own devices were barely compared; v0.37 compares them all:
    :class:`DistinctAttributeV036` is the older one.) With ``DRAListTypeAttributes``
    (``internal/experimental``) values are sets that must be pairwise disjoint.
    """

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool = False) -> None:
        super().__init__(attribute, requests, list_types)
        self.values: list[Mapping[str, Any]] = []

    def add(self, base: str, full: str, candidate: DeviceWithID) -> bool:
        if not self.matches(base, full):
            return True
        value = candidate.attribute(self.attribute)
        if value is None or not self.matches_attribute(value):
            return False
        self.values.append(value)
        self.narrowed += 1
        return True

    def matches_attribute(self, value: Mapping[str, Any]) -> bool:
        """``matchesAttribute``: the value is distinct from every one held."""
        if self.list_types:
            as_set = attribute_set(value)
            held = (attribute_set(v) for v in self.values)
            return as_set is not None and all(h is None or _intersection(as_set, h) is None for h in held)
        kind = next(iter(value), "")
        if kind not in _SCALAR_KINDS:
            return not self.values
        return value not in self.values

    def admits(self, base: str, full: str, candidate: DeviceWithID) -> bool:
        """Whether ``add`` could accept the device now; once a value is held it stays held deeper."""
        if not self.matches(base, full):
            return True
        value = candidate.attribute(self.attribute)
        return value is not None and self.matches_attribute(value)

    def remove(self, base: str, full: str) -> None:
        if self.matches(base, full):
            self.values.pop()


class DistinctAttributeV036(_AttributeConstraint):
    """``distinctAttributeConstraint`` as 1.36's scheduler has it (v0.36.3, ``internal/incubating``
    and ``internal/experimental`` ``constraint.go``), kept because allocation is exact per release.

    Its values are a map keyed by the base request name, so each device of a request replaces
    the one before it and a request's devices are only compared with the last one; ``remove``
    deletes the request's entry however many devices it still holds. The first device of the
    constraint (a count, not the map) is taken without a look at its value.
    """

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool = False) -> None:
        super().__init__(attribute, requests, list_types)
        self.by_request: dict[str, Mapping[str, Any]] = {}
        self.count = 0

    def add(self, base: str, full: str, candidate: DeviceWithID) -> bool:
        if not self.matches(base, full):
            return True
        value = candidate.attribute(self.attribute)
        if value is None or (self.count and not self.matches_attribute(value, self.by_request.values())):
            return False
        self.by_request[base] = value
        self.count += 1
        self.narrowed += 1
        return True

    def matches_attribute(self, value: Mapping[str, Any], held: Iterable[Mapping[str, Any]]) -> bool:
        """``matchesAttribute``: no held value of the same kind equal (sets: overlapping) to ``value``."""
        if self.list_types:
            as_set = attribute_set(value)
            sets = (attribute_set(v) for v in held)
            return as_set is not None and all(h is None or _intersection(as_set, h) is None for h in sets)
        kind = next(iter(value), "")
        return all(kind in _SCALAR_KINDS and value != h for h in held)

    def admits(self, base: str, full: str, candidate: DeviceWithID) -> bool:
        """Whether ``add`` could accept the device deeper in the search.

        The request's own entry is left out: a later device of the same request replaces it, so
        a value it refuses now may be taken then. The other entries stay while the branch lasts.
        """
        if not self.matches(base, full):
            return True
        value = candidate.attribute(self.attribute)
        others = [v for name, v in self.by_request.items() if name != base]
        return value is not None and (not self.count or self.matches_attribute(value, others))

    def remove(self, base: str, full: str) -> None:
        if self.matches(base, full):
            self.by_request.pop(base, None)
            self.count -= 1


Constraint = MatchAttribute | DistinctAttribute | DistinctAttributeV036
