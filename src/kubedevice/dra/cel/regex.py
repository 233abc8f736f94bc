"""Regular expressions as Kubernetes evaluates them: RE2 (Go's regexp) through the real RE2 library.

``matches`` (CEL standard library) and ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library
regex.go). RE2 rather than Python's ``re``: ``$`` does not match before a final newline,
lookarounds and backreferences are errors, POSIX classes, ``\\pL``, ``\\z`` and ``\\Q…\\E`` work.
``findAll`` keeps Go's rule that an empty match right after a previous match is skipped.

Matching calls the binding's RE2 object (``_re2.RE2.Match``) on UTF-8 bytes, as Go does: the
binding's public ``search`` re-derives character offsets on every call and costs about three
times as much (measured: 1.5-2.4 µs against 4.3-7.0 µs per ``matches``). That object is private,
so pyproject pins the binding to the 1.1 series and ``PRIVATE_API`` says whether it is usable;
when it is not, the same byte-offset spans come from the public API (slower, same answers), and
tests/dra/test_cel_regex.py fails so the pin gets revisited.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from .values import Err

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would log every refused pattern on stderr
_NO_MATCH = (-1, -1)


def _private_anchor() -> Any:
    """The binding's private UNANCHORED constant if its RE2 object can be driven directly."""
    try:
        anchor = re2._Anchor.UNANCHORED
        probe = re2.compile("b", _OPTIONS)._regexp.Match(anchor, b"ab", 0, 2)
    except (AttributeError, TypeError):
        return None
    return anchor if tuple(probe[0]) == (1, 2) else None


_UNANCHORED = _private_anchor()
PRIVATE_API = _UNANCHORED is not None


class _PublicSpans:
    """Byte-offset spans from the public API, for a binding whose private RE2 object changed."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled

    def Match(self, _anchor: Any, data: bytes, start: int, _end: int) -> list[tuple[int, int]]:
        text = data.decode("utf-8", "surrogatepass")
        found = self.compiled.search(text, len(data[:start].decode("utf-8", "surrogatepass")))
        if found is None:
            return [_NO_MATCH]
        begin = len(text[:found.start()].encode("utf-8", "surrogatepass"))
        return [(begin, begin + len(found.group().encode("utf-8", "surrogatepass")))]


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    if _has_any_byte(pattern):
        raise re2.error(b"invalid escape sequence: \\C")
    compiled = re2.compile(pattern, _OPTIONS)
    # the RE2 object itself (see the module docstring)
    return compiled._regexp if PRIVATE_API else _PublicSpans(compiled)


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
    "missing ]": "missing closing ]", "missing )": "missing closing )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count", "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "pattern too large - compile failed": "expression too large",
}


def error(pattern: str) -> str:
    """Why Go's regexp.Compile refuses ``pattern``, in its words (``code: `fragment```), or ''."""
    try:
        _compiled(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
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
