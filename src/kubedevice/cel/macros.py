"""Comprehension macros (all, exists, exists_one, map, filter), cel.bind, optMap/optFlatMap,
the two-variable comprehensions of ext.TwoVarComprehensions and ext.Lists' sortBy.

Each iteration charges the shared runtime cost counter, so that nested loops over large lists
hit Kubernetes' per-evaluation cost limit (1,000,000) instead of running unbounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import values as v
from .engine import (
    DEFERRED,
    EMPTY_SORTED,
    ERROR,
    FREE,
    VIEW,
    CheckError,
    Compiled,
    Compiler,
    assignable,
    fmt,
    is_dyn,
    mismatch,
)
from .library import DYN
from .lists import COMPARABLE, self_compare, sort_by_keys
from .parser import Comprehension, ListLit, Node
from .values import NONE, Err, Optional, charge


def _iter_var_type(target: Any, at: Node | None = None) -> Any:
    if target in (DYN, ERROR):  # a range that failed to check: its variable is dyn
        return "dyn"
    if isinstance(target, tuple) and target[0] in ("list", "map"):
        return target[1]
    raise _not_a_range(target, at)


def _not_a_range(target: Any, at: Node | None) -> CheckError:
    """Reported at the range expression (sortBy: at its call)."""
    return CheckError(
        f"expression of type '{fmt(target)}' cannot be range of a comprehension (must be list, map, or dynamic)", at
    )


def _not_bool(kind: str, predicate: Compiled, node: Comprehension, accumulator: Any) -> CheckError:
    """all/exists expand to && / || with the predicate: cel-go checks the operand itself; the
    other macros' predicates (exists_one, filter, the filter of map and the transforms) are the
    condition of a ternary ``_?_:_(predicate, step, accumulator)``, reported at the macro."""
    if kind in ("all", "exists"):
        return CheckError(mismatch("bool", predicate.type), node.body)
    shown = fmt(accumulator)
    return CheckError(
        f"found no matching overload for '_?_:_' applied to '({fmt(predicate.type)}, {shown}, {shown})'", node
    )


def _non_bool(part: Compiled | None) -> bool:
    return part is not None and part.type != "bool" and not is_dyn(part.type)


def _predicate_error(node: Comprehension, body: Compiled, extra: Compiled | None, result: Any) -> CheckError | None:
    """A predicate that is not a bool (checked even over a range that failed to check, whose
    variables are of the error type, as cel-go does)."""
    accumulator = "int" if node.kind == "exists_one" else result
    if node.kind in ("all", "exists", "exists_one", "filter") and _non_bool(body):
        return _not_bool(node.kind, body, node, accumulator)
    if extra is not None and _non_bool(extra):  # map(x, predicate, f), the transforms' filter
        return _not_bool(node.kind, extra, node, accumulator)
    return None


def _result_type(kind: str, var_type: Any, body: Compiled) -> Any:
    return {"map": ("list", body.type), "filter": ("list", var_type)}.get(kind, "bool")


def _items(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return list(value.keys())
    raise not_iterable(value)


def not_iterable(value: Any) -> Err:
    """cel-go's message for a one-variable comprehension, which names the Go type of the value."""
    return Err(f"got '{v.go_type(value)}', expected iterable type")


def compile_macro(c: Compiler, node: Comprehension) -> Compiled:
    target = c.compile(node.target)
    if node.kind == "bind":
        return _bind(c, node, target)
    if node.kind in ("optMap", "optFlatMap"):
        return _opt_map(c, node, target)
    if node.var2 is not None:
        return _two_var(c, node, target)
    if node.kind == "sortBy":
        return _sort_by(c, node, target)
    try:
        var_type = _iter_var_type(target.type, node.target)
    except CheckError as exc:  # cel-go reports it and checks the body with an error-typed variable
        c.errors.append(exc)
        var_type = ERROR
    c.scopes.append({node.var: var_type})
    try:
        body = c.compile(node.body)
        extra = c.compile(node.extra) if node.extra is not None else None
    finally:
        c.scopes.pop()
    result_type = _result_type(node.kind, var_type, body)
    failed = _predicate_error(node, body, extra, result_type)
    if failed is not None:
        raise failed
    if var_type == ERROR:
        return Compiled(ERROR, body.fn, 0)
    return _loop(node, target, body, extra, result_type)


