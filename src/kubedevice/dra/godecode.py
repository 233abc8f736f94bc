"""What the API server's decoder says about a document before any validation runs.

The API server decodes a request body into the versioned Go types with ``sigs.k8s.io/json``
(a fork of ``encoding/json``): a string is never an int, ``2.0`` is not an int64, ``"true"`` is
not a bool, and a ``metav1.Time`` must parse as RFC 3339. The first such problem in document
order fails the whole request with ``<Kind> in version "<v>" cannot be handled as a <Kind>:
<error>`` (``transformDecodeError`` in ``k8s.io/apiserver/pkg/endpoints/handlers/rest.go``).
This module renders those errors exactly; ``models.from_document`` decides when they apply.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from typing_extensions import is_typeddict

from ..errors import KubedeviceError

# (Go struct, JSON field) -> the Go type's name where it is a named string type; "{pkg}" is the
# apiVersion's package (v1, v1beta1, ...). k8s.io/api/resource/*/types.go, core/v1/types.go.
_NAMED_TYPES = {
    ("ExactDeviceRequest", "allocationMode"): "{pkg}.DeviceAllocationMode",
    ("DeviceSubRequest", "allocationMode"): "{pkg}.DeviceAllocationMode",
    ("DeviceRequest", "allocationMode"): "{pkg}.DeviceAllocationMode",  # v1alpha3, v1beta1
    ("DeviceConstraint", "matchAttribute"): "{pkg}.FullyQualifiedName",
    ("DeviceConstraint", "distinctAttribute"): "{pkg}.FullyQualifiedName",
    ("NodeSelectorRequirement", "operator"): "v1.NodeSelectorOperator",
    ("DeviceTaint", "effect"): "{pkg}.DeviceTaintEffect",
    ("DeviceToleration", "effect"): "{pkg}.DeviceTaintEffect",
    ("DeviceToleration", "operator"): "{pkg}.DeviceTolerationOperator",
    ("Condition", "status"): "v1.ConditionStatus",
}
# Python model -> Go struct where the names differ.
_GO_STRUCTS = {"DeviceConfiguration": "DeviceClassConfiguration"}
# Fields Go holds in an embedded struct: the embedded field's Go name joins the error's path
# (decode.go: ``d.errorContext.FieldStack = append(..., subv.Type().Field(ind).Name)``).
_EMBEDDED = {("DeviceConfiguration", "opaque"), ("DeviceClaimConfiguration", "opaque")}
_CORE_TYPES = {"NodeSelector", "NodeSelectorTerm", "NodeSelectorRequirement", "ObjectMeta", "Condition"}  # package v1
_OLD_STYLE = ("v1alpha3", "v1beta1")


def is_int64(value: Any) -> bool:
    """An integer Go's decoder stores in an ``int64`` (``strconv.ParseInt(s, 10, 64)`` succeeds)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _unwrap(annotation: Any) -> Any:
    """``X | None`` -> ``X``; ``Annotated[X, ...]`` -> ``X``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation


def _is_struct(annotation: Any) -> bool:
    """A Go struct on our side: a model, or a TypedDict (the small structs kept as plain dicts)."""
    return isinstance(annotation, type) and (issubclass(annotation, BaseModel) or is_typeddict(annotation))


def _field(model: Any, alias: str) -> Any:
    if is_typeddict(model):
        hint = typing.get_type_hints(model, include_extras=False).get(alias)
        return None if hint is None else _unwrap(hint)
    for name, info in model.model_fields.items():
        if alias in (info.alias, name):
            return _unwrap(info.annotation)
    return None


def go_type(annotation: Any, pkg: str) -> str:
    """``reflect.Type.String()`` of the Go type a field has."""
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if origin is list:
        return "[]" + go_type(typing.get_args(annotation)[0], pkg)
    if origin is dict:
        return f"map[{pkg}.QualifiedName]" + go_type(typing.get_args(annotation)[1], pkg)
    if _is_struct(annotation):
        name = _GO_STRUCTS.get(annotation.__name__, annotation.__name__)
        return f"{'v1' if name in _CORE_TYPES else pkg}.{name}"
    return {int: "int64", bool: "bool", str: "string"}.get(annotation, "interface {}")


def _steps(model: type[BaseModel], loc: tuple[int | str, ...]) -> Iterator[tuple[str, str, Any]]:
    """(Go struct, JSON field, annotation) for each struct field along a pydantic location."""
    current: Any = model
    skip_next = False
    for part in loc:
        if skip_next or isinstance(part, int):
            skip_next = False
            continue
        if not _is_struct(current):
            return
        annotation = _field(current, part)
        yield current.__name__, part, annotation
        current = annotation
        while typing.get_origin(current) in (list, dict):
            skip_next = typing.get_origin(current) is dict  # the next part is a map key
            current = _unwrap(typing.get_args(current)[-1])


def drop_nulls(model: type[BaseModel], data: Any) -> None:
    """Make ``null`` what Go's decoder makes of it, in place.

    A ``null`` struct field keeps its zero value, which is our default for every field, so
    ``count: null`` decodes as an absent ``count`` (then defaulted) instead of failing; a ``null``
    list item or map value of a struct type is a zero struct, which validation then reports.
    """
    if not isinstance(data, dict):
        return
    for key in list(data):
        annotation = _field(model, key)
        if data[key] is None and annotation is not None:
            del data[key]
            continue
        origin = typing.get_origin(annotation)
        item = _unwrap(typing.get_args(annotation)[-1]) if origin in (list, dict) else annotation
        if not _is_struct(item):
            continue
        if origin not in (list, dict):
            drop_nulls(item, data[key])
            continue
        container = data[key]
        if not isinstance(container, list | dict):
            continue  # the wrong JSON type: a type error later
        for slot in range(len(container)) if isinstance(container, list) else list(container):
            if container[slot] is None:
                container[slot] = {}
            drop_nulls(item, container[slot])


def type_error(model: type[BaseModel], loc: tuple[int | str, ...], value: Any, version: str) -> str | None:
    """``UnmarshalTypeError.Error()`` for a value of the wrong JSON type at ``loc``, or None.

    ``Field`` is the path of JSON field names (no indexes, no map keys), ``Struct`` the Go
    struct that holds the last one (decode.go, ``addErrorContext``).
    """
    stack: list[str] = []
    struct, last = "", None
    for py_struct, name, annotation in _steps(model, loc):
        struct = _GO_STRUCTS.get(py_struct, py_struct)
        if (py_struct, name) in _EMBEDDED:
            stack.append("DeviceConfiguration")
        if version in _OLD_STYLE:
            if name == "exactly":
                continue  # no such level: the request's fields are flat in DeviceRequest
            struct = _old_style(py_struct, name, struct, stack)
        stack.append(name)
        last = (py_struct, name, annotation)
    if last is None:
        return None
    named = _NAMED_TYPES.get((struct, last[1]))
    target = named.format(pkg=version) if named else go_type(last[2], version)
    if target.startswith("[]") and isinstance(loc[-1], int):
        target = target[2:]  # the error is about one element
    kind = json_kind(value, target)
    return f"json: cannot unmarshal {kind} into Go struct field {struct}.{'.'.join(stack)} of type {target}"


def _old_style(py_struct: str, name: str, struct: str, stack: list[str]) -> str:
    """v1alpha3/v1beta1 keep a request's fields flat and a device's under ``basic``."""
    if py_struct == "ExactDeviceRequest":
        return "DeviceRequest"
    if py_struct == "Device" and name != "name":
        stack.append("basic")
        return "BasicDevice"
    return struct


def json_kind(value: Any, target: str) -> str:
    """``UnmarshalTypeError.Value``: what the JSON literal was (numbers quoted for int targets)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {value!r}" if target in ("int64", "int32") else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


