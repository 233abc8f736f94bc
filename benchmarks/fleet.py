"""The API load of a fleet: ``python benchmarks/fleet.py [--nodes 1000] [--cluster-dir DIR]``.

N simulated nodes, each a Node object and a ResourceSlice publisher with a client of its own
(8 devices with attributes and a capacity), against the real kube-apiserver and etcd of a
``kubedevice.testing.cluster`` cluster; first with kubedevice's ``SlicePublisher`` (all nodes in
one asyncio process), then with Kubernetes' own Go ``resourceslice.Controller``
(``benchmarks/go/fleetpeer``: one client per node at QPS 5 / burst 10, the Node read once for
the owner UID), in the same run on the same cluster, each on nodes and a driver name of its own.
Both fleets run inside the cluster's network namespace (``nsenter -n``), so their 2N long-lived
connections go straight to the API server, not through the host relay.

Phases, each measured from the API server's own metrics (``apiserver_request_total`` by verb for
``resourceslices`` and ``nodes``, response, request-body and watch-event bytes), before/after:
start-up (until every node's pool is published), steady state (``--steady`` seconds, scaled to
per node per hour), churn (10% of the nodes flip one device's health 10 times a second for
``--churn`` seconds, an odd number of flips: writes per second, and the end state compared with
the devices), a restart of every publisher at once (requests, time, creates/deletes: must be 0),
and the API server's storage size. The requests the benchmark itself makes (metrics scrapes, one
list for the end state) are outside the counted windows or not on these resources.

Not in CI (it takes minutes and most of two cores). Needs root (the cluster) and Go (the peer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import Client as HttpClient
from lightkube.config.client_adapter import ConnectionParams
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceSlice

from kubedevice.device import Device, Health
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver.publisher import SlicePublisher
from kubedevice.dra.models import to_document
from kubedevice.plugin.base import Plugin
from kubedevice.testing import components, gobuild
from kubedevice.testing.cluster import Cluster, leftovers, missing_prerequisite

HERE = Path(__file__).resolve().parent
PY_DRIVER, GO_DRIVER = "py.fleet.kubedevice.dev", "go.fleet.kubedevice.dev"
PY_PREFIX, GO_PREFIX = "kdpy-", "kdgo-"
FLIPPED = "accel3"
END_STATE_LIMIT = 180.0
"""Seconds after the last flip within which every node's stored slice must be its last state."""
WAVE = 100
"""Nodes started at once, in both fleets: 1,000 TLS handshakes at once on this machine's two
cores time out (connect timeouts, then retries in lockstep), which real nodes never do."""
WRITES = ("POST", "PUT", "PATCH", "DELETE")
BYTES = ("apiserver_response_sizes_sum", "apiserver_request_body_size_bytes_sum")


class Accelerators(Plugin):
    """8 devices as a real accelerator driver describes them: attributes and a memory capacity."""

    def dra_attributes(self) -> dict[str, dict[str, dict[str, object]]]:
        return {
            d.id: {
                "model": {"string": "kd-accel-8"},
                "index": {"int": i},
                "driverVersion": {"version": "1.2.3"},
                "memory": {"quantity": "16Gi"},
            }
            for i, d in enumerate(self.devices())
        }


def accelerators() -> Accelerators:
    return Accelerators("example.com/accel", [Device(f"accel{i}") for i in range(8)])


def device_documents(driver: str, flipped: bool) -> list[dict[str, Any]]:
    plugin = accelerators()
    if flipped:
        plugin.set_health(FLIPPED, Health.UNHEALTHY)
    devices: list[dict[str, Any]] = to_document(DraDriver(driver, [plugin]).slices("n")[0])["spec"]["devices"]
    return devices


# --- the Python fleet (run inside the cluster's network namespace) ------------------------------


@dataclass
class PyNode:
    plugin: Accelerators
    publisher: SlicePublisher
    client: AsyncClient
    task: asyncio.Task[None]


