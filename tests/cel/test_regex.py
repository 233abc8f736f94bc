"""The RE2 binding's private object that regex.py drives for speed, and the public fallback:
both paths give the same answers on one corpus, and the private one is only chosen for the
google-re2 releases in KNOWN_GOOD."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import re2

from kubedevice.cel import regex
from kubedevice.cel.values import Err

PATTERNS = [
    "b",
    "^a",
    "a$",
    "x*",
    "",
    "\\b",
    "(?m)^",
    "a\\z",
    "a|ab",
    "(?U)a+",
    "a{2,}",
    ".",
    "[^a]",
    "[[:alpha:]]+",
    "\\pL+",
    "\\p{Han}+",
    "é+",
    "(?i)É",
    "日本",
    "\\Q.*\\E",
    "\ud800",
    ".\ud800.",
    # refused, as Go refuses them: the error text must not depend on the path either
    "a(",
    "[a",
    "(?=a)",
    "a**",
    "\\C",
    "x{1001}",
    "(?P<n>a",
    "\\",
]
TEXTS = ["", "ab", "a\n", "abc\n", "aaa", "éÉé b", "xx ax", "日本語 a", "a\ud800b", ".*x", "\ud800"]
LIMITS = [-1, 0, 1, 2]


def _private_anchor() -> Any:
    return getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)


@contextmanager
def _path(name: str) -> Iterator[None]:
    """Compile and match through one path (patterns compiled before are forgotten)."""
    saved = regex.SPANS, regex._UNANCHORED
    regex.SPANS = regex._private if name == "private" else regex._PublicSpans
    regex._UNANCHORED = _private_anchor() if name == "private" else None
    regex._compiled.cache_clear()
    try:
        yield
    finally:
        regex.SPANS, regex._UNANCHORED = saved
        regex._compiled.cache_clear()


def _attempt(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Err as exc:
        return f"Err: {exc}"


def _answers(name: str) -> list[Any]:
    """Every public function of regex.py over the corpus."""
    out: list[Any] = []
    with _path(name):
        for pattern in PATTERNS:
            out.append((pattern, regex.error(pattern), regex.is_valid(pattern)))
            match = regex.matcher(pattern)
            for text in TEXTS:
                out.append(
                    (
                        pattern,
                        text,
                        _attempt(regex.matches, text, pattern),
                        _attempt(regex.find, text, pattern),
                        None if match is None else match(text),
                    )
                )
                out.extend((pattern, text, limit, _attempt(regex.find_all, text, pattern, limit)) for limit in LIMITS)
    return out


def _skip_without_private_object() -> None:
    if _private_anchor() is None or not hasattr(re2.compile("b")._regexp, "Match"):
        assert not regex.PRIVATE_API, f"google-re2 {regex.VERSION} is in KNOWN_GOOD but has no private RE2 object"
        pytest.skip(f"google-re2 {regex.VERSION} has no private RE2 object: only the public path exists")


def test_the_path_is_chosen_by_the_installed_release() -> None:
    installed = importlib.metadata.version("google-re2")
    assert installed == regex.VERSION
    assert regex.PRIVATE_API is (installed in regex.KNOWN_GOOD)
    assert regex.SPANS is (regex._private if regex.PRIVATE_API else regex._PublicSpans)


def test_both_paths_answer_alike_on_the_corpus() -> None:
    """Run with a new google-re2 installed before adding it to KNOWN_GOOD."""
    _skip_without_private_object()
    private, public = _answers("private"), _answers("public")
    assert len(private) == len(public)
    for mine, theirs in zip(private, public, strict=True):
        assert mine == theirs


@pytest.mark.parametrize("pattern", [p for p in PATTERNS if regex.is_valid(p)])
def test_both_paths_give_the_same_spans_from_every_start(pattern: str) -> None:
    _skip_without_private_object()
    compiled = re2.compile(pattern.encode("utf-8", "surrogatepass"), regex._OPTIONS)
    private, public = regex._private(compiled), regex._PublicSpans(compiled)
    for text in TEXTS:
        data = text.encode("utf-8", "surrogatepass")
        for start in range(len(data) + 1):
            want = tuple(private.Match(_private_anchor(), data, start, len(data))[0])
            assert tuple(public.Match(None, data, start, len(data))[0]) == want, (pattern, text, start)


def test_the_corpus_answers_as_go() -> None:
    """A few answers of Go's regexp (checked with go1.26), so that agreeing paths are also right."""
    assert regex.matches("abc\n", "c$") is False  # $ is \z without (?m)
    assert regex.find("éÉé b", "(?i)É+") == "éÉé"
    assert regex.find_all("xx ax", "x*") == ["xx", "", "x"]  # no empty match right after a match
    assert regex.find_all("aaa", "", 2) == ["", ""]
    assert regex.find("日本語 a", "\\p{Han}+") == "日本語"
    assert regex.error("(?=a)") == "invalid or unsupported Perl syntax: `(?=`"
    assert regex.error("\\C") == "invalid escape sequence: `\\C`"
