"""Port of github.com/blang/semver/v4 parsing and ordering, as used by Kubernetes' CEL library."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import KubedeviceError
from ..gostrings import quote

_DIGITS = frozenset("0123456789")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_UINT64_MAX = (1 << 64) - 1


class SemverError(KubedeviceError, ValueError):
    """The string is not a strict semantic version."""


@dataclass(frozen=True, slots=True)
class Semver:
    """A parsed version; equality and ordering ignore build metadata, like semver.Compare."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = field(default=(), compare=False)

    def compare(self, other: Semver) -> int:
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return 1 if a > b else -1
        return _compare_pre(self.pre, other.pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))


def _compare_pre(a: tuple[int | str, ...], b: tuple[int | str, ...]) -> int:
    if not a or not b:
        return (not a) - (not b)
    for x, y in zip(a, b, strict=False):
        if x == y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            return 1 if x > y else -1
        if isinstance(x, int):
            return -1
        if isinstance(y, int):
            return 1
        return 1 if str(x) > str(y) else -1
    return (len(a) > len(b)) - (len(a) < len(b))


def _uint(part: str) -> int:
    """strconv.ParseUint(part, 10, 64), with its error text."""
    if not part:
        raise SemverError('strconv.ParseUint: parsing "": invalid syntax')
    value = int(part)
    if value > _UINT64_MAX:
        raise SemverError(f"strconv.ParseUint: parsing {quote(part)}: value out of range")
    return value


def _number(part: str, what: str) -> int:
    """A major, minor or patch number, checked in blang's order and words."""
    if not set(part) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {what} number {quote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {quote(part)}")
    return _uint(part)


def _pre_identifier(part: str) -> int | str:
    if not part:
        raise SemverError("Prerelease is empty")
    if set(part) <= _DIGITS:
        if len(part) > 1 and part[0] == "0":
            raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {quote(part)}")
        return _uint(part)
    if not set(part) <= _ALNUM:
        raise SemverError(f"Invalid character(s) found in prerelease {quote(part)}")
    return part


def _build_identifier(part: str) -> str:
    if not part:
        raise SemverError("Build meta data is empty")
    if not set(part) <= _ALNUM:
        raise SemverError(f"Invalid character(s) found in build meta data {quote(part)}")
    return part


@lru_cache(maxsize=4096)
def parse(text: str) -> Semver:
    """semver.Parse: strict MAJOR.MINOR.PATCH[-PRE][+BUILD], failing on the first problem in
    blang's order (major, minor, patch, prerelease, build) with its message."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    patch, plus, meta = parts[2].partition("+")
    patch, minus, pres = patch.partition("-")
    number = _number(patch, "patch")
    pre = tuple(_pre_identifier(p) for p in pres.split(".")) if minus else ()
    build = tuple(_build_identifier(b) for b in meta.split(".")) if plus else ()
    return Semver(major, minor, number, pre, build)


def normalize_and_parse(text: str) -> Semver:
    """Kubernetes' normalizeAndParse: optional "v", leading zeros dropped, short forms padded."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part.encode("utf-8", "surrogatepass")) > 1:  # Go's len: bytes, so "é" is long enough
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _DIGITS:
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))
