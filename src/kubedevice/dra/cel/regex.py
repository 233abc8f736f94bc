"""Regular expressions as Kubernetes evaluates them: RE2 (Go's regexp) through the real RE2 library.

``matches`` (CEL standard library) and ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library
regex.go). RE2 rather than Python's ``re``: ``$`` does not match before a final newline,
lookarounds and backreferences are errors, POSIX classes, ``\\pL``, ``\\z`` and ``\\Q…\\E`` work.
``findAll`` keeps Go's rule that an empty match right after a previous match is skipped.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from .values import Err

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would log every refused pattern on stderr


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    if _has_any_byte(pattern):
        raise re2.error(b"invalid escape sequence: \\C")
    return re2.compile(pattern, _OPTIONS)


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


def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 pattern, or the CEL runtime error Kubernetes reports for a bad one."""
    try:
        return _compiled(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise Err(f"error parsing regexp: {detail}") from None


def is_valid(pattern: str) -> bool:
    """regexp.Compile succeeds: constant patterns are checked when an expression is compiled."""
    try:
        compile_pattern(pattern)
    except Err:
        return False
    return True


def matches(text: str, pattern: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


def find(text: str, pattern: str) -> str:
    found = compile_pattern(pattern).search(text)
    return found.group(0) if found is not None else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's Regexp.FindAllString(text, limit)."""
    compiled = compile_pattern(pattern)
    out: list[str] = []
    pos, previous_end, end = 0, -1, len(text)
    while (limit < 0 or len(out) < limit) and pos <= end:
        found = compiled.search(text, pos)
        if found is None:
            break
        start, stop = found.span()
        accept = True
        if stop == pos:  # an empty match: never right after the previous match
            accept = start != previous_end
            pos += 1
        else:
            pos = stop
        previous_end = stop
        if accept:
            out.append(found.group(0))
    return out
