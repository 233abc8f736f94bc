"""Go's ``%q`` (strconv.Quote): error messages we mirror from Kubernetes quote strings this way."""

from __future__ import annotations

_NAMED = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    '"': '\\"',
    "\\": "\\\\",
}


def quote(text: str) -> str:
    """Double-quoted, with Go's escapes; printable Unicode is left as is."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the common case, without a loop
    return '"' + "".join(_rune(c) for c in text) + '"'


def _rune(c: str) -> str:
    named = _NAMED.get(c)
    if named is not None:
        return named
    if c.isprintable() or c == " ":
        return c
    code = ord(c)
    if code < 0x80:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, decoded with surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:  # a lone surrogate is not UTF-8: Go escapes its bytes one by one
        return "".join(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogatepass"))
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def quote_bytes(data: bytes) -> str:
    """``%q`` of a Go string holding arbitrary bytes: invalid UTF-8 shows as ``\\xNN``."""
    return quote(data.decode("utf-8", "surrogateescape"))


def quote_list(values: list[str] | tuple[str, ...]) -> str:
    """``%q`` of a string slice: ``["a" "b"]``."""
    return "[" + " ".join(map(quote, values)) + "]"


def go_bytes(text: str) -> bytes:
    """The bytes a Go string holds for ``text``: UTF-8, a byte that was not UTF-8 (decoded with
    surrogateescape) as that byte, another lone surrogate as the U+FFFD Go's JSON decoder puts in
    its place. ``.decode("utf-8", "surrogateescape")`` turns any slice of them back into text."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return b"".join(_go_char(c) for c in text)


def _go_char(c: str) -> bytes:
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:
        return bytes([code - 0xDC00])
    return "\ufffd".encode() if 0xD800 <= code <= 0xDFFF else c.encode()


def go_len(text: str) -> int:
    """Go's ``len`` of the string: its bytes (:func:`go_bytes`), which every Kubernetes length limit counts."""
    return len(text) if text.isascii() else len(go_bytes(text))
