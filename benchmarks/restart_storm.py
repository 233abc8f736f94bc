#!/usr/bin/env python3
"""1,000 kubelet restarts against one ``kubedevice serve``: every one re-registered?

    python benchmarks/restart_storm.py             # 1,000 restarts, about 2 minutes
    python benchmarks/restart_storm.py --restarts 100

Our kubelet simulator restarts as the kubelet does (stop: streams end, kubelet.sock removed;
start: every socket in the directory wiped, a new kubelet.sock). For each restart we wait until
every resource has Registered again and its devices are allocatable, and record both latencies
from the new kubelet.sock. The daemon's RSS, threads and open fds are sampled every 20 restarts;
a leak shows as a positive slope after warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from procstat import Sample, noise, percentile, sample, trend

from kubedevice.kubelet import KubeletSimulator

RESOURCES = {"example.com/null": 8, "example.com/other": 2}
TIMEOUT = 30.0


def config() -> str:
    return "resources:\n" + "".join(
        f"  - name: {name}\n    static: {{count: {count}, paths: [/dev/null]}}\n" for name, count in RESOURCES.items()
    )


async def storm(restarts: int, work: Path) -> None:
    plugin_dir = work / "plugins"
    (work / "config.yaml").write_text(config())
    sim = KubeletSimulator(plugin_dir, grace_period=60.0)
    await sim.start()
    log = (work / "daemon.log").open("wb")
    daemon = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(work / "config.yaml"),
        "--plugin-dir",
        str(plugin_dir),
        "--log-level",
        "warning",
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    registered_ms: list[float] = []
    restored_ms: list[float] = []
    samples: list[Sample] = []
    missed = 0
    try:
        await sim.wait_until(lambda: sim.allocatable() == RESOURCES, TIMEOUT)
        samples.append(sample(daemon.pid, 0))
        started = time.monotonic()
        for n in range(1, restarts + 1):
            await sim.restart()
            since = sim.kubelet_sock_created_at
            try:
                await sim.wait_until(lambda t=since: _restored(sim, t), TIMEOUT)
            except TimeoutError:
                missed += 1
                continue
            restored_ms.append((time.monotonic() - since) * 1000)
            latest = max(r.received_at for r in sim.registrations if r.received_at >= since)
            registered_ms.append((latest - since) * 1000)
            del sim.registrations[: -len(RESOURCES)]  # bounded memory on our side
            if n % 20 == 0:
                samples.append(sample(daemon.pid, n))
        took = time.monotonic() - started
    finally:
        daemon.terminate()
        await asyncio.wait_for(daemon.wait(), 15)
        await sim.stop()
        log.close()
    print(f"{restarts} kubelet restarts in {took:.1f} s; {len(RESOURCES)} resources each")
    print(f"  re-registered: {len(registered_ms)} of {restarts} (missed {missed} within {TIMEOUT:g} s)")
    for label, values in (("Register (last resource)", registered_ms), ("devices allocatable again", restored_ms)):
        print(
            f"  {label:26} ms: p50 {percentile(values, 0.5):7.2f}  p99 {percentile(values, 0.99):7.2f}"
            f"  max {max(values):7.2f}"
        )
    print(trend(samples, 1000, "restarts"))
    print(noise())


def _restored(sim: KubeletSimulator, since: float) -> bool:
    return sim.allocatable() == RESOURCES and _all_registered(sim, since)


def _all_registered(sim: KubeletSimulator, since: float) -> bool:
    names = {r.resource_name for r in sim.registrations if r.received_at >= since and r.error is None}
    return names >= set(RESOURCES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kd-storm-") as tmp:
        asyncio.run(storm(args.restarts, Path(tmp)))


if __name__ == "__main__":
    main()