@dataclass
class PyFleet:
    kubeconfig: Path
    nodes: int
    running: list[PyNode] = field(default_factory=list)
    plugins: list[Accelerators] = field(default_factory=list)
    """Each node's devices, kept over a restart of the publishers as the hardware is."""

    def __post_init__(self) -> None:
        self.plugins = [accelerators() for _ in range(self.nodes)]

    async def start(self) -> None:
        """Start every node's publisher, ``WAVE`` at a time (each wave published before the next)."""
        begin = time.monotonic()
        for first in range(0, self.nodes, WAVE):
            wave = [self._start(i) for i in range(first, min(first + WAVE, self.nodes))]
            self.running += wave
            await asyncio.gather(*(n.publisher.published.wait() for n in wave))
        print(f"published {time.monotonic() - begin:.3f}", flush=True)

    def _start(self, i: int) -> PyNode:
        name = f"{PY_PREFIX}{i}"
        plugin = self.plugins[i]
        driver = DraDriver(PY_DRIVER, [plugin])
        client = AsyncClient(KubeConfig.from_file(self.kubeconfig), field_manager="kubedevice-fleet")
        publisher = SlicePublisher(client, PY_DRIVER, name, lambda: driver.slices(name))
        driver.subscribe(publisher.changed)
        return PyNode(plugin, publisher, client, asyncio.create_task(publisher.run()))

    async def flip(self, count: int, hz: float, seconds: float) -> None:
        flips = int(hz * seconds) | 1  # odd: every flipping node ends unhealthy
        loop = asyncio.get_running_loop()
        start = loop.time()
        for n in range(flips):
            await asyncio.sleep(max(0.0, start + (n + 1) / hz - loop.time()))
            for node in self.running[:count]:
                node.plugin.set_health(FLIPPED, Health.UNHEALTHY if n % 2 == 0 else Health.HEALTHY)
        print(f"flipped {flips}", flush=True)

    async def stop(self) -> None:
        for node in self.running:
            node.task.cancel()
        await asyncio.gather(*(n.task for n in self.running), return_exceptions=True)
        await asyncio.gather(*(n.client.close() for n in self.running))
        self.running = []
        print("stopped", flush=True)


async def py_worker(kubeconfig: Path, nodes: int) -> None:
    """The same line protocol as the Go peer (see its main.go): start, flip, stop."""
    fleet = PyFleet(kubeconfig, nodes)
    while line := await asyncio.to_thread(sys.stdin.readline):
        words = line.split()
        if words == ["start"]:
            await fleet.start()
        elif words[:1] == ["flip"] and len(words) == 4:
            await fleet.flip(int(words[1]), float(words[2]), float(words[3]))
        elif words == ["stop"]:
            await fleet.stop()


# --- the host side: the cluster, the metrics, the phases ----------------------------------------

METRIC = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')


class Metrics:
    """The API server's /metrics, summed to what this benchmark reports."""

    def __init__(self, kubeconfig: Path) -> None:
        config = KubeConfig.from_file(kubeconfig).get()
        assert config is not None
        self._http = HttpClient(config, ConnectionParams(trust_env=False))

    def snapshot(self) -> Counter[str]:
        text = self._http.request("GET", "/metrics").text
        counts: Counter[str] = Counter()
        for line in text.splitlines():
            match = METRIC.match(line)
            if match is None:
                continue
            name, labels, value = match.group(1), dict(re.findall(r'(\w+)="([^"]*)"', match.group(2))), match.group(3)
            resource = labels.get("resource", "")
            if name == "apiserver_request_total" and ours(resource, labels["verb"]):
                counts[f"{labels['verb']} {resource}"] += int(float(value))
            elif (name in BYTES and ours(resource, labels.get("verb", ""))) or (
                name == "apiserver_watch_events_sizes_sum" and labels.get("kind") == "ResourceSlice"
            ):
                counts["bytes"] += int(float(value))
            elif name in ("apiserver_storage_size_bytes", "apiserver_storage_db_total_size_in_bytes"):
                counts["storage"] = max(counts["storage"], int(float(value)))
            elif name == "apiserver_longrunning_requests" and resource == "resourceslices":
                counts["open watches"] += int(float(value))
        return counts


