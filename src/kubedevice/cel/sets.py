"""cel-go's ext.Sets (Kubernetes base environment since 1.29): sets.contains, sets.intersects and
sets.equivalent over lists, with cel-go's static cost (m × n comparisons, twice for equivalent)."""

from __future__ import annotations

from typing import Any

from . import values as v
from .cost import Coster, Range, plus, scaled, times
from .library import CALL_COSTS, NOT_CONSTANT, RUNTIME_COSTS, SPECIALIZERS, register
from .parser import Call
from .values import UInt


def _has(items: Any, item: Any) -> bool:
    return any(v.equal_or_false(item, x) for x in items)


# exactly these types: equal in CEL exactly when equal in Python
_HASHABLE = frozenset({str, int, bytes})


def _hashable(items: Any) -> bool:
    return set(map(type, items)) <= _HASHABLE  # no Python-level loop


def _contains(items: Any, subset: Any) -> bool:
    if _hashable(items) and _hashable(subset):
        return set(subset) <= set(items)
    return all(_has(items, x) for x in subset)


def _intersects(a: Any, b: Any) -> bool:
    if _hashable(a) and _hashable(b):
        return not set(a).isdisjoint(b)
    return any(_has(b, x) for x in a)


def _equivalent(a: Any, b: Any) -> bool:
    return _contains(a, b) and _contains(b, a)


# A constant list becomes a frozenset when Python's set membership is CEL's equality for it and
# for every element kind a runtime list may then hold: strings are equal only to equal strings
# (never to bytes or numbers); ints and uints to each other by value, so lists holding a bool
# (True == 1 in Python) or a double (CEL compares int and double as doubles) take the general
# path, as do lists of any other kind.
_WITH_STRINGS = frozenset({str, bytes, int, UInt, bool, float})
_WITH_INTS = frozenset({str, bytes, int, UInt})


def constant_set(value: Any) -> tuple[frozenset[Any], frozenset[type]] | None:
    """(the constant list as a set, the runtime element kinds it may be checked against)."""
    if type(value) is not list or not value:
        return None
    kinds = set(map(type, value))
    if kinds == {str}:
        return frozenset(value), _WITH_STRINGS
    if kinds <= {int, UInt}:
        return frozenset(value), _WITH_INTS
    return None


def _specialize(name: str, factor: int) -> Any:
    def specialize(_nodes: list[Any], consts: list[Any], fns: list[Any], impl: Any) -> Any:
        if len(fns) != 2 or (consts[0] is NOT_CONSTANT) == (consts[1] is NOT_CONSTANT):
            return None
        const_first = consts[0] is not NOT_CONSTANT
        found = constant_set(consts[0] if const_first else consts[1])
        if found is None:
            return None
        members, kinds = found
        const = consts[0] if const_first else consts[1]
        size = len(const)
        other = fns[1] if const_first else fns[0]
        answer = _answers(name, const_first, members)

        def call(a: dict[str, Any]) -> Any:
            items = other(a)
            if type(items) is list and kinds.issuperset(map(type, items)):
                result = answer(items)
            else:
                result = impl(const, items) if const_first else impl(items, const)
            v.charge_call(a, 1 + factor * len(items) * size)
            return result

        return call

    return specialize


def _answers(name: str, const_first: bool, members: frozenset[Any]) -> Any:
    """The set operation on a runtime list whose kinds make set membership exact."""
    if name == "sets.intersects":
        return lambda items: not members.isdisjoint(items)
    if name == "sets.equivalent":
        return lambda items: members.issuperset(items) and members.issubset(items)
    return members.issuperset if const_first else members.issubset


def _cost(factor: float) -> Any:
    def estimate(c: Coster, node: Call) -> tuple[Range, None] | None:
        if len(node.args) != 2:
            return None
        product = times(c.size_or_unknown(node.args[0]), c.size_or_unknown(node.args[1]))
        return plus(scaled(product, factor), (1, 1)), None

    return estimate


LIST = ("list", "T")
register("sets.contains", False, (LIST, LIST), "bool", _contains)
register("sets.intersects", False, (LIST, LIST), "bool", _intersects)
register("sets.equivalent", False, (LIST, LIST), "bool", _equivalent)
RUNTIME_COSTS.update(
    {
        "sets.contains": lambda args, _r: 1 + len(args[0]) * len(args[1]),
        "sets.intersects": lambda args, _r: 1 + len(args[0]) * len(args[1]),
        "sets.equivalent": lambda args, _r: 1 + 2 * len(args[0]) * len(args[1]),
    }
)
CALL_COSTS.update({"sets.contains": _cost(1), "sets.intersects": _cost(1), "sets.equivalent": _cost(2)})
SPECIALIZERS.update(
    {
        "sets.contains": _specialize("sets.contains", 1),
        "sets.intersects": _specialize("sets.intersects", 1),
        "sets.equivalent": _specialize("sets.equivalent", 2),
    }
)
