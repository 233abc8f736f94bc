"""The import contracts of ``.importlinter`` hold, and would catch a wrong import.

``lint-imports`` (scripts/test.sh runs it beside ruff and mypy) checks the tree as it is; here
each contract is also shown to fail: a copy of the package with one import that breaks it.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kubedevice

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
PACKAGE = Path(kubedevice.__file__).resolve().parent


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package found in ``src`` (first on the path, before the installed one)."""
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "500"}  # one line per import, not wrapped
    run = "from importlinter.cli import lint_imports_command; lint_imports_command()"  # the lint-imports script
    command = [sys.executable, "-c", run, str(CONFIG), "--no-cache"]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=src, timeout=120, check=False)


def test_the_tree_keeps_every_contract() -> None:
    done = lint_imports(PACKAGE.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_every_offline_dra_module_is_under_its_contract() -> None:
    """The contract lists the offline modules one by one (a forbidden contract over kubedevice.dra
    would take in the driver): a new module must be added to it."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    listed = set(parser["importlinter:contract:offline-dra"]["source_modules"].split())
    offline = {
        f"kubedevice.dra.{path.stem if path.suffix else path.name}"
        for path in (PACKAGE / "dra").iterdir()
        if path.name not in {"__init__.py", "driver", "__pycache__"} and (path.suffix == ".py" or path.is_dir())
    }
    assert listed == offline


BROKEN = {
    "cel-alone": ("cel/engine.py", "import kubedevice.dra.models"),
    "offline-dra": ("dra/pods.py", "import kubedevice.dra.driver.state"),
    "simulators-not-driver": ("conformance/rules.py", "import kubedevice.dra.driver.cdi"),  # above it in the layers
    "layers": ("device.py", "import kubedevice.plugin.server"),
}


@pytest.mark.parametrize("contract", sorted(BROKEN))
def test_a_wrong_import_breaks_its_contract(contract: str, tmp_path: Path) -> None:
    module, line = BROKEN[contract]
    copy = tmp_path / "kubedevice"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # the wrong import\n")
    done = lint_imports(tmp_path)
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    name = parser[f"importlinter:contract:{contract}"]["name"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{name} BROKEN" in done.stdout
    assert "1 broken" in done.stdout  # that one contract, no other
