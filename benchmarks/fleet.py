"""The API load of a fleet: ``python benchmarks/fleet.py [--nodes 1000] [--variant both] [--pods 1000]``.

N simulated nodes, each a Node object and a ResourceSlice publisher with a client of its own,
against the real kube-apiserver and etcd of a ``kubedevice.testing.cluster`` cluster (or
``--cluster-dir DIR``); first with kubedevice's ``SlicePublisher`` (the nodes split over
``--processes`` asyncio processes, default one per CPU, so the comparison is core for core),
then with Kubernetes' own Go ``resourceslice.Controller`` (``benchmarks/go/fleetpeer``: one
process, one client per node at QPS 5 / burst 10, the Node read once for the owner UID), in the
same run on the same cluster, each on nodes and a driver name of its own. Both fleets run inside
the cluster's network namespace (``nsenter -n``), so their 2N long-lived connections go
straight to the API server, not through the host relay. Two device layouts (``--variant``):
``flat``, 8 devices with attributes and a capacity; ``partitionable``, one GPU published as
``dra.sharing: counters`` publishes it (the whole GPU and 8 partitions on one counter set, the
set in a slice of its own); the Go peer publishes the same slices.

Phases, each measured from the API server's own metrics (``apiserver_request_total`` by verb for
``resourceslices`` and ``nodes``, response, request-body and watch-event bytes), before/after:
start-up (until every node's pool is published), steady state (``--steady`` seconds, scaled to
per node per hour), churn (10% of the nodes flip one device's health 10 times a second for
``--churn`` seconds, an odd number of flips: writes per second, and the end state compared with
the devices), a restart of every publisher at once (requests, time, creates/deletes: must be 0),
the API server's storage size, and scheduling: ``--pods`` pods, each with a claim from a
ResourceClaimTemplate, placed by the cluster's kube-scheduler on the fleet's nodes (pods/s,
p50/p99 from create to bound; every claim checked against its pod's node, devices given twice
and counters overdrawn). The requests the benchmark itself makes (metrics scrapes, one list for
the end state) are outside the counted windows or not on these resources.

Not in CI (it takes minutes and most of two cores). Needs root (the cluster) and Go (the peer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
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
from typing import Any, cast

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import Client as HttpClient
from lightkube.config.client_adapter import ConnectionParams
from lightkube.core.exceptions import ApiError
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node, Pod, ServiceAccount, ServiceAccountToken
from lightkube.resources.resource_v1 import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice

from kubedevice.device import Device, Health
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver.publisher import SlicePublisher
from kubedevice.dra.models import to_document
from kubedevice.dra.slices import REPLICAS_COUNTER, Sharing
from kubedevice.plugin.base import Plugin
from kubedevice.testing import components, gobuild
from kubedevice.testing.cluster import Cluster, leftovers, missing_prerequisite

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import plots  # noqa: E402

END_STATE_LIMIT = 180.0
"""Seconds after the last flip within which every node's stored slice must be its last state."""
WAVE = 100
"""Nodes started at once, in both fleets (the Python fleet's processes share it): 1,000 TLS
handshakes at once on this machine's two cores time out (connect timeouts, then retries in
lockstep), which real nodes never do."""
WRITES = ("POST", "PUT", "PATCH", "DELETE")
BYTES = ("apiserver_response_sizes_sum", "apiserver_request_body_size_bytes_sum")
FLEETS = {"kubedevice": "py", "go": "go"}
"""Each fleet's short tag, in its driver's and nodes' names."""
PER_NODE = 8
"""Devices per node (flat), or partitions of the one GPU per node (partitionable)."""


@dataclass(frozen=True)
class Variant:
    """A node's device layout; each variant runs on nodes and drivers of its own.

    ``flat``: 8 devices, each with attributes and a capacity. ``partitionable``: one 80Gi GPU
    published as kubedevice's ``dra.sharing: counters`` publishes it (KEP-4815,
    DRAPartitionableDevices, beta and on by default from 1.36 as
    ``pkg/features/kube_features.go`` v1.36.3 has it): the whole GPU and its 8 partitions, the
    whole consuming all 8 ``replicas`` of the GPU's counter set and a partition one, the counter
    set in a slice of its own (a slice holds devices or counter sets, never both). Claims ask
    for a partition (``selector``: the partitions carry the ``group`` attribute, the whole
    device does not), so a node takes up to 8 pods, as in the flat variant.
    """

    name: str
    sharing: Sharing
    resource: str
    ids: tuple[str, ...]
    group: str | None
    attributes: tuple[tuple[str, dict[str, object]], ...]
    flipped: str
    """The device whose health flips in the churn phase."""
    selector: str | None = None
    """CEL a claim adds to the DeviceClass's (``{driver}`` is the driver's name)."""

    def driver(self, fleet: str) -> str:
        return f"{FLEETS[fleet]}.{'' if self.name == 'flat' else 'p'}fleet.kubedevice.dev"

    def prefix(self, fleet: str) -> str:
        return f"kd{FLEETS[fleet]}{'' if self.name == 'flat' else 'p'}-"

    def plugin(self) -> Accelerators:
        return Accelerators(self, [Device(i, group=self.group) for i in self.ids])


