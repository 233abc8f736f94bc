"""Runtime values and the dynamic (runtime-dispatched) CEL operations on them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from .quantity import ComputedQuantity, Quantity
from .semver import Semver

INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1
UINT_MAX = (1 << 64) - 1


class Err(Exception):
    """A CEL runtime error value, raised so that Python unwinds to the nearest absorber."""


class Panic(Err):
    """A Go panic in a library function (an unchecked type assertion on a dyn argument): cel-go
    turns it into an 'internal error' for the whole evaluation, which && and || cannot absorb."""


COST_KEY = "@cost"
MAX_COST = 1_000_000


def charge(a: dict[str, Any], amount: int) -> None:
    """Spend runtime cost from the evaluation's budget (Kubernetes' per-call limit)."""
    budget = a.get(COST_KEY)
    if budget is None:
        budget = a[COST_KEY] = [MAX_COST]
    budget[0] -= amount
    if budget[0] < 0:  # cel-go cancels the whole evaluation: no && or || absorbs it
        raise Panic("operation cancelled: actual cost limit exceeded")


def actual_size(value: Any) -> int:
    """cel-go's actualSize: a string's code points, a bytes', list's or map's length, an optional's
    value's size, 1 for anything else."""
    if isinstance(value, (str, bytes, list, tuple, dict)):
        return len(value)
    if type(value) is Optional and value.present:
        return actual_size(value.value)
    return 1


def traversal(size: int, factor: float = 0.1) -> int:
    """``uint64(math.Ceil(float64(size) * factor))``, cel-go's cost of walking ``size`` units."""
    return math.ceil(size * factor)


def charge_call(a: dict[str, Any], cost: int) -> None:
    """Charge a call whose cost cel-go computes from its arguments (a cost tracker or Kubernetes'
    CallCost): the static cost a comprehension charges per iteration already counted 1 for it."""
    if cost > 1:
        charge(a, cost - 1)


class UInt(int):
    """CEL uint: distinct from int at runtime."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Optional:
    """CEL optional_type; ``present`` distinguishes optional.none() from optional.of(null)."""

    present: bool
    value: Any = None


NONE = Optional(False)


class Deferred:
    """A cel.bind initialiser that failed: cel-go binds lazily, so the error only counts if used."""

    __slots__ = ("error",)

    def __init__(self, error: Err) -> None:
        self.error = error


def undefer(value: Any) -> Any:
    if type(value) is Deferred:
        raise value.error
    return value


def no_overload(name: str, *args: Any) -> Err:
    """A library function's type guard refusing its arguments (cel-go's MaybeNoSuchOverload)."""
    return Err(f"no such overload: {name}({', '.join(type_name(a) for a in args)})")


# Go's dynamic type (%T) of each CEL value, and whether it has an Add method: Go's panic for a
# value that is not a traits.Lister names the first method it lacks, Add or else Contains.
_GO_TYPES: dict[str, tuple[str, bool]] = {
    "string": ("types.String", True),
    "int": ("types.Int", True),
    "uint": ("types.Uint", True),
    "double": ("types.Double", True),
    "bytes": ("types.Bytes", True),
    "google.protobuf.Duration": ("types.Duration", True),
    "google.protobuf.Timestamp": ("types.Timestamp", True),
    "bool": ("types.Bool", False),
    "null_type": ("types.Null", False),
    "map": ("*types.baseMap", False),
    "optional_type": ("*types.Optional", False),
    "type": ("*types.Type", False),
    "kubernetes.Semver": ("cel.Semver", False),
    "kubernetes.Quantity": ("cel.Quantity", False),
    "kubernetes.URL": ("cel.URL", False),
    "net.IP": ("cel.IP", False),
    "net.CIDR": ("cel.CIDR", False),
    "kubernetes.NamedFormat": ("cel.Format", False),
}
# Go types that cannot be a Go map key (they hold a slice or a func): a lookup panics.
UNHASHABLE = frozenset({"cel.Semver", "types.Bytes", "cel.Format"})


def go_type(value: Any) -> str:
    """Go's %T of a CEL value, as messages about a value of the wrong kind print it."""
    if isinstance(value, Err):
        return "*types.Err"
    name = type_name(value)
    return _GO_TYPES[name][0] if name in _GO_TYPES else name


