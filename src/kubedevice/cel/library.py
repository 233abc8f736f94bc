"""Function overloads: the CEL standard library subset, the strings extension, regex, optionals,
and Kubernetes' lists, quantity and semver libraries, each with a static signature for the
checker and a Python implementation for the runtime."""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import quantity as q
from . import regex
from . import semver as sv
from .values import (
    NONE,
    TIME_TYPES,
    Err,
    Optional,
    UInt,
    actual_size,
    arith,
    charge,
    charge_call,
    check_int,
    compare,
    equal_or_false,
    go_value,
    no_overload,
    operator_error,
    refused,
    traversal,
    type_name,
)

T = Any  # a type: str for primitives/abstract types, tuple for ("list", e), ("map", k, v), ("optional", e)
DYN = "dyn"
QTY = "kubernetes.Quantity"
SEMVER = "kubernetes.Semver"


@dataclass(frozen=True)
class Overload:
    member: bool
    params: tuple[T, ...]  # "A" is a type parameter, ("list", "A") etc. allowed
    result: T
    impl: Callable[..., Any]


OVERLOADS: dict[str, list[Overload]] = {}
# Static cost of a call, per function name, for the libraries in their own modules:
# (coster, call node) -> (cost without the arguments, result size) or None for cel-go's default.
CALL_COSTS: dict[str, Callable[[Any, Any], Any]] = {}
# Runtime cost of a call, per function name, charged when the call is evaluated (cel-go's cost
# trackers and Kubernetes' CallCost): (arguments, result) -> cost.
RUNTIME_COSTS: dict[str, Callable[[list[Any], Any], int]] = {}
# Functions that panic in Go when called with the wrong kind through dyn (see values.Panic)
# instead of failing normally: their cost trackers assert a list (values.not_a_list).
UNCHECKED: set[str] = set()
# Functions whose cost tracker asserts the kinds of its arguments only when the checker resolved
# the call to one overload (cel-go's planner names the overload, and so finds its tracker, only
# then; interpreter/runtimecost.go passes it the evaluated arguments, failed ones included): the
# assertion, given the arguments (an Err for one that failed), returns the panic or None.
RESOLVED_ASSERTS: dict[str, Callable[[list[Any]], Err | None]] = {}
# How a function refuses arguments of the wrong kind, where it is not the type guard's
# "no such overload: f(types)": the standard string functions skip the guards (their
# implementation refuses) and size() is an operator, named only for an operand without a size.
REFUSALS: dict[str, Callable[..., Err]] = {
    "contains": refused,
    "startsWith": refused,
    "endsWith": refused,
    "matches": refused,
    "size": lambda *args: operator_error("size", *args),
}
# Runtime classes of each declared type name, for overload dispatch (libraries add theirs).
VALUE_TYPES: dict[str, tuple[type, ...]] = {}
# Compile-time specialisations of a call, per function name, for calls with constant arguments:
# (argument nodes with the receiver first, their constant values or NOT_CONSTANT, argument
# closures, the general implementation) -> a closure for this call, or None to keep the general
# one. A specialisation must answer exactly like the general closure for every input: it checks
# the runtime kinds it relies on and falls back to the general implementation otherwise.
SPECIALIZERS: dict[str, Callable[[list[Any], list[Any], list[Any], Callable[..., Any]], Any]] = {}
NOT_CONSTANT = object()
# Prefixes of namespaced global functions (``sets.contains(a, b)`` is not a call on ``sets``).
NAMESPACES = {"optional", "sets", "lists", "ip", "strings"}


def register(name: str, member: bool, params: tuple[T, ...], result: T, impl: Callable[..., Any]) -> None:
    OVERLOADS.setdefault(name, []).append(Overload(member, params, result, impl))


def _quantity(text: str) -> q.Quantity:
    try:
        return q.parse_quantity(text)
    except q.QuantityError as exc:
        raise Err(str(exc)) from exc


def _is_quantity(text: str) -> bool:
    try:
        q.parse_quantity(text)
    except q.QuantityError:
        return False
    return True


def _as_integer(value: q.Quantity) -> int:
    result = value.as_int64()
    if result is None:
        raise Err("cannot convert value to integer")
    return result


