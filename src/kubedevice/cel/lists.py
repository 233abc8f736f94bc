"""cel-go's ext.Lists at version 3 (Kubernetes base environment since 1.34): slice, flatten,
sort, sortBy (a macro, see macros.py), lists.range, reverse and distinct, with their static costs."""

from __future__ import annotations

from typing import Any

from . import values as v
from .cost import MAX, Coster, Range, plus, scaled, sort_cost, times
from .library import CALL_COSTS, DYN, REFUSALS, RESOLVED_ASSERTS, RUNTIME_COSTS, UNCHECKED, register
from .parser import Call, Lit, Node
from .values import Err, UInt

COMPARABLE = (
    "int",
    "uint",
    "double",
    "bool",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
    "string",
    "bytes",
)
MAX_RANGE = 1_000_000
LIST_CREATE = 10


def _slice(items: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise Err(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise Err(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if len(items) < end:
        raise Err(f"cannot slice({start}, {end}), list is length {len(items)}")
    return list(items[start:end])


def _flatten_refusal(items: Any, *depth: Any) -> Err:
    """flatten runs without type guards and words its own refusal (ext/lists.go)."""
    return Err(f"no such overload: {_type_string(items)}.flatten({', '.join(map(_type_string, depth))})")


def _type_string(value: Any) -> str:
    """A runtime value's CEL type as Go's %v prints it (lists and maps are parameterised by dyn);
    not its Go type, which values.go_type gives."""
    name = v.type_name(value)
    return {"list": "list(dyn)", "map": "map(dyn, dyn)"}.get(name, name)


def _flatten(items: Any, depth: int = 1) -> list[Any]:
    if not isinstance(items, (list, tuple)) or type(depth) is not int:
        raise _flatten_refusal(items, depth)
    if depth < 0:
        raise Err("level must be non-negative")
    out: list[Any] = []
    for item in items:
        if isinstance(item, (list, tuple)) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


def _range(n: int) -> list[int]:
    if n < 0:
        raise Err(f"lists.range: size must be non-negative, got {n}")
    if n > MAX_RANGE:
        raise Err(f"lists.range: size {n} exceeds maximum allowed ({MAX_RANGE})")
    return list(range(n))


def _distinct(items: list[Any]) -> list[Any]:
    unique: list[Any] = []
    for item in items:
        if not any(v.equal_or_false(item, seen) for seen in unique):
            unique.append(item)
    return unique


_ORDERED = (int, UInt, float, bool, str, bytes)


def sort_by_keys(items: Any, keys: list[Any]) -> list[Any]:
    """@sortByAssociatedKeys: the keys must be comparable values of one type."""
    if not isinstance(items, (list, tuple)):
        raise v.operator_error("@sortByAssociatedKeys", items)
    if len(items) != len(keys):
        raise Err(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, "
            f"but got {len(items)} and {len(keys)} elements respectively"
        )
    if not items:
        return list(items)
    first = type(keys[0])
    if first not in _ORDERED and first not in v.TIME_TYPES:
        raise Err("list elements must be comparable")
    if len(keys) > 1 and any(type(k) is not first for k in keys):
        raise Err("list elements must have the same type")
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    return [items[i] for i in order]


def _sort(items: list[Any]) -> list[Any]:
    return sort_by_keys(items, list(items))


def _register() -> None:
    register("slice", True, (("list", "T"), "int", "int"), ("list", "T"), _slice)
    register("flatten", True, (("list", ("list", "T")),), ("list", "T"), _flatten)
    register("flatten", True, (("list", DYN), "int"), ("list", DYN), _flatten)
    REFUSALS["flatten"] = _flatten_refusal
    for t in COMPARABLE:
        register("sort", True, (("list", t),), ("list", t), _sort)
    register("lists.range", False, ("int",), ("list", "int"), _range)
    register("reverse", True, (("list", "T"),), ("list", "T"), lambda items: list(reversed(items)))
    register("distinct", True, (("list", "T"),), ("list", "T"), _distinct)


# Static costs: cel-go ext/lists.go estimators (version 3) ------------------------------------


def _uint_literal(node: Node, default: int) -> int:
    """nodeAsUintValue: an int literal (negative counts as 0), else the default."""
    if isinstance(node, Lit) and node.kind == "int":
        return max(int(node.value), 0)
    return default


def _allocating(factor: float, size: Range) -> tuple[Range, Range]:
    """estimateAllocatingListCall: size × factor + 1 (the call) + 10 (the new list)."""
    return plus(scaled(size, factor), (1 + LIST_CREATE, 1 + LIST_CREATE)), size


def _slice_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if node.target is None or len(node.args) != 2:
        return None
    size = c.size_or_unknown(node.target)
    start, end = _uint_literal(node.args[0], 0), _uint_literal(node.args[1], size[1])
    length = (end - start) % (1 << 64)  # uint64 arithmetic, as in Go
    return _allocating(1, (length, length))


def _flatten_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if node.target is None or len(node.args) > 1:
        return None
    depth = _uint_literal(node.args[0], MAX) if node.args else 1
    return _allocating(float(depth), c.size_or_unknown(node.target))


def _range_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if len(node.args) != 1:
        return None
    n = _uint_literal(node.args[0], MAX)
    return _allocating(1, (n, n))


def _reverse_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if node.target is None or node.args:
        return None
    return _allocating(1, c.size_or_unknown(node.target))


def _distinct_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if node.target is None or node.args:
        return None
    size = c.size_or_unknown(node.target)
    return _allocating(2.0, times(size, size))


def _sort_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    if node.target is None or node.args:
        return None
    t = c.type_of(node.target)
    element = t[1] if isinstance(t, tuple) and t[0] == "list" else DYN
    return sort_cost(c.size_or_unknown(node.target), element)


def _allocated(factor: float, size: int) -> int:
    """trackAllocatingListCall."""
    return int(size * factor) + 1 + LIST_CREATE


def self_compare(items: Any) -> int:
    """trackListSelfCompare: n² comparisons, strings and bytes a little more."""
    if not items:
        return _allocated(2.0, 0)
    return _allocated(2.1 if type(items[0]) in (str, bytes) else 2.0, len(items) ** 2)


def _flatten_tracked(args: list[Any], _result: Any) -> int:
    return _allocated(float(args[1]) if len(args) > 1 else 1.0, len(args[0]))


RUNTIME_COSTS.update(
    {
        "slice": lambda _args, result: _allocated(1, len(result)),
        "lists.range": lambda _args, result: _allocated(1, len(result)),
        "reverse": lambda _args, result: _allocated(1, len(result)),
        "flatten": _flatten_tracked,
        "distinct": lambda args, _result: self_compare(args[0]),
        "sort": lambda args, _result: self_compare(args[0]),
    }
)
# distinct() of a non-list panics in cel-go (its cost tracker asserts args[0].(traits.Lister)).
UNCHECKED.add("distinct")
REFUSALS["sort"] = lambda *args: v.operator_error("sort", *args)


def _assert_sorted_list(args: list[Any]) -> Err | None:
    """cel-go ext/lists.go, trackListSort: args[0].(traits.Lister)."""
    return None if isinstance(args[0], (list, tuple)) else v.not_a_list(args[0])


def _assert_depth(args: list[Any]) -> Err | None:
    """cel-go ext/lists.go, trackListFlatten: args[1].(types.Int), a Go interface conversion."""
    if len(args) < 2 or type(args[1]) is int:
        return None
    return v.Panic(f"internal error: interface conversion: ref.Val is {v.go_type(args[1])}, not types.Int")


RESOLVED_ASSERTS.update({"sort": _assert_sorted_list, "flatten": _assert_depth})
CALL_COSTS.update(
    {
        "slice": _slice_cost,
        "flatten": _flatten_cost,
        "lists.range": _range_cost,
        "reverse": _reverse_cost,
        "distinct": _distinct_cost,
        "sort": _sort_cost,
    }
)
_register()
