"""``kubedevice serve --claims-dir``: the testing-only claim source is refused where it makes no sense."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", *args],
        check=False, capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("config", "extra", "message"),
    [
        ("dra-null.yaml", ["--node", "n1", "--claims-dir", "/nonexistent-claims"],
         "kubedevice: serve: --claims-dir /nonexistent-claims is not a directory"),
        ("null.yaml", ["--claims-dir", "/tmp"],
         "kubedevice: serve: --claims-dir is for a config with a 'dra' section: device plugins get no ResourceClaims"),
    ],
)  # fmt: skip
def test_claims_dir_errors(config: str, extra: list[str], message: str) -> None:
    done = _serve("--config", str(ROOT / "examples" / config), *extra)
    assert (done.returncode, done.stderr.strip()) == (2, message)
