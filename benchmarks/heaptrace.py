"""Run a Python program with its heap recorded: ``python heaptrace.py OUT.jsonl -m module args...``.

The soak uses it to tell a leak in our code from allocator growth. Every INTERVAL seconds one
JSON line goes to OUT: the RSS; what Python objects hold (tracemalloc: a leak in Python code
grows here); glibc malloc's bytes in use and free-but-kept (``mallinfo2``: a native leak grows
the first, fragmentation the second); and the ten allocation sites that grew most since the
first record. tracemalloc slows the program, so figures from a traced run are for memory only.
"""

from __future__ import annotations

import ctypes
import json
import os
import runpy
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from procstat import sample  # beside this script: python puts its directory on the path

INTERVAL = float(os.environ.get("HEAPTRACE_INTERVAL", "60"))
FRAMES = 4


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _malloc() -> dict[str, int]:
    """glibc's own accounting (all arenas): in use, free but kept, and mmapped blocks."""
    try:
        info = ctypes.CDLL(None).mallinfo2
    except AttributeError:  # not glibc 2.33+
        return {}
    info.restype = _MallInfo2
    got = info()
    return {
        "malloc_in_use_kib": got.uordblks // 1024,
        "malloc_free_kib": got.fordblks // 1024,
        "malloc_mmap_kib": got.hblkhd // 1024,
    }


_OWN = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]


def _record(out: Path, started: float, baseline: Any) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(_OWN)
    grown = [stat for stat in snapshot.compare_to(baseline, "traceback") if stat.size_diff > 0][:10]
    current, _peak = tracemalloc.get_traced_memory()
    row = {
        "at": round(time.monotonic() - started, 1),
        "rss_kib": sample(os.getpid(), 0).rss_kib,
        "python_kib": current // 1024,
        **_malloc(),
        "grown": [
            {
                "kib": stat.size_diff // 1024,
                "count": stat.count_diff,
                "where": [f"{frame.filename}:{frame.lineno}" for frame in stat.traceback],
            }
            for stat in grown
        ],
    }
    with out.open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def _recorder(out: Path) -> None:
    """The first record is the baseline: start-up allocations are not growth."""
    started = time.monotonic()
    time.sleep(INTERVAL)
    baseline = tracemalloc.take_snapshot().filter_traces(_OWN)
    _record(out, started, baseline)
    while True:
        time.sleep(INTERVAL)
        _record(out, started, baseline)


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit(__doc__.splitlines()[0])
    out, module = Path(sys.argv[1]), sys.argv[3]
    tracemalloc.start(FRAMES)
    threading.Thread(target=_recorder, args=(out,), daemon=True, name="heaptrace").start()
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