def not_a_list(value: Any) -> Panic:
    """The panic of a call whose cost tracker asserts a list (traits.Lister) and gets ``value``
    (an Err when the argument itself failed)."""
    adds = not isinstance(value, Err) and _GO_TYPES.get(type_name(value), ("", False))[1]
    missing = "Contains" if adds else "Add"
    return Panic(
        f"internal error: interface conversion: {go_type(value)} is not traits.Lister: missing method {missing}"
    )


def refused(*_args: Any) -> Err:
    """An implementation refusing an operand (MaybeNoSuchOverloadErr): ==, in, &&, ||, !, ?:."""
    return Err("no such overload")


# The traits of cel-go's runtime types (common/types/types.go); Kubernetes' types have none.
_TRAITS: dict[str, frozenset[str]] = {
    name: frozenset(traits.split())
    for name, traits in {
        "bool": "compare negate",
        "bytes": "add compare size",
        "double": "add compare divide multiply negate subtract",
        "google.protobuf.Duration": "add compare negate receive subtract",
        "int": "add compare divide modulo multiply negate subtract",
        "list": "add contain index iterate lister size",
        "map": "contain index iterate size",
        "string": "add compare match receive size",
        "google.protobuf.Timestamp": "add compare receive subtract",
        "uint": "add compare divide modulo multiply subtract",
    }.items()
}
# The standard operators, whose one binding needs a trait of the first operand (common/stdlib).
_NEEDS = {
    "_+_": "add",
    "_-_": "subtract",
    "_*_": "multiply",
    "_/_": "divide",
    "_%_": "modulo",
    "-_": "negate",
    "_<_": "compare",
    "_<=_": "compare",
    "_>_": "compare",
    "_>=_": "compare",
    "size": "size",
    # ext.Lists' functions with one binding guarded by traits.ListerType
    "sort": "lister",
    "@sortByAssociatedKeys": "lister",
}


def operator_error(name: str, *args: Any) -> Err:
    """A function with one trait-guarded binding (the standard operators, ext.Lists' sort)
    refusing its operands, in cel-go's words: the interpreter names the
    function when the first operand lacks the trait the binding needs and takes no receiver
    calls; otherwise the implementation (or the receiver) refuses, without a name."""
    have = _TRAITS.get(type_name(args[0]), frozenset())
    if _NEEDS[name] not in have and "receive" not in have:
        return Err(f"no such overload: {name}")
    return refused()


def type_name(value: Any) -> str:
    declared = getattr(value, "CEL_TYPE", None)
    if isinstance(declared, str):
        return declared
    names: dict[type, str] = {
        bool: "bool",
        int: "int",
        UInt: "uint",
        float: "double",
        str: "string",
        bytes: "bytes",
        type(None): "null_type",
        list: "list",
        tuple: "list",
        dict: "map",
        Quantity: "kubernetes.Quantity",
        Semver: "kubernetes.Semver",
        Optional: "optional_type",
    }
    for cls in type(value).__mro__:
        if cls in names:
            return names[cls]
    return type(value).__name__


def _is_num(value: Any) -> bool:
    return type(value) in (int, UInt, float)


def equals(a: Any, b: Any) -> bool:
    """Heterogeneous equality: values of different kinds are unequal, numbers compare by value.

    Kubernetes' Quantity and Semver refuse comparison with other kinds (an error, not false).
    """
    if a is None or b is None:
        return a is None and b is None
    ta, tb = type(a), type(b)
    if ta is ComputedQuantity:
        ta = Quantity
    if (ta in _STRICT or getattr(ta, "CEL_STRICT", False)) and ta is not tb:
        raise refused()
    if ta is tb or (_is_num(a) and _is_num(b)):
        if ta in (list, tuple) or ta is dict or ta is CelMap:
            return _container_equals(a, b)
        if ta is Quantity:
            return bool(a.cmp(b) == 0)
        if ta is float or tb is float:  # cel-go compares an int or uint with a double as doubles
            return float(a) == float(b)
        return bool(a == b)
    if ta in (list, tuple) and tb in (list, tuple):
        return _container_equals(a, b)
    if issubclass(ta, dict) and issubclass(tb, dict):
        return _container_equals(a, b)
    return False


