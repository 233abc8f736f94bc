"""Field errors and paths, as ``k8s.io/apimachinery/pkg/util/validation/field``: ``str()`` of an
error is the API server's text for it (``spec.selectors[0].cel.expression: Invalid value: …``),
the line ``kubectl`` prints and ``status.details.causes`` carries.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..gostrings import quote as go_quote
from ..releases import NEWEST, at_least


class ErrorType(enum.StrEnum):
    """``field.ErrorType`` with the text its ``String()`` prints."""

    NOT_FOUND = "Not found"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    INVALID = "Invalid value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    INTERNAL = "Internal error"


_NO_VALUE = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL})


def format_value(value: Any) -> str:
    """How ``ErrorBody`` prints a bad value: Go's ``%v`` for simple types, ``%q`` for strings, JSON else."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, default=str, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``; ``str()`` is the API server's text for it."""

    type: ErrorType
    field: str
    value: Any = ""
    detail: str = ""

    def body(self) -> str:
        """``ErrorBody``: the text without the field path."""
        text = str(self.type)
        if self.type not in _NO_VALUE:
            text += f": {format_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


class Path:
    """``field.Path``: builds ``spec.devices[0].attributes[dra.example.com/model]``."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def child(self, *names: str) -> Path:
        text = self._text
        for name in names:
            text = f"{text}.{name}" if text else name
        return Path(text)

    def index(self, i: int) -> Path:
        return Path(f"{self._text}[{i}]")

    def key(self, key: str) -> Path:
        return Path(f"{self._text}[{key}]")

    def __str__(self) -> str:
        return self._text


ErrorList = list[FieldError]


def required(path: Path, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, str(path), "", detail)


def invalid(path: Path, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, str(path), value, detail)


def forbidden(path: Path, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, str(path), "", detail)


def too_long(path: Path, limit: int, release: str = NEWEST) -> FieldError:
    """``field.TooLong`` (apimachinery pkg/util/validation/field/errors.go): "may not be more than
    N bytes" from 1.32 ("byte" for one from 1.34); 1.31's said "must have at most N bytes"."""
    if not at_least(release, "1.32"):
        return FieldError(ErrorType.TOO_LONG, str(path), "", f"must have at most {limit} bytes")
    unit = "byte" if limit == 1 and at_least(release, "1.34") else "bytes"
    return FieldError(ErrorType.TOO_LONG, str(path), "", f"may not be more than {limit} {unit}")


def too_long_max_length(path: Path, limit: int, release: str = NEWEST) -> FieldError:
    """``field.TooLongMaxLength``: 1.31's "may not be longer than N", which DRA's validation used for
    every limit, lists' sizes too; from 1.32 it is ``TooLong``."""
    if at_least(release, "1.32"):
        return too_long(path, limit, release)
    return FieldError(ErrorType.TOO_LONG, str(path), "", f"may not be longer than {limit}")


def too_long_characters(path: Path, limit: int) -> FieldError:
    """``field.TooLongCharacters`` (apimachinery v0.36 on): a limit counted in runes."""
    return FieldError(ErrorType.TOO_LONG, str(path), "", f"may not be more than {limit} characters")


def too_many(path: Path, actual: int, limit: int) -> FieldError:
    return FieldError(ErrorType.TOO_MANY, str(path), actual, f"must have at most {limit} items")


def not_found(path: Path, value: Any) -> FieldError:
    return FieldError(ErrorType.NOT_FOUND, str(path), value)


def duplicate(path: Path, value: Any) -> FieldError:
    return FieldError(ErrorType.DUPLICATE, str(path), value)


def not_supported(path: Path, value: Any, supported: Sequence[str]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, str(path), value, detail)


def each_invalid(path: Path, value: str, messages: Sequence[str]) -> ErrorList:
    """One ``Invalid`` per message of a format check: how every caller of ``IsDNS1123Label`` and
    its kin turns the messages into errors."""
    return [invalid(path, value, message) for message in messages]
