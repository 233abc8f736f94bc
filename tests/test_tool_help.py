"""The help of the simulator, the checker and the DRA tools reads as text: no reST markup, no type noise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

COMMANDS = [
    ["kubelet"],
    ["check"],
    ["dra"],
    ["dra", "validate"],
    ["dra", "explain"],
    ["dra", "allocate"],
    ["dra", "slices"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_is_plain_text(command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "``" not in text and ":func:" not in text and ":mod:" not in text
    option_rows = [line for line in text.splitlines() if "--" in line and "--help" not in line]
    for row in option_rows:
        assert "<bool>" not in row and "<path>" not in row and "<str>" not in row, row
