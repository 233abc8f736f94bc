"""DEVELOPERS.md's module map ("Shape of the code") matches the tree: every module of
``src/kubedevice`` is named in the row of its package, and every package or module a row is
about exists. A module added without a line in the map, or a row left behind by a move, fails."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "kubedevice"
GENERATED = re.compile(r"_pb2(_grpc)?\.py$")


def rows() -> dict[str, str]:
    """Each row of the map by the names of its first cell (``dra/live``, ``cli.py``)."""
    text = (ROOT / "DEVELOPERS.md").read_text()
    table = text[text.index("## Shape of the code") : text.index("### Adding a device source")]
    found: dict[str, str] = {}
    for line in table.splitlines():
        if line.startswith("| `"):
            first, rest = line[2:].split(" | ", 1)
            for name in re.findall(r"`([^`]+)`", first):
                found[name.rstrip("/")] = rest
    return found


def named(text: str) -> set[str]:
    """The module names a row's text gives in backticks: ``pools``, ``base.py``, ``dra/``, ``a/b``."""
    names = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        for word in re.split(r"[\s,()]+", quoted):
            name = word.strip(".:").removesuffix(".py").rstrip("/")
            names.update({name, name.rpartition("/")[2]})
    return names


def modules() -> list[tuple[str, ...]]:
    return [
        path.relative_to(PACKAGE).with_suffix("").parts
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py") and not GENERATED.search(path.name)
    ]


def test_every_module_is_named_in_its_package_row() -> None:
    table = rows()
    missing = []
    for parts in modules():
        keys = ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]
        row = next((k for k in keys if k in table or f"{k}.py" in table), None)
        if row is None:
            missing.append(f"{'/'.join(parts)}.py: no row")
        elif row != "/".join(parts) and parts[-1] not in named(table.get(row) or table[f"{row}.py"]):
            missing.append(f"{'/'.join(parts)}.py: not named in the row of {row}/")
    assert not missing, missing


def test_every_row_is_about_something_that_exists() -> None:
    gone = [k for k in rows() if not (PACKAGE / k).is_dir() and not (PACKAGE / k).with_suffix(".py").is_file()
            and not (PACKAGE / k).is_file()]  # fmt: skip
    assert not gone, gone
