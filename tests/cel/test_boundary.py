"""The generic engine stands alone: kubedevice.cel never imports kubedevice.dra (DRA's
environment builds on the engine, as k8s.io/dynamic-resource-allocation/cel on
k8s.io/apiserver/pkg/cel, never the other way round). Its imports are one of the contracts of
``.importlinter`` (tests/test_import_contracts.py); here, what importing it loads at run time."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_engine_loads_nothing_of_dra() -> None:
    code = "import sys, kubedevice.cel; print(sorted(m for m in sys.modules if m.startswith('kubedevice.dra')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
