"""The RE2 binding's private API that regex.py drives for speed, and the public fallback."""

from __future__ import annotations

import pytest
import re2

from kubedevice.dra.cel import regex

PATTERNS = ["b", "^a", "a$", "x*", "[[:alpha:]]+", "\\pL+", "é+", "(?i)É", "\\b", "", "a|ab"]
TEXTS = ["", "ab", "abc\n", "éÉé b", "xx ax", "日本語 a"]


def test_private_api_is_there() -> None:
    """Fails loudly when a google-re2 release changes _Anchor or the RE2 object's Match:
    then revisit the pin in pyproject (matching still works, three times slower)."""
    assert regex.PRIVATE_API, f"google-re2 {getattr(re2, '__version__', '?')}: private RE2 API changed"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_public_fallback_gives_the_private_spans(pattern: str) -> None:
    compiled = re2.compile(pattern, regex._OPTIONS)
    public = regex._PublicSpans(compiled)
    for text in TEXTS:
        data = text.encode()
        for start in range(len(data) + 1):
            if start < len(data) and data[start] & 0xC0 == 0x80:
                continue  # find_all only ever starts at character boundaries
            want = tuple(compiled._regexp.Match(re2._Anchor.UNANCHORED, data, start, len(data))[0])
            assert tuple(public.Match(None, data, start, len(data))[0]) == want, (pattern, text, start)
