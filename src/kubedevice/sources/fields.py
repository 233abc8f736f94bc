"""The config's building blocks shared by the resource schema and every source's own config model.

Kept apart from :mod:`.schema` so a source module can define its config model without importing
the schema, which imports the source registry (and so every source module).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from ..errors import FieldProblem

#: Linux's PATH_MAX, the terminating NUL included: a longer path fails with ENAMETOOLONG.
PATH_MAX = 4096
#: Any other text: far above any name, pattern or value a config needs.
MAX_TEXT = 4096
#: Every model of the config file (``config.py`` and the ``dra:`` section use it too).
SCHEMA_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, str_max_length=MAX_TEXT)
#: Devices one resource advertises at most (IDs with their replicas), known from the config for a
#: static source; the kubelet's 4 MiB ListAndWatch answer bounds every source (:mod:`.limits`).
MAX_DEVICES = 100_000
_HEX4 = re.compile(r"^(0x)?([0-9a-fA-F]{4})\Z")
_PCI_CLASS = re.compile(r"^(0x)?([0-9a-fA-F]{2}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6})\Z")
_CLASS_FORMAT = '2, 4 or 6 hex digits like "1200" (class, subclass, prog-if)'


class Model(BaseModel):
    """Strict, frozen, no unknown keys: the base of every model of the resource config."""

    model_config = ConfigDict(**SCHEMA_CONFIG, populate_by_name=True)


def path_problem(value: str) -> str | None:
    if not value.startswith("/"):
        return "must be absolute"
    if ".." in value.split("/"):
        return "must not contain '..'"
    if len(value.encode()) >= PATH_MAX:
        return f"is {len(value.encode())} bytes, over the {PATH_MAX - 1} a path may have (PATH_MAX)"
    return "must not contain NUL" if "\0" in value else None


def _absolute(value: str) -> str:
    problem = path_problem(value)
    if problem:
        raise ValueError(f"path {value!r} {problem}")
    return value


def _hex(pattern: re.Pattern[str], what: str) -> Callable[[Any], Any]:
    """A before-validator for hex IDs: quoted (YAML reads 1234 as a number), normalised to lowercase."""

    def check(value: Any) -> Any:
        if isinstance(value, int):
            raise ValueError(f"{value} must be quoted: {what}")
        if isinstance(value, str):
            match = pattern.match(value)
            if not match:
                raise ValueError(f"{value!r} is not {what}")
            return match.group(2).lower()
        return value

    return check


def regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
    return value


AbsPath = Annotated[str, AfterValidator(_absolute)]
HexId = Annotated[str, BeforeValidator(_hex(_HEX4, '4 hex digits like "10ee"'))]
PciClass = Annotated[str, BeforeValidator(_hex(_PCI_CLASS, _CLASS_FORMAT))]


def each_once(kinds: list[str]) -> None:
    """A node kind listed twice is a typo or a merge slip: refused at its second place."""
    twice = sorted({kind for kind in kinds if kinds.count(kind) > 1})
    if twice:
        second = next(i for i, kind in enumerate(kinds) if kind in kinds[:i])
        raise FieldProblem((second,), f"lists {', '.join(twice)} more than once")
