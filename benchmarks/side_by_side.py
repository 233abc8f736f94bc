#!/usr/bin/env python3
"""kubedevice against Go device plugins, measured by the same Go kubelet client in one run.

    python benchmarks/side_by_side.py            # about 2 minutes warm (first Go build ~10 min)

Peers, each serving the same number of devices:
  kubedevice  ``kubedevice serve`` with ``static: {count: N, paths: [/dev/null]}``
  go-stub     the kubelet's own Go plugin stub (pkg/kubelet/cm/devicemanager/plugin/v1beta1),
              same devices, same /dev/null device spec per Allocate
  sample      k8s.io/kubernetes/test/images/sample-device-plugin (2 devices; creates a file
              under /tmp on every Allocate), run in a private mount namespace

Runs are interleaved (each round visits every peer, rotating the order) so machine noise hits
all peers alike; the spread of per-round medians is printed as the noise estimate.
Measured: Allocate latency (``dpharness bench-allocate``: registered like the kubelet, then
sequential Allocate calls), idle RSS after registration, and re-registration after a restart of
the kubelet's real device manager (``dpharness devicemanager`` in a mount namespace). Both
latency distributions are drawn into ``allocate.svg`` and ``reregistration.svg`` in ``--svg DIR``
(default docs/benchmarks/, which docs/benchmarks.md shows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pstats
import shutil
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "interop" / "deviceplugin"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gobuild  # noqa: E402
import plots  # noqa: E402

TARGETS = {"allocate_p50": 1.5, "allocate_p99": 1.5, "rss": 1.25, "reregister_speedup": 50.0}
PeerStart = Callable[[Path, Path], contextlib.AbstractAsyncContextManager[int]]


@dataclass
class Peer:
    name: str
    resource: str
    devices: int
    start: PeerStart
    allocate_us: list[float] = field(default_factory=list)
    round_p50s: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    reregister_ms: list[float] = field(default_factory=list)


@contextlib.asynccontextmanager
async def process(argv: list[str], log: Path) -> AsyncIterator[int]:
    """Run ``argv`` for the block; yields its pid (the plugin itself: unshare and sh exec)."""
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=out)
    try:
        yield proc.pid
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


def kubedevice_peer(devices: int, work: Path, profile: Path | None = None) -> PeerStart:
    config = work / "kubedevice.yaml"
    config.write_text(f"resources:\n  - name: example.com/null\n    static: {{count: {devices}, paths: [/dev/null]}}\n")
    python = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]

    def start(plugin_dir: Path, log: Path) -> contextlib.AbstractAsyncContextManager[int]:
        return process(
            [
                *python,
                "-m",
                "kubedevice",
                "serve",
                "--config",
                str(config),
                "--plugin-dir",
                str(plugin_dir),
                "--log-level",
                "warning",
            ],
            log,
        )

    return start


def stub_peer(binary: Path, devices: int) -> PeerStart:
    def start(plugin_dir: Path, log: Path) -> contextlib.AbstractAsyncContextManager[int]:
        return process([str(binary), "-dir", str(plugin_dir), "-devices", str(devices)], log)

    return start


def sample_peer(binary: Path) -> PeerStart:
    def start(plugin_dir: Path, log: Path) -> contextlib.AbstractAsyncContextManager[int]:
        return process(gobuild.in_kubelet_dir(plugin_dir, [str(binary)]), log)

    return start


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


@contextlib.asynccontextmanager
async def harness(argv: list[str], log: Path) -> AsyncIterator[gobuild.GoEvents]:
    go = await gobuild.GoEvents.start(argv, log)
    try:
        yield go
    finally:
        await go.stop()


async def allocate_round(peer: Peer, harness_bin: Path, args: argparse.Namespace, work: Path) -> None:
    """Register the peer, read its idle RSS, then time Allocate calls."""
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as tmp:
        plugin_dir = Path(tmp)
        argv = [
            str(harness_bin),
            "bench-allocate",
            "-dir",
            str(plugin_dir),
            "-n",
            str(args.calls),
            "-warmup",
            str(args.warmup),
            "-idle",
            f"{args.idle}s",
            "-timeout",
            "300s",
        ]
        async with harness(argv, work / f"bench-{peer.name}.log") as go:
            await go.next("serving")
            async with peer.start(plugin_dir, work / f"{peer.name}.log") as pid:
                await go.next("registered", timeout=60)
                await go.next("idle", timeout=60)
                peer.rss_kib.append(rss_kib(pid))
                samples: list[float] = (await go.next("allocate_latency_us", timeout=300))["samples"]
    peer.allocate_us.extend(samples)
    peer.round_p50s.append(statistics.median(samples))


async def reregister_round(peer: Peer, harness_bin: Path, args: argparse.Namespace, work: Path) -> None:
    """Restart the real device manager; time until the peer's devices are allocatable again."""
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as tmp:
        plugin_dir = Path(tmp)
        argv = gobuild.in_kubelet_dir(
            plugin_dir,
            [
                str(harness_bin),
                "devicemanager",
                "-resource",
                peer.resource,
                "-devices",
                str(peer.devices),
                "-request",
                "0",
                "-restarts",
                str(args.restarts),
                "-timeout",
                "60s",
            ],
        )
        async with harness(argv, work / f"dm-{peer.name}.log") as go:
            await go.next("kubelet_started")
            async with peer.start(plugin_dir, work / f"{peer.name}.log"):
                await go.next("capacity", timeout=60)
                for _ in range(args.restarts):
                    peer.reregister_ms.append((await go.next("reregistered", timeout=90))["elapsed_ms"])


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def verdict(ratio: float, target: float, lower_is_better: bool = True) -> str:
    ok = ratio <= target if lower_is_better else ratio >= target
    return f"{'meets' if ok else 'MISSES'} target {'<=' if lower_is_better else '>='} {target:g}"