class Accelerators(Plugin):
    """A node's devices as a real accelerator driver describes them: attributes and a capacity."""

    def __init__(self, variant: Variant, devices: list[Device]) -> None:
        super().__init__(variant.resource, devices)
        self.variant = variant

    def dra_attributes(self) -> dict[str, dict[str, dict[str, object]]]:
        return {d.id: {**dict(self.variant.attributes), "index": {"int": i}} for i, d in enumerate(self.devices())}


VARIANTS = {
    "flat": Variant(
        "flat", "replicas", "example.com/accel", tuple(f"accel{i}" for i in range(PER_NODE)), None,
        (("model", {"string": "kd-accel-8"}), ("driverVersion", {"version": "1.2.3"}),
         ("memory", {"quantity": "16Gi"})),
        "accel3",
    ),
    "partitionable": Variant(
        "partitionable", "counters", "example.com/gpu", tuple(f"gpu0-{i}" for i in range(PER_NODE)), "gpu0",
        (("model", {"string": "kd-gpu-80"}), ("driverVersion", {"version": "1.2.3"}),
         ("gpuMemory", {"quantity": "80Gi"})),
        "gpu0-3", '"group" in device.attributes["{driver}"]',
    ),
}  # fmt: skip


def driver_for(variant: Variant, fleet: str, plugin: Accelerators) -> DraDriver:
    return DraDriver(variant.driver(fleet), [plugin], sharing=variant.sharing)


def slice_specs(variant: Variant, fleet: str, flipped: bool) -> list[dict[str, Any]]:
    """A node's slices as ``{"devices": [...]}`` or ``{"sharedCounters": [...]}``, in the
    publisher's order: what the Go peer publishes and what the end state must be."""
    plugin = variant.plugin()
    if flipped:
        plugin.set_health(variant.flipped, Health.UNHEALTHY)
    specs = [to_document(s)["spec"] for s in driver_for(variant, fleet, plugin).slices("n")]
    return [{k: spec[k] for k in ("devices", "sharedCounters") if spec.get(k)} for spec in specs]


# --- the Python fleet (run inside the cluster's network namespace) ------------------------------


@dataclass
class PyNode:
    plugin: Accelerators
    publisher: SlicePublisher
    client: AsyncClient
    task: asyncio.Task[None]


@dataclass
class PyFleet:
    """Nodes ``first`` to ``first + nodes - 1`` of the fleet: one process's share."""

    kubeconfig: Path
    variant: Variant
    first: int
    nodes: int
    wave: int
    tokens: Path | None
    """Each node's service-account token, bound to its Node (``<dir>/<node>``), as the kubelet
    mounts one into a DaemonSet pod; None: certificates only, so the Node is read for its UID."""
    running: list[PyNode] = field(default_factory=list)
    plugins: list[Accelerators] = field(default_factory=list)
    """Each node's devices, kept over a restart of the publishers as the hardware is."""

    def __post_init__(self) -> None:
        self.plugins = [self.variant.plugin() for _ in range(self.nodes)]

    async def start(self) -> None:
        """Start every node's publisher, ``wave`` at a time (each wave published before the next);
        print each node's time from its start to its pool published, then the whole time."""
        begin = time.monotonic()
        latencies: list[float] = []
        for first in range(0, self.nodes, self.wave):
            started = time.monotonic()
            wave = [self._start(i) for i in range(first, min(first + self.wave, self.nodes))]
            self.running += wave
            latencies += await asyncio.gather(*(_published_after(n, started) for n in wave))
        print("latencies " + ",".join(f"{t:.4f}" for t in latencies), flush=True)
        print(f"published {time.monotonic() - begin:.3f}", flush=True)

    def _start(self, i: int) -> PyNode:
        name = f"{self.variant.prefix('kubedevice')}{self.first + i}"
        plugin = self.plugins[i]
        driver = driver_for(self.variant, "kubedevice", plugin)
        client = AsyncClient(KubeConfig.from_file(self.kubeconfig), field_manager="kubedevice-fleet")
        token = self.tokens / name if self.tokens is not None else None
        publisher = SlicePublisher(client, driver.name, name, lambda: driver.slices(name), token_file=token)
        driver.subscribe(publisher.changed)
        return PyNode(plugin, publisher, client, asyncio.create_task(publisher.run()))

    async def flip(self, count: int, hz: float, seconds: float) -> None:
        flips = int(hz * seconds) | 1  # odd: every flipping node ends unhealthy
        loop = asyncio.get_running_loop()
        start = loop.time()
        for n in range(flips):
            await asyncio.sleep(max(0.0, start + (n + 1) / hz - loop.time()))
            for node in self.running[:count]:
                node.plugin.set_health(self.variant.flipped, Health.UNHEALTHY if n % 2 == 0 else Health.HEALTHY)
        print(f"flipped {flips}", flush=True)

    async def stop(self) -> None:
        for node in self.running:
            node.task.cancel()
        await asyncio.gather(*(n.task for n in self.running), return_exceptions=True)
        await asyncio.gather(*(n.client.close() for n in self.running))
        self.running = []
        print("stopped", flush=True)


