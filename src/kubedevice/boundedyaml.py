"""YAML from files we do not trust, within bounds: size, nesting depth, alias expansion.

PyYAML recurses once per nesting level, so 100,000 ``[`` end in a RecursionError traceback;
and it shares aliased nodes, so a 400-byte "billion laughs" file becomes 10^9 values for
whatever walks it next (pydantic would run for hours). The limits are far above any real
config or DRA manifest, and each failure is an ordinary YAML error with a line and column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 100
MAX_VALUES = 1_000_000  # after alias expansion


class InputError(OSError):
    """A file too large or not UTF-8 (an ``OSError``, so callers report it as unreadable)."""


def read_text(path: Path | str) -> str:
    """The file's text, refusing more than :data:`MAX_BYTES` (also from a FIFO or a device)."""
    with open(path, "rb") as handle:
        blob = handle.read(MAX_BYTES + 1)
    if len(blob) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8: byte 0x{blob[err.start]:02x} at offset {err.start}") from None


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader refusing documents nested deeper than :data:`MAX_DEPTH` or expanding past :data:`MAX_VALUES`."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Node | None:
        node: Node | None = super().compose_document()
        if node is not None:
            _Expansion().measure(node, 1)
        return node


class _Expansion:
    """The size and depth a node graph has once aliases are expanded (memoised, so linear)."""

    def __init__(self) -> None:
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
        if size > MAX_VALUES:
            raise ComposerError(None, None, f"aliases expand to more than {MAX_VALUES:,} values", node.start_mark)
        self._sizes[key] = size
        return size


def load(text: str) -> Any:
    """``yaml.safe_load`` within the bounds."""
    return yaml.load(text, Loader=BoundedLoader)