def report(peers: list[Peer], reregister: bool) -> None:
    ours, others = peers[0], peers[1:]
    print("\nAllocate latency (µs, one container, 1 device), idle RSS after registration")
    print(f"{'peer':12} {'p50':>8} {'p99':>8} {'round p50 spread':>18} {'RSS MiB':>8}")
    for p in peers:
        spread = (max(p.round_p50s) - min(p.round_p50s)) / statistics.median(p.round_p50s) * 100
        print(
            f"{p.name:12} {pct(p.allocate_us, 50):8.0f} {pct(p.allocate_us, 99):8.0f} "
            f"{spread:17.0f}% {statistics.median(p.rss_kib) / 1024:8.1f}"
        )
    if reregister:
        print("\nRe-registration after a restart of the real device manager (ms, kubelet.sock to allocatable)")
        for p in peers:
            print(f"{p.name:12} median {statistics.median(p.reregister_ms):9.1f}   all {sorted(p.reregister_ms)}")
    print("\nRatios kubedevice / Go peer")
    for other in others:
        r50 = pct(ours.allocate_us, 50) / pct(other.allocate_us, 50)
        r99 = pct(ours.allocate_us, 99) / pct(other.allocate_us, 99)
        rss = statistics.median(ours.rss_kib) / statistics.median(other.rss_kib)
        print(
            f"vs {other.name:9} Allocate p50 {r50:5.2f}x ({verdict(r50, TARGETS['allocate_p50'])}), "
            f"p99 {r99:5.2f}x ({verdict(r99, TARGETS['allocate_p99'])}), "
            f"idle RSS {rss:5.2f}x ({verdict(rss, TARGETS['rss'])})"
        )
        if reregister:
            speedup = statistics.median(other.reregister_ms) / statistics.median(ours.reregister_ms)
            print(
                f"{'':12} re-registration {speedup:7.0f}x faster "
                f"({verdict(speedup, TARGETS['reregister_speedup'], lower_is_better=False)})"
            )
    print(
        f"\nNoise: {os.cpu_count()} CPUs shared; load average {os.getloadavg()[0]:.2f} at the end. "
        "Treat ratios within the round-p50 spread as equal."
    )