async def _published_after(node: PyNode, started: float) -> float:
    await node.publisher.published.wait()
    return time.monotonic() - started


async def py_worker(args: argparse.Namespace) -> None:
    """The same line protocol as the Go peer (see its main.go): start, flip, stop."""
    fleet = PyFleet(args.kubeconfig, VARIANTS[args.variant], args.first, args.nodes, args.wave, args.token_dir)
    while line := await asyncio.to_thread(sys.stdin.readline):
        words = line.split()
        if words == ["start"]:
            await fleet.start()
        elif words[:1] == ["flip"] and len(words) == 4:
            await fleet.flip(int(words[1]), float(words[2]), float(words[3]))
        elif words == ["stop"]:
            await fleet.stop()


def shares(nodes: int, processes: int) -> list[tuple[int, int]]:
    """``(first, count)`` of each process's nodes: contiguous, sizes differing by one at most."""
    processes = min(processes, nodes)
    return [(nodes * k // processes, nodes * (k + 1) // processes - nodes * k // processes) for k in range(processes)]


# --- the host side: the cluster, the metrics, the phases ----------------------------------------

METRIC = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$")


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
        self.latencies: list[float] = []
        """Each node's seconds from its start to its pool published, at the last start that printed them."""

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self, until: str) -> float:
        """The number on the next answer line that starts with ``until`` (per-node start-up
        latencies printed before it are kept in ``latencies``)."""
        assert self.process.stdout is not None
        while answer := self.process.stdout.readline():
            words = answer.split()
            if words[:1] == ["latencies"] and len(words) == 2:
                self.latencies = [float(t) for t in words[1].split(",")]
            if words[:1] == [until]:
                return float(words[1]) if len(words) > 1 else 0.0
        code = self.process.wait()
        raise SystemExit(f"fleet: a fleet process failed before answering {until!r} (exit {code})")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Workers:
    """A fleet's processes: each gets its own line, and the fleet is done when the last is."""

    def __init__(self, argvs: list[list[str]], namespace_pid: int) -> None:
        self.workers = [Worker(argv, namespace_pid) for argv in argvs]

    def command(self, lines: str | list[str], until: str) -> float:
        """Send each process its line (or all the same); the largest number they answer."""
        each = [lines] * len(self.workers) if isinstance(lines, str) else lines
        for worker, line in zip(self.workers, each, strict=True):
            worker.send(line)
        return max(worker.answer(until) for worker in self.workers)

    def latencies(self) -> list[float]:
        return sorted(t for worker in self.workers for t in worker.latencies)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


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
    startup_s: list[float] = field(default_factory=list)
    """Each node's start-up: its publisher's start to its pool published."""


@dataclass(frozen=True)
class Run:
    """One fleet of one variant: its processes (each with its share of the nodes) and names."""

    fleet: str
    variant: Variant
    nodes: int
    shares: list[tuple[int, int]]

    @property
    def driver(self) -> str:
        return self.variant.driver(self.fleet)

    @property
    def prefix(self) -> str:
        return self.variant.prefix(self.fleet)

    def flip_lines(self, churning: int, seconds: float) -> list[str]:
        """The first ``churning`` nodes of the fleet flip: each process its part of them."""
        counts = [max(0, min(first + count, churning) - first) for first, count in self.shares]
        return [f"flip {c} 10 {seconds}" for c in counts]


def run_fleet(run: Run, workers: Workers, metrics: Metrics, args: argparse.Namespace, kubeconfig: Path) -> Result:
    result, figures, n, name = Result(), {}, run.nodes, run.fleet
    before = metrics.snapshot()
    figures["start-up s"] = workers.command("start", "published")
    latencies = result.startup_s = workers.latencies()
    if latencies:
        figures["start-up per node p50 s"] = percentile(latencies, 0.50)
        figures["start-up per node p99 s"] = percentile(latencies, 0.99)
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
    flips = workers.command(run.flip_lines(churning, args.churn), "flipped")
    last_flip = time.monotonic()
    wrong = asyncio.run(wrong_end_state(kubeconfig, run, churning))
    while wrong and time.monotonic() - last_flip < END_STATE_LIMIT:
        time.sleep(1)
        wrong = asyncio.run(wrong_end_state(kubeconfig, run, churning))
    figures["churn end state exact after s"] = time.monotonic() - last_flip
    figures["churn end state wrong nodes"] = wrong
    churn = delta(steady_end, settle(metrics))
    figures["churn writes/s/node"] = writes(churn) / args.churn / churning
    figures["churn writes/flip"] = writes(churn) / flips / churning
    figures["churn KiB"] = churn["bytes"] / 1024

    restart_begin = metrics.snapshot()
    workers.command("stop", "stopped")
    began = time.monotonic()
    workers.command("start", "published")
    figures["restart s"] = time.monotonic() - began
    restart = delta(restart_begin, settle(metrics, quiet=3.0))
    figures["restart requests/node"] = requests(restart) / n
    figures["restart writes"] = writes(restart)
    result.notes.append(f"{name} restart: {counted(restart)}")
    figures["storage MiB"] = metrics.snapshot()["storage"] / 2**20
    if args.pods:
        figures |= asyncio.run(schedule(kubeconfig, run, args.pods))
    result.figures = figures
    return result


def canonical(specs: list[dict[str, Any]]) -> list[str]:
    """A node's slices as comparable text: devices and counter sets, taints without the
    server's ``timeAdded``, in any order of slices."""
    texts = []
    for full in specs:
        spec = {k: full[k] for k in ("devices", "sharedCounters") if full.get(k)}
        for device in spec.get("devices", []):
            for taint in device.get("taints", []):
                taint.pop("timeAdded", None)
        texts.append(json.dumps(spec, sort_keys=True))
    return sorted(texts)


async def wrong_end_state(kubeconfig: Path, run: Run, churning: int) -> int:
    """Nodes whose slices in the API server are not exactly their devices' final state."""
    flipped = canonical(slice_specs(run.variant, run.fleet, True))
    steady = canonical(slice_specs(run.variant, run.fleet, False))
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    by_node: dict[str, list[dict[str, Any]]] = {}
    try:
        async for s in client.list(ResourceSlice, fields={"spec.driver": run.driver}):
            if s.spec and s.spec.nodeName:
                by_node.setdefault(s.spec.nodeName, []).append(s.to_dict()["spec"])
    finally:
        await client.close()
    return sum(
        canonical(by_node.get(f"{run.prefix}{i}", [])) != (flipped if i < churning else steady)
        for i in range(run.nodes)
    )


# --- scheduling pods with claims onto the fleet's nodes ------------------------------------------

NODE_LABEL = "fleet.kubedevice.dev/fleet"
NO_KUBELET_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
"""The node lifecycle controller taints a Node whose kubelet stops reporting (here: never
reports) after its grace period; the benchmark's pods tolerate that instead of the benchmark
renewing 2N Leases every few seconds, more API load than the publishers it measures."""
SCHEDULE_STALL = 120.0
"""Seconds without a new binding after which the scheduling phase gives up."""
CREATORS = 20
"""Pod creations in flight at once."""


async def schedule(kubeconfig: Path, run: Run, pods: int) -> dict[str, float]:
    """Create ``pods`` pods, each with a claim from a ResourceClaimTemplate asking for one of the
    fleet's devices, and let the cluster's kube-scheduler place them on the fleet's nodes.

    Latency runs from the moment a pod's create returned to the watch event that shows it
    bound (``spec.nodeName``); throughput is the pods bound over the time from the first create
    sent to the last binding. Then every claim is checked: allocated, on its pod's node, no
    device given twice, no node's counters overdrawn."""
    namespace = f"kdf-{FLEETS[run.fleet]}-{run.variant.name[:4]}-{os.getpid()}"
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    try:
        await _prepare(client, namespace, run)
        began, created, bound = await _place(client, namespace, run, pods)
        figures = _timing(began, created, bound, pods)
        figures |= await _check(client, namespace, run)
        print(f"{run.fleet} {run.variant.name} scheduling: {figures}", flush=True)
        return figures
    finally:
        await _clean(client, namespace, run)
        await client.close()


async def _prepare(client: AsyncClient, namespace: str, run: Run) -> None:
    await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    deadline = time.monotonic() + 60
    while not await _exists(client, ServiceAccount, "default", namespace):
        if time.monotonic() > deadline:
            raise SystemExit(f"fleet: namespace {namespace} got no default ServiceAccount in 60 s")
        await asyncio.sleep(0.5)
    expression = f'device.driver == "{run.driver}"'
    with contextlib.suppress(ApiError):  # left by an interrupted run: the same content
        await client.create(
            cast(
                DeviceClass,
                DeviceClass.from_dict(
                    {"metadata": {"name": run.driver}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}
                ),
            )
        )
    selector = run.variant.selector
    exactly: dict[str, Any] = {"deviceClassName": run.driver}
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector.format(driver=run.driver)}}]
    await client.create(cast(ResourceClaimTemplate, ResourceClaimTemplate.from_dict({
        "metadata": {"name": "accel", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "accel", "exactly": exactly}]}}}})))  # fmt: skip


