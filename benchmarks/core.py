"""Core runtime benchmarks: ``python benchmarks/core.py`` (add ``--quick`` for a smoke run).

Every plugin runs as its own process, the way the kubelet sees it; the kubelet side is the
simulator in this process. Prints median and p99 of each measurement against its target.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from grpc import aio

from kubedevice import Device
from kubedevice.allocation.policies import pack_numa
from kubedevice.api import pb, pb_grpc
from kubedevice.kubelet import KubeletSimulator
from kubedevice.names import endpoint_for

HERE = Path(__file__).resolve().parent
NULL_CONFIG = HERE.parent / "examples" / "null.yaml"
TOGGLE = "example.com/toggle"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(name: str, values_ms: Sequence[float], target: str, ok: bool, unit: str = "ms") -> None:
    verdict = "PASS" if ok else "MISS"
    print(
        f"{name:<44} median {statistics.median(values_ms):9.3f} {unit}  p99 {percentile(values_ms, 0.99):9.3f} {unit}"
        f"  n={len(values_ms):<5} target {target:<12} {verdict}",
        flush=True,
    )


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


async def wait_registered(sim: KubeletSimulator, resource: str, count: int, timeout: float = 20.0) -> None:
    await sim.wait_until(lambda: sim.allocatable().get(resource) == count, timeout)


def spawn(args: Sequence[str], plugin_dir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBEDEVICE_PLUGIN_DIR": str(plugin_dir)}
    return subprocess.Popen(list(args), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def daemon_args(plugin_dir: Path) -> list[str]:
    return [sys.executable, "-m", "kubedevice", "serve", "--config", str(NULL_CONFIG), "--plugin-dir", str(plugin_dir)]


def toggle_args(plugin_dir: Path, count: int) -> list[str]:
    return [sys.executable, str(HERE / "toggle_plugin.py"), str(plugin_dir), str(count)]


async def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    await asyncio.to_thread(proc.wait, 10)


async def bench_startup_and_rss(runs: int) -> None:
    """Process start to the kubelet receiving Register, and idle RSS once registered."""
    startup, rss = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            sim = KubeletSimulator(Path(tmp))
            await sim.start()
            started = time.monotonic()
            proc = spawn(daemon_args(Path(tmp)), Path(tmp))
            await wait_registered(sim, "example.com/null", 4)
            startup.append(1000 * (sim.registrations[0].received_at - started))
            await asyncio.sleep(2.0)
            rss.append(rss_kib(proc.pid) / 1024)
            await stop(proc)
            await sim.stop()
    report("start to registered (kubedevice serve)", startup, "<= 500 ms", percentile(startup, 0.5) <= 500)
    report("idle RSS, 4 devices (MiB)", rss, "<= 30 MiB", statistics.median(rss) <= 30, unit="MiB")


def wall_ms(args: Sequence[str]) -> float:
    """Wall time of one short command, from spawn to exit."""
    started = time.perf_counter()
    subprocess.run(list(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return 1000 * (time.perf_counter() - started)


def bench_command_startup(runs: int) -> None:
    """``kubedevice --help`` against the bare interpreter and the daemon's own imports, interleaved."""
    commands = {
        "bare interpreter (python -c pass)": [sys.executable, "-c", "pass"],
        "serve's dependencies imported (floor)": [
            sys.executable,
            "-c",
            "import grpc, pydantic, yaml, inotify_simple, typer",
        ],
        "kubedevice --help": [sys.executable, "-m", "kubedevice", "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, args in commands.items():
            times[name].append(wall_ms(args))
    bare = statistics.median(times["bare interpreter (python -c pass)"])
    for name, values in times.items():
        ratio = statistics.median(values) / bare
        report(f"{name} ({ratio:.1f}x bare)", values, "-", True)


async def bench_reregistration(restarts: int) -> None:
    """New kubelet.sock to our Register call, over many kubelet restarts."""
    with tempfile.TemporaryDirectory() as tmp:
        sim = KubeletSimulator(Path(tmp))
        await sim.start()
        proc = spawn(daemon_args(Path(tmp)), Path(tmp))
        await wait_registered(sim, "example.com/null", 4)
        latencies = []
        for _ in range(restarts):
            before = len(sim.registrations)
            await sim.restart()
            await sim.wait_until(lambda n=before: len(sim.registrations) > n, 20.0)  # type: ignore[misc]
            latencies.append(1000 * (sim.registrations[-1].received_at - sim.kubelet_sock_created_at))
            await wait_registered(sim, "example.com/null", 4)
        await stop(proc)
        await sim.stop()
    report(
        f"re-registration after kubelet restart (x{restarts})",
        latencies,
        "p99 <= 50 ms",
        percentile(latencies, 0.99) <= 50,
    )


async def with_toggle(count: int, body: Callable[[pb_grpc.DevicePluginStub, int], Awaitable[None]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sim = KubeletSimulator(Path(tmp))
        await sim.start()
        proc = spawn(toggle_args(Path(tmp), count), Path(tmp))
        await wait_registered(sim, TOGGLE, count)
        async with aio.insecure_channel(f"unix://{Path(tmp) / endpoint_for(TOGGLE)}") as channel:
            await body(pb_grpc.DevicePluginStub(channel), proc.pid)
        await stop(proc)
        await sim.stop()


async def bench_propagation(flips: int, streams: int = 8) -> None:
    """A health change in the plugin process to the last of ``streams`` open streams."""

    async def body(stub: pb_grpc.DevicePluginStub, pid: int) -> None:
        calls = [stub.ListAndWatch(pb.Empty()) for _ in range(streams)]
        for call in calls:
            await call.read()
        latencies = []
        for _ in range(flips):
            started = time.perf_counter()
            os.kill(pid, signal.SIGUSR1)
            await asyncio.gather(*(call.read() for call in calls))
            latencies.append(1000 * (time.perf_counter() - started))
        for call in calls:
            call.cancel()
        report(
            f"change to all {streams} ListAndWatch streams", latencies, "<= 100 ms", percentile(latencies, 0.99) <= 100
        )

    await with_toggle(4, body)


async def bench_allocate(calls: int) -> None:
    async def body(stub: pb_grpc.DevicePluginStub, pid: int) -> None:
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["dev-00001"])])
        for _ in range(50):
            await stub.Allocate(request)
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            await stub.Allocate(request)
            latencies.append(1000 * (time.perf_counter() - started))
        report("Allocate round trip (Python client)", latencies, "see side_by_side", True)

    await with_toggle(4, body)


async def bench_preferred(calls: int) -> None:
    """GetPreferredAllocation over 1,000 devices through the RPC, and the policy alone at 10,000."""

    async def body(stub: pb_grpc.DevicePluginStub, pid: int) -> None:
        ids = [f"dev-{i:05d}" for i in range(1000)]
        latencies = []
        for _ in range(calls):
            random.shuffle(ids)
            request = pb.PreferredAllocationRequest(
                container_requests=[
                    pb.ContainerPreferredAllocationRequest(
                        available_deviceIDs=ids, must_include_deviceIDs=ids[:2], allocation_size=8
                    )
                ]
            )
            started = time.perf_counter()
            await stub.GetPreferredAllocation(request)
            latencies.append(1000 * (time.perf_counter() - started))
        report("GetPreferredAllocation RPC, 1,000 devices", latencies, "<= 5 ms", percentile(latencies, 0.99) <= 5)

    await with_toggle(1000, body)
    for size in (1000, 10_000):
        pool = [Device(f"dev-{i:05d}", numa_nodes=(i % 4,)) for i in range(size)]
        policy = []
        for _ in range(calls):
            random.shuffle(pool)
            started = time.perf_counter()
            pack_numa(pool, pool[:2], 8)
            policy.append(1000 * (time.perf_counter() - started))
        report(f"NUMA packing policy alone, {size:,} devices", policy, "<= 5 ms", percentile(policy, 0.99) <= 5)


async def main(quick: bool) -> None:
    scale = 0.1 if quick else 1.0
    print(f"kubedevice core benchmarks on {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.2f})")
    bench_command_startup(5 if quick else 21)
    await bench_startup_and_rss(3 if quick else 11)
    await bench_reregistration(max(5, int(100 * scale)))
    await bench_propagation(max(20, int(200 * scale)))
    await bench_allocate(max(200, int(2000 * scale)))
    await bench_preferred(max(20, int(200 * scale)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    asyncio.run(main(parser.parse_args().quick))
