"""The Python example in docs/sources.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "sources.md"


def test_docs_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert blocks, "docs/sources.md lost its example"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