def _semver(text: str, normalize: bool = False) -> sv.Semver:
    try:
        return sv.normalize_and_parse(text) if normalize else sv.parse(text)
    except sv.SemverError as exc:
        raise Err(str(exc)) from exc


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver(text, normalize)
    except Err:
        return False
    return True


def _int64(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _list_of(value: Any, name: str) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise no_overload(name, value)
    return list(value)


_COMPARABLE = (int, UInt, float, bool, str, bytes)


def _comparable(item: Any, name: str, items: list[Any]) -> Any:
    """An element min/max/isSorted can order; otherwise the call refuses the list."""
    if type(item) not in _COMPARABLE and type(item) not in TIME_TYPES:
        raise no_overload(name, items)
    return item


def _ordering(a: Any, b: Any) -> int | None:
    """traits.Comparer.Compare as Kubernetes' list functions use it: an error is just no answer."""
    try:
        return compare(a, b, "_<_")  # the name only words an error, which is dropped
    except Err:
        return None


def _is_sorted(items: Any) -> bool:
    """Only a pair known to be out of order counts; incomparable pairs (NaN, mixed kinds) do not."""
    items = _list_of(items, "isSorted")
    for i, item in enumerate(items):
        _comparable(item, "isSorted", items)
        if i and _ordering(items[i - 1], item) == 1:
            return False
    return True


def _sum(items: Any) -> Any:
    items = _list_of(items, "sum")
    if not items:
        return 0
    if type(items[0]) not in (int, UInt, float) and TIME_TYPES.get(type(items[0])) != "duration":
        raise no_overload("sum", items)
    total = items[0]
    for item in items[1:]:
        total = arith("+", total, item)  # kinds must agree; overflow is an error
    return total


def _extreme(items: Any, sign: int, name: str) -> Any:
    """Kubernetes' min()/max(): replace the best only when it compares the preferred way."""
    items = _list_of(items, name)
    best = None
    for item in items:
        _comparable(item, name, items)
        if best is None or _ordering(best, item) == -sign:
            best = item
    if best is None:
        raise Err(f"{name} called on empty list")
    return best


def _index_of(items: Any, value: Any, last: bool = False) -> int:
    found = [i for i, x in enumerate(_list_of(items, "indexOf")) if equal_or_false(x, value)]
    if not found:
        return -1
    return found[-1] if last else found[0]


_NUMBERS_ONLY = frozenset({int, UInt})


def _includes(items: Any, value: Any) -> bool:
    """Kubernetes' includes(): list membership, or plain equality for a scalar target."""
    if not isinstance(items, (list, tuple)):
        return equal_or_false(items, value)
    kind = type(value)
    if kind is str or kind is bytes:  # only a str (bytes) equals a str (bytes), as in Python
        return value in items
    if kind is int and _NUMBERS_ONLY.issuperset(map(type, items)):
        return value in items  # ints and uints only: Python's equality is CEL's
    return any(equal_or_false(x, value) for x in items)


def _substring(s: str, start: int, end: int | None = None) -> str:
    end = len(s) if end is None else end
    if start < 0 or start > len(s):
        raise Err(f"index out of range: {start}")
    if end < 0 or end > len(s):
        raise Err(f"index out of range: {end}")
    if start > end:
        raise Err(f"invalid substring range. start: {start}, end: {end}")
    return s[start:end]


def _char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise Err(f"index out of range: {i}")
    return s[i : i + 1]


def _index_of_str(s: str, sub: str, start: int = 0) -> int:
    """cel-go v0.29 indexOf: a negative offset fails, one past the end finds nothing."""
    if start < 0:
        raise Err(f"index out of range: {start}")
    if sub == "":
        return min(start, len(s))
    if start >= len(s):
        return -1
    return s.find(sub, start)


def _last_index_of_str(s: str, sub: str, end: int | None = None) -> int:
    """cel-go v0.29 lastIndexOf: the search starts at ``end`` (default the last character)."""
    if end is None:
        if sub == "":
            return len(s)
        if len(s.encode()) < len(sub.encode()):
            return -1
        end = len(s) - 1
    if end < 0:
        raise Err(f"index out of range: {end}")
    if sub == "":
        return min(end, len(s))
    if end >= len(s):
        return -1
    return s.rfind(sub, 0, min(end, len(s) - len(sub)) + len(sub))


def _split(s: str, sep: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    if sep == "":
        chars = list(s)
        return chars if limit < 0 or limit >= len(chars) else [*chars[: limit - 1], "".join(chars[limit - 1 :])]
    return s.split(sep, limit - 1 if limit > 0 else -1)


def _replace(s: str, old: str, new: str, limit: int = -1) -> str:
    if limit == 0:
        return s
    if old == "":
        parts = list(s)
        n = len(parts) + 1 if limit < 0 else min(limit, len(parts) + 1)
        out = "".join(new + c for c in parts[:n]) if n <= len(parts) else new + new.join(parts) + new
        return out + "".join(parts[n:]) if n <= len(parts) else out
    return s.replace(old, new, limit if limit > 0 else -1)


def _join(items: Any, *sep: str) -> str:
    if not isinstance(items, (list, tuple)) or any(type(x) is not str for x in items):
        raise no_overload("join", items, *sep)
    return (sep[0] if sep else "").join(items)


def _to_int(value: Any) -> int:
    if type(value) is str:
        if _GO_INT.fullmatch(value) is None:  # strconv.ParseInt: no spaces, underscores or prefixes
            raise Err("type conversion error from 'string' to 'int'")
        return check_int(int(value, 10))
    if type(value) is float:
        if math.isnan(value) or not -9.223372036854776e18 < value < 9.223372036854776e18:
            raise Err("double is out of int range")
        return int(value)
    if type(value) in (int, UInt):
        return check_int(int(value))
    raise no_overload("int", value)


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _to_string(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) in (int, UInt):
        return str(int(value))
    if type(value) is bytes:
        try:
            return value.decode()
        except UnicodeDecodeError as exc:
            raise Err("invalid UTF-8 in bytes, cannot convert to string") from exc
    raise no_overload("string", value)


_GO_BOOLS = {
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}


def _parse_bool(text: str) -> bool:
    """strconv.ParseBool, which cel-go uses for bool(string)."""
    if text not in _GO_BOOLS:
        raise Err("type conversion error from 'string' to 'bool'")
    return _GO_BOOLS[text]


def _parse_double(text: str) -> float:
    """strconv.ParseFloat: Python's float() minus the spellings Go rejects. Go accepts
    underscores between digits (``'1_000'``, strconv's underscoreOK) and hexadecimal mantissas
    with a binary exponent (``'0x1p4'``); a value out of range is an error, not an infinity."""
    bad = Err("type conversion error from 'string' to 'double'")
    if (
        not text.isascii()
        or text.strip() != text
        or ("_" in text and not _underscore_ok(text))
        or (text[:1] in "+-" and text[1:].lower() == "nan")
    ):  # Go takes a sign on Inf only
        raise bad
    digits = text.replace("_", "")
    unsigned = digits.lstrip("+-")
    try:
        if unsigned[:2] in ("0x", "0X"):
            if len(digits) - len(unsigned) > 1 or not any(c in unsigned for c in "pP"):
                raise ValueError(text)
            value = float.fromhex(digits)
        else:
            value = float(digits)
    except (ValueError, OverflowError) as exc:
        raise bad from exc
    if math.isinf(value) and "n" not in unsigned.lower():  # overflow, not an "inf" spelling
        raise bad
    return value


def _underscore_ok(text: str) -> bool:
    """Go strconv's underscoreOK: an underscore only between digits, or after a base prefix."""
    saw = "^"
    i = 0
    text = text[1:] if text[:1] in "+-" else text
    hexadecimal = False
    if len(text) >= 2 and text[0] == "0" and text[1].lower() in "box":
        i, saw, hexadecimal = 2, "0", text[1].lower() == "x"
    for c in text[i:]:
        if (c.isdigit() and c.isascii()) or (hexadecimal and c.lower() in "abcdef"):
            saw = "0"
        elif c == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def format_double(value: float) -> str:
    """Go's %g (cel-go's string(double)): shortest digits, exponent form outside 1e-4..1e6."""
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exponent)  # position of the decimal point in ``text``
    exp = point - 1
    prefix = "-" if sign else ""
    if value == 0:
        return prefix + "0"
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def _opt_value(o: Optional) -> Any:
    if not o.present:
        raise Err("optional.none() dereference")
    return o.value


def _of_non_zero(value: Any) -> Optional:
    zero = (
        value is None
        or value is False
        or (type(value) in (int, UInt, float) and value == 0)
        or (isinstance(value, (str, bytes, list, tuple, dict)) and len(value) == 0)
    )
    return NONE if zero else Optional(True, value)


def _register_standard() -> None:
    register("size", False, ("string",), "int", len)
    register("size", True, ("string",), "int", len)
    register("size", False, ("bytes",), "int", len)
    register("size", True, ("bytes",), "int", len)
    register("size", False, (("list", "A"),), "int", len)
    register("size", True, (("list", "A"),), "int", len)
    register("size", False, (("map", "A", "B"),), "int", len)
    register("size", True, (("map", "A", "B"),), "int", len)
    register("contains", True, ("string", "string"), "bool", lambda s, t: t in s)
    register("startsWith", True, ("string", "string"), "bool", lambda s, t: s.startswith(t))
    register("endsWith", True, ("string", "string"), "bool", lambda s, t: s.endswith(t))
    register("matches", True, ("string", "string"), "bool", regex.matches)
    register("matches", False, ("string", "string"), "bool", regex.matches)
    register("int", False, ("int",), "int", _to_int)
    register("int", False, ("uint",), "int", _to_int)
    register("int", False, ("double",), "int", _to_int)
    register("int", False, ("string",), "int", _to_int)
    register("string", False, ("string",), "string", _to_string)
    register("string", False, ("int",), "string", _to_string)
    register("string", False, ("uint",), "string", _to_string)
    register("string", False, ("bool",), "string", _to_string)
    register("string", False, ("bytes",), "string", _to_string)
    register("double", False, ("int",), "double", float)
    register("double", False, ("uint",), "double", float)
    register("double", False, ("double",), "double", float)
    register("double", False, ("string",), "double", _parse_double)
    register("string", False, ("double",), "string", format_double)
    register("bool", False, ("string",), "bool", _parse_bool)
    register("bytes", False, ("string",), "bytes", lambda s: s.encode())
    register("bytes", False, ("bytes",), "bytes", lambda b: b)
    register("uint", False, ("int",), "uint", _to_uint)
    register("uint", False, ("uint",), "uint", _to_uint)
    register("uint", False, ("double",), "uint", _to_uint)
    register("uint", False, ("string",), "uint", _to_uint)
    register("bool", False, ("bool",), "bool", lambda b: b)
    register("dyn", False, ("A",), DYN, lambda v: v)


def _to_uint(value: Any) -> UInt:
    if type(value) is str:
        if not value.isascii() or not value.isdigit():  # strconv.ParseUint: digits only
            raise Err("type conversion error from 'string' to 'uint'")
        value = int(value)
    elif type(value) is float:
        if math.isnan(value) or not 0 <= value < 1.8446744073709552e19:
            raise Err("double out of uint range")
        value = int(value)
    if value < 0 or value > (1 << 64) - 1:
        raise Err("unsigned integer overflow")
    return UInt(value)


# unicode.IsSpace, which the strings extension's trim() uses.
_UNICODE_SPACE = (
    " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _register_strings() -> None:
    register("charAt", True, ("string", "int"), "string", _char_at)
    register("indexOf", True, ("string", "string"), "int", _index_of_str)
    register("indexOf", True, ("string", "string", "int"), "int", _index_of_str)
    register("lastIndexOf", True, ("string", "string"), "int", _last_index_of_str)
    register("lastIndexOf", True, ("string", "string", "int"), "int", _last_index_of_str)
    register("lowerAscii", True, ("string",), "string", lambda s: "".join(c.lower() if c.isascii() else c for c in s))
    register("upperAscii", True, ("string",), "string", lambda s: "".join(c.upper() if c.isascii() else c for c in s))
    register("replace", True, ("string", "string", "string"), "string", _replace)
    register("replace", True, ("string", "string", "string", "int"), "string", _replace)
    register("split", True, ("string", "string"), ("list", "string"), _split)
    register("split", True, ("string", "string", "int"), ("list", "string"), _split)
    register("substring", True, ("string", "int"), "string", _substring)
    register("substring", True, ("string", "int", "int"), "string", _substring)
    register("trim", True, ("string",), "string", lambda s: s.strip(_UNICODE_SPACE))
    register("join", True, (("list", "string"),), "string", _join)
    register("join", True, (("list", "string"), "string"), "string", _join)
    register("find", True, ("string", "string"), "string", regex.find)
    register("findAll", True, ("string", "string"), ("list", "string"), regex.find_all)
    register("findAll", True, ("string", "string", "int"), ("list", "string"), regex.find_all)


def _register_lists() -> None:
    for elem in (
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "bytes",
        "google.protobuf.Duration",
        "google.protobuf.Timestamp",
    ):
        register("isSorted", True, (("list", elem),), "bool", _is_sorted)
    for elem in ("int", "uint", "double", "google.protobuf.Duration"):
        register("sum", True, (("list", elem),), elem, _sum)
    for elem in (
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "bytes",
        "google.protobuf.Duration",
        "google.protobuf.Timestamp",
    ):
        register("min", True, (("list", elem),), elem, lambda xs: _extreme(xs, -1, "min"))
        register("max", True, (("list", elem),), elem, lambda xs: _extreme(xs, 1, "max"))
    register("indexOf", True, (("list", "A"), "A"), "int", _index_of)
    register("lastIndexOf", True, (("list", "A"), "A"), "int", lambda xs, v: _index_of(xs, v, last=True))


def _register_quantity() -> None:
    register("quantity", False, ("string",), QTY, _quantity)
    register("isQuantity", False, ("string",), "bool", _is_quantity)
    register("sign", False, (QTY,), "int", lambda a: a.sign())
    register("isGreaterThan", True, (QTY, QTY), "bool", lambda a, b: a.cmp(b) == 1)
    register("isLessThan", True, (QTY, QTY), "bool", lambda a, b: a.cmp(b) == -1)
    register("compareTo", True, (QTY, QTY), "int", lambda a, b: a.cmp(b))
    register("asApproximateFloat", True, (QTY,), "double", lambda a: a.approximate_float())
    register("asInteger", True, (QTY,), "int", _as_integer)
    register("isInteger", True, (QTY,), "bool", lambda a: a.as_int64() is not None)
    register("add", True, (QTY, QTY), QTY, lambda a, b: q.computed(a.add(b)))
    register("add", True, (QTY, "int"), QTY, lambda a, b: q.computed(a.add(q.from_int(b))))
    register("sub", True, (QTY, QTY), QTY, lambda a, b: q.computed(a.sub(b)))
    register("sub", True, (QTY, "int"), QTY, lambda a, b: q.computed(a.sub(q.from_int(b))))


def _register_semver() -> None:
    register("semver", False, ("string",), SEMVER, _semver)
    register("semver", False, ("string", "bool"), SEMVER, _semver)
    register("isSemver", False, ("string",), "bool", _is_semver)
    register("isSemver", False, ("string", "bool"), "bool", _is_semver)
    register("isGreaterThan", True, (SEMVER, SEMVER), "bool", lambda a, b: a.compare(b) == 1)
    register("isLessThan", True, (SEMVER, SEMVER), "bool", lambda a, b: a.compare(b) == -1)
    register("compareTo", True, (SEMVER, SEMVER), "int", lambda a, b: a.compare(b))
    register("major", True, (SEMVER,), "int", lambda a: _int64(a.major))
    register("minor", True, (SEMVER,), "int", lambda a: _int64(a.minor))
    register("patch", True, (SEMVER,), "int", lambda a: _int64(a.patch))


def _register_optional() -> None:
    register("optional.of", False, ("A",), ("optional", "A"), lambda v: Optional(True, v))
    register("optional.ofNonZeroValue", False, ("A",), ("optional", "A"), _of_non_zero)
    register("optional.none", False, (), ("optional", "A"), lambda: NONE)
    register("hasValue", True, (("optional", "A"),), "bool", lambda o: o.present)
    register("value", True, (("optional", "A"),), "A", _opt_value)
    register("orValue", True, (("optional", "A"), "A"), "A", lambda o, v: o.value if o.present else v)
    register("or", True, (("optional", "A"), ("optional", "A")), ("optional", "A"), lambda o, p: o if o.present else p)
    # cel.OptionalTypes() unversioned, as Kubernetes declares it: version 2's functions too
    register("first", True, (("list", "A"),), ("optional", "A"), lambda xs: Optional(True, xs[0]) if xs else NONE)
    register("last", True, (("list", "A"),), ("optional", "A"), lambda xs: Optional(True, xs[-1]) if xs else NONE)
    register(
        "optional.unwrap",
        False,
        (("list", ("optional", "A")),),
        ("list", "A"),
        lambda opts: _unwrap("optional.unwrap", opts),
    )
    register("unwrapOpt", True, (("list", ("optional", "A")),), ("list", "A"), lambda opts: _unwrap("unwrapOpt", opts))


def _unwrap(name: str, opts: list[Any]) -> list[Any]:
    """optUnwrap (cel-go cel/library.go): the values of the present optionals. A dyn list whose
    first element is no optional fails the runtime signature check (cel-go only looks at the first
    element: common/types/types.go defaultIsAssignableRuntimeType); a later one, optUnwrap itself."""
    if opts and type(opts[0]) is not Optional:
        raise no_overload(name, opts)
    out = []
    for o in opts:
        if type(o) is not Optional:
            raise Err(f"value {go_value(o)} is not optional")
        if o.present:
            out.append(o.value)
    return out


INCLUDES = Overload(True, (DYN, DYN), "bool", _includes)


_SCALARS = frozenset({int, bool, float, UInt})


def traversal_cost(value: Any) -> int:
    """Kubernetes' traversalCost: a tenth of each string's length (truncated), 1 per other value."""
    if type(value) in (str, bytes):
        return int(len(value) * 0.1)
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _SCALARS:  # the common all-numbers list, without a Python loop
            return len(value)
        return sum(1 if type(x) in _SCALARS else traversal_cost(x) for x in value)
    if isinstance(value, dict):
        return sum(traversal_cost(k) + traversal_cost(x) for k, x in value.items())
    return 1


RUNTIME_COSTS.update(
    dict.fromkeys(
        ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes"),
        lambda args, _result: traversal_cost(args[0]),
    )
)


def regex_cost(text: Any, pattern: Any) -> int:
    """cel-go's cost of a regex over a text: the text's traversal (plus one) times a quarter of
    the pattern's length (one state guessed per four characters)."""
    return traversal(1 + actual_size(text)) * traversal(actual_size(pattern), 0.25)


def first_traversal(times: int = 1) -> Callable[[list[Any], Any], int]:
    """A call that walks its first argument ``times`` times: ``ceil(size * times * 0.1)``. The
    functions that take it are declared on strings only (``len`` is cel-go's size of one)."""
    if times == 1:
        return lambda args, _result: math.ceil(len(args[0]) * 0.1)
    return lambda args, _result: math.ceil(len(args[0]) * times * 0.1)


def _conversion(scanned: type) -> Callable[[list[Any], Any], int]:
    """string(bytes) and bytes(string) walk their argument; the other conversions cost 1."""
    return lambda args, _result: traversal(actual_size(args[0])) if type(args[0]) is scanned else 1


# cel-go's runtime costs of the standard string functions (interpreter/runtimecost.go) and
# Kubernetes' of its libraries (library/cost.go, CallCost), charged where they depend on the sizes.
RUNTIME_COSTS.update(
    {
        "contains": lambda args, _r: math.ceil(len(args[0]) * 0.1) * math.ceil(len(args[1]) * 0.1),
        "startsWith": lambda args, _r: math.ceil(len(args[1]) * 0.1),
        "endsWith": lambda args, _r: math.ceil(len(args[1]) * 0.1),
        "matches": lambda args, _r: regex_cost(args[0], args[1]),
        "find": lambda args, _r: regex_cost(args[0], args[1]),
        "findAll": lambda args, _r: regex_cost(args[0], args[1]),
        "string": _conversion(bytes),
        "bytes": _conversion(str),
        "lowerAscii": first_traversal(),
        "upperAscii": first_traversal(),
        "substring": first_traversal(),
        "trim": first_traversal(),
        "replace": first_traversal(2),
        "split": first_traversal(2),
        "join": lambda _args, result: traversal(actual_size(result) * 2),
        "quantity": first_traversal(),
        "isQuantity": first_traversal(),
        "semver": first_traversal(),
        "isSemver": first_traversal(),
    }
)


def _specialize_includes(_nodes: list[Any], consts: list[Any], fns: list[Any], impl: Callable[..., Any]) -> Any:
    """``list.includes(constant string or int)``: Python's list membership is CEL's equality when
    the list holds only strings (for a string) or only ints and uints (for an int)."""
    if len(fns) != 2 or consts[0] is not NOT_CONSTANT or type(consts[1]) not in (str, int):
        return None
    target, value = fns[0], consts[1]
    kinds = frozenset({str}) if type(value) is str else _NUMBERS_ONLY

    def includes(a: dict[str, Any]) -> bool:
        items = target(a)
        if type(items) is list and kinds.issuperset(map(type, items)):
            result = value in items
            charge_call(a, len(items) if kinds is _NUMBERS_ONLY else traversal_cost(items))
            return result
        found = bool(impl(items, value))
        charge_call(a, traversal_cost(items))
        return found

    return includes


def _specialize_matches(_nodes: list[Any], consts: list[Any], fns: list[Any], impl: Callable[..., Any]) -> Any:
    """``text.matches(constant pattern)``: the pattern is compiled once, not looked up per call."""
    if len(fns) != 2 or consts[0] is not NOT_CONSTANT or type(consts[1]) is not str:
        return None
    match = regex.matcher(consts[1])
    if match is None:
        return None
    text, pattern = fns[0], consts[1]

    pattern_cost = traversal(len(pattern), 0.25)

    def matches(a: dict[str, Any]) -> bool:
        value = text(a)
        if type(value) is not str:
            return bool(impl(value, pattern))
        cost = math.ceil((1 + len(value)) * 0.1) * pattern_cost
        if cost > 1:  # charge_call written out: a short text against a short pattern costs 1
            charge(a, cost - 1)
        return bool(match(value))

    return matches


def _specialize_found(_nodes: list[Any], consts: list[Any], fns: list[Any], impl: Callable[..., Any]) -> Any:
    """``find``/``findAll`` with a constant pattern: Kubernetes compiles it once, and that call
    refuses a non-string text (or limit) without naming itself (FindRegexOptimization)."""
    if len(fns) not in (2, 3) or type(consts[1]) is not str or not regex.is_valid(consts[1]):
        return None
    text, pattern, limit = fns[0], consts[1], fns[2] if len(fns) == 3 else None

    def found(a: dict[str, Any]) -> Any:
        value = text(a)  # every argument first: an error in any of them is the answer
        if limit is None:
            if type(value) is not str:
                raise refused()
            result = impl(value, pattern)
        else:
            n = limit(a)
            if type(value) is not str or type(n) is not int:
                raise refused()
            result = impl(value, pattern, n)
        charge_call(a, regex_cost(value, pattern))
        return result

    return found


def _specialize_ordering(name: str) -> Callable[..., Any]:
    """``x.compareTo(c)``, ``x.isGreaterThan(c)``, ``x.isLessThan(c)`` with a constant quantity
    or semver: the comparison itself when ``x`` is of the constant's class, no dispatch."""

    def specialize(_nodes: list[Any], consts: list[Any], fns: list[Any], impl: Callable[..., Any]) -> Any:
        if len(fns) != 2 or consts[0] is not NOT_CONSTANT or type(consts[1]) not in (q.Quantity, sv.Semver):
            return None
        target, const = fns[0], consts[1]
        kind = type(const)
        compare = q.Quantity.cmp if kind is q.Quantity else sv.Semver.compare
        want = {"isGreaterThan": 1, "isLessThan": -1}.get(name)

        def ordering(a: dict[str, Any]) -> Any:
            value = target(a)
            if type(value) is not kind:
                return impl(value, const)
            order = compare(value, const)
            return order if want is None else order == want

        return ordering

    return specialize


SPECIALIZERS["includes"] = _specialize_includes
SPECIALIZERS.update({name: _specialize_ordering(name) for name in ("compareTo", "isGreaterThan", "isLessThan")})
SPECIALIZERS["matches"] = _specialize_matches
SPECIALIZERS["find"] = SPECIALIZERS["findAll"] = _specialize_found

_register_standard()
_register_strings()
_register_lists()
_register_quantity()
_register_semver()
_register_optional()

__all__ = [
    "CALL_COSTS",
    "DYN",
    "INCLUDES",
    "NAMESPACES",
    "NOT_CONSTANT",
    "OVERLOADS",
    "QTY",
    "RESOLVED_ASSERTS",
    "RUNTIME_COSTS",
    "SEMVER",
    "SPECIALIZERS",
    "UNCHECKED",
    "VALUE_TYPES",
    "Overload",
    "format_double",
    "register",
    "traversal_cost",
    "type_name",
]
