"""cel-go's ext.Sets (Kubernetes base environment since 1.29): sets.contains, sets.intersects and
sets.equivalent over lists, with cel-go's static cost (m × n comparisons, twice for equivalent)."""

from __future__ import annotations

from typing import Any

from . import values as v
from .cost import Coster, Range, plus, scaled, times
from .library import CALL_COSTS, RUNTIME_COSTS, register
from .parser import Call


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
RUNTIME_COSTS.update({"sets.contains": lambda args, _r: 1 + len(args[0]) * len(args[1]),
                      "sets.intersects": lambda args, _r: 1 + len(args[0]) * len(args[1]),
                      "sets.equivalent": lambda args, _r: 1 + 2 * len(args[0]) * len(args[1])})
CALL_COSTS.update({"sets.contains": _cost(1), "sets.intersects": _cost(1), "sets.equivalent": _cost(2)})
