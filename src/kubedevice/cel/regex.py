"""Regular expressions as Kubernetes evaluates them: RE2 (Go's regexp) through the real RE2 library.

``matches`` (CEL standard library) and ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library
regex.go). RE2 rather than Python's ``re``: ``$`` does not match before a final newline,
lookarounds and backreferences are errors, POSIX classes, ``\\pL``, ``\\z`` and ``\\Q…\\E`` work.
``findAll`` keeps Go's rule that an empty match right after a previous match is skipped.

Matching runs on UTF-8 bytes with byte offsets, as Go does. The binding's public ``search``
builds a generator and a match object per call (and on a ``str`` re-derives character
offsets); driving its RE2 object (``_re2.RE2.Match``) directly costs a quarter to a third of
the public call on bytes (measured side by side: 4.0-5.3 µs against 16-19 µs per ``matches``
on a loaded 2-core machine). That object is private, so it is used only for the google-re2
releases in KNOWN_GOOD, which tests/cel/test_regex.py holds to the public path on one
corpus. Any other release (or none found) uses the public API on bytes (a bytes pattern
searched in bytes reports byte offsets): slower, same answers. The choice is made once, here
at import, so the hot path tests nothing per call.
"""

from __future__ import annotations

import importlib.metadata
from functools import lru_cache
from typing import Any

import re2

from .values import Err

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would log every refused pattern on stderr
_NO_MATCH = (-1, -1)

# google-re2 releases whose private RE2 object (re2._Anchor, _re2.RE2.Match) gives the public
# path's answers on tests/cel/test_regex.py's corpus; add a release only after that test
# passed with it installed.
KNOWN_GOOD = frozenset({"1.1.20240702", "1.1.20250805", "1.1.20251105"})


def _installed_version() -> str:
    try:
        return importlib.metadata.version("google-re2")
    except importlib.metadata.PackageNotFoundError:  # importable but not installed as a distribution
        return ""


VERSION = _installed_version()
PRIVATE_API = VERSION in KNOWN_GOOD
_UNANCHORED: Any = re2._Anchor.UNANCHORED if PRIVATE_API else None


class _PublicSpans:
    """The private RE2 object's ``Match`` (first span only) through the public API."""

    __slots__ = ("compiled",)

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled

    def Match(self, _anchor: Any, data: bytes, start: int, _end: int) -> list[tuple[int, int]]:
        found = self.compiled.search(data, start)
        return [_NO_MATCH if found is None else found.span()]


def _private(compiled: Any) -> Any:
    return compiled._regexp


# How a compiled pattern is searched: chosen once (see the module docstring).
SPANS: Any = _private if PRIVATE_API else _PublicSpans


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    if _has_any_byte(pattern):
        raise re2.error(b"invalid escape sequence: \\C")
    # Bytes, so that both paths report byte offsets. surrogatepass: a lone surrogate (JSON input
    # can hold one, Go's strings cannot) goes to RE2 as its bytes instead of crashing the encoder.
    return SPANS(re2.compile(pattern.encode("utf-8", "surrogatepass"), _OPTIONS))


def _has_any_byte(pattern: str) -> bool:
    """``\\C`` (any byte) is the one escape C++ RE2 accepts and Go's regexp refuses."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            if pattern[i + 1] == "C":
                return True
            if pattern[i + 1] == "Q":  # literal text up to \E
                end = pattern.find("\\E", i + 2)
                i = len(pattern) if end < 0 else end + 2
                continue
            i += 2
        else:
            i += 1
    return False


# RE2's error codes as Go's regexp/syntax names them (the two libraries share the codes).
_GO_ERRORS = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "pattern too large - compile failed": "expression too large",
}


def error(pattern: str) -> str:
    """Why Go's regexp.Compile refuses ``pattern``, in its words (``code: `fragment```), or ''."""
    try:
        _compiled(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        code, sep, fragment = detail.partition(": ")
        return f"{_GO_ERRORS.get(code, code)}: `{fragment}`" if sep else _GO_ERRORS.get(code, code)
    return ""


def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 pattern, or the CEL runtime error Kubernetes reports for a bad one."""
    try:
        return _compiled(pattern)
    except re2.error:
        raise Err(f"error parsing regexp: {error(pattern)}") from None


def is_valid(pattern: str) -> bool:
    """regexp.Compile succeeds: constant patterns are checked when an expression is compiled."""
    try:
        compile_pattern(pattern)
    except Err:
        return False
    return True


def _span(compiled: Any, data: bytes, start: int) -> tuple[int, int]:
    found: tuple[int, int] = compiled.Match(_UNANCHORED, data, start, len(data))[0]
    return found


def matches(text: str, pattern: str) -> bool:
    data = text.encode("utf-8", "surrogatepass")
    return _span(compile_pattern(pattern), data, 0) != _NO_MATCH


def find(text: str, pattern: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    start, end = _span(compile_pattern(pattern), data, 0)
    return data[start:end].decode("utf-8", "surrogatepass") if start >= 0 else ""


def _next_char(data: bytes, pos: int) -> int:
    """Offset after the UTF-8 character at ``pos``."""
    pos += 1
    while pos < len(data) and data[pos] & 0xC0 == 0x80:
        pos += 1
    return pos


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's Regexp.FindAllString(text, limit)."""
    compiled = compile_pattern(pattern)
    data = text.encode("utf-8", "surrogatepass")
    out: list[str] = []
    pos, previous_end = 0, -1
    while (limit < 0 or len(out) < limit) and pos <= len(data):
        start, stop = _span(compiled, data, pos)
        if start < 0:
            break
        accept = True
        if stop == pos:  # an empty match: never right after the previous match
            accept = start != previous_end
            pos = _next_char(data, pos)
        else:
            pos = stop
        previous_end = stop
        if accept:
            out.append(data[start:stop].decode("utf-8", "surrogatepass"))
    return out


def matcher(pattern: str) -> Any:
    """``text -> bool`` for a constant pattern, compiled once (None if the pattern is bad)."""
    try:
        compiled = compile_pattern(pattern)
    except Err:
        return None

    def match(text: str) -> bool:
        data = text.encode("utf-8", "surrogatepass")
        return bool(compiled.Match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH)

    return match