def ours(resource: str, verb: str) -> bool:
    """What the publishers send: anything on resourceslices, and GETs of Nodes (the kubelet's
    GET of its own Node every 10 s is in this too: ~360 an hour, the same for both fleets; the
    node lifecycle controller's writes to the Nodes without a kubelet are not)."""
    return resource == "resourceslices" or (resource == "nodes" and verb == "GET")


def delta(before: Counter[str], after: Counter[str]) -> Counter[str]:
    """What happened between two snapshots. A watch is in ``apiserver_request_total`` only when
    it ends, so the watches started are those that ended plus the change in open watches."""
    changed = Counter({k: after[k] - before[k] for k in after if k not in ("storage", "open watches")})
    changed["WATCH resourceslices"] += after["open watches"] - before["open watches"]
    return changed


def counted(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted((k, v) for k, v in counts.items() if k != "bytes" and v))


def requests(counts: Counter[str]) -> int:
    return sum(v for k, v in counts.items() if k != "bytes")


def writes(counts: Counter[str]) -> int:
    return sum(v for k, v in counts.items() if k.split()[0] in WRITES and k.endswith("resourceslices"))


class Worker:
    """A fleet process inside the cluster's network namespace, driven line by line."""

    def __init__(self, argv: list[str], namespace_pid: int) -> None:
        self.process = subprocess.Popen(
            ["nsenter", "-t", str(namespace_pid), "-n", "--", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def command(self, line: str, until: str) -> float:
        """Send ``line``; the number on the answer line that starts with ``until``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        while answer := self.process.stdout.readline():
            words = answer.split()
            if words[:1] == [until]:
                return float(words[1]) if len(words) > 1 else 0.0
        code = self.process.wait()
        raise SystemExit(f"fleet: a fleet process failed at {line.split(maxsplit=1)[0]} (exit {code})")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def settle(metrics: Metrics, quiet: float = 3.0, limit: float = 300.0) -> Counter[str]:
    """Wait until no write to resourceslices has been counted for ``quiet`` seconds."""
    last = metrics.snapshot()
    still = time.monotonic()
    deadline = still + limit
    while time.monotonic() - still < quiet and time.monotonic() < deadline:
        time.sleep(0.5)
        now = metrics.snapshot()
        if writes(delta(last, now)):
            still = time.monotonic()
        last = now
    return last


@dataclass
class Result:
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run_fleet(name: str, worker: Worker, metrics: Metrics, args: argparse.Namespace, kubeconfig: Path) -> Result:
    result, figures, n = Result(), {}, args.nodes
    before = metrics.snapshot()
    figures["start-up s"] = worker.command("start", "published")
    watching = time.monotonic()  # a watch is opened after its list: count every node's in start-up
    while metrics.snapshot()["open watches"] - before["open watches"] < n and time.monotonic() - watching < 120:
        time.sleep(1)
    after = settle(metrics, quiet=2.0)
    startup = delta(before, after)
    figures["start-up requests/node"] = requests(startup) / n
    figures["start-up writes/node"] = writes(startup) / n
    figures["start-up KiB/node"] = startup["bytes"] / 1024 / n
    figures["open watches"] = after["open watches"]
    result.notes.append(f"{name} start-up requests: {counted(startup)}")

    time.sleep(args.steady)
    steady_end = metrics.snapshot()
    steady = delta(after, steady_end)
    figures["rest requests/node/h"] = requests(steady) * 3600 / args.steady / n
    figures["rest writes/node/h"] = writes(steady) * 3600 / args.steady / n
    result.notes.append(f"{name} at rest ({args.steady:.0f} s): {counted(steady)}")

    churning = max(1, n // 10)
    flips = worker.command(f"flip {churning} 10 {args.churn}", "flipped")
    last_flip = time.monotonic()
    wrong = asyncio.run(wrong_end_state(kubeconfig, name, n, churning))
    while wrong and time.monotonic() - last_flip < END_STATE_LIMIT:
        time.sleep(1)
        wrong = asyncio.run(wrong_end_state(kubeconfig, name, n, churning))
    figures["churn end state exact after s"] = time.monotonic() - last_flip
    figures["churn end state wrong nodes"] = wrong
    churn = delta(steady_end, settle(metrics))
    figures["churn writes/s/node"] = writes(churn) / args.churn / churning
    figures["churn writes/flip"] = writes(churn) / flips / churning
    figures["churn KiB"] = churn["bytes"] / 1024

    restart_begin = metrics.snapshot()
    worker.command("stop", "stopped")
    began = time.monotonic()
    worker.command("start", "published")
    figures["restart s"] = time.monotonic() - began
    restart = delta(restart_begin, settle(metrics, quiet=3.0))
    figures["restart requests/node"] = requests(restart) / n
    figures["restart writes"] = writes(restart)
    result.notes.append(f"{name} restart: {counted(restart)}")
    figures["storage MiB"] = metrics.snapshot()["storage"] / 2**20
    result.figures = figures
    return result


async def wrong_end_state(kubeconfig: Path, name: str, nodes: int, churning: int) -> int:
    """Nodes whose slice in the API server is not exactly their devices' final state."""
    driver, prefix = (PY_DRIVER, PY_PREFIX) if name == "kubedevice" else (GO_DRIVER, GO_PREFIX)
    flipped, steady = device_documents(driver, True), device_documents(driver, False)
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    try:
        listing = client.list(ResourceSlice, fields={"spec.driver": driver})
        by_node = {s.spec.nodeName: s.to_dict() async for s in listing if s.spec}
    finally:
        await client.close()
    wrong = 0
    for i in range(nodes):
        stored = by_node.get(f"{prefix}{i}")
        devices = [] if stored is None else stored["spec"]["devices"]
        for device in devices:
            for taint in device.get("taints", []):
                taint.pop("timeAdded", None)
        wrong += devices != (flipped if i < churning else steady)
    return wrong


async def create_nodes(kubeconfig: Path, nodes: int) -> None:
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    names = [f"{p}{i}" for p in (PY_PREFIX, GO_PREFIX) for i in range(nodes)]
    try:
        for start in range(0, len(names), 50):
            await asyncio.gather(
                *(client.create(Node(metadata=ObjectMeta(name=n))) for n in names[start : start + 50]),
                return_exceptions=True,
            )
    finally:
        await client.close()


async def delete_nodes(kubeconfig: Path, nodes: int) -> None:
    """The Nodes go, and the garbage collector takes their slices (owner references)."""
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    names = [f"{p}{i}" for p in (PY_PREFIX, GO_PREFIX) for i in range(nodes)]
    try:
        for start in range(0, len(names), 50):
            await asyncio.gather(*(client.delete(Node, n) for n in names[start : start + 50]), return_exceptions=True)
        for driver in (PY_DRIVER, GO_DRIVER):
            async for s in client.list(ResourceSlice, fields={"spec.driver": driver}):
                if s.metadata is not None and s.metadata.name:
                    with contextlib.suppress(Exception):
                        await client.delete(ResourceSlice, s.metadata.name)
    finally:
        await client.close()


@contextlib.contextmanager
def cluster_at(directory: Path | None) -> Iterator[Cluster]:
    """The cluster in ``directory``, or one started (and torn down) for this run."""
    if directory is not None:
        cluster = Cluster(directory)
        if cluster.state() is None:
            raise SystemExit(f"fleet: no cluster in {directory} (scripts/cluster.sh up --dir {directory})")
        yield cluster
        return
    reason = missing_prerequisite()
    if reason is not None:
        raise SystemExit(f"fleet: cannot start a cluster: {reason}")
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="kdf-")))  # short: socket paths below it are limited
    cluster.up(components.ensure_all())
    state = cluster.state()
    try:
        yield cluster
    finally:
        cluster.down()
        if state is not None and not leftovers(cluster.dir, state):
            shutil.rmtree(cluster.dir, ignore_errors=True)