_STRICT = (Quantity, Semver)


def not_equals(a: Any, b: Any) -> bool:
    """cel-go's ``!=`` is ``Equal(a, b) != true``: where the left operand's type refuses the
    comparison (``semver("1.0.0") != dyn("x")``), ``==`` fails but ``!=`` is true."""
    try:
        return not equals(a, b)
    except Err:
        return True


def equal_or_false(a: Any, b: Any) -> bool:
    """Equality as container searches use it: an incomparable pair is simply not equal."""
    try:
        return equals(a, b)
    except Err:
        return False


def _container_equals(a: Any, b: Any) -> bool:
    """cel-go's list and map Equal: only a definite false decides; an element comparison that
    fails (``[q.add(r)] == [q.add(r)]``) counts as equal."""
    if len(a) != len(b):
        return False
    if isinstance(a, dict):
        for key, value in a.items():
            other = map_find(b, key)
            if other is _MISSING or not _element_equal(value, other):
                return False
        return True
    return all(_element_equal(x, y) for x, y in zip(a, b, strict=True))


def _element_equal(a: Any, b: Any) -> bool:
    try:
        return equals(a, b)
    except Err:
        return True


_MISSING = object()
MAP_KEY_TYPES = (str, int, UInt, bool, float, type(None))


class _Identity:
    """A list or map used as a map key: cel-go keys it by reference, so only itself finds it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


class _Unique:
    """A NaN map key: equal to nothing, itself included (a Go map never finds a NaN key, and each
    insertion of one adds an entry), where Python's dict would match the same NaN object."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _stored(key: Any) -> tuple[type, Any]:
    kind = type(key)
    if kind is float and math.isnan(key):
        return kind, _Unique(key)
    if kind in MAP_KEY_TYPES or kind in TIME_TYPES:
        return kind, key
    if kind is Semver or kind is bytes:  # Go slices underneath: not usable as Go map keys
        raise Err(f"unsupported key type: {type_name(key)}")
    return kind, _Identity(key)  # lists, maps, quantities, optionals: by reference, as in Go


def _key(stored: tuple[type, Any]) -> Any:
    key = stored[1]
    return key.value if type(key) is _Identity or type(key) is _Unique else key


class DefaultingMap(dict[str, Any]):
    """A map whose absent keys read as an empty map (lookups honour ``default``): how
    Kubernetes' DRA presents the attributes and capacity of an unknown domain."""

    default: ClassVar[dict[str, Any]] = {}


class CelMap(dict[Any, Any]):
    """A map an expression builds: keys of different kinds stay apart, as in cel-go, where
    ``true``, ``1``, ``1u`` and ``1.0`` are four keys that Python's dict would merge into one.

    Entries are stored under ``(kind, key)``; iteration, ``items()`` and ``keys()`` give the CEL
    keys back. ``put`` stores exactly (the last write wins, like a Go map); ``map_find`` is
    cel-go's lookup, which then tries the other numeric kinds."""

    __slots__ = ()

    def put(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, _stored(key), value)

    def drop(self, key: Any) -> None:
        dict.pop(self, _stored(key), None)

    def exact(self, key: Any) -> Any:
        return dict.get(self, _stored(key), _MISSING)

    def __iter__(self) -> Any:
        return map(_key, dict.__iter__(self))

    def keys(self) -> Any:
        return list(map(_key, dict.__iter__(self)))

    def items(self) -> Any:
        return [(_key(stored), value) for stored, value in dict.items(self)]

    def get(self, key: Any, default: Any = None) -> Any:
        found = map_find(self, key)
        return default if found is _MISSING else found

    def __getitem__(self, key: Any) -> Any:
        found = map_find(self, key)
        if found is _MISSING:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return map_find(self, key) is not _MISSING

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {x!r}" for k, x in self.items()) + "}"