async def _exists(client: AsyncClient, kind: type[ServiceAccount], name: str, namespace: str) -> bool:
    try:
        await client.get(kind, name, namespace=namespace)
    except ApiError as err:
        if err.status.code == 404:
            return False
        raise
    return True


def pod_document(name: str, namespace: str, run: Run) -> dict[str, Any]:
    """A pod that needs one device of the fleet's driver, on the fleet's nodes only."""
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {NODE_LABEL: run.prefix.rstrip("-")},
            "tolerations": [{"key": key, "operator": "Exists"} for key in NO_KUBELET_TAINTS],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "accel", "resourceClaimTemplateName": "accel"}],
            "containers": [{"name": "c", "image": "kubedevice.invalid/never-runs:1",
                            "resources": {"claims": [{"name": "accel"}]}}],
        },
    }  # fmt: skip


async def _place(
    client: AsyncClient, namespace: str, run: Run, pods: int
) -> tuple[float, dict[str, float], dict[str, float]]:
    """Create the pods while a watch notes when each is bound; (first send, created, bound)."""
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    progress = asyncio.Event()
    watcher = asyncio.create_task(_watch_bindings(client, namespace, bound, progress))
    gate = asyncio.Semaphore(CREATORS)

    async def create(i: int) -> None:
        async with gate:
            await client.create(cast(Pod, Pod.from_dict(pod_document(f"p{i}", namespace, run))))
            created[f"p{i}"] = time.monotonic()

    began = time.monotonic()
    try:
        await asyncio.gather(*(create(i) for i in range(pods)))
        while len(bound) < pods:
            progress.clear()
            try:
                async with asyncio.timeout(SCHEDULE_STALL):
                    await progress.wait()
            except TimeoutError:
                print(f"fleet: {pods - len(bound)} pods not bound after {SCHEDULE_STALL:.0f} s without progress")
                break
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    return began, created, bound


