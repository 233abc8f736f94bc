#!/usr/bin/env python3
"""Soak: hotplug churn, health flapping and Allocate load on one ``kubedevice serve`` for an hour.

    python benchmarks/soak.py                  # 1 hour (not run in CI)
    python benchmarks/soak.py --minutes 2      # a short run
    python benchmarks/soak.py --trace-memory heap.jsonl   # and record the daemon's heap

Every step changes the devices under the host root (ttyUSB nodes appear and vanish) and flips
one device's health (an exec check tests a flag file), then waits until our kubelet simulator's
capacity and allocatable show exactly that state: a step that does not converge within 5 s is a
missed update. Meanwhile a client calls Allocate on a static resource in a loop. The daemon's
RSS, threads and fds are sampled every 10 s; a leak shows as a positive slope after warm-up.
With ``--trace-memory`` the daemon runs under heaptrace.py, and the slopes of what Python
objects hold and of glibc's in-use and free-but-kept bytes tell a leak from allocator growth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpc import aio
from procstat import Sample, noise, percentile, sample, slope, trend

from kubedevice.api import pb, pb_grpc
from kubedevice.kubelet import KubeletSimulator
from kubedevice.names import endpoint_for

SERIAL, STATIC = "example.com/serial", "example.com/null"
MAX_DEVICES = 6
CONVERGE_S = 5.0


def config(flags: Path) -> str:
    return f"""\
resources:
  - name: {SERIAL}
    glob: {{paths: ["/dev/ttyUSB*"]}}
    health:
      interval_seconds: 0.2
      failure_threshold: 1
      checks:
        - {{type: exec, argv: [sh, -c, "test ! -e {flags}/$0", "{{id}}"], timeout_seconds: 2}}
  - name: {STATIC}
    static: {{count: 4, paths: [/dev/null]}}