def _find_typed(mapping: CelMap, key: Any) -> Any:
    """cel-go's refValMapAccessor.Find: the exact key, else the same number as another kind
    (a double as an int, then as a uint; an int as a uint; a uint as an int), when lossless."""
    kind = type(key)
    found = mapping.exact(key)
    if found is not _MISSING or kind not in (float, int, UInt):
        return found
    if kind is float:
        if key.is_integer() and -(2.0**63) < key < 2.0**63:
            found = mapping.exact(int(key))
            if found is not _MISSING:
                return found
        return mapping.exact(UInt(int(key))) if key.is_integer() and 0 <= key < 2.0**64 else _MISSING
    if kind is int:
        return mapping.exact(UInt(key)) if key >= 0 else _MISSING
    return mapping.exact(int(key)) if key <= INT_MAX else _MISSING


def map_find(mapping: dict[Any, Any], key: Any) -> Any:
    """Map lookup with CEL's numeric key equivalence (1 == 1u == 1.0)."""
    if type(mapping) is CelMap:
        return _find_typed(mapping, key)
    if type(key) is str:  # a str only ever equals a str key, so the dict lookup is exact
        found = mapping.get(key, _MISSING)
        return found if found is not _MISSING else getattr(mapping, "default", _MISSING)
    if type(key) is float:
        if not key.is_integer():
            return _MISSING
        key = int(key)
    if type(key) in (int, UInt):
        for candidate in (int(key), UInt(key)) if 0 <= key <= UINT_MAX else (int(key),):
            for k, v in mapping.items():
                if type(k) in (int, UInt) and k == candidate:
                    return v
        return _MISSING
    if type(key) is not bool:
        raise Err(f"unsupported key type: {type_name(key)}")
    return _scan(mapping, key)


def _scan(mapping: dict[Any, Any], key: Any) -> Any:
    for k, v in mapping.items():
        if type(k) is type(key) and k == key:
            return v
    return getattr(mapping, "default", _MISSING)


def index(container: Any, key: Any) -> Any:
    """``container[key]`` as cel-go's attribute qualifiers read it."""
    if isinstance(container, (list, tuple)):
        position = _list_index(key)
        if not 0 <= position < len(container):
            raise Err(f"index out of bounds: {position}")
        return container[position]
    if isinstance(container, dict):
        if type(key) not in _QUALIFIERS:  # cel-go indexes a map only with a scalar key
            raise Err(f"invalid qualifier type: {type_name(key)}")
        value = map_find(container, key)
        if value is _MISSING:
            raise Err(f"no such key: {go_value(key)}")
        return value
    raise Err(f"no such key: {go_value(key)}")  # a qualifier on a value that has no keys


def _list_index(key: Any) -> int:
    """types.IndexOrError: an int, or a uint or double that is one exactly."""
    if type(key) is int:
        return key
    if type(key) is float and key.is_integer() and INT_MIN <= key <= INT_MAX:
        return int(key)
    if type(key) is UInt and key <= INT_MAX:
        return int(key)
    if type(key) in (float, UInt):
        raise Err(f"unsupported index value {go_value(key)} in list")
    raise Err(f"unsupported index type '{type_name(key)}' in list")


def go_value(value: Any) -> str:
    """Go's %v of a scalar CEL value, as error messages print keys and indexes."""
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        if math.isnan(value) or math.isinf(value):
            return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
    return str(value)


_QUALIFIERS = frozenset({str, int, UInt, bool, float})


def has_key(container: Any, key: Any) -> bool:
    if isinstance(container, dict):
        return map_find(container, key) is not _MISSING
    raise no_overload("has", container)


def compare(a: Any, b: Any, op: str) -> int:
    """Ordering for the relational operators, including cross-type numeric comparisons."""
    ta, tb = type(a), type(b)
    if (_is_num(a) and _is_num(b)) or (ta is tb and (ta in (str, bytes, bool) or ta in TIME_TYPES)):
        if ta is float or tb is float:  # as doubles, like cel-go's compareIntDouble
            a, b = float(a), float(b)
            if math.isnan(a) or math.isnan(b):
                raise Err("NaN values cannot be ordered")
        return int(a > b) - int(a < b)
    raise operator_error(op, a, b)