async def _watch_bindings(
    client: AsyncClient, namespace: str, bound: dict[str, float], progress: asyncio.Event
) -> None:
    """A watch without a resourceVersion starts with every existing pod, so none is missed."""
    while True:
        with contextlib.suppress(ApiError, httpx2.HTTPError):
            async for _, pod in client.watch(Pod, namespace=namespace):
                name = pod.metadata.name if pod.metadata else None
                if name and pod.spec and pod.spec.nodeName and name not in bound:
                    bound[name] = time.monotonic()
                    progress.set()
        await asyncio.sleep(0.2)


def _timing(began: float, created: dict[str, float], bound: dict[str, float], pods: int) -> dict[str, float]:
    latencies = sorted(max(0.0, bound[p] - created[p]) for p in bound if p in created)
    if not latencies:
        return {"schedule pods bound": 0}
    return {
        "schedule pods bound": len(bound),
        "schedule pods/s": len(bound) / max(1e-9, max(bound.values()) - began),
        "schedule p50 s": percentile(latencies, 0.50),
        "schedule p99 s": percentile(latencies, 0.99),
        "schedule pods not bound": pods - len(bound),
    }


def percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


async def _check(client: AsyncClient, namespace: str, run: Run) -> dict[str, float]:
    """Every bound pod's claim: allocated, on the pod's node and the fleet's driver, no device
    given twice, no node's counter set drawn beyond its size."""
    claims = {c.metadata.name: c.to_dict() async for c in client.list(ResourceClaim, namespace=namespace)
              if c.metadata and c.metadata.name}  # fmt: skip
    consumes = consumption(slice_specs(run.variant, run.fleet, False))
    misplaced = unallocated = 0
    given: Counter[tuple[str, str]] = Counter()
    drawn: Counter[str] = Counter()
    async for pod in client.list(Pod, namespace=namespace):
        node = pod.spec.nodeName if pod.spec else None
        if not node:
            continue
        statuses = (pod.status.resourceClaimStatuses if pod.status else None) or []
        allocations = [a for s in statuses if (a := _allocation(claims, s.resourceClaimName))]
        if not statuses or len(allocations) < len(statuses):
            unallocated += 1
            continue
        for allocation in allocations:
            for result in allocation["devices"]["results"]:
                misplaced += result["pool"] != node or result["driver"] != run.driver
                given[(result["pool"], result["device"])] += 1
                drawn[result["pool"]] += consumes.get(result["device"], 0)
    return {
        "schedule claims not allocated": unallocated,
        "schedule devices not on pod's node": misplaced,
        "schedule devices given twice": sum(v - 1 for v in given.values()),
        "schedule nodes counters overdrawn": sum(v > PER_NODE for v in drawn.values()),
    }