# --- metav1.Time: time.Parse(time.RFC3339, s) ----------------------------------------------

_RFC3339 = "2006-01-02T15:04:05Z07:00"
# (literal prefix, layout element) as Go's nextStdChunk splits RFC3339.
_CHUNKS = (("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"), ("", "Z07:00"))


def time_quote(text: str) -> str:
    """``time.quote``: non-ASCII and control characters as ``\\xNN`` bytes, unlike strconv."""
    out = []
    for char in text:
        if ord(char) >= 0x80 or char < " ":
            out.append("".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogatepass")))
        else:
            out.append("\\" + char if char in '"\\' else char)
    return '"' + "".join(out) + '"'


class TimeParseError(KubedeviceError, ValueError):
    """``time.ParseError`` with Go's text."""

    def __init__(self, value: str, layout_elem: str, value_elem: str, message: str = "") -> None:
        if message:
            text = f"parsing time {time_quote(value)}{message}"
        else:
            text = (
                f"parsing time {time_quote(value)} as {time_quote(_RFC3339)}: "
                f"cannot parse {time_quote(value_elem)} as {time_quote(layout_elem)}"
            )
        super().__init__(text)


def _digit(text: str, i: int) -> bool:
    return i < len(text) and "0" <= text[i] <= "9"


def _getnum(text: str, fixed: bool) -> tuple[int, str] | None:
    """time.getnum: one or two digits (exactly two when ``fixed``)."""
    if not _digit(text, 0):
        return None
    if not _digit(text, 1):
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def _year(text: str) -> tuple[int, str] | None:
    """stdLongYear: four bytes starting with a digit, through time.atoi (which takes no sign here)."""
    if len(text) < 4 or not _digit(text, 0) or not all(_digit(text, i) for i in range(4)):
        return None
    return int(text[:4]), text[4:]


def _zone(value: str, rest: str) -> str:
    """stdISO8601ColonTZ: ``Z`` or ``±hh:mm``; returns what follows."""
    if rest.startswith("Z"):
        return rest[1:]
    if len(rest) < 6 or rest[3] != ":":
        raise TimeParseError(value, "Z07:00", rest)
    hour, minute = _getnum(rest[1:3], True), _getnum(rest[4:6], True)
    if hour is not None and hour[0] > 24:
        raise TimeParseError(value, "", "", ": time zone offset hour out of range")
    if minute is not None and minute[0] > 60:
        raise TimeParseError(value, "", "", ": time zone offset minute out of range")
    if hour is None or minute is None or rest[0] not in "+-":
        raise TimeParseError(value, "Z07:00", rest)
    return rest[6:]


_RANGES = {"01": ("month", 1, 12), "15": ("hour", 0, 23), "04": ("minute", 0, 59), "05": ("second", 0, 59)}


def _fraction(rest: str) -> str:
    """A fractional second the layout does not name is skipped (stdSecond's special case)."""
    if len(rest) >= 2 and rest[0] in ".," and _digit(rest, 1):
        n = 2
        while _digit(rest, n):
            n += 1
        return rest[n:]
    return rest


def parse_rfc3339(value: str) -> None:
    """Raise ``TimeParseError`` as ``time.Parse(time.RFC3339, value)`` fails (go/src/time/format.go)."""
    rest, fields = value, {}
    for prefix, elem in _CHUNKS:
        if not rest.startswith(prefix):
            common = 0
            while common < len(prefix) and rest[common : common + 1] == prefix[common]:
                common += 1
            raise TimeParseError(value, prefix, rest[common:])
        rest = rest[len(prefix) :]
        if elem == "Z07:00":
            rest = _zone(value, rest)
            continue
        parsed = _year(rest) if elem == "2006" else _getnum(rest, elem != "15")
        if parsed is None:
            raise TimeParseError(value, elem, rest)
        fields[elem], rest = parsed
        if elem in _RANGES:
            name, low, high = _RANGES[elem]
            if not low <= fields[elem] <= high:
                raise TimeParseError(value, "", "", f": {name} out of range")
        if elem == "05":
            rest = _fraction(rest)
    if rest:
        raise TimeParseError(value, "", rest, f": extra text: {time_quote(rest)}")
    if not 1 <= fields["02"] <= _days_in(fields["01"], fields["2006"]):
        raise TimeParseError(value, "", "", ": day out of range")


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31