def draw(directory: Path, peers: list[Peer], reregister: bool) -> None:
    """The distributions behind the report's medians and p99s, every peer of the same run."""
    note = plots.machine_note()
    calls = plots.Panel("one container, one device, sequential", {p.name: p.allocate_us for p in peers})
    plots.ecdf(directory / "allocate.svg", "Allocate round trip from the kubelet's Go client", "µs", [calls], note)
    if reregister:
        times = plots.Panel("kubelet.sock back to devices allocatable", {p.name: p.reregister_ms for p in peers})
        title = "Re-registration after a restart of the kubelet's real device manager"
        plots.ecdf(directory / "reregistration.svg", title, "ms", [times], note)


async def run(args: argparse.Namespace, work: Path) -> None:
    harness_bin, sample_bin, stub_bin = gobuild.harness(), gobuild.sample_plugin(), gobuild.stub_plugin()
    if harness_bin is None or sample_bin is None or stub_bin is None:
        raise SystemExit("Go toolchain not found: install Go to build the peers")
    namespace_error = gobuild.mount_namespace_error()
    peers = [
        Peer("kubedevice", "example.com/null", args.devices, kubedevice_peer(args.devices, work)),
        Peer("go-stub", "example.com/null", args.devices, stub_peer(stub_bin, args.devices)),
    ]
    if namespace_error is None:
        peers.append(Peer("sample", gobuild.SAMPLE_RESOURCE, 2, sample_peer(sample_bin)))
    else:
        print(f"sample plugin and re-registration skipped: {namespace_error}")
    for n in range(args.rounds):
        for peer in peers[n % len(peers) :] + peers[: n % len(peers)]:
            await allocate_round(peer, harness_bin, args, work)
            print(
                f"round {n + 1}: {peer.name} Allocate p50 {peer.round_p50s[-1]:.0f} µs, "
                f"RSS {peer.rss_kib[-1] / 1024:.1f} MiB",
                flush=True,
            )
    reregister = namespace_error is None and args.restarts > 0
    if reregister:
        for peer in peers:
            await reregister_round(peer, harness_bin, args, work)
            print(f"re-registration: {peer.name} {peer.reregister_ms} ms", flush=True)
    report(peers, reregister)
    svg = plots.svg_dir(args)
    if svg is not None:
        draw(svg, peers, reregister)
    if args.profile:
        await profile_kubedevice(harness_bin, args, work)


async def profile_kubedevice(harness_bin: Path, args: argparse.Namespace, work: Path) -> None:
    """One more kubedevice Allocate round under cProfile: where the server's time goes."""
    out = work / "kubedevice.prof"
    peer = Peer("kubedevice-profiled", "example.com/null", args.devices, kubedevice_peer(args.devices, work, out))
    await allocate_round(peer, harness_bin, args, work)
    print(f"\nkubedevice under cProfile (Allocate p50 {peer.round_p50s[-1]:.0f} µs with profiling on)")
    pstats.Stats(str(out)).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved Allocate/RSS rounds per peer")
    parser.add_argument("--calls", type=int, default=2000, help="timed Allocate calls per round")
    parser.add_argument("--warmup", type=int, default=300, help="untimed Allocate calls first")
    parser.add_argument("--idle", type=float, default=2.0, help="seconds idle before reading RSS")
    parser.add_argument("--devices", type=int, default=2, help="devices per peer (the sample plugin has 2)")
    parser.add_argument("--restarts", type=int, default=2, help="device manager restarts per peer (Go peers ~10 s)")
    parser.add_argument("--profile", action="store_true", help="then profile kubedevice's Allocate path")
    parser.add_argument("--keep-logs", action="store_true", help="keep the plugin and harness logs")
    plots.add_svg_option(parser)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kd-side-by-side-"))
    try:
        asyncio.run(run(args, work))
    finally:
        if args.keep_logs:
            print(f"logs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
