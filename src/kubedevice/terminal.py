"""Where a command's table goes: a terminal, drawn to its width, or a pipe or file, never wrapped.

Off a terminal rich cannot know a width and guesses 80 columns, folding long cells over several
lines: a resource name split in two in ``kubedevice discover > devices.txt`` is one grep can no
longer find. There a table is drawn as wide as its longest row instead. The file itself is
asked, not only rich: ``FORCE_COLOR`` (set in many CI environments) makes rich call a pipe a
terminal, but its width there is still a guess.
"""

from __future__ import annotations

from rich.console import Console
from rich.rule import Rule

UNBOUNDED = 1_000_000
"""Columns of the console off a terminal: more than any row holds, so none is folded."""


def on_terminal(console: Console) -> bool:
    isatty = getattr(console.file, "isatty", None)
    return console.is_terminal and isatty is not None and bool(isatty())


def table_console() -> Console:
    """stdout's console: the terminal's width on a terminal, no limit elsewhere."""
    console = Console()
    return console if on_terminal(console) else Console(width=UNBOUNDED)


RULE_WIDTH = 80
"""Columns of a heading's rule off a terminal: a rule has no longest row, it fills the width."""


def heading(console: Console, title: str) -> None:
    """A rule with ``title``: across the terminal, or :data:`RULE_WIDTH` columns into a pipe or file
    (an unbounded console would draw it a million characters wide)."""
    width = console.width if console.width < UNBOUNDED else RULE_WIDTH
    console.print(Rule(title), width=width)
