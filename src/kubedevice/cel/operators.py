"""Operators with CEL's rules: commutative error-absorbing && and ||, heterogeneous equality,
cross-type numeric ordering, overflow-checked arithmetic, indexing and the ternary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import values as v
from .engine import ERROR, CheckError, Closure, Compiled, Compiler, assignable, fmt, is_constant, is_dyn, mismatch
from .parser import Call, ListLit, Lit, Node, flatten
from .timestamps import DURATION, TIMESTAMP
from .values import NONE, Err, Optional

_NUMERIC = ("int", "uint", "double")


def _no_overload(name: str, *types: Any) -> CheckError:
    return CheckError(f"found no matching overload for '{name}' applied to '({', '.join(fmt(t) for t in types)})'")


def _logical(is_and: bool) -> Callable[[Compiler, Call], Compiled]:
    name = "_&&_" if is_and else "_||_"

    def build(c: Compiler, node: Call) -> Compiled:
        leaves: list[Node] = []
        flatten(node, name, leaves)
        parts = [c.compile(leaf) for leaf in leaves]
        mismatched = False
        for leaf, part in zip(leaves, parts, strict=True):
            if part.type != "bool" and not is_dyn(part.type):  # cel-go checks (and reports) each operand
                c.errors.append(CheckError(mismatch("bool", part.type), leaf))
                mismatched = True
        if mismatched:
            return Compiled(ERROR, parts[0].fn, 0)
        fns = tuple(p.fn for p in parts)
        stop, go_on = not is_and, is_and
        panic = v.Panic

        def run(a: dict[str, Any]) -> bool:  # v.absorb written out: no generator per evaluation
            failure: Err | None = None
            for f in fns:
                try:
                    value = f(a)
                except panic:
                    raise
                except Err as exc:
                    failure = failure or exc
                    continue
                if value is stop:
                    return not go_on
                if value is not go_on and failure is None:
                    failure = value if isinstance(value, Err) else v.refused()
            if failure is not None:
                raise failure
            return go_on

        return Compiled("bool", run, sum(p.cost for p in parts))

    return build


def _not(c: Compiler, node: Call) -> Compiled:
    inner = c.compile(node.args[0])
    if inner.type != "bool" and not is_dyn(inner.type):
        raise _no_overload("!_", inner.type)
    f = inner.fn
    return Compiled("bool", lambda a: not v.truthy(f(a), "!_"), inner.cost + 1)


def _equality(negated: bool) -> Callable[[Compiler, Call], Compiled]:
    name = "_!=_" if negated else "_==_"

    def build(c: Compiler, node: Call) -> Compiled:
        left, right = (c.compile(a) for a in node.args)
        comparable = assignable(left.type, right.type, {}) and assignable(right.type, left.type, {})
        if not comparable:
            raise _no_overload(name, left.type, right.type)
        lf, rf = left.fn, right.fn
        if isinstance(node.args[1], Lit) and node.args[1].kind in ("string", "bool", "int"):
            return _equal_literal(left, rf({}), negated)
        test = v.not_equals if negated else v.equals

        def equality(a: dict[str, Any]) -> bool:
            x, y = lf(a), rf(a)
            if type(x) in _SIZED and type(y) in _SIZED:
                _charge_traversal(a, x, y)
            return test(x, y)

        return Compiled("bool", equality, left.cost + right.cost + 1)

    return build


_TEXTS = (str, bytes)
_SIZED = frozenset({str, bytes, list, tuple, dict, v.CelMap, v.DefaultingMap})


def _charge_traversal(a: dict[str, Any], x: Any, y: Any) -> None:
    """cel-go's cost of ==, != and the orderings of strings and bytes: a tenth of the shorter
    operand's size, where the call's static cost already counted 1."""
    extra = v.traversal(min(len(x), len(y))) - 1
    if extra > 0:
        v.charge(a, extra)


def _equal_literal(left: Compiled, const: Any, negated: bool) -> Compiled:
    """``x == "lit"``: no closure call for the constant, plain == when the runtime kinds agree
    (checked types are not trusted: a dyn branch can still deliver another kind)."""
    lf = left.fn
    cost = left.cost + (const != "")  # comparing with "" walks nothing: cel-go charges 0
    kind = type(const)
    if kind is str and len(const) > 10:  # a comparison of long strings costs more than 1
        plain = lf

        def charged(a: dict[str, Any]) -> Any:
            value = plain(a)
            if type(value) is str:
                _charge_traversal(a, value, const)
            return value

        lf = charged

    def eq(a: dict[str, Any]) -> bool:
        value = lf(a)
        if type(value) is kind:
            return bool(value == const)
        return v.equals(value, const)

    def ne(a: dict[str, Any]) -> bool:
        value = lf(a)
        if type(value) is kind:
            return bool(value != const)
        return v.not_equals(value, const)

    return Compiled("bool", ne if negated else eq, cost)


_ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool", TIMESTAMP, DURATION})
_WITH_DYN = _ORDERED | {"null_type"}  # cel-go's checker lets null stand for a dyn operand's partner
_RELATIONS: dict[str, Callable[[int], bool]] = {
    "_<_": lambda r: r == -1,
    "_<=_": lambda r: r in (-1, 0),
    "_>_": lambda r: r == 1,
    "_>=_": lambda r: r in (0, 1),
}


def _relation(name: str) -> Callable[[Compiler, Call], Compiled]:
    test = _RELATIONS[name]

    def build(c: Compiler, node: Call) -> Compiled:
        left, right = (c.compile(a) for a in node.args)
        lt, rt = left.type, right.type
        # dyn matches any declared overload, so the other side must be orderable: no overload
        # takes a Semver or a Quantity (k8s' library orders them with compareTo)
        ok = (
            (is_dyn(lt) and (is_dyn(rt) or rt in _WITH_DYN))
            or (is_dyn(rt) and lt in _WITH_DYN)
            or (lt in _NUMERIC and rt in _NUMERIC)
            or (lt == rt and lt in _WITH_DYN)
            or (lt == "null_type" and rt in _TIMES)  # null is assignable to a timestamp or duration
            or (rt == "null_type" and lt in _TIMES)
        )
        if not ok:
            raise _no_overload(name, lt, rt)
        lf, rf = left.fn, right.fn
        if lt == rt == "int" and isinstance(node.args[1], Lit):
            return Compiled("bool", _int_relation(name, lf, rf({})), left.cost + 1)

        def relation(a: dict[str, Any]) -> bool:
            x, y = lf(a), rf(a)
            if type(x) in _TEXTS and type(y) is type(x):
                _charge_traversal(a, x, y)
            return test(v.compare(x, y, name))

        return Compiled("bool", relation, left.cost + right.cost + 1)

    return build


def _int_relation(name: str, lf: Closure, const: int) -> Closure:
    """``int_expr < 5``: Python's ordering when the value really is an int, CEL's otherwise."""
    test = _RELATIONS[name]

    def relation(a: dict[str, Any]) -> bool:
        value = lf(a)
        if type(value) is int:
            return test((value > const) - (value < const))
        return test(v.compare(value, const, name))

    return relation


def _arith(op: str) -> Callable[[Compiler, Call], Compiled]:
    name = f"_{op}_"

    def build(c: Compiler, node: Call) -> Compiled:
        left, right = (c.compile(a) for a in node.args)
        lt, rt = left.type, right.type
        allowed = {
            "+": ("int", "uint", "double", "string", "bytes"),
            "-": _NUMERIC,
            "*": _NUMERIC,
            "/": _NUMERIC,
            "%": ("int", "uint"),
        }[op]
        timed = _time_arith(op, lt, rt)
        if timed is not None:
            lf, rf = left.fn, right.fn
            return Compiled(timed, lambda a: v.arith(op, lf(a), rf(a)), left.cost + right.cost + 1)
        if is_dyn(lt) or is_dyn(rt):
            result: Any = lt if not is_dyn(lt) else rt
            if (isinstance(result, tuple) and result[0] != "list") or (
                not isinstance(result, tuple) and result not in allowed and not is_dyn(result)
            ):
                raise _no_overload(name, lt, rt)
        elif lt == rt and lt in allowed:
            result = lt
        elif (
            op == "+"
            and isinstance(lt, tuple)
            and isinstance(rt, tuple)
            and lt[0] == rt[0] == "list"
            and assignable(lt, rt, {})
        ):
            result = lt if not is_dyn(lt[1]) else rt
        else:
            raise _no_overload(name, lt, rt)
        lf, rf = left.fn, right.fn
        if op != "+" or not (result in ("string", "bytes") or is_dyn(result)):
            return Compiled(result, lambda a: v.arith(op, lf(a), rf(a)), left.cost + right.cost + 1)

        def add(a: dict[str, Any]) -> Any:
            total = v.arith("+", lf(a), rf(a))
            if type(total) in _TEXTS:  # copying both operands: a tenth of their sizes
                extra = v.traversal(len(total)) - 1
                if extra > 0:
                    v.charge(a, extra)
            return total

        return Compiled(result, add, left.cost + right.cost + 1)

    return build


_TIME_ARITH = {
    ("+", TIMESTAMP, DURATION): TIMESTAMP,
    ("+", DURATION, TIMESTAMP): TIMESTAMP,
    ("+", DURATION, DURATION): DURATION,
    ("-", TIMESTAMP, TIMESTAMP): DURATION,
    ("-", TIMESTAMP, DURATION): TIMESTAMP,
    ("-", DURATION, DURATION): DURATION,
}


_TIMES = (TIMESTAMP, DURATION)


def _time_arith(op: str, lt: Any, rt: Any) -> Any:
    """Result type of + or - when a timestamp or duration is involved (None otherwise); null is
    assignable to both (cel-go's legacy nullness), so it takes their overloads too."""
    if lt not in (*_TIMES, "null_type") and rt not in (*_TIMES, "null_type"):
        return None
    results = {result for (o, x, y), result in _TIME_ARITH.items() if o == op and _takes(x, lt) and _takes(y, rt)}
    if not results:
        raise _no_overload(f"_{op}_", lt, rt)
    return results.pop() if len(results) == 1 else "dyn"


def _takes(param: str, t: Any) -> bool:
    return t in (param, "null_type") or is_dyn(t)


def _negate(c: Compiler, node: Call) -> Compiled:
    inner = c.compile(node.args[0])
    if inner.type not in ("int", "double") and not is_dyn(inner.type):
        raise _no_overload("-_", inner.type)
    f = inner.fn
    return Compiled(inner.type, lambda a: v.negate(f(a)), inner.cost + 1)


def _ternary(c: Compiler, node: Call) -> Compiled:
    cond, then, other = (c.compile(a) for a in node.args)
    if cond.type != "bool" and not is_dyn(cond.type):
        raise _no_overload("_?_:_", cond.type, then.type, other.type)
    if not assignable(then.type, other.type, {}):
        raise _no_overload("_?_:_", "bool", then.type, other.type)
    cf, tf, of = cond.fn, then.fn, other.fn
    result = then.type if not is_dyn(then.type) else other.type
    return Compiled(
        result, lambda a: tf(a) if v.truthy(cf(a), "_?_:_") else of(a), cond.cost + max(then.cost, other.cost)
    )


def _element_type(container: Any, key: Any, name: str) -> Any:
    if is_dyn(container):
        return "dyn"
    kind = container[0] if isinstance(container, tuple) else None
    if kind == "list" and (key == "int" or is_dyn(key)):
        return container[1]
    if kind == "map" and assignable(container[1], key, {}):
        return container[2]
    raise _no_overload(name, container, key)


def _index(c: Compiler, node: Call) -> Compiled:
    container, key = (c.compile(a) for a in node.args)
    result = _element_type(container.type, key.type, "_[_]")
    refused = _constant_qualifier(node.args[1])
    if refused is not None:  # cel-go plans a constant key as a qualifier, which must be a scalar
        c.planning.append(f"invalid qualifier type: {refused}")
    where = c.view(node.args[0])
    if where is not None and isinstance(node.args[1], Lit) and node.args[1].kind == "string":
        return Compiled(result, c.env.read_key(where, str(node.args[1].value)), 3)
    where = c.view(node)
    if where is not None:
        return Compiled(result, c.env.read(where), 2)
    cf, kf = container.fn, key.fn
    return Compiled(result, lambda a: v.index(cf(a), kf(a)), container.cost + key.cost + 1)


def _constant_qualifier(key: Node) -> str | None:
    """The Go type of a constant key cel-go's planner refuses as a qualifier (null, a list, a
    map, a duration or timestamp literal; through dyn() too), else None."""
    while isinstance(key, Call) and key.function == "dyn" and key.target is None and len(key.args) == 1:
        key = key.args[0]
    if isinstance(key, Lit) and key.kind == "null":
        return "types.Null"
    if isinstance(key, ListLit) and all(isinstance(e, Lit) for e in key.elements):
        return "*types.baseList"
    if (
        isinstance(key, Call)
        and key.function in ("duration", "timestamp")
        and key.target is None
        and len(key.args) == 1
        and isinstance(key.args[0], Lit)
        and key.args[0].kind == "string"
    ):
        return "types.Duration" if key.function == "duration" else "types.Timestamp"
    return None


def _optional_index(c: Compiler, node: Call) -> Compiled:
    container, key = (c.compile(a) for a in node.args)
    optional = isinstance(container.type, tuple) and container.type[0] == "optional"
    result = _element_type(container.type[1] if optional else container.type, key.type, "_[?_]")
    refused = _constant_qualifier(node.args[1])
    if refused is not None:
        c.planning.append(f"invalid qualifier type: {refused}")
    cf, kf = container.fn, key.fn

    def run(a: dict[str, Any]) -> Optional:
        base, k = cf(a), kf(a)
        if isinstance(base, Optional):
            if not base.present:
                return NONE
            base = base.value
        if not isinstance(base, (dict, list, tuple)):
            return NONE
        try:
            if isinstance(base, dict) and not v.has_key(base, k):
                return NONE
            return Optional(True, v.index(base, k))
        except Err:
            if isinstance(base, (list, tuple)):
                return NONE
            raise

    return Compiled(("optional", result), run, container.cost + key.cost + 1)


def _in(c: Compiler, node: Call) -> Compiled:
    item, container = (c.compile(a) for a in node.args)
    ct = container.type
    searchable = isinstance(ct, tuple) and ct[0] in ("list", "map") and assignable(ct[1], item.type, {})
    if not is_dyn(ct) and not searchable:
        raise _no_overload("@in", item.type, ct)
    itf, cf = item.fn, container.fn
    literal = node.args[1]
    cost = item.cost + container.cost + 1
    constant = _constant_set(literal, cf)
    if constant is None:

        def contains(a: dict[str, Any]) -> bool:
            container, x = cf(a), itf(a)
            if type(container) in (list, tuple) and len(container) > 1:  # a search through the list
                v.charge(a, len(container) - 1)
            return v.contains(container, x)

        return Compiled("bool", contains, cost)
    # A constant list of strings, numbers and bools: cel-go's planner (OptOptimize) makes it a Go
    # map, whose lookup panics for an item of a Go type that cannot be a map key (a Semver).
    strings = frozenset(x for x in constant if type(x) is str)

    def member(a: dict[str, Any]) -> bool:
        x = itf(a)
        if type(x) is str:
            return x in strings
        go_type = v.go_type(x)
        if go_type in v.UNHASHABLE:
            raise v.Panic(f"internal error: runtime error: hash of unhashable type {go_type}")
        return v.contains(cf(a), x)

    return Compiled("bool", member, cost)


def _constant_set(literal: Node, fn: Closure) -> list[Any] | None:
    """The values of a non-empty list literal of constant strings, numbers and bools, else None."""
    if not (isinstance(literal, ListLit) and not literal.optional and literal.elements):
        return None
    if not all(is_constant(e) for e in literal.elements):
        return None
    try:
        values: list[Any] = fn({})
    except Err:
        return None
    return values if all(type(x) in _SET_KINDS for x in values) else None


_SET_KINDS = frozenset({str, int, v.UInt, float, bool})


SPECIAL: dict[str, Callable[[Compiler, Call], Compiled]] = {
    "_&&_": _logical(True),
    "_||_": _logical(False),
    "!_": _not,
    "-_": _negate,
    "_==_": _equality(False),
    "_!=_": _equality(True),
    "_?_:_": _ternary,
    "_[_]": _index,
    "_[?_]": _optional_index,
    "@in": _in,
    **{name: _relation(name) for name in _RELATIONS},
    **{f"_{op}_": _arith(op) for op in "+-*/%"},
}