def _allocation(claims: dict[str, dict[str, Any]], name: str | None) -> dict[str, Any] | None:
    allocation: dict[str, Any] | None = (claims.get(name or "", {}).get("status") or {}).get("allocation")
    return allocation


def consumption(specs: list[dict[str, Any]]) -> dict[str, int]:
    """What each device takes of its counter set (``replicas``, kubedevice's one counter)."""
    return {
        device["name"]: sum(int(c["counters"][REPLICAS_COUNTER]["value"]) for c in device.get("consumesCounters", []))
        for spec in specs
        for device in spec.get("devices", [])
    }


async def _clean(client: AsyncClient, namespace: str, run: Run) -> None:
    """Pods on Nodes without a kubelet never finish a graceful deletion: delete them at once;
    their claims go with them (owner references), then the namespace and the class."""
    gate = asyncio.Semaphore(CREATORS)

    async def delete(name: str) -> None:
        async with gate:
            with contextlib.suppress(ApiError):
                await client.delete(Pod, name, namespace=namespace, grace_period=0)

    names = [p.metadata.name async for p in client.list(Pod, namespace=namespace) if p.metadata and p.metadata.name]
    await asyncio.gather(*(delete(n) for n in names))
    with contextlib.suppress(ApiError):
        await client.delete(Namespace, namespace)
    with contextlib.suppress(ApiError):
        await client.delete(DeviceClass, run.driver)


# --- the Nodes ----------------------------------------------------------------------------------


