"""YAML from files we do not trust, within bounds: size, nesting depth, values, alias expansion.

PyYAML recurses once per nesting level, so 100,000 ``[`` end in a RecursionError traceback;
and it shares aliased nodes, so a 400-byte "billion laughs" file becomes 10^9 values for
whatever walks it next (pydantic would run for hours). The limits are far above any real
config or DRA manifest, and each failure is an ordinary YAML error with a line and column.

Scanning and parsing run in libyaml when PyYAML has it (its wheels do): PyYAML's own scanner
reads one character at a time in Python, 2 s for a 4 MB scalar and 25 s for 200,000 short
map entries on one core, which libyaml does 4 to 50 times faster. The node tree is still built
by PyYAML's composer, in Python, so that the depth and value limits apply while it is built and
a file past them is refused without reading the rest; PyYAML's own check for characters YAML
forbids runs first, as it does without libyaml.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.reader import Reader, ReaderError
from yaml.resolver import Resolver

from .errors import KubedeviceError

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 100
MAX_VALUES = 1_000_000  # after alias expansion
_LIBYAML_DEPTH = "exceeded maximum nesting depth"


class InputError(KubedeviceError, OSError):
    """A file too large or not UTF-8 (an ``OSError``, so callers report it as unreadable)."""


def read_text(path: Path | str) -> str:
    """The file's text, refusing more than :data:`MAX_BYTES` (also from a FIFO or a device)."""
    with open(path, "rb") as handle:
        return _bounded_text(handle)


def read_input(path: Path | str) -> str:
    """:func:`read_text`, with ``-`` for standard input as kubectl's ``-f -``: for the objects
    the ``dra`` commands read (``kubectl get resourceslices -o yaml | kubedevice dra available -``)."""
    if str(path) != "-":
        return read_text(path)
    if sys.stdin is None:  # started with standard input closed
        raise InputError("standard input is closed")
    return _whole_input(sys.stdin)


@functools.lru_cache(maxsize=1)
def _whole_input(stream: TextIO) -> str:
    """A standard input's text, read once and kept: a command reads its files twice (parsed
    before the cluster is asked, then decoded for its release), and ``--class - --slices -``
    means the same input for both. Keyed by the stream, so a new ``sys.stdin`` is read anew."""
    return _bounded_text(stream.buffer)


def _bounded_text(handle: BinaryIO) -> str:
    blob = handle.read(MAX_BYTES + 1)
    if len(blob) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8: byte 0x{blob[err.start]:02x} at offset {err.start}") from None


def _check_printable(text: str) -> None:
    """PyYAML's reader check, which libyaml's would only make once it reaches the character."""
    match = Reader.NON_PRINTABLE.search(text)
    if match:
        raise ReaderError("<input>", match.start(), ord(match.group()), "unicode", "special characters are not allowed")


def _libyaml_loader() -> type[yaml.SafeLoader]:
    """libyaml's events, PyYAML's composer (first in the MRO), constructor and resolver; PyYAML's
    SafeLoader when PyYAML was built without libyaml (same results, slower)."""
    try:
        from yaml._yaml import CParser  # noqa: PLC0415 - absent without libyaml
    except ImportError:  # pragma: no cover - every supported wheel has libyaml
        return yaml.SafeLoader

    class Loader(Composer, CParser, SafeConstructor, Resolver):
        def __init__(self, stream: str) -> None:
            _check_printable(stream)
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return Loader  # type: ignore[return-value]  # a SafeLoader in all but its parser


if TYPE_CHECKING:
    _Loader = yaml.SafeLoader
else:
    _Loader = _libyaml_loader()


class BoundedLoader(_Loader):
    """A safe loader refusing documents nested deeper than :data:`MAX_DEPTH` or holding more than
    :attr:`max_values` values (counted as they are read, and again with aliases expanded)."""

    max_values = MAX_VALUES
    _depth = 0
    _values = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._values += 1
        if self._values > self.max_values:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise ComposerError(None, None, f"more than {self.max_values:,} values", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node | None:
        try:
            node: Node | None = super().compose_document()
        except MarkedYAMLError as err:
            if err.problem != _LIBYAML_DEPTH:
                raise
            # libyaml scans deep flow collections ahead and stops at its own depth (1,000): one message
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", err.problem_mark) from None
        if node is not None:
            _Expansion(self.max_values).measure(node, 1)
        return node


class _Expansion:
    """The size and depth a node graph has once aliases are expanded (memoised, so linear)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._sizes: dict[int, int | None] = {}  # None: being measured (a recursive alias)

    def measure(self, node: Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ComposerError(None, None, f"aliases nest deeper than {MAX_DEPTH} levels", node.start_mark)
        key = id(node)
        if key in self._sizes:
            size = self._sizes[key]
            if size is None:
                raise ComposerError(None, None, "recursive alias", node.start_mark)
            return size
        self._sizes[key] = None
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        size = 1 + sum(self.measure(child, depth + 1) for child in children)
        if size > self._limit:
            raise ComposerError(None, None, f"aliases expand to more than {self._limit:,} values", node.start_mark)
        self._sizes[key] = size
        return size


def load(text: str) -> Any:
    """``yaml.safe_load`` within the bounds."""
    return yaml.load(text, Loader=BoundedLoader)