def _loop(node: Comprehension, target: Compiled, body: Compiled, extra: Compiled | None, result_type: Any) -> Compiled:
    kind, var, tf, bf = node.kind, node.var, target.fn, body.fn
    xf = extra.fn if extra else None
    loop = _Loop(kind, var, bf, xf, *_step_costs(kind, body, extra))

    def run(a: dict[str, Any]) -> Any:
        items = _items(tf(a))
        saved = a.get(var, _UNSET)
        try:
            return _run(loop, a, items)
        finally:
            if saved is _UNSET:
                a.pop(var, None)
            else:
                a[var] = saved

    return Compiled(result_type, run, target.cost + 1)


_UNSET = object()


@dataclass(frozen=True)
class _Loop:
    kind: str
    var: str
    body: Any
    extra: Any
    step: int  # charged every iteration
    hit: int = 0  # charged when the predicate of a filter, exists_one or a filtered map holds


# cel-go's runtime cost of one iteration besides the body: the loop condition (all, exists:
# @not_strictly_false(accu), 2; the others: the constant true, 0) and the accumulator step,
# where `accu` costs 1, a call 1 and a list literal 10: all/exists `accu && p` (+1),
# exists_one `p ? accu + 1 : accu`, filter `p ? accu + [x] : accu`, map `accu + [f]` (+12),
# transformMap `@mapInsert(accu, k, f)` (+3), transformMapEntry `@mapInsert(accu, f)` (+2);
# a filter makes the step `p ? <step> : accu`. Loops nested in the body charge their own.
_STEPS = {"all": 3, "exists": 3, "map": 12, "transformList": 12, "transformMap": 3, "transformMapEntry": 2}
_HITS = {"exists_one": 1, "filter": 12}


def _step_costs(kind: str, body: Compiled, extra: Compiled | None) -> tuple[int, int]:
    """(charged every iteration, charged when the predicate holds)."""
    if kind in _HITS:
        return body.cost + 1, _HITS[kind]
    if extra is None:
        return body.cost + _STEPS[kind], 0
    return extra.cost + 1, body.cost + _STEPS[kind] - 1


def _run(loop: _Loop, a: dict[str, Any], items: list[Any]) -> Any:
    kind, var, bf, xf, step = loop.kind, loop.var, loop.body, loop.extra, loop.step
    if kind in ("all", "exists"):

        def outcomes() -> Iterator[Any]:
            for item in items:
                charge(a, step)
                a[var] = item
                yield v.outcome(bf, a)

        return v.absorb(outcomes(), kind == "exists", "_&&_" if kind == "all" else "_||_")
    hit = loop.hit
    if kind == "exists_one":
        count = 0
        for item in items:
            charge(a, step)
            a[var] = item
            if v.truthy(bf(a), "exists_one"):
                charge(a, hit)
                count += 1
        return count == 1
    out = []
    for item in items:
        charge(a, step)
        a[var] = item
        if kind == "filter":
            if v.truthy(bf(a), "filter"):
                charge(a, hit)
                out.append(item)
        elif xf is not None:
            if v.truthy(xf(a), "map"):
                charge(a, hit)
                out.append(bf(a))
        else:
            out.append(bf(a))
    return out


def _bind(c: Compiler, node: Comprehension, init: Compiled) -> Compiled:
    """cel.bind is lazy in cel-go: a failing initialiser only matters if the body reads it.
    Initialisers have no side effects, so evaluating eagerly and deferring the error is the same."""
    view = c.view(node.target)
    if view is not None:
        # a view (device.attributes["d"]) cannot fail and costs nothing to name: the body reads
        # it (or single entries of it) directly, nothing is bound at run time.
        c.scopes.append({node.var: init.type, VIEW + node.var: view})
        try:
            body = c.compile(node.body)
        finally:
            c.scopes.pop()
        return Compiled(body.type, body.fn, init.cost + body.cost)
    c.scopes.append({node.var: init.type, DEFERRED + node.var: True})
    try:
        body = c.compile(node.body)
    finally:
        c.scopes.pop()
    var, inf, bf = node.var, init.fn, body.fn

    def run(a: dict[str, Any]) -> Any:
        saved = a.get(var, _UNSET)
        try:
            a[var] = inf(a)
        except Err as exc:
            a[var] = v.Deferred(exc)
        try:
            return bf(a)
        finally:
            if saved is _UNSET:
                a.pop(var, None)
            else:
                a[var] = saved

    return Compiled(body.type, run, init.cost + body.cost)