# Timestamp and Duration classes (kind by class) and their + - and negation, registered by
# timestamps.py, which builds on this module.
TIME_TYPES: dict[type, str] = {}
TIME_OPS: dict[str, Callable[..., Any]] = {}


def _time_arith(op: str, a: Any, b: Any) -> Any:
    kinds = (TIME_TYPES.get(type(a)), TIME_TYPES.get(type(b)))
    allowed = {
        "+": (("timestamp", "duration"), ("duration", "timestamp"), ("duration", "duration")),
        "-": (("timestamp", "timestamp"), ("timestamp", "duration"), ("duration", "duration")),
    }
    if kinds not in allowed.get(op, ()):
        raise operator_error(f"_{op}_", a, b)
    return TIME_OPS[op](a, b)


def check_int(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise Err("integer overflow")
    return value


def check_uint(value: int) -> UInt:
    if not 0 <= value <= UINT_MAX:
        raise Err("unsigned integer overflow")
    return UInt(value)


def _int_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def arith(op: str, a: Any, b: Any) -> Any:
    """+ - * / % with CEL's overflow and division-by-zero errors; operands must share a kind."""
    ta, tb = type(a), type(b)
    if ta in TIME_TYPES or tb in TIME_TYPES:
        return _time_arith(op, a, b)
    if ta is not tb and not (ta in (list, tuple) and tb in (list, tuple)):
        raise operator_error(f"_{op}_", a, b)
    if ta is int or ta is UInt:
        check = check_int if ta is int else check_uint
        if op in "/%" and b == 0:
            raise Err("division by zero" if op == "/" else "modulus by zero")
        if op == "/":
            return check(_int_div(a, b))
        if op == "%":
            if ta is int and a == INT_MIN and b == -1:
                raise Err("integer overflow")
            return check(a - b * _int_div(a, b))
        return check({"+": a + b, "-": a - b, "*": a * b}[op])
    if ta is float and op in "+-*/":
        return _float_op(op, a, b)
    if op == "+" and ta in (str, bytes):
        return a + b
    if op == "+" and ta in (list, tuple):
        return list(a) + list(b)
    raise operator_error(f"_{op}_", a, b)


def _float_op(op: str, a: float, b: float) -> float:
    if op == "/":
        if b == 0:
            return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
        return a / b
    try:
        return {"+": a + b, "-": a - b, "*": a * b}[op]
    except OverflowError:
        return math.inf


def negate(a: Any) -> Any:
    if type(a) is int:
        return check_int(-a)
    if TIME_TYPES.get(type(a)) == "duration":  # only reachable through dyn: -_ is not declared for it
        return TIME_OPS["negate"](a)
    if type(a) is float:
        return -a
    raise operator_error("-_", a)


def size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict)):
        return len(value)
    raise operator_error("size", value)


def contains(container: Any, item: Any) -> bool:
    """The `in` operator."""
    if isinstance(container, (list, tuple)):
        return any(equal_or_false(item, x) for x in container)
    if isinstance(container, dict):
        return map_find(container, item) is not _MISSING and not (
            hasattr(container, "default") and all(not equals(item, k) for k in container)
        )
    raise refused()


def absorb(outcomes: Iterable[Any], stop: bool, name: str) -> bool:
    """CEL's commutative && (stop=False) / || (stop=True) over values or Err outcomes:
    any operand equal to ``stop`` decides, otherwise the first error or non-bool fails."""
    failure: Err | None = None
    for value in outcomes:
        if value is stop:
            return bool(stop)
        if isinstance(value, Err):
            failure = failure or value
        elif value is not (not stop):
            failure = failure or refused()
    if failure is not None:
        raise failure
    return not stop


def outcome(fn: Callable[[Any], Any], arg: Any) -> Any:
    """``fn(arg)``, with a CEL error returned as a value rather than raised."""
    try:
        return fn(arg)
    except Panic:
        raise
    except Err as exc:
        return exc


def truthy(value: Any, name: str) -> bool:
    if value is True or value is False:
        return bool(value)
    raise refused()


Fn = Callable[..., Any]