def node_document(name: str, fleet_label: str) -> dict[str, Any]:
    """A Node as a kubelet registers it: Ready, with room for pods, labelled by fleet. Status is
    kept on create (the API server's node strategy drops nothing on create)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    room = {"pods": "110", "cpu": "8", "memory": "64Gi"}
    return {
        "metadata": {"name": name, "labels": {NODE_LABEL: fleet_label}},
        "status": {
            "capacity": room, "allocatable": room,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated by benchmarks/fleet.py", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}],
        },
    }  # fmt: skip


def node_names(variant: Variant, nodes: int) -> list[str]:
    return [f"{variant.prefix(fleet)}{i}" for fleet in FLEETS for i in range(nodes)]


async def create_nodes(kubeconfig: Path, variant: Variant, nodes: int) -> None:
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    names = node_names(variant, nodes)
    try:
        for start in range(0, len(names), 50):
            await asyncio.gather(
                *(client.create(cast(Node, Node.from_dict(node_document(n, n.rpartition("-")[0]))))
                  for n in names[start : start + 50]),
                return_exceptions=True,
            )  # fmt: skip
    finally:
        await client.close()


async def issue_tokens(kubeconfig: Path, variant: Variant, nodes: int) -> dict[str, str]:
    """A token bound to each kubedevice Node (TokenRequest with a Node ``boundObjectRef``: it
    carries the node's name and UID as a pod's projected token does), made before the counted
    windows: the publisher then needs no Node GET, as in a DaemonSet pod."""
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    names = [f"{variant.prefix('kubedevice')}{i}" for i in range(nodes)]
    tokens: dict[str, str] = {}

    async def issue(name: str) -> None:
        node = await client.get(Node, name)
        assert node.metadata is not None
        ref = BoundObjectReference(apiVersion="v1", kind="Node", name=name, uid=node.metadata.uid)
        request = ServiceAccountToken(
            metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], boundObjectRef=ref, expirationSeconds=3600)
        )
        answer = await client.create(request, "default", namespace="default")
        assert answer.status is not None
        tokens[name] = str(answer.status.token)

    try:
        for start in range(0, len(names), 50):
            await asyncio.gather(*(issue(n) for n in names[start : start + 50]))
    finally:
        await client.close()
    return tokens


def write_tokens(directory: Path, tokens: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, token in tokens.items():
        (directory / name).write_text(token)
    return directory


async def wait_marked(kubeconfig: Path, variant: Variant, nodes: int, limit: float = 240.0) -> None:
    """Wait until the node lifecycle controller has marked every new Node unreachable (the
    ``unreachable:NoSchedule`` taint it adds with Ready Unknown, 50 s after the last heartbeat
    by default): its GETs and writes of 2N Nodes then fall before the counted windows. At most
    ``limit`` seconds: at 2,000 Nodes the controller-manager (its client at QPS 20) takes more
    than 10 minutes, and what it does later shows as Node GETs in the per-request breakdown."""
    wanted = set(node_names(variant, nodes))
    marked: set[str] = set()
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    begin = time.monotonic()
    try:
        while not wanted <= marked and time.monotonic() - begin < limit:
            await asyncio.sleep(5)
            marked = {n.metadata.name or "" async for n in client.list(Node) if n.metadata and _unreachable(n)}
    finally:
        await client.close()
    took = time.monotonic() - begin
    count = f"{len(wanted & marked)} of {len(wanted)}"
    print(f"{variant.name}: {count} Nodes marked unreachable in {took:.0f} s", flush=True)
    await asyncio.sleep(5)  # the controller's last writes of the pass that marked them


def _unreachable(node: Node) -> bool:
    taints = (node.spec.taints if node.spec else None) or []
    return any(t.key == NO_KUBELET_TAINTS[0] and t.effect == "NoSchedule" for t in taints)


async def delete_nodes(kubeconfig: Path, variant: Variant, nodes: int) -> None:
    """The Nodes go, and the garbage collector takes their slices (owner references)."""
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-fleet")
    names = node_names(variant, nodes)
    try:
        for start in range(0, len(names), 50):
            await asyncio.gather(*(client.delete(Node, n) for n in names[start : start + 50]), return_exceptions=True)
        for fleet in FLEETS:
            async for s in client.list(ResourceSlice, fields={"spec.driver": variant.driver(fleet)}):
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


def print_table(results: dict[str, Result], variant: Variant, args: argparse.Namespace) -> None:
    nodes = args.nodes
    layout = "8 devices" if variant.name == "flat" else "1 GPU as 8 partitions + the whole (counters)"
    print(
        f"\n{variant.name}: {nodes} simulated nodes, {layout} each; kubedevice in {min(args.processes, nodes)} "
        f"processes; churn: {max(1, nodes // 10)} nodes flipping one device 10/s; {args.pods} pods with claims"
    )
    print(f"| {'figure':34} | {'kubedevice':>11} | {'Go resourceslice':>16} | {'ratio':>6} |")
    print(f"|{'-' * 36}|{'-' * 13}:|{'-' * 17}:|{'-' * 7}:|")
    py, go = results.get("kubedevice"), results.get("go")
    keys = (py or go or Result()).figures
    for key in keys:
        a = py.figures.get(key) if py else None
        b = go.figures.get(key) if go else None
        ratio = f"{a / b:6.2f}" if a is not None and b else "     -"
        print(f"| {key:34} | {_cell(a, 11)} | {_cell(b, 16)} | {ratio} |")
    for result in results.values():
        for note in result.notes:
            print(f"  {note}")


def _cell(value: float | None, width: int) -> str:
    return f"{value:{width}.3f}" if value is not None else " " * width


def fleet_argv(run: Run, kubeconfig: Path, peer: Path, specs: Path, tokens: Path | None) -> list[list[str]]:
    """Each process of the fleet: the Go peer is one (its goroutines use every core), the Python
    fleet ``--processes`` of them, each a share of the nodes, starting ``WAVE`` nodes at a time
    between them."""
    if run.fleet == "go":
        return [[str(peer), "-kubeconfig", str(kubeconfig), "-nodes", str(run.nodes), "-prefix", run.prefix,
                 "-driver", run.driver, "-slices", str(specs), "-wave", str(WAVE)]]  # fmt: skip
    wave = max(1, WAVE // len(run.shares))
    return [
        [sys.executable, __file__, "--worker", "--variant", run.variant.name, "--first", str(first),
         "--nodes", str(count), "--wave", str(wave), "--kubeconfig", str(kubeconfig),
         *(["--token-dir", str(tokens)] if tokens is not None else [])]
        for first, count in run.shares
    ]  # fmt: skip


def run_variant(variant: Variant, args: argparse.Namespace, cluster: Cluster, peer: Path, scratch: Path) -> None:
    state = cluster.state()
    assert state is not None
    kubeconfig = cluster.kubeconfig
    results: dict[str, Result] = {}
    try:
        asyncio.run(create_nodes(kubeconfig, variant, args.nodes))
        asyncio.run(wait_marked(kubeconfig, variant, args.nodes))
        metrics = Metrics(kubeconfig)
        for fleet in FLEETS:
            if args.only not in (None, fleet):
                continue
            processes = args.processes if fleet == "kubedevice" else 1
            run = Run(fleet, variant, args.nodes, shares(args.nodes, processes))
            specs = write_specs(scratch, variant)
            tokens = None if args.no_tokens or fleet != "kubedevice" else scratch / f"tokens-{variant.name}"
            if tokens is not None:
                write_tokens(tokens, asyncio.run(issue_tokens(kubeconfig, variant, args.nodes)))
            workers = Workers(fleet_argv(run, kubeconfig, peer, specs, tokens), state.namespace_pid)
            try:
                results[fleet] = run_fleet(run, workers, metrics, args, kubeconfig)
            finally:
                workers.close()
            print(f"{fleet} {variant.name}: {results[fleet].figures}", flush=True)
    finally:
        asyncio.run(delete_nodes(kubeconfig, variant, args.nodes))
    print_table(results, variant, args)
    svg = plots.svg_dir(args)
    if svg is not None:
        draw_startup(svg, results, variant, args.nodes)


def draw_startup(directory: Path, results: dict[str, Result], variant: Variant, nodes: int) -> None:
    """Each node's start-up as a distribution, both fleets of the run: what one DaemonSet pod waits."""
    series = {name: result.startup_s for name, result in results.items() if result.startup_s}
    if not series:
        return
    panel = plots.Panel(f"{nodes} nodes, {variant.name}: publisher start to pool published", series)
    title = "ResourceSlice publishing, per-node start-up, kubedevice against Go's resourceslice.Controller"
    plots.ecdf(directory / f"fleet-startup-{variant.name}.svg", title, "s", [panel], plots.machine_note())


