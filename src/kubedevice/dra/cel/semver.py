"""Port of github.com/blang/semver/v4 parsing and ordering, as used by Kubernetes' CEL library."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

_DIGITS = frozenset("0123456789")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_UINT64_MAX = (1 << 64) - 1


class SemverError(ValueError):
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


def _number(part: str, what: str) -> int:
    if not part or not set(part) <= _DIGITS:
        raise SemverError(f"invalid character(s) found in {what} number")
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f"{what} number must not contain leading zeroes")
    value = int(part)
    if value > _UINT64_MAX:
        raise SemverError(f"{what} number out of range")
    return value


def _pre_identifier(part: str) -> int | str:
    if not part:
        raise SemverError("prerelease is empty")
    if set(part) <= _DIGITS:
        return _number(part, "prerelease")
    if not set(part) <= _ALNUM:
        raise SemverError("invalid character(s) found in prerelease")
    return part


@lru_cache(maxsize=4096)
def parse(text: str) -> Semver:
    """semver.Parse: strict MAJOR.MINOR.PATCH[-PRE][+BUILD]."""
    if not text:
        raise SemverError("version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("no major, minor and patch value found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest, build = parts[2], tuple[str, ...]()
    if "+" in rest:
        rest, meta = rest.split("+", 1)
        build = tuple(meta.split("."))
        if any(not b or not set(b) <= _ALNUM for b in build):
            raise SemverError("invalid build metadata")
    pre: tuple[int | str, ...] = ()
    if "-" in rest:
        rest, pres = rest.split("-", 1)
        pre = tuple(_pre_identifier(p) for p in pres.split("."))
    return Semver(major, minor, _number(rest, "patch"), pre, build)


def normalize_and_parse(text: str) -> Semver:
    """Kubernetes' normalizeAndParse: optional "v", leading zeros dropped, short forms padded."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _DIGITS:
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))
