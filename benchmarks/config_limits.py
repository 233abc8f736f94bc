"""Reading a config at and past its limits: ``python benchmarks/config_limits.py``.

Before issue #27, 200,000 env entries took 52 s and 367 MB in ``kubedevice discover`` (85 s to parse
alone on a loaded machine), and a 5 MB env value was accepted, then failed every Allocate at the
kubelet. Now a config holds at most 10,000 values (refused while it is read) and the Allocate answer
is measured when it is read. Per case, in a fresh process each time: ``discover``'s CPU time
(user + system, which a loaded machine inflates less than wall time), its wall time and peak RSS,
and the CPU time of the config work alone (read, discover, measure; imports excluded). Medians of
``--runs`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HEAD = "resources:\n  - name: example.com/x\n    static: {count: 1, paths: [/dev/null]}\n    env:\n"
CASES = {
    "200,000 env entries (refused)": _HEAD + "".join(f"      V{i}: x\n" for i in range(200_000)),
    "4,990 env entries (10,000 values, the limit)": _HEAD + "".join(f"      V{i}: x\n" for i in range(4_990)),
    "31 env values of 130 KB (a 4 MB answer, the limit)": _HEAD
    + "".join(f"      V{i}: '{'x' * 130_000}'\n" for i in range(31)),
}
_WORK = """
import sys, time
from pathlib import Path
from kubedevice.config import ConfigError, load_config
from kubedevice.sources import survey
from kubedevice.sources.cli import _check_limits
start = time.process_time()
try:
    config = load_config(Path(sys.argv[1]))
    _check_limits(survey(config, "/"), Path("/"))
    verdict = "read"
except (ConfigError, ValueError) as error:
    verdict = "refused: " + str(error).split(": ", 1)[1][:60]
print(time.process_time() - start, verdict)
"""


def discover(config: Path) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and peak RSS (KiB) of one ``kubedevice discover`` (this child's own)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "kubedevice", "discover", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0  # reaped by wait4
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - start, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    results = []
    with tempfile.TemporaryDirectory() as work:
        for name, text in CASES.items():
            config = Path(work) / "config.yaml"
            config.write_text(text)
            measured = [discover(config) for _ in range(runs)]
            alone = [subprocess.run([sys.executable, "-c", _WORK, str(config)], capture_output=True, text=True,
                                    check=True).stdout.split(" ", 1) for _ in range(runs)]  # fmt: skip
            results.append(
                {
                    "case": name,
                    "file_bytes": len(text),
                    "discover_cpu_s": round(statistics.median(m[0] for m in measured), 3),
                    "discover_wall_s": round(statistics.median(m[1] for m in measured), 3),
                    "peak_rss_mib": round(max(m[2] for m in measured) / 1024, 1),
                    "config_work_cpu_s": round(statistics.median(float(a[0]) for a in alone), 3),
                    "verdict": alone[0][1].strip(),
                }
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
