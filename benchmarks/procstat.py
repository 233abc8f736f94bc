"""What /proc says about a process (RSS, threads, fds), and a least-squares slope, for benchmarks."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    at: float  # x: restarts done, seconds elapsed, ...
    rss_kib: int
    threads: int
    fds: int


def sample(pid: int, at: float) -> Sample:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.split()
    return Sample(at, int(fields["VmRSS"][0]), int(fields["Threads"][0]), len(os.listdir(f"/proc/{pid}/fd")))


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def trend(samples: Sequence[Sample], per: float, unit: str) -> str:
    """RSS, threads and fds: first, last, and the slope per ``per`` units of x (after warm-up)."""
    steady = samples[len(samples) // 5 :] or samples  # the first fifth warms caches and pools
    xs = [s.at for s in steady]
    lines = []
    for name, label, scale in (("rss_kib", "RSS MiB", 1024), ("threads", "threads", 1), ("fds", "fds", 1)):
        ys = [getattr(s, name) / scale for s in steady]
        first, last = getattr(samples[0], name) / scale, getattr(samples[-1], name) / scale
        lines.append(
            f"  {label:8} first {first:8.1f}  last {last:8.1f}  slope after warm-up {slope(xs, ys) * per:+8.3f}"
            f" per {per:g} {unit}"
        )
    return "\n".join(lines)


def noise() -> str:
    load = os.getloadavg()
    return (
        f"machine: {os.cpu_count()} CPUs shared with other builds and tests; "
        f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min) at the end"
    )
