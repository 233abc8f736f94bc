"""Every command's help reads as text: no reST markup, no Python type noise, whichever typer runs it.

The commands are found by walking the command tree typer builds (``tests/cli/tree.py``), the
tools loaded as ``kubedevice`` loads them, so a new command or subcommand is checked without
being listed here.
"""

from __future__ import annotations

import re

import pytest

from kubedevice.commands import run
from tests.cli.tree import commands

# typer's own metavars are the Python type in angle brackets (<bool>, <path>, <list[Path]>,
# <int range>); ours are upper case (FILE, DIR, SECONDS) or the choices (<text|json>).
TYPE_METAVAR = re.compile(r"<[a-z_][a-z_ ]*(\[[^\]]*\])?>")
NOISE = ("list[", "Optional[", "NoneType", "PosixPath(", "``", ":func:", ":mod:", "[bold", "--install-completion")


def command_paths() -> list[list[str]]:
    """Every command and subcommand, as the words that name it after ``kubedevice``."""
    return [list(command.path) for command in commands()]


COMMANDS = command_paths()


def test_the_walk_finds_every_known_command() -> None:
    known = ["serve", "demo", "discover", "kubelet", "check", "dra", "dra validate", "dra explain", "dra allocate"]
    found = {" ".join(path) for path in COMMANDS}
    assert set(known) <= found, sorted(found)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda path: " ".join(path) or "kubedevice")
def test_help_is_plain_text(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    with pytest.raises(SystemExit) as exited:
        run([*command, "--help"])
    out, err = capsys.readouterr()
    assert exited.value.code == 0, err
    assert out.startswith(" ".join(["Usage: kubedevice", *command]) + " "), out
    assert TYPE_METAVAR.search(out) is None, out
    assert not [noise for noise in NOISE if noise in out], out
    help_rows = [row.strip() for row in out.splitlines() if row.lstrip().startswith("-") and "--help" in row]
    assert len(help_rows) == 1 and re.fullmatch(r"-h, --help +Show this message and exit\.", help_rows[0]), help_rows
