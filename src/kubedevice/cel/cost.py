"""Static worst-case cost, as cel-go's checker.CostEstimator with Kubernetes' library estimator
computes it; Kubernetes refuses expressions estimated above an environment's limit.

Sizes come from the environment's size estimator (Declarations.size: for DRA, the declared
limits of the `device` variable); anything unbounded is "unknown" (up to 2**64-1) and costs
saturate like cel-go's uint64 arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .engine import FREE, OBJECT_TYPES, Declarations
from .library import CALL_COSTS, NAMESPACES, QTY, SEMVER
from .parser import Call, Comprehension, Ident, ListLit, Lit, MapLit, Node, Select

MAX = (1 << 64) - 1
Range = tuple[int, int]  # (min, max), used for both costs and sizes
UNKNOWN: Range = (0, MAX)
STRING_FACTOR = 0.1
REGEX_FACTOR = 0.25


def _add(a: int, b: int) -> int:
    return MAX if a > MAX - b else a + b


def _mul(a: int, b: int) -> int:
    return MAX if b and a > MAX // b else a * b


def _factor(x: int, f: float) -> int:
    if x > 0 and f > 0 and x > MAX / f:
        return MAX
    value = math.ceil(x * f)
    return MAX if value >= 2**64 else int(value)


def plus(*ranges: Range) -> Range:
    lo, hi = 0, 0
    for r in ranges:
        lo, hi = _add(lo, r[0]), _add(hi, r[1])
    return lo, hi


def times(a: Range, b: Range) -> Range:
    return _mul(a[0], b[0]), _mul(a[1], b[1])


def scaled(r: Range, f: float) -> Range:
    return _factor(r[0], f), _factor(r[1], f)


def union(a: Range, b: Range) -> Range:
    return min(a[0], b[0]), max(a[1], b[1])


ONE: Range = (1, 1)
ZERO: Range = (0, 0)


_SCALARS = frozenset({"bool", "int", "uint", "double", "google.protobuf.Timestamp", "google.protobuf.Duration"})


def _is_scalar(t: Any) -> bool:
    if isinstance(t, tuple) and t[0] == "optional":
        return _is_scalar(t[1])
    return t in _SCALARS


@dataclass
class _Var:
    path: list[str] | None
    size: Range | None
    entry: Range | None  # element size when the variable holds a literal list/map


class Coster:
    """Cost of one checked expression; ``types`` maps id(node) to the checker's type."""

    def __init__(self, types: dict[int, Any], env: Declarations) -> None:
        self.types = types
        self.env = env
        self.paths: dict[int, list[str]] = {}
        self.sizes: dict[int, Range] = {}
        self.entries: dict[int, Range] = {}
        self.locals: list[tuple[str, _Var]] = []

    def type_of(self, node: Node) -> Any:
        return self.types.get(id(node), "dyn")

    # sizes --------------------------------------------------------------------------------
    def size(self, node: Node) -> Range | None:
        if id(node) in self.sizes:
            return self.sizes[id(node)]
        if isinstance(node, Lit):
            if node.kind in ("string", "bytes"):
                return len(node.value), len(node.value)
            return ONE
        if isinstance(node, (ListLit, MapLit)):
            n = len(node.elements) if isinstance(node, ListLit) else len(node.entries)
            return n, n
        by_path = self.path_size(self.paths.get(id(node)))
        if by_path is not None:
            return by_path
        if _is_scalar(self.type_of(node)):
            return ONE
        if isinstance(node, Ident):
            var = self._local(node.name)
            if var is not None and var.size is not None:
                return var.size
        return None

    def path_size(self, path: list[str] | None) -> Range | None:
        """The environment's size estimator, for an access path from one of its variables."""
        return self.env.size(path) if path else None

    def size_or_unknown(self, node: Node) -> Range:
        return self.size(node) or UNKNOWN

    def _local(self, name: str) -> _Var | None:
        for var_name, var in reversed(self.locals):
            if var_name == name:
                return var
        return None

    def entry(self, node: Node) -> Range | None:
        if id(node) in self.entries:
            return self.entries[id(node)]
        if isinstance(node, Ident):
            var = self._local(node.name)
            return var.entry if var is not None else None
        return None

    # costs --------------------------------------------------------------------------------
    def cost(self, node: Node) -> Range:
        if isinstance(node, Lit):
            return ZERO
        if isinstance(node, Ident):
            var = self._local(node.name)
            self.paths[id(node)] = (var.path or []) if var is not None else [node.name]
            if var is not None and var.path is None:
                self.paths.pop(id(node))
            return ONE
        if isinstance(node, Select):
            return self._select(node)
        if isinstance(node, ListLit):
            return self._list(node)
        if isinstance(node, MapLit):
            parts = [self.cost(n) for key, value, _ in node.entries for n in (key, value)]
            return plus(*parts, (30, 30))
        if isinstance(node, Comprehension):
            return self._comprehension(node)
        assert isinstance(node, Call)
        return self._call(node)

    def _select(self, node: Select) -> Range:
        operand = self.cost(node.operand)
        if node.test_only:
            return operand
        if node.optional:  # _?._(operand, "field"): an ordinary call
            self.sizes[id(node)] = self.size_or_unknown(node)
            return plus(operand, ONE)
        t = self.type_of(node.operand)
        extra = ONE if t in OBJECT_TYPES or (isinstance(t, tuple) and t[0] == "map") else ZERO
        base = self.paths.get(id(node.operand))
        if base is not None:
            self.paths[id(node)] = [*base, node.field]
        return plus(operand, extra)

    def _list(self, node: ListLit) -> Range:
        total = (10, 10)
        item: Range = (MAX, 0) if node.elements else (0, 0)
        for element in node.elements:
            total = plus(total, self.cost(element))
            item = union(item, self.size_or_unknown(element))
        self.entries[id(node)] = item
        return total

    def _call(self, node: Call) -> Range:
        if node.function == "dyn" and node.target is None and len(node.args) == 1:
            inner = self.cost(node.args[0])
            self._copy(node.args[0], node)
            return plus(ONE, inner)
        arg_costs = [self.cost(a) for a in node.args]
        namespaced = (
            isinstance(node.target, Ident) and node.target.name in NAMESPACES and self._local(node.target.name) is None
        )  # optional.of(...) is a function name, not a target
        target_cost = self.cost(node.target) if node.target is not None and not namespaced else ZERO
        estimate, result_size = self._function(node, arg_costs)
        if node.function in ("_[_]", "_[?_]") and node.target is None:
            container = node.args[0]
            entry = self.entry(container)
            result_size = entry if entry is not None else result_size
            kind = self.type_of(container)
            step = "@items" if isinstance(kind, tuple) and kind[0] == "list" else "@values"
            base = self.paths.get(id(container))
            if base is not None:
                self.paths[id(node)] = [*base, step]
        if result_size is None:
            result_size = self.size(node)
        if result_size is not None:
            self.sizes[id(node)] = result_size
        return plus(target_cost, estimate)

    def function_name(self, node: Call) -> str:
        """The declared name: ``sets.contains`` for ``sets.contains(a, b)``."""
        target = node.target
        if isinstance(target, Ident) and target.name in NAMESPACES and self._local(target.name) is None:
            return f"{target.name}.{node.function}"
        return node.function

    def _function(self, node: Call, arg_costs: list[Range]) -> tuple[Range, Range | None]:
        args_sum = plus(*arg_costs)
        library = CALL_COSTS.get(self.function_name(node))
        if library is not None:
            found = library(self, node)
            if found is not None:
                return plus(found[0], args_sum), found[1]
        k8s = self._kubernetes(node)
        if k8s is not None:
            return plus(k8s[0], args_sum), k8s[1]
        builtin = _BUILTINS.get(node.function)
        if builtin is not None:
            result = builtin(self, node, arg_costs)
            if result is not None:
                return result
        return plus(ONE, args_sum), None

    def _kubernetes(self, node: Call) -> tuple[Range, Range | None] | None:
        """library.CostEstimator.EstimateCallCost for the functions a DRA selector can call."""
        name, target, args = node.function, node.target, node.args
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes") and target is not None:
            return self._list_function(name, target), None
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            size = self.size_or_unknown(target)
            return scaled(size, STRING_FACTOR), size
        if name == "split" and target is not None:
            size = self.size_or_unknown(target)
            limit = size[1]
            if len(args) > 1 and isinstance(args[1], Lit) and args[1].kind == "int":
                limit = args[1].value % (1 << 64)
            return scaled(size, 2 * STRING_FACTOR), (0, limit)
        if name == "join" and target is not None:
            return self._join(target, args)
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args)
        if name in ("find", "findAll") and target is not None and args:
            size = self.size_or_unknown(target)
            text = scaled(plus(size, ONE), STRING_FACTOR)
            return times(text, scaled(self.size_or_unknown(args[0]), REGEX_FACTOR)), (0, size[1])
        if name in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return scaled(self.size_or_unknown(args[0]), STRING_FACTOR), None
        if name in (
            "sign",
            "asInteger",
            "isInteger",
            "asApproximateFloat",
            "isGreaterThan",
            "isLessThan",
            "compareTo",
            "add",
            "sub",
            "major",
            "minor",
            "patch",
        ):
            return ONE, None
        if name == "_==_":
            left, right = (self.type_of(a) for a in args)
            if left == right and left in (QTY, SEMVER, "net.IP", "net.CIDR"):
                return ONE, None
            if left == right == "kubernetes.NamedFormat":
                return scaled((1, 64), STRING_FACTOR), None  # MaxFormatSize
            if left == right == "kubernetes.URL":  # upstream sizes both sides by the right one
                right_size = self.size(args[1])
                return scaled((1, right_size[1] if right_size else 1), STRING_FACTOR), None
        return None

    def _list_element_path(self, target: Node) -> list[str] | None:
        t = self.type_of(target)
        if isinstance(t, tuple) and t[0] == "list":
            return [*self.paths.get(id(target), []), "@items"]
        return None

    def _list_function(self, name: str, target: Node) -> Range:
        element = self._list_element_path(target)
        size = self.size_or_unknown(target)
        if element is not None:
            cost = ONE
            element_type = self.type_of(target)[1]
            if element_type in ("string", "bytes"):
                cost = plus(cost, scaled(self.path_size(element) or UNKNOWN, STRING_FACTOR))
            return times(size, cost)
        if name == "includes":
            return times(size, ONE)
        return scaled(size, STRING_FACTOR)

    def _join(self, target: Node, args: list[Node]) -> tuple[Range, Range]:
        count = self.size_or_unknown(target)
        element = self._list_element_path(target)
        size: Range = times(count, self.path_size(element) or UNKNOWN) if element is not None else ZERO
        if args:
            separators = (max(count[0] - 1, 0), max(count[1] - 1, 0))
            size = plus(size, times(self.size_or_unknown(args[0]), separators))
        return scaled(size, STRING_FACTOR), size

    def _replace(self, target: Node, args: list[Node]) -> tuple[Range, Range]:
        sz, old, new = self.size_or_unknown(target), self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
        if old[0] == 0:
            count_max, kept_max = (sz[1] + 1 if sz[1] < MAX else sz[1]), sz[1]
        elif new[1] <= old[0]:
            count_max, kept_max = 0, sz[1]
        else:
            count_max, kept_max = math.ceil(sz[1] / old[0]), 0
        if old[1] == 0:
            count_min, kept_min = (sz[0] + 1 if sz[0] < MAX else sz[0]), sz[0]
        elif old[1] <= new[0]:
            count_min, kept_min = 0, sz[0]
        else:
            count_min, kept_min = math.ceil(sz[0] / old[1]), 0
        size = plus(times((count_min, count_max), new), (kept_min, kept_max))
        return scaled(sz, 2 * STRING_FACTOR), size

    # comprehensions -----------------------------------------------------------------------
    def _comprehension(self, node: Comprehension) -> Range:
        if node.kind == "bind":
            init = self.cost(node.target)
            self.locals.append((node.var, self._var_for(node.target)))
            body = self.cost(node.body)
            self.locals.pop()
            self._copy(node.body, node)
            return plus((10, 10), init, body)
        if node.kind in ("optMap", "optFlatMap"):
            return self._opt_map(node)
        if node.kind == "sortBy":
            return self._sort_by(node)
        range_cost = self.cost(node.target)
        self.locals.append((node.var, self._iter_var(node.target)))
        if node.var2 is not None:
            self.locals[-1] = (node.var, self._first_var(node.target))
            self.locals.append((node.var2, self._second_var(node.target)))
        body = self.cost(node.body)
        extra = self.cost(node.extra) if node.extra is not None else None
        self.locals.pop()
        if node.var2 is not None:
            self.locals.pop()
        count = self.size_or_unknown(node.target)
        init, step, result = _MACRO_COSTS[node.kind](body, extra)
        if node.kind in ("map", "filter", "transformList", "transformMap", "transformMapEntry"):
            self.sizes[id(node)] = count
        return plus(range_cost, init, result, times(count, step))

    def _first_var(self, target: Node) -> _Var:
        """Index (a scalar) of a list, or key of a map."""
        t = self.type_of(target)
        base = self.paths.get(id(target))
        if isinstance(t, tuple) and t[0] == "list":
            return _Var(None, ONE, None)
        return _Var([*base, "@keys"] if base is not None else None, None, None)

    def _second_var(self, target: Node) -> _Var:
        """Element of a list, or value of a map."""
        t = self.type_of(target)
        base = self.paths.get(id(target))
        step = "@items" if isinstance(t, tuple) and t[0] == "list" else "@values"
        entry = self.entry(target)
        size = entry if (entry is not None and step == "@items") else None
        return _Var([*base, step] if base is not None else None, size, None)

    def _sort_by(self, node: Comprehension) -> Range:
        """cel.bind(@in, list, @in.@sortByAssociatedKeys(@in.map(x, key))) as ext.Lists expands it."""
        init = self.cost(node.target)
        size = self.size_or_unknown(node.target)
        self.locals.append((node.var, self._iter_var(node.target)))
        key = self.cost(node.body)
        self.locals.pop()
        map_init, map_step, map_result = _map(key, None)
        mapped = plus(ONE, map_init, map_result, times(size, map_step))  # @in.map(x, key)
        sort, result_size = sort_cost(size, self.type_of(node.body))
        self.sizes[id(node)] = result_size
        return plus((10, 10), init, sort, ONE, mapped)

    def _var_for(self, init: Node) -> _Var:
        return _Var(self.paths.get(id(init)), self.size(init), self.entry(init))

    def _iter_var(self, target: Node) -> _Var:
        t = self.type_of(target)
        entry = self.entry(target)
        is_list = isinstance(t, tuple) and t[0] == "list"
        base = self.paths.get(id(target))
        path = [*base, "@items" if is_list else "@keys"] if base is not None else None
        size = entry if (entry is not None and is_list) else None
        return _Var(path, size, None)

    def _copy(self, source: Node, target: Node) -> None:
        """copySizeEstimates: ``target`` has the sizes of ``source``, not its path (so
        ``dyn(device).attributes`` is no declared path and its size is unknown)."""
        size, entry = self.size(source), self.entry(source)
        if size is not None:
            self.sizes[id(target)] = size
        if entry is not None:
            self.entries[id(target)] = entry

    def _opt_map(self, node: Comprehension) -> Range:
        """opt.hasValue() ? optional.of(cel.bind(x, opt.value(), e)) : optional.none() (optFlatMap: no of)."""
        target = self.cost(node.target)
        self.locals.append((node.var, _Var(None, None, None)))
        body = self.cost(node.body)
        self.locals.pop()
        has_value = plus(ONE, target)
        bound = plus((10, 10), plus(ONE, target), body)
        mapped = plus(ONE, bound) if node.kind == "optMap" else bound
        return plus(has_value, union(mapped, ONE))


