"""Hotplug propagation: ``python benchmarks/hotplug.py`` (``--quick`` for a smoke run).

A device node appears or vanishes under the host root; we time how long until *every* open
ListAndWatch stream has the new list. Our side is ``kubedevice serve`` with a glob resource
(inotify, in its own process); the Go peer (benchmarks/go/hotpeer) is a minimal fsnotify-based
plugin on the official v1beta1 Go API (the best a Go plugin does; squat's generic-device-plugin
rescans every 5 s). Both are read by the same client, interleaved. Target: p99 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from grpc import aio

from kubedevice.api import pb, pb_grpc
from kubedevice.names import endpoint_for
from kubedevice.testing import gobuild

RESOURCE = "example.com/hot"
TARGET_MS = 100.0
STREAMS = 2
GO_MODULE = Path(__file__).resolve().parent / "go"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_ours(work: Path, root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    config = work / "hot.yaml"
    config.write_text(f'resources:\n  - name: {RESOURCE}\n    glob: {{paths: ["/dev/hot*"]}}\n')
    plugin_dir = work / "plugins"
    plugin_dir.mkdir(exist_ok=True)  # the kubelet's directory: serve waits for it, never creates it
    command = [sys.executable, "-m", "kubedevice", "serve", "--config", str(config)]
    command += ["--plugin-dir", str(plugin_dir), "--host-root", str(root), "--log-level", "warning"]
    return subprocess.Popen(command), plugin_dir / endpoint_for(RESOURCE)


def start_go(binary: Path, work: Path, root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    socket = work / "go.sock"
    command = [str(binary), "--dir", str(root / "dev"), "--pattern", "hot*", "--socket", str(socket)]
    return subprocess.Popen(command), socket


class Peer:
    """One plugin under test: a device directory and ``STREAMS`` open ListAndWatch streams."""

    def __init__(self, name: str, dev: Path, socket: Path) -> None:
        self.name, self.dev, self.socket = name, dev, socket
        self.samples: list[float] = []

    async def open(self) -> None:
        for _ in range(300):
            if self.socket.exists():
                break
            await asyncio.sleep(0.05)
        self.channel = aio.insecure_channel(f"unix://{self.socket}")
        stub = pb_grpc.DevicePluginStub(self.channel)
        self.streams = [stub.ListAndWatch(pb.Empty()) for _ in range(STREAMS)]
        for stream in self.streams:
            await stream.read()

    async def flip(self, name: str) -> None:
        """Create or remove ``name``; time until every stream shows it (or its absence)."""
        path = self.dev / name
        present = not path.exists()
        start = time.perf_counter()
        if present:
            path.touch()
        else:
            path.unlink()
        await asyncio.gather(*(self._until(s, name, present) for s in self.streams))
        self.samples.append((time.perf_counter() - start) * 1000)

    @staticmethod
    async def _until(stream: aio.UnaryStreamCall[pb.Empty, pb.ListAndWatchResponse], name: str, present: bool) -> None:
        while True:
            message = await asyncio.wait_for(stream.read(), 10)
            assert isinstance(message, pb.ListAndWatchResponse)
            if (name in {d.ID for d in message.devices}) == present:
                return

    async def close(self) -> None:
        for stream in self.streams:
            stream.cancel()
        await self.channel.close()


async def measure(peers: Sequence[Peer], rounds: int) -> None:
    for peer in peers:
        await peer.open()
    for i in range(rounds):
        for peer in peers:  # interleaved, so machine noise hits both alike
            await peer.flip(f"hot{1 + i % 8}")
            await asyncio.sleep(0.005)
    for peer in peers:
        await peer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 rounds instead of 400")
    rounds = 20 if parser.parse_args().quick else 400
    binary = gobuild.build(GO_MODULE, "./hotpeer", "hotpeer")
    if binary is None:
        print("needs Go for the peer", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kubedevice-hotplug-") as tmp:
        work = Path(tmp)
        roots = {name: work / name / "root" for name in ("ours", "go")}
        for root in roots.values():
            (root / "dev").mkdir(parents=True)
            (root / "dev" / "hot0").touch()
        ours, our_socket = start_ours(work / "ours", roots["ours"])
        go, go_socket = start_go(binary, work / "go", roots["go"])
        try:
            peers = [
                Peer("kubedevice (inotify)", roots["ours"] / "dev", our_socket),
                Peer("Go fsnotify peer", roots["go"] / "dev", go_socket),
            ]
            asyncio.run(measure(peers, rounds))
        finally:
            for process in (ours, go):
                process.terminate()
                process.wait(10)
    print(f"hotplug add/remove → all {STREAMS} ListAndWatch streams, {rounds} events each")
    for peer in peers:
        p99 = percentile(peer.samples, 0.99)
        verdict = "PASS" if p99 <= TARGET_MS else "MISS"
        print(
            f"  {peer.name:<24} median {statistics.median(peer.samples):7.2f} ms  p99 {p99:7.2f} ms  "
            f"target p99 ≤ {TARGET_MS:.0f} ms {verdict}"
        )
    ours_p50, go_p50 = (statistics.median(p.samples) for p in peers)
    ours_p99, go_p99 = (percentile(p.samples, 0.99) for p in peers)
    print(f"  ratio kubedevice/Go: median {ours_p50 / go_p50:.1f}×, p99 {ours_p99 / go_p99:.1f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
