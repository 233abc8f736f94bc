"""Compile errors in cel-go's display form, as the API server returns them.

``Issues.String()`` prints ``ERROR: <input>:L:C: message`` followed by the source line and a
caret under the column (``.`` per preceding code point, full-width for multi-byte ones).
"""

from __future__ import annotations

_MAX_SNIPPET = 16384  # cel-go's maxSnippetLength, in bytes


def display(source: str, offset: int | None, message: str) -> str:
    """cel-go's ``Error.ToDisplayString`` for an error at code point ``offset`` of ``source``."""
    if offset is None or offset < 0:
        return f"ERROR: <input>:-1:0: {message}"
    offset = min(offset, len(source))
    line_start = source.rfind("\n", 0, offset) + 1
    line_end = source.find("\n", offset)
    snippet = source[line_start:] if line_end < 0 else source[line_start:line_end]
    line = source.count("\n", 0, offset) + 1
    column = offset - line_start
    text = f"ERROR: <input>:{line}:{column + 1}: {message}"
    if len(snippet.encode("utf-8", "surrogatepass")) > _MAX_SNIPPET:
        return text
    snippet = snippet.replace("\t", " ")
    dots = "".join("\uff0e" if ord(c) > 0x7F else "." for c in snippet[:column])
    caret = "\uff3e" if column < len(snippet) and ord(snippet[column]) > 0x7F else "^"
    return f"{text}\n | {snippet}\n | {dots}{caret}"