def write_specs(scratch: Path, variant: Variant) -> Path:
    """The Go peer's slices, written just before it starts: a run takes long enough for a
    cleaner of old temporary directories to have taken an earlier copy."""
    scratch.mkdir(parents=True, exist_ok=True)
    specs = scratch / f"{variant.name}.json"
    specs.write_text(json.dumps({"healthy": slice_specs(variant, "go", False),
                                 "unhealthy": slice_specs(variant, "go", True)}))  # fmt: skip
    return specs


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--variant",
        choices=("flat", "partitionable", "both"),
        default="both",
        help="the device layout (default: both, one after the other)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        help="processes of the kubedevice fleet, each a share of the nodes (default: the CPUs)",
    )
    parser.add_argument("--pods", type=int, default=1000, help="pods with claims to schedule (0: none)")
    parser.add_argument("--steady", type=float, default=180.0, help="seconds at rest (default 180)")
    parser.add_argument("--churn", type=float, default=30.0, help="seconds of flipping (default 30)")
    parser.add_argument("--cluster-dir", type=Path, help="a cluster started with scripts/cluster.sh up --dir DIR")
    parser.add_argument("--only", choices=tuple(FLEETS), help="run one fleet only")
    parser.add_argument(
        "--no-tokens",
        action="store_true",
        help="kubedevice's nodes without a service-account token (certificates only: a Node GET each)",
    )
    plots.add_svg_option(parser)
    parser.add_argument("--token-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--wave", type=int, default=WAVE, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def bad_arguments(args: argparse.Namespace) -> str | None:
    """The first argument out of range, as one line naming it."""
    if args.nodes < 1:
        return "--nodes must be at least 1"
    if args.processes < 1:
        return "--processes must be at least 1"
    free = args.nodes * PER_NODE - max(1, args.nodes // 10)  # a churning node ends with one device tainted
    if not args.worker and not 0 <= args.pods <= free:
        return f"--pods must be between 0 and {free}, the healthy devices of {args.nodes} nodes after the churn"
    return None


def main() -> int:
    args = arguments()
    problem = bad_arguments(args)
    if problem is not None:
        print(f"fleet: {problem}", file=sys.stderr)
        return 2
    if args.worker:
        asyncio.run(py_worker(args))
        return 0
    peer = gobuild.build(HERE / "go" / "fleetpeer", ".", "fleetpeer", timeout=1800)
    if peer is None:
        raise SystemExit("fleet: the Go peer needs a Go toolchain")
    variants = list(VARIANTS.values()) if args.variant == "both" else [VARIANTS[args.variant]]
    scratch_dir = tempfile.TemporaryDirectory(prefix="kdfleet-", ignore_cleanup_errors=True)
    with cluster_at(args.cluster_dir) as cluster, scratch_dir as scratch:
        print(f"load before: {Path('/proc/loadavg').read_text().strip()}", flush=True)
        for variant in variants:
            run_variant(variant, args, cluster, peer, Path(scratch))
        print(f"load after: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
