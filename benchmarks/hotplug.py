"""Hotplug propagation: ``python benchmarks/hotplug.py`` (``--quick`` for a smoke run).

A device node appears or vanishes under the host root; we time how long until *every* open
ListAndWatch stream has the new list. Our side is ``kubedevice serve`` with a glob resource
(inotify, in its own process); the Go peer is a minimal fsnotify-based plugin built here from
the official v1beta1 Go API (the best a Go plugin does; squat's generic-device-plugin rescans
every 5 s). Both are read by the same client, interleaved. Target: p99 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
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

RESOURCE = "example.com/hot"
TARGET_MS = 100.0
STREAMS = 2
GO_PEER = """\
package main

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	dir, pattern string
	mu           sync.Mutex
	devices      []*pluginapi.Device
	changed      chan struct{}
}

func (p *plugin) rescan() {
	entries, _ := os.ReadDir(p.dir)
	var devices []*pluginapi.Device
	for _, e := range entries {
		if ok, _ := filepath.Match(p.pattern, e.Name()); ok {
			devices = append(devices, &pluginapi.Device{ID: e.Name(), Health: pluginapi.Healthy})
		}
	}
	sort.Slice(devices, func(i, j int) bool { return devices[i].ID < devices[j].ID })
	p.mu.Lock()
	p.devices = devices
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		p.mu.Lock()
		devices, changed := p.devices, p.changed
		p.mu.Unlock()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func main() {
	dir := flag.String("dir", "", "directory to watch")
	pattern := flag.String("pattern", "*", "file name glob")
	socket := flag.String("socket", "", "unix socket to serve on")
	flag.Parse()
	p := &plugin{dir: *dir, pattern: *pattern, changed: make(chan struct{})}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		panic(err)
	}
	if err := watcher.Add(*dir); err != nil {
		panic(err)
	}
	p.rescan()
	go func() {
		for range watcher.Events {
			p.rescan()
		}
	}()
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, p)
	_ = server.Serve(listener)
}
"""
GO_MOD = """\
module kubedevice.bench/hotpeer

go 1.25.0

require (
	github.com/fsnotify/fsnotify v1.9.0
	google.golang.org/grpc v1.72.2
	k8s.io/kubelet v0.35.4
)
"""


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build_go_peer(work: Path) -> Path:
    """Compile the Go peer (modules come through the Go toolchain's own proxy settings/cache)."""
    src = work / "hotpeer"
    src.mkdir()
    (src / "main.go").write_text(GO_PEER)
    (src / "go.mod").write_text(GO_MOD)
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "mod", "tidy"], cwd=src, env=env, check=True, capture_output=True)
    subprocess.run(["go", "build", "-o", "hotpeer", "."], cwd=src, env=env, check=True, capture_output=True)
    return src / "hotpeer"


def start_ours(work: Path, root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    config = work / "hot.yaml"
    config.write_text(f'resources:\n  - name: {RESOURCE}\n    glob: {{paths: ["/dev/hot*"]}}\n')
    plugin_dir = work / "plugins"
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
    if shutil.which("go") is None:
        print("needs Go for the peer", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kubedevice-hotplug-") as tmp:
        work = Path(tmp)
        binary = build_go_peer(work)
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