def print_table(results: dict[str, Result], nodes: int) -> None:
    print(f"\n{nodes} simulated nodes, 8 devices each; churn: {max(1, nodes // 10)} nodes flipping one device 10/s")
    print(f"| {'figure':32} | {'kubedevice':>11} | {'Go resourceslice':>16} | {'ratio':>6} |")
    print(f"|{'-' * 34}|{'-' * 13}:|{'-' * 17}:|{'-' * 7}:|")
    py, go = results.get("kubedevice"), results.get("go")
    keys = (py or go or Result()).figures
    for key in keys:
        a = py.figures.get(key) if py else None
        b = go.figures.get(key) if go else None
        ratio = f"{a / b:6.2f}" if a is not None and b else "     -"
        print(f"| {key:32} | {_cell(a, 11)} | {_cell(b, 16)} | {ratio} |")
    for result in results.values():
        for note in result.notes:
            print(f"  {note}")


def _cell(value: float | None, width: int) -> str:
    return f"{value:{width}.3f}" if value is not None else " " * width


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--steady", type=float, default=180.0, help="seconds at rest (default 180)")
    parser.add_argument("--churn", type=float, default=30.0, help="seconds of flipping (default 30)")
    parser.add_argument("--cluster-dir", type=Path, help="a cluster started with scripts/cluster.sh up --dir DIR")
    parser.add_argument("--only", choices=("kubedevice", "go"), help="run one fleet only")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.nodes < 1:
        print("fleet: --nodes must be at least 1", file=sys.stderr)
        return 2
    if args.worker:
        asyncio.run(py_worker(args.kubeconfig, args.nodes))
        return 0
    peer = gobuild.build(HERE / "go" / "fleetpeer", ".", "fleetpeer", timeout=1800)
    if peer is None:
        raise SystemExit("fleet: the Go peer needs a Go toolchain")
    with cluster_at(args.cluster_dir) as cluster, tempfile.TemporaryDirectory(prefix="kdf-") as scratch:
        state = cluster.state()
        assert state is not None
        kubeconfig = cluster.kubeconfig
        devices = Path(scratch) / "devices.json"
        devices.write_text(
            json.dumps({"healthy": device_documents(GO_DRIVER, False), "unhealthy": device_documents(GO_DRIVER, True)})
        )
        asyncio.run(create_nodes(kubeconfig, args.nodes))
        time.sleep(20)  # the controller-manager's own GETs of the new Nodes, out of the counted windows
        metrics = Metrics(kubeconfig)
        fleets = {
            "kubedevice": [sys.executable, __file__, "--worker", "--nodes", str(args.nodes),
                           "--kubeconfig", str(kubeconfig)],
            "go": [str(peer), "-kubeconfig", str(kubeconfig), "-nodes", str(args.nodes), "-prefix", GO_PREFIX,
                   "-driver", GO_DRIVER, "-devices", str(devices)],
        }  # fmt: skip
        results: dict[str, Result] = {}
        try:
            for name, argv in fleets.items():
                if args.only in (None, name):
                    worker = Worker(argv, state.namespace_pid)
                    try:
                        results[name] = run_fleet(name, worker, metrics, args, kubeconfig)
                    finally:
                        worker.close()
                    print(f"{name}: {results[name].figures}", flush=True)
        finally:
            asyncio.run(delete_nodes(kubeconfig, args.nodes))
        print_table(results, args.nodes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