def _logical(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None]:
    return (costs[0][0], plus(costs[0], costs[1])[1]), None


def _conditional(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None]:
    size = union(c.size_or_unknown(node.args[1]), c.size_or_unknown(node.args[2]))
    return plus(costs[0], union(costs[1], costs[2])), size


def _comparison(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    """Equality always, ordering when a string/bytes overload is among the candidates."""
    if node.function not in ("_==_", "_!=_") and not all(
        c.type_of(a) in ("string", "bytes") or _dyn(c.type_of(a)) for a in node.args
    ):
        return None
    numeric = [c.type_of(a) for a in node.args if c.type_of(a) in ("int", "uint", "double", "bool")]
    if node.function not in ("_==_", "_!=_") and numeric:
        return None
    smallest = min(c.size_or_unknown(node.args[0])[1], c.size_or_unknown(node.args[1])[1])
    base = (1 if smallest > 0 else 0, smallest)
    return plus(scaled(base, STRING_FACTOR), *costs), None


def _addition(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    left, right = (c.type_of(a) for a in node.args)
    t = right if _dyn(left) else left
    kind = t[0] if isinstance(t, tuple) else t
    if _dyn(t):
        size = plus(c.size_or_unknown(node.args[0]), c.size_or_unknown(node.args[1]))
        return union(plus(scaled(size, STRING_FACTOR), *costs), plus(ONE, *costs)), size
    if kind not in ("string", "bytes", "list"):
        return None
    size = plus(c.size_or_unknown(node.args[0]), c.size_or_unknown(node.args[1]))
    entries = [e for e in (c.entry(node.args[0]), c.entry(node.args[1])) if e is not None]
    if entries:
        c.entries[id(node)] = entries[0] if len(entries) == 1 else union(entries[0], entries[1])
    if kind == "list":
        return plus(ONE, *costs), size
    return plus(scaled(size, STRING_FACTOR), *costs), size


def _dyn(t: Any) -> bool:
    return t in ("dyn", "any")


def _in(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    """in_list costs the list's size; with a dyn container in_map (cost 1) is also possible."""
    t = c.type_of(node.args[1])
    if (isinstance(t, tuple) and t[0] == "list") or _dyn(t):
        in_list = plus(c.size_or_unknown(node.args[1]), *costs)
        return (union(in_list, plus(ONE, *costs)) if _dyn(t) else in_list), None
    return None


def _string_prefix(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    if node.target is None or len(node.args) != 1:
        return None
    return plus(scaled(c.size_or_unknown(node.args[0]), STRING_FACTOR), *costs), None


def _matches(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    text, regex = (node.target, node.args[0]) if node.target is not None else (node.args[0], node.args[1])
    text_cost = scaled(plus(c.size_or_unknown(text), ONE), STRING_FACTOR)
    regex_cost = scaled(c.size_or_unknown(regex), REGEX_FACTOR)
    return plus(times(text_cost, regex_cost), *costs), None


def _contains(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    if node.target is None:
        return None
    text = scaled(c.size_or_unknown(node.target), STRING_FACTOR)
    sub = scaled(c.size_or_unknown(node.args[0]), STRING_FACTOR)
    return plus(times(text, sub), *costs), None


def _conversion(c: Coster, node: Call, costs: list[Range]) -> tuple[Range, Range | None] | None:
    """string(bytes) and bytes(string) scan their argument; with a dyn argument that overload is
    one of the candidates, so the estimate spans it and the unit cost of the others."""
    if node.target is not None or len(node.args) != 1:
        return None
    t = c.type_of(node.args[0])
    scanned = "bytes" if node.function == "string" else "string"
    if t != scanned and not _dyn(t):
        return None
    size = c.size_or_unknown(node.args[0])
    scan = plus(scaled(size, STRING_FACTOR), *costs)
    result = (size[0], _mul(size[1], 4)) if node.function == "bytes" else size
    return (union(scan, plus(ONE, *costs)) if _dyn(t) else scan), result


_BUILTINS: dict[str, Callable[[Coster, Call, list[Range]], tuple[Range, Range | None] | None]] = {
    "string": _conversion,
    "bytes": _conversion,
    "_&&_": _logical,
    "_||_": _logical,
    "_?_:_": _conditional,
    "_==_": _comparison,
    "_!=_": _comparison,
    "_<_": _comparison,
    "_<=_": _comparison,
    "_>_": _comparison,
    "_>=_": _comparison,
    "_+_": _addition,
    "@in": _in,
    "startsWith": _string_prefix,
    "endsWith": _string_prefix,
    "matches": _matches,
    "contains": _contains,
}


def _all(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init true; condition @not_strictly_false(acc); step acc && body; result acc
    return ZERO, plus((2, 2), (1, _add(1, body[1]))), ONE


def _exists(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init false; condition @not_strictly_false(!acc); step acc || body; result acc
    return ZERO, plus((3, 3), (1, _add(1, body[1]))), ONE


def _exists_one(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init 0; condition true; step body ? acc + 1 : acc; result acc == 1
    return ZERO, plus(body, union((2, 2), ONE)), (2, 2)


def _map(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init []; condition true; step [filter ?] acc + [body] [: acc]; result acc
    append = plus((12, 12), body)
    return (10, 10), (plus(extra, union(append, ONE)) if extra is not None else append), ONE


def _filter(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init []; condition true; step body ? acc + [x] : acc; result acc
    return (10, 10), plus(body, union((13, 13), ONE)), ONE


def _transform_map(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init {}; step [filter ?] cel.@mapInsert(acc, k, body) [: acc]; result acc
    insert = plus((3, 3), body)
    return (30, 30), (plus(extra, union(insert, ONE)) if extra is not None else insert), ONE


def _transform_map_entry(body: Range, extra: Range | None) -> tuple[Range, Range, Range]:
    # init {}; step [filter ?] cel.@mapInsert(acc, body) [: acc]; result acc
    insert = plus((2, 2), body)
    return (30, 30), (plus(extra, union(insert, ONE)) if extra is not None else insert), ONE


_MACRO_COSTS: dict[str, Callable[[Range, Range | None], tuple[Range, Range, Range]]] = {
    "all": _all,
    "exists": _exists,
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
    "transformList": _map,
    "transformMap": _transform_map,
    "transformMapEntry": _transform_map_entry,
}


def sort_cost(size: Range, element_type: Any) -> tuple[Range, Range]:
    """ext.Lists' estimateListSortCost: n² comparisons (strings and bytes also pay for their
    length; a dyn element may be one), plus the call and the new list; the result size is n²."""
    free = type(element_type) is type(FREE)  # a free key type: cel-go binds it to int's overload
    factor = 2.1 if element_type in ("string", "bytes", "dyn", "any") and not free else 2.0
    squared = times(size, size)
    return plus(scaled(squared, factor), (11, 11)), squared


def estimate(root: Node, types: dict[int, Any], env: Declarations) -> int:
    """The maximum of cel-go's cost estimate for ``root``, checked in ``env``."""
    return Coster(types, env).cost(root)[1]
