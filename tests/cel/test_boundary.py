"""The generic engine stands alone: kubedevice.cel never imports kubedevice.dra (DRA's
environment builds on the engine, as k8s.io/dynamic-resource-allocation/cel on
k8s.io/apiserver/pkg/cel, never the other way round)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kubedevice.cel

ENGINE = Path(kubedevice.cel.__file__).resolve().parent


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved against kubedevice.cel."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "kubedevice.cel" if node.level == 1 else "kubedevice" if node.level == 2 else ""
            module = ".".join(p for p in (base, node.module or "") if p) if node.level else node.module or ""
            found += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return found


def test_no_engine_module_imports_dra() -> None:
    offenders = {
        path.name: [m for m in _imports(path) if m == "kubedevice.dra" or m.startswith("kubedevice.dra.")]
        for path in sorted(ENGINE.glob("*.py"))
    }
    assert not {name: found for name, found in offenders.items() if found}


def test_importing_the_engine_loads_nothing_of_dra() -> None:
    code = "import sys, kubedevice.cel; print(sorted(m for m in sys.modules if m.startswith('kubedevice.dra')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