def _opt_map(c: Compiler, node: Comprehension, target: Compiled) -> Compiled:
    t = target.type
    if not (is_dyn(t) or (isinstance(t, tuple) and t[0] == "optional")):
        raise CheckError(f"found no matching overload for '{node.kind}' applied to '({fmt(t)})'")
    c.scopes.append({node.var: t[1] if isinstance(t, tuple) else "dyn"})
    try:
        body = c.compile(node.body)
    finally:
        c.scopes.pop()
    flat, var, tf, bf = node.kind == "optFlatMap", node.var, target.fn, body.fn

    def run(a: dict[str, Any]) -> Optional:
        base = tf(a)
        if not isinstance(base, Optional):
            raise v.no_overload(node.kind, base)
        if not base.present:
            return NONE
        saved = a.get(var, _UNSET)
        a[var] = base.value
        try:
            out = bf(a)
        finally:
            if saved is _UNSET:
                a.pop(var, None)
            else:
                a[var] = saved
        if flat:
            if not isinstance(out, Optional):
                raise v.no_overload("optFlatMap", out)
            return out
        return Optional(True, out)

    result = body.type if flat else ("optional", body.type)
    return Compiled(result, run, target.cost + body.cost + 1)


def _pair_types(target: Any, at: Node) -> tuple[Any, Any]:
    if target in (DYN, ERROR):  # google.protobuf.Any (attributes without list types) is not a range
        return DYN, DYN
    if isinstance(target, tuple) and target[0] == "list":
        return "int", target[1]
    if isinstance(target, tuple) and target[0] == "map":
        return target[1], target[2]
    raise _not_a_range(target, at)


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    if isinstance(value, (list, tuple)):
        return list(enumerate(value))
    if isinstance(value, dict):
        return list(value.items())
    raise Err(f"unsupported comprehension range type: {v.go_type(value)}")  # the two-variable form's words


def _two_var(c: Compiler, node: Comprehension, target: Compiled) -> Compiled:
    """all/exists/existsOne(i, v, p), transformList/transformMap/transformMapEntry(i, v, [filter,] e)."""
    try:
        first, second = _pair_types(target.type, node.target)
    except CheckError as exc:  # reported; the body is still checked, as by cel-go
        c.errors.append(exc)
        first = second = ERROR
    assert node.var2 is not None
    c.scopes.append({node.var: first, node.var2: second})
    try:
        body = c.compile(node.body)
        extra = c.compile(node.extra) if node.extra is not None else None
    finally:
        c.scopes.pop()
    kind = node.kind
    result: Any = {
        "transformList": ("list", body.type),
        "transformMap": ("map", first, body.type),
        "transformMapEntry": body.type if not is_dyn(body.type) else ("map", DYN, DYN),
    }.get(kind, "bool")
    failed = _predicate_error(node, body, extra, result)
    if failed is not None:
        raise failed
    if first == ERROR:
        return Compiled(ERROR, body.fn, 0)
    if kind == "transformMapEntry" and not (
        is_dyn(body.type) or (isinstance(body.type, tuple) and body.type[0] == "map")
    ):
        raise CheckError(
            f"found no matching overload for 'cel.@mapInsert' applied to '(map(dyn, dyn), {fmt(body.type)})'"
        )
    loop = _Loop(kind, node.var, body.fn, extra.fn if extra else None, *_step_costs(kind, body, extra))
    var2, tf = node.var2, target.fn

    def run(a: dict[str, Any]) -> Any:
        pairs = _pairs(tf(a))
        saved = a.get(loop.var, _UNSET), a.get(var2, _UNSET)
        try:
            return _run_pairs(loop, var2, a, pairs)
        finally:
            for name, old in zip((loop.var, var2), saved, strict=True):
                if old is _UNSET:
                    a.pop(name, None)
                else:
                    a[name] = old

    return Compiled(result, run, target.cost + 1)


