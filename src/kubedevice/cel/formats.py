"""Kubernetes' Format library (k8s.io/apiserver/pkg/cel/library/format.go), in the base
environment since 1.31: ``format.named(name)`` (an optional format), ``format.dns1123Label()``
and the other named formats, and ``<format>.validate(text)``, which is ``optional.none()`` for
valid text and else the validator's messages, worded as apimachinery and kube-openapi word them
(the name formats are :mod:`kubedevice.apimachinery`'s, as ``format.go`` calls apimachinery's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ..apimachinery import content, validation
from ..apimachinery.meta import mask_trailing_dash
from ..gostrings import quote as go_quote
from .cost import ONE, STRING_FACTOR, Coster, Range, scaled
from .library import CALL_COSTS, NAMESPACES, RUNTIME_COSTS, VALUE_TYPES, register
from .parser import Call
from .urls import URLError, parse
from .values import NONE, Optional, actual_size, traversal

FORMAT_TYPE = "kubernetes.NamedFormat"
MAX_NAME_FORMAT_REGEX_SIZE = 128
_REGEX_FACTOR = 0.25

_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.IGNORECASE)
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")


def _prefixed(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A name prefix's format (``NameIsDNSLabel(s, true)`` and its kin): a trailing dash masked first."""
    return lambda value: check(mask_trailing_dash(value))


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
    "dns1123Label": Format("DNS1123Label", validation.is_dns1123_label, 30),
    "dns1123Subdomain": Format("DNS1123Subdomain", validation.is_dns1123_subdomain, 60),
    "dns1035Label": Format("DNS1035Label", validation.is_dns1035_label, 30),
    "qualifiedName": Format("QualifiedName", content.is_label_key, 60),
    "dns1123LabelPrefix": Format("DNS1123LabelPrefix", _prefixed(validation.is_dns1123_label), 30),
    "dns1123SubdomainPrefix": Format("DNS1123SubdomainPrefix", _prefixed(validation.is_dns1123_subdomain), 60),
    "dns1035LabelPrefix": Format("DNS1035LabelPrefix", _prefixed(validation.is_dns1035_label), 30),
    "labelValue": Format("LabelValue", content.is_label_value, 40),
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
