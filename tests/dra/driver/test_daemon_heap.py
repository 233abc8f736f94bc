"""The DRA daemon's start-up heap is frozen once the driver is first ready (``daemon._ready``).

Unfrozen, every full collection of ``serve``'s DRA process walked lightkube's models, pydantic's
schemas and grpc's modules again: 21-40 ms pauses inside NodePrepare/UnprepareResources calls,
which set the 32-claim unprepare's p99 (``benchmarks/dra_prepare.py``). Run in a process of its own:
a freeze is for good, and this test process's heap is not the daemon's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import gc
from kubedevice.dra.driver.daemon import _ready
from kubedevice.metrics import Readiness
readiness = Readiness(["d.example.com"])
_ready(readiness, "d.example.com", False)
before = gc.get_freeze_count()
_ready(readiness, "d.example.com", True)
frozen = gc.get_freeze_count()
_ready(readiness, "d.example.com", False)
_ready(readiness, "d.example.com", True)
print(before, frozen, gc.get_freeze_count(), readiness.ready())
"""


def test_the_start_up_heap_is_frozen_the_first_time_the_driver_is_ready() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr
    before, frozen, again, ready = done.stdout.split()
    assert int(before) == 0, "not before the driver is ready"
    assert int(frozen) > 10_000, "the daemon's modules and their objects"
    assert again == frozen, "once: later objects are collected as usual"
    assert ready == "True"
