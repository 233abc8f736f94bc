"""Kubernetes' Format library (k8s.io/apiserver/pkg/cel/library/format.go), in the base
environment since 1.31: ``format.named(name)`` (an optional format), ``format.dns1123Label()``
and the other named formats, and ``<format>.validate(text)``, which is ``optional.none()`` for
valid text and else the validator's messages, worded as apimachinery and kube-openapi word them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ..gostrings import quote as go_quote
from .cost import ONE, STRING_FACTOR, Coster, Range, scaled
from .library import CALL_COSTS, NAMESPACES, RUNTIME_COSTS, VALUE_TYPES, register
from .parser import Call
from .urls import URLError, parse
from .values import NONE, Optional, actual_size, traversal

FORMAT_TYPE = "kubernetes.NamedFormat"
MAX_NAME_FORMAT_REGEX_SIZE = 128
_REGEX_FACTOR = 0.25

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE = "(" + _KEY + ")?"
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.IGNORECASE)
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery's RegexError, spacing included (``'a',  or 'b', ``)."""
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _full(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None  # fullmatch: '$' must not pass a final newline


def _size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))  # Go's len() counts bytes


def _dns1123_label(value: str) -> list[str]:
    errors = ["must be no more than 63 characters"] if _size(value) > 63 else []
    if not _full(_LABEL, value):
        errors.append(
            "must not contain dots"
            if _full(_SUBDOMAIN, value)
            else _regex_error(_LABEL_MSG, _LABEL, "my-name", "123-abc")
        )
    return errors


def _dns1123_subdomain(value: str, unit: str = "characters") -> list[str]:
    errors = [f"must be no more than 253 {unit}"] if _size(value) > 253 else []
    if not _full(_SUBDOMAIN, value):
        errors.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN, "example.com"))
    return errors


def _dns1035_label(value: str) -> list[str]:
    errors = ["must be no more than 63 characters"] if _size(value) > 63 else []
    if not _full(_DNS1035, value):
        errors.append(_regex_error(_DNS1035_MSG, _DNS1035, "my-name", "abc-123"))
    return errors


def _mask_trailing_dash(name: str) -> str:
    """apimachinery's maskTrailingDash (it drops two characters, an upstream quirk)."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def _prefixed(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    return lambda value: check(_mask_trailing_dash(value))


def _qualified_name(value: str) -> list[str]:
    """content.IsLabelKey."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_KEY_MSG, _KEY, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + m for m in _dns1123_subdomain(parts[0], "bytes")]
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not _full(_KEY, name):
        errors.append("name part " + _regex_error(_KEY_MSG, _KEY, "MyName", "my.name", "123-abc"))
    return errors


def _label_value(value: str) -> list[str]:
    errors = ["must be no more than 63 bytes"] if _size(value) > 63 else []
    if not _full(_VALUE, value):
        errors.append(_regex_error(_VALUE_MSG, _VALUE, "MyValue", "my_value", "12345"))
    return errors


def _uri(value: str) -> list[str]:
    """url.ParseRequestURI's error, as *url.Error prints it."""
    try:
        parse(value.encode("utf-8", "surrogateescape"), True)
    except URLError as exc:
        return [f"parse {go_quote(value)}: {exc}"]
    return []


def _is_date(value: str) -> bool:
    """time.Parse("2006-01-02", value): fixed-width fields and a real day of the month."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        return False
    year, month, day = int(value[:4]), int(value[5:7]), int(value[8:])
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return 1 <= day <= days


def _is_datetime(value: str) -> bool:
    """kube-openapi's strfmt.IsDateTime (only the part after the first 't' is checked)."""
    if len(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    found = _TIME.fullmatch(parts[1])
    return found is not None and found[1] <= "23" and found[2] <= "59" and found[3] <= "59"


def _check(test: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda value: [] if test(value) else [message]


@dataclass(frozen=True, slots=True)
class Format:
    """A ``kubernetes.NamedFormat`` value: equal when the names are."""

    CEL_TYPE: ClassVar[str] = FORMAT_TYPE
    CEL_STRICT: ClassVar[bool] = True  # == with another kind is an error, as upstream
    name: str
    check: Callable[[str], list[str]]
    # the size of the regex Kubernetes charges a validation for (its MaxRegexSize)
    max_regex_size: int = field(default=0, compare=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Format) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


FORMATS = {
    "dns1123Label": Format("DNS1123Label", _dns1123_label, 30),
    "dns1123Subdomain": Format("DNS1123Subdomain", _dns1123_subdomain, 60),
    "dns1035Label": Format("DNS1035Label", _dns1035_label, 30),
    "qualifiedName": Format("QualifiedName", _qualified_name, 60),
    "dns1123LabelPrefix": Format("DNS1123LabelPrefix", _prefixed(_dns1123_label), 30),
    "dns1123SubdomainPrefix": Format("DNS1123SubdomainPrefix", _prefixed(_dns1123_subdomain), 60),
    "dns1035LabelPrefix": Format("DNS1035LabelPrefix", _prefixed(_dns1035_label), 30),
    "labelValue": Format("LabelValue", _label_value, 40),
    "uri": Format("URI", _uri, 1103),
    "uuid": Format("uuid", _check(lambda v: _UUID.fullmatch(v) is not None, "does not match the UUID format"), 70),
    "byte": Format("byte", _check(lambda v: _BASE64.fullmatch(v) is not None, "invalid base64"), 84),
    "date": Format("date", _check(_is_date, "invalid date"), 71),
    "datetime": Format("datetime", _check(_is_datetime, "invalid datetime"), 71),
}


def _named(name: str) -> Optional:
    found = FORMATS.get(name)
    return NONE if found is None else Optional(True, found)


def _validate(fmt: Format, text: str) -> Optional:
    messages = fmt.check(text)
    return Optional(True, messages) if messages else NONE


def _validate_cost(c: Coster, node: Call) -> tuple[Range, None] | None:
    """Kubernetes' estimate: the text's size, times a 128-character regex."""
    if len(node.args) != 1:
        return None
    text = scaled(c.size_or_unknown(node.args[0]), STRING_FACTOR)
    return scaled(text, MAX_NAME_FORMAT_REGEX_SIZE * _REGEX_FACTOR), None


def _validate_tracked(args: list[object], _result: object) -> int:
    """Kubernetes' CallCost: the text's traversal (plus one) times the format's regex size / 4."""
    fmt, text = args
    size = fmt.max_regex_size if isinstance(fmt, Format) else 0
    return traversal(1 + actual_size(text)) * traversal(size, 0.25)


def _unit(c: Coster, node: Call) -> tuple[Range, None]:
    return ONE, None


def _register() -> None:
    VALUE_TYPES[FORMAT_TYPE] = (Format,)
    NAMESPACES.add("format")
    register("format.named", False, ("string",), ("optional", FORMAT_TYPE), _named)
    register("validate", True, (FORMAT_TYPE, "string"), ("optional", ("list", "string")), _validate)
    for name, fmt in FORMATS.items():
        register(f"format.{name}", False, (), FORMAT_TYPE, lambda fmt=fmt: fmt)
    CALL_COSTS.update({"validate": _validate_cost, "format.named": _unit})
    RUNTIME_COSTS["validate"] = _validate_tracked


_register()
