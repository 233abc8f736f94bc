"""string.format() and strings.quote() of cel-go's strings extension at version 2 (Kubernetes'
base environment), as ext/formatting.go implements them with the en-US locale: %f groups
thousands and prints ∞, %e prints ×10 with a superscript exponent and (an upstream quirk)
always six decimals, padded to the requested precision as a width. A constant format string
with a list literal is checked when the expression is compiled, as cel-go's validator does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..gostrings import quote as go_quote
from . import values as v
from .cost import Coster, Range, plus, scaled, times
from .engine import FORMAT_VALIDATOR
from .library import CALL_COSTS, RUNTIME_COSTS, first_traversal, format_double, register
from .parser import Call, ListLit, MapLit
from .timestamps import duration_string, timestamp_string
from .values import Err, UInt, type_name

DEFAULT_PRECISION = 6
_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_SPECIAL_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class FormatError(Err):
    """A formatting clause that does not fit its argument."""


def _clause_error(clause: str, wanted: str, value_type: str) -> FormatError:
    return FormatError(f"error during formatting: {clause} clause can only be used on {wanted}, was given {value_type}")


def _grouped(text: str) -> str:
    whole, dot, fraction = text.partition(".")
    return f"{int(whole):,}" + dot + fraction


def _double(arg: Any, clause: str) -> float:
    if type(arg) is str and arg in _SPECIAL_STRINGS:
        return _SPECIAL_STRINGS[arg]
    if type(arg) is not float:
        raise _clause_error(clause, "doubles", type_name(arg))
    return arg


def _fixed(arg: Any, precision: int | None) -> str:
    value = _double(arg, "fixed-point")
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    text = format(abs(value), f".{DEFAULT_PRECISION if precision is None else precision}f")
    negative = value < 0 and any(c not in "0." for c in text)  # x/text prints no "-0"
    return ("-" if negative else "") + _grouped(text)


def _scientific(arg: Any, precision: int | None) -> str:
    value = _double(arg, "scientific")
    width = DEFAULT_PRECISION if precision is None else precision  # upstream passes it as a width
    if math.isnan(value) or math.isinf(value):
        text = "NaN" if math.isnan(value) else ("∞" if value > 0 else "-∞")
    else:
        mantissa, _, exponent = format(abs(value), f".{DEFAULT_PRECISION}e").partition("e")
        power = int(exponent)
        sign = "-" if value < 0 and float(mantissa) != 0 else ""
        superscript = (("-" if power < 0 else "") + f"{abs(power):02d}").translate(_SUPERSCRIPTS)
        text = f"{sign}{mantissa}×10{superscript}"
    return text.rjust(width)


def _integer(arg: Any, clause: str, wanted: str, spec: str, allow_bool: bool = False) -> str:
    if allow_bool and type(arg) is bool:
        return "1" if arg else "0"
    if type(arg) not in (int, UInt):
        raise _clause_error(clause, wanted, type_name(arg))
    return ("-" if arg < 0 else "") + format(abs(int(arg)), spec)


def _hex(arg: Any, upper: bool) -> str:
    if type(arg) in (str, bytes):
        data = arg.encode("utf-8", "surrogatepass") if type(arg) is str else arg
        text = data.hex()
    else:
        text = _integer(arg, "hex", "integers, byte buffers, and strings", "x")
    return text.upper() if upper else text


def format_string(arg: Any) -> str:
    """FormatString: the %s clause."""
    if isinstance(arg, (list, tuple)):
        return "[" + ", ".join(_member(x) for x in arg) + "]"
    if isinstance(arg, dict):
        return _format_map(arg)
    if arg is None:
        return "null"
    if type(arg) is bytes:
        try:
            return arg.decode()
        except UnicodeDecodeError:
            raise FormatError(
                'error during formatting: could not convert argument "invalid UTF-8 in bytes, '
                'cannot convert to string" to string'
            ) from None
    converter = _TO_STRING.get(type_name(arg))
    if converter is None:
        raise _clause_error(
            "string",
            "strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps",
            type_name(arg),
        )
    return converter(arg)


# The kinds cel-go's clauseForType formats inside a list or map (others: "no formatting function").
_MEMBER_KINDS = frozenset(
    {
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "bool",
        "null_type",
        "type",
        "list",
        "map",
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
    }
)


def _member(x: Any) -> str:
    """A list element or map value: formatted by its type, then quoted as a CEL literal."""
    kind = type_name(x)
    if kind not in _MEMBER_KINDS:
        raise FormatError(f"error during formatting: no formatting function for {kind}")
    if kind == "double":
        text = f"{x:.6f}" if math.isfinite(x) else ("NaN" if math.isnan(x) else ("+Inf" if x > 0 else "-Inf"))
        return go_quote(text) if not math.isfinite(x) else text
    if kind in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
        name = "timestamp" if kind.endswith("Timestamp") else "duration"
        return f"{name}({go_quote(format_string(x))})"
    if kind in ("int", "uint"):
        return str(int(x))
    text = format_string(x)
    if kind == "string":
        return go_quote(text)
    if kind == "bytes":
        return "b" + go_quote(text)
    return text


def _format_map(mapping: dict[Any, Any]) -> str:
    pairs = []
    for key, value in mapping.items():
        if type_name(key) not in ("string", "bool", "int", "uint"):
            raise FormatError(f"error during formatting: no formatting function for map key of type {type_name(key)}")
        pairs.append((_member(key), _member(value)))
    pairs.sort(key=lambda pair: pair[0].encode())
    return "{" + ", ".join(f"{k}:{val}" for k, val in pairs) + "}"


_TO_STRING: dict[str, Callable[[Any], str]] = {}


def _parse_precision(text: str, i: int) -> tuple[int, int | None]:
    if text[i] != ".":
        return i, None
    j = i + 1
    while True:
        if j >= len(text):
            raise FormatError(
                "could not parse formatting clause: error while parsing precision: could not find "
                "end of precision specifier"
            )
        if not ("0" <= text[j] <= "9"):
            break
        j += 1
    if j == i + 1:
        raise FormatError(
            "could not parse formatting clause: error while parsing precision: error while "
            'converting precision to integer: strconv.Atoi: parsing "": invalid syntax'
        )
    return j, int(text[i + 1 : j])


def _clause(text: str, i: int) -> tuple[int, str, int | None]:
    """(index after the clause, verb, precision) of the clause starting after a '%' at i - 1."""
    i, precision = _parse_precision(text, i)
    verb = text[i]
    if verb not in "sdfebxXo":
        raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
    return i + 1, verb, precision


def render(verb: str, precision: int | None, arg: Any) -> str:
    if verb == "s":
        return format_string(arg)
    if verb == "d":
        return _integer(arg, "decimal", "integers", "d")
    if verb == "f":
        return _fixed(arg, precision)
    if verb == "e":
        return _scientific(arg, precision)
    if verb == "b":
        return _integer(arg, "binary", "integers and bools", "b", allow_bool=True)
    if verb == "o":
        return _integer(arg, "octal", "integers", "o")
    return _hex(arg, verb == "X")


def walk(text: str, count: int, visit: Callable[[int, str, int | None], str]) -> tuple[str, int]:
    """parseFormatString: the output and how many arguments the clauses used."""
    out, i, index = [], 0, 0
    while i < len(text):
        if text[i] != "%":
            out.append(text[i])
            i += 1
            continue
        if i + 1 < len(text) and text[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if i + 1 >= len(text):
            raise FormatError("unexpected end of string")
        if index >= count:
            raise FormatError(f"index {index} out of range")
        i, verb, precision = _clause(text, i + 1)
        out.append(visit(index, verb, precision))
        index += 1
    return "".join(out), index


def string_format(text: str, args: Any) -> str:
    if not isinstance(args, (list, tuple)):
        raise v.no_overload("format", text, args)
    rendered, _ = walk(text, len(args), lambda index, verb, precision: render(verb, precision, args[index]))
    return rendered


def quote(text: str) -> str:
    escapes = {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
    return '"' + "".join(escapes.get(c, c) for c in text) + '"'


# Compile-time check (cel-go's stringFormatValidator) -------------------------------------------

_ACCEPTS = {
    "s": (
        "list",
        "map",
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "google.protobuf.Timestamp",
        "bytes",
        "google.protobuf.Duration",
        "type",
        "null_type",
    ),
    "d": ("int", "uint"),
    "f": ("double", "string"),
    "e": ("double", "string"),
    "b": ("int", "uint", "bool"),
    "x": ("int", "uint", "string", "bytes"),
    "X": ("int", "uint", "string", "bytes"),
    "o": ("int", "uint"),
}
_NAMES = {
    "s": "string",
    "d": "decimal",
    "f": "fixed-point",
    "e": "scientific",
    "b": "binary",
    "x": "hex",
    "X": "hex",
    "o": "octal",
}


def _kind(t: Any) -> str:
    return t[0] if isinstance(t, tuple) else ("google.protobuf.Any" if t == "any" else str(t))


_VALIDATOR_WANTS = {
    "d": "decimal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "o": "octal clause can only be used on integers",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
    "s": "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
    "durations, and timestamps",
}


def validate(text: str, elements: list[Any], type_of: Callable[[Any], Any]) -> tuple[Any, str] | None:
    """The error cel-go's validator reports for ``"<text>".format([<elements>])`` and the
    argument it reports it at (None: at the call), or None."""
    found: list[tuple[Any, str]] = []

    def check(index: int, verb: str, precision: int | None) -> str:
        bad = _bad_argument(elements[index], verb, type_of)
        if bad is not None:
            found.append((bad[0], f"error during formatting: {_VALIDATOR_WANTS[verb]}, was given {bad[1]}"))
            raise FormatError(found[-1][1])
        return ""

    try:
        _, used = walk(text, len(elements), check)
    except FormatError as error:
        return found[0] if found else (None, str(error))
    if len(elements) > used:
        return None, f"too many arguments supplied to string.format (expected {used}, got {len(elements)})"
    return None


def _bad_argument(node: Any, verb: str, type_of: Callable[[Any], Any]) -> tuple[Any, str] | None:
    """The argument (or, for %s, the nested element) of a type the clause refuses, and its type."""
    t = type_of(node)
    if t == "dyn":
        return None
    if _kind(t) not in _ACCEPTS[verb]:
        return node, _kind(t)
    if verb == "s":  # lists and maps are checked element by element
        children = (
            node.elements
            if isinstance(node, ListLit)
            else ([n for key, value, _ in node.entries for n in (key, value)] if isinstance(node, MapLit) else [])
        )
        for child in children:
            bad = _bad_argument(child, "s", type_of)
            if bad is not None:
                return bad
    return None


def _format_cost(c: Coster, node: Call) -> tuple[Range, None] | None:
    if node.target is None:
        return None
    return scaled(c.size_or_unknown(node.target), 0.1), None


def _quote_cost(c: Coster, node: Call) -> tuple[Range, Range] | None:
    """A tenth of the text; the result is 2 longer, or twice as long plus 2 when all is escaped."""
    if len(node.args) != 1:
        return None
    size = c.size_or_unknown(node.args[0])
    return scaled(size, 0.1), plus((size[0], times(size, (2, 2))[1]), (2, 2))


def _register() -> None:
    _TO_STRING.update(
        {
            "string": str,
            "bool": lambda b: "true" if b else "false",
            "int": str,
            "uint": str,
            "double": format_double,
            "type": lambda t: t.name,
            "google.protobuf.Timestamp": timestamp_string,
            "google.protobuf.Duration": duration_string,
        }
    )
    register("format", True, ("string", ("list", "dyn")), "string", string_format)
    register("strings.quote", False, ("string",), "string", quote)
    CALL_COSTS.update({"format": _format_cost, "strings.quote": _quote_cost})
    RUNTIME_COSTS.update({"format": first_traversal(), "strings.quote": first_traversal()})
    FORMAT_VALIDATOR.append(validate)


_register()
