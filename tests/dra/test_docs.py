"""Every DRA command in docs/dra.md and the README runs as written, with the output the docs show."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRA_DOC = ROOT / "docs" / "dra.md"
README = ROOT / "README.md"
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def documented_runs() -> list[tuple[str, str]]:
    """``$ command`` lines of docs/dra.md with the output lines printed under them."""
    runs: list[tuple[str, str]] = []
    for block in FENCE.findall(DRA_DOC.read_text()):
        for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            command, _, output = chunk.partition("\n")
            runs.append((command, output))
    return runs


def readme_commands() -> list[str]:
    """The README's DRA block: a ``cd`` then commands, each with a trailing comment."""
    section = README.read_text().split("## DRA\n", 1)[1]
    return [line.split("  #")[0].strip() for line in FENCE.findall(section)[0].splitlines()]


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command through a shell (for ``<``), ``kubedevice`` being this interpreter's module."""
    words = shlex.split(command)
    assert words[0] == "kubedevice", command
    tail = command[len("kubedevice") :]
    return subprocess.run(
        f"{shlex.quote(sys.executable)} -m kubedevice{tail}",
        shell=True,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_the_docs_show_commands() -> None:
    commands = [c for c, _ in documented_runs()]
    for verb in ("validate", "explain", "allocate", "slices", "cel", "convert"):
        assert any(c.startswith(f"kubedevice dra {verb}") for c in commands), verb


@pytest.mark.parametrize(("command", "output"), documented_runs(), ids=[c for c, _ in documented_runs()])
def test_documented_command_prints_what_the_doc_shows(command: str, output: str) -> None:
    result = run(command, ROOT)
    assert "Traceback" not in result.stderr
    assert result.stdout + result.stderr == output, f"{command}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def test_readme_dra_commands_run() -> None:
    first, *commands = readme_commands()
    assert first == "cd examples/dra" and len(commands) == 10
    for command in commands:
        result = run(command, ROOT / "examples" / "dra")
        assert result.returncode == 0, f"{command}: {result.stderr}"
        assert result.stdout and not result.stderr, command