def _run_pairs(loop: _Loop, var2: str, a: dict[str, Any], pairs: list[tuple[Any, Any]]) -> Any:
    kind, var, bf, xf, step = loop.kind, loop.var, loop.body, loop.extra, loop.step
    if kind in ("all", "exists"):

        def outcomes() -> Iterator[Any]:
            for first, second in pairs:
                charge(a, step)
                a[var], a[var2] = first, second
                yield v.outcome(bf, a)

        return v.absorb(outcomes(), kind == "exists", "_&&_" if kind == "all" else "_||_")
    hit = loop.hit
    if kind == "exists_one":
        count = 0
        for first, second in pairs:
            charge(a, step)
            a[var], a[var2] = first, second
            if v.truthy(bf(a), "exists_one"):
                charge(a, hit)
                count += 1
        return count == 1
    out: Any = [] if kind == "transformList" else v.CelMap()
    for first, second in pairs:
        charge(a, step)
        a[var], a[var2] = first, second
        if xf is not None:
            if not v.truthy(xf(a), "_?_:_"):
                continue
            charge(a, hit)
        if kind == "transformList":
            out.append(bf(a))
        elif kind == "transformMap":
            out.put(first, bf(a))
        else:
            _insert_entries(out, bf(a))
    return out


def _insert_entries(out: v.CelMap, entries: Any) -> None:
    """cel.@mapInsert(map, map): a key already present is an error."""
    if not isinstance(entries, dict):
        raise v.no_overload("cel.@mapInsert", out, entries)
    for key, value in entries.items():
        if v.has_key(out, key):
            raise Err(f"insert failed: key {key} already exists")
        out.put(key, value)


def _sort_by(c: Compiler, node: Comprehension, target: Compiled) -> Compiled:
    """list.sortBy(x, key): sort the list by the (comparable) key of each element."""
    if not (is_dyn(target.type) or (isinstance(target.type, tuple) and target.type[0] == "list")):
        raise CheckError(f"found no matching overload for 'map' applied to '({fmt(target.type)})'")
    c.scopes.append({node.var: _iter_var_type(target.type, node)})  # at the macro's '('
    try:
        key = c.compile(node.body)
    finally:
        c.scopes.pop()
    if not is_dyn(key.type) and not any(assignable(t, key.type, {}) for t in COMPARABLE):
        raise CheckError(
            f"found no matching overload for '@sortByAssociatedKeys' applied to "
            f"'{fmt(target.type)}.(list({fmt(key.type)}))'"
        )
    loop = _Loop("map", node.var, key.fn, None, *_step_costs("map", key, None))
    tf = target.fn
    # A key of one comparable type resolves @sortByAssociatedKeys to one overload, whose cost
    # tracker asserts the keys list even when computing it failed (ext/lists.go, trackListSortBy).
    # So does a key of a free type (the elements of dyn(l).reverse()): cel-go binds it to the
    # first overload's, int.
    free_key = key.type is FREE or type(key.type) is type(FREE)
    resolved = not is_dyn(key.type) or free_key

    def keys_of(a: dict[str, Any], items: Any) -> Any:
        saved = a.get(loop.var, _UNSET)
        try:
            return _run(loop, a, _items(items))
        finally:
            if saved is _UNSET:
                a.pop(loop.var, None)
            else:
                a[loop.var] = saved

    def run(a: dict[str, Any]) -> Any:
        try:
            items = tf(a)
            keys = keys_of(a, items)
        except v.Panic:
            raise
        except Err as exc:
            if resolved:
                raise v.not_a_list(exc) from None
            raise
        result = sort_by_keys(items, keys)
        if resolved:  # trackListSortBy: n² comparisons of the keys
            v.charge_call(a, self_compare(keys))
        return result

    result = EMPTY_SORTED if isinstance(node.target, ListLit) and not node.target.elements else target.type
    if free_key and isinstance(result, tuple) and type(result[1]) is type(FREE):
        result = ("list", "int")
    elif is_dyn(result):  # a dyn list with dyn keys matches every key type's overload: their results
        # list(T) each carry a fresh T, so cel-go's checker settles on dyn (resolveOverload)
        result = DYN if is_dyn(key.type) else ("list", DYN)
    return Compiled(result, run, target.cost + 1)