"""


async def allocate_load(socket: Path, stop: asyncio.Event, latencies: list[float]) -> None:
    async with aio.insecure_channel(f"unix://{socket}") as channel:
        stub = pb_grpc.DevicePluginStub(channel)
        ids = [d.ID for d in (await stub.ListAndWatch(pb.Empty()).read()).devices]
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids[:1])])
        while not stop.is_set():
            started = time.perf_counter()
            await stub.Allocate(request)
            latencies.append((time.perf_counter() - started) * 1e6)
            await asyncio.sleep(0.005)


HERE = Path(__file__).resolve().parent


async def soak(minutes: float, work: Path, heap: Path | None) -> None:
    host, flags, plugin_dir = work / "host", work / "flags", work / "plugins"
    (host / "dev").mkdir(parents=True)
    flags.mkdir()
    (host / "dev" / "null").touch()
    (work / "config.yaml").write_text(config(flags))
    sim = KubeletSimulator(plugin_dir, grace_period=60.0)
    await sim.start()
    log = (work / "daemon.log").open("wb")
    traced = [str(HERE / "heaptrace.py"), str(heap)] if heap else []
    daemon = await asyncio.create_subprocess_exec(
        sys.executable,
        *traced,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(work / "config.yaml"),
        "--plugin-dir",
        str(plugin_dir),
        "--host-root",
        str(host),
        "--log-level",
        "warning",
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    rng = random.Random(1)
    present: set[int] = set()
    unhealthy: set[int] = set()
    steps = missed = 0
    converge_ms: list[float] = []
    latencies: list[float] = []
    samples: list[Sample] = []
    stop = asyncio.Event()
    try:
        await sim.wait_until(lambda: sim.allocatable().get(STATIC) == 4, 30)
        load = asyncio.create_task(allocate_load(plugin_dir / endpoint_for(STATIC), stop, latencies))
        started = time.monotonic()
        next_sample = next_report = started
        while time.monotonic() - started < minutes * 60:
            if daemon.returncode is not None:
                raise SystemExit(f"the daemon exited ({daemon.returncode}) after {steps} steps; see {work}/daemon.log")
            if time.monotonic() >= next_sample:
                samples.append(sample(daemon.pid, time.monotonic() - started))
                next_sample += 10
            if time.monotonic() >= next_report:  # a partial record survives an interrupted hour
                last = samples[-1]
                print(
                    f"  {last.at / 60:5.1f} min: {steps} steps, {missed} missed, RSS {last.rss_kib / 1024:.1f} MiB,"
                    f" threads {last.threads}, fds {last.fds}",
                    flush=True,
                )
                next_report += 300
            _churn(rng, host, flags, present, unhealthy)
            steps += 1
            want = (len(present), len(present - unhealthy))
            began = time.monotonic()
            try:
                await sim.wait_until(lambda w=want: _state(sim) == w, CONVERGE_S)
                converge_ms.append((time.monotonic() - began) * 1000)
            except TimeoutError:
                missed += 1
                print(f"missed: want {want}, kubelet has {_state(sim)}", flush=True)
        stop.set()
        await load
        samples.append(sample(daemon.pid, time.monotonic() - started))
    finally:
        stop.set()
        daemon.terminate()
        await asyncio.wait_for(daemon.wait(), 15)
        await sim.stop()
        log.close()
    print(f"soak {minutes:g} min: {steps} steps of hotplug churn + health flips, {missed} missed updates")
    print(f"  converged ms: p50 {percentile(converge_ms, 0.5):7.1f}  p99 {percentile(converge_ms, 0.99):7.1f}")
    print(
        f"  Allocate under churn µs ({len(latencies)} calls): p50 {percentile(latencies, 0.5):7.0f}"
        f"  p99 {percentile(latencies, 0.99):7.0f}"
    )
    print(trend(samples, 3600, "s"))
    if heap:
        print(heap_trend(heap))
    print(noise())


def heap_trend(heap: Path) -> str:
    """Slopes per hour of the heaptrace records, and the sites that grew most by the last one."""
    rows = [json.loads(line) for line in heap.read_text().splitlines()]
    if len(rows) < 2:
        return f"  heap: {len(rows)} record(s) in {heap}, too few for a slope"
    xs = [row["at"] for row in rows]
    lines = [f"  heap (from {heap}, first record = baseline after 1 min):"]
    for key in ("rss_kib", "python_kib", "malloc_in_use_kib", "malloc_free_kib", "malloc_mmap_kib"):
        if key in rows[0]:
            ys = [row[key] / 1024 for row in rows]
            lines.append(
                f"    {key[:-4]:<14} first {ys[0]:7.1f}  last {ys[-1]:7.1f} MiB"
                f"  slope {slope(xs, ys) * 3600:+7.3f} MiB per 3600 s"
            )
    for grown in rows[-1]["grown"][:5]:
        where = " <- ".join(grown["where"][-2:])
        lines.append(f"    grew {grown['kib']:6d} KiB in {grown['count']:+6d} blocks at {where}")
    return "\n".join(lines)


def _churn(rng: random.Random, host: Path, flags: Path, present: set[int], unhealthy: set[int]) -> None:
    """Plug or unplug one node, and flip one present device's health."""
    n = rng.randrange(MAX_DEVICES)
    node = host / "dev" / f"ttyUSB{n}"
    if n in present:
        node.unlink()
        present.discard(n)
    else:
        node.touch()
        present.add(n)
    if present:
        flip = rng.choice(sorted(present))
        flag = flags / _key(flip)
        if flip in unhealthy:
            flag.unlink(missing_ok=True)
            unhealthy.discard(flip)
        else:
            flag.touch()
            unhealthy.add(flip)
    unhealthy &= present
    for stale in {p.name for p in flags.iterdir()} - {_key(u) for u in unhealthy}:
        (flags / stale).unlink()


def _key(n: int) -> str:
    return f"ttyUSB{n}"


def _state(sim: KubeletSimulator) -> tuple[int, int]:
    return sim.capacity().get(SERIAL, 0), sim.allocatable().get(SERIAL, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--trace-memory", type=Path, metavar="FILE", help="record the daemon's heap here (JSON lines)")
    args = parser.parse_args()
    heap = args.trace_memory.resolve() if args.trace_memory else None
    if heap:
        heap.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kd-soak-") as tmp:
        asyncio.run(soak(args.minutes, Path(tmp), heap))


if __name__ == "__main__":
    main()
