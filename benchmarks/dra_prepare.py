"""DRA driver benchmark: ``python benchmarks/dra_prepare.py [--quick] [--cluster-dir DIR] [--device-metadata]``.

Two parts, each printing medians and p99:

1. **In process, claims in memory** (no API server): NodePrepareResources + NodeUnprepareResources
   for 1 and 32 claims from the kubelet-side client to the driver over a real unix socket, CDI
   spec files and checkpoint writes included: what the driver itself costs per call (with
   ``--device-metadata``, the driver also writes each claim's device metadata). Then the
   same client's NodeUnprepareResources against a bare grpc.aio server that only answers (no
   driver code): grpcio's per-call floor, the part of the driver's figure no Python code can cut.
2. **Against Kubernetes' own DRA test driver**, same run, same client (kubedevice's ``DraClient``,
   as the kubelet calls): ``kubedevice serve`` with a ``dra:`` config and the Go test driver
   (``k8s.io/kubernetes/test/e2e/dra/test-driver`` on ``kubeletplugin``), each a process of its
   own with its sockets in a kubelet directory of ours, both fetching every claim from the same
   real kube-apiserver (claims created and allocated through the status subresource). Rounds
   are interleaved, rotating which driver goes first, so machine noise hits both alike; the
   spread of per-block medians is printed as the noise estimate. The bare grpc.aio server of part 1
   runs too, in a process of its own like both drivers, its NodeUnprepareResources timed in the
   same rounds: the floor of a Python driver (part 1's, sharing the client's process, is lower).
   Then the idle RSS of both (after registration and publishing, before any call, and again after
   the calls), and for kubedevice a hotplug (a device node appears / vanishes under its host root)
   until the ResourceSlice in the API server shows it, polled every 10 ms: each change after a
   quiet period, then back to back (within the publisher's ``min_interval``).

Not alike, so read ratios with this in mind: kubedevice records every call in its checkpoint of
prepared claims (one appended line, on disk, before it answers; no fsync, see
``kubedevice.dra.driver.checkpoint`` for why) and writes CDI specs atomically; the Go test driver
keeps prepared claims in memory only and writes its CDI files with a plain write.
Its client-go rate limit (50 QPS, burst 100 by default) is raised so that it never waits on it.
As on a node, CDI directories are on tmpfs and checkpoints on disk.

The second part needs a cluster: ``--cluster-dir`` of one started with ``scripts/cluster.sh up``,
else one is started in a temporary directory (~30 s warm) and torn down at the end. Part 2's
latency distributions, ours against Go's, are drawn into ``dra-prepare.svg`` and
``dra-unprepare.svg`` in ``--svg DIR`` (default docs/benchmarks/, which docs/benchmarks.md shows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grpc import aio
from lightkube import AsyncClient, KubeConfig

from kubedevice.api import dra_v1_pb2 as v1
from kubedevice.api import dra_v1_pb2_grpc as v1_grpc
from kubedevice.device import ContainerAllocation, Device, DeviceSpec
from kubedevice.dra.driver import DraDriver, DriverService, ServiceOptions
from kubedevice.dra.driver.publisher import MIN_INTERVAL_SECONDS
from kubedevice.dra.driver.state import ClaimError
from kubedevice.dra.nodeclaims import AllocatedDevice, Claim
from kubedevice.kubelet.dra.plugin import DraClient, Registered, register
from kubedevice.plugin.base import Plugin
from kubedevice.testing import components
from kubedevice.testing import dratestdriver as go
from kubedevice.testing.cluster import Cluster, leftovers, missing_prerequisite

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plots
from procstat import noise, percentile, sample

DRIVER = "bench.example.com"
NODE = "bench-node"
OURS = "bench.kubedevice.test"
GO = "go.bench.kubedevice.test"
SIZES = (1, 32)
BLOCKS = 5
HOT_POLL = 0.01


# --- part 1: in process, claims in memory --------------------------------------------------------


class MemoryClaims:
    """Claims already allocated, kept in memory: the benchmark measures the driver, not an API server."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], Claim] = {}

    def add(self, name: str, device: str) -> tuple[str, str, str]:
        uid = str(uuid.uuid4())
        result = AllocatedDevice("req", DRIVER, NODE, device)
        self.claims["default", name] = Claim("default", name, uid, True, (result,))
        return "default", name, uid

    async def get(self, namespace: str, name: str) -> Claim:
        try:
            return self.claims[namespace, name]
        except KeyError:
            raise ClaimError(f"no claim {namespace}/{name}") from None


async def in_process(rounds: int, root: Path, cdi: Path, device_metadata: bool = False) -> None:
    grant = ContainerAllocation(envs={"DEV": "x"}, devices=[DeviceSpec("/dev/null")])
    plugin = Plugin("example.com/bench", [Device(f"d{i}", grant=grant) for i in range(64)])
    driver = DraDriver(DRIVER, [plugin], device_metadata=device_metadata)
    claims = MemoryClaims()
    (root / "boot_id").write_text("bench\n")
    for made_by_the_kubelet in ("plugins", "plugins_registry"):  # the driver waits for them, never makes them
        (root / "kubelet" / made_by_the_kubelet).mkdir(parents=True, exist_ok=True)
    options = ServiceOptions(NODE, root / "kubelet", cdi, root / "boot_id")
    service = DriverService(driver, claims, options, None)
    await service.start()
    print(f"in process, claims in memory (the driver's own cost{', device metadata' if device_metadata else ''}):")
    try:
        async with DraClient(await register(service.sockets.registration)) as client:
            for size in SIZES:
                prepare: list[float] = []
                unprepare: list[float] = []
                for r in range(rounds):
                    refs = [claims.add(f"c{r}-{i}", f"d{i}") for i in range(size)]
                    start = time.perf_counter()
                    await client.prepare(refs)
                    middle = time.perf_counter()
                    await client.unprepare(refs)
                    prepare.append((middle - start) * 1000)
                    unprepare.append((time.perf_counter() - middle) * 1000)
                for name, times in (("NodePrepareResources", prepare), ("NodeUnprepareResources", unprepare)):
                    print(
                        f"  {name:22s} {size:2d} claims: median {statistics.median(times):7.2f} ms, "
                        f"p99 {percentile(times, 0.99):7.2f} ms ({rounds} rounds)"
                    )
    finally:
        await service.stop()


class BareUnprepare(v1_grpc.DRAPluginServicer):  # type: ignore[misc]
    """grpcio's floor: NodeUnprepareResources answered with the map of empty errors, nothing else."""

    async def NodeUnprepareResources(
        self, request: v1.NodeUnprepareResourcesRequest, context: object
    ) -> v1.NodeUnprepareResourcesResponse:
        response = v1.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].error = ""
        return response


async def serve_bare(socket: Path) -> None:
    """``--serve-bare SOCKET``: the bare server alone in its process, until SIGTERM (part 2's floor)."""
    server = aio.server(options=[("grpc.so_reuseport", 0)])
    v1_grpc.add_DRAPluginServicer_to_server(BareUnprepare(), server)
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    gc.freeze()  # as serve does once ready: this process imported the whole benchmark's modules
    await server.wait_for_termination()


@contextlib.asynccontextmanager
async def bare_process(socket: Path, log: Path) -> AsyncIterator[DraClient]:
    """The bare server in a process of its own, as both drivers are: a client of it."""
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--serve-bare", str(socket), stdout=out, stderr=out
        )
    try:
        await until(lambda: _true(socket.is_socket() or process.returncode is not None), 30)
        if process.returncode is not None:
            raise RuntimeError(f"bare server exited: {_tail(log)}")
        async with DraClient(Registered(DRIVER, str(socket), "v1.DRAPlugin")) as client:
            yield client
    finally:
        await go.stop(process)


def _tail(log: Path) -> str:
    return log.read_text()[-2000:]


async def bare_floor(rounds: int, root: Path) -> None:
    """The same client and calls against a bare grpc.aio server: what no Python driver can go below."""
    server = aio.server(options=[("grpc.so_reuseport", 0)])
    v1_grpc.add_DRAPluginServicer_to_server(BareUnprepare(), server)
    socket = root / "bare.sock"
    server.add_insecure_port(f"unix:{socket}")
    await server.start()
    try:
        async with DraClient(Registered(DRIVER, str(socket), "v1.DRAPlugin")) as client:
            for size in SIZES:
                refs = [("default", f"bare-{i}", str(uuid.uuid4())) for i in range(size)]
                times: list[float] = []
                for _ in range(rounds):
                    start = time.perf_counter()
                    await client.unprepare(refs)
                    times.append((time.perf_counter() - start) * 1000)
                print(
                    f"  {'bare grpc.aio server':22s} {size:2d} claims: median {statistics.median(times):7.2f} ms, "
                    f"p99 {percentile(times, 0.99):7.2f} ms (NodeUnprepareResources, no driver code)"
                )
    finally:
        await server.stop(0)


# --- part 2: against the Go test driver, claims in the API server --------------------------------


@dataclass
class Peer:
    """One driver process under test, as the kubelet sees it."""

    name: str
    driver: str
    pid: int
    client: DraClient
    claims: dict[int, list[tuple[str, str, str]]] = field(default_factory=dict)
    """Per claim count, the claims prepared and unprepared each round (the same ones every round)."""
    times: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    rss_kib: dict[str, int] = field(default_factory=dict)

    async def round(self, size: int) -> None:
        refs = self.claims[size]
        start = time.perf_counter()
        prepared = await self.client.prepare(refs)
        middle = time.perf_counter()
        unprepared = await self.client.unprepare(refs)
        end = time.perf_counter()
        errors = [c.error for c in [*prepared.claims.values(), *unprepared.claims.values()] if c.error]
        if errors or len(prepared.claims) != size:
            raise RuntimeError(f"{self.name}: {len(prepared.claims)} of {size} claims answered, errors {errors[:3]}")
        self.times.setdefault(("prepare", size), []).append((middle - start) * 1000)
        self.times.setdefault(("unprepare", size), []).append((end - middle) * 1000)


@dataclass
class BarePeer(Peer):
    """The bare grpc.aio server in its own process: NodeUnprepareResources only, of claims it never saw."""

    async def round(self, size: int) -> None:
        refs = [("default", f"bare-{i}", f"bare-uid-{i}") for i in range(size)]
        start = time.perf_counter()
        await self.client.unprepare(refs)
        self.times.setdefault(("unprepare", size), []).append((time.perf_counter() - start) * 1000)


def our_config(path: Path, devices: int) -> None:
    path.write_text(
        f"dra:\n  driver: {OURS}\nresources:\n"
        f"  - name: example.com/bench\n    static: {{count: {devices}, paths: [/dev/null]}}\n"
        '    env:\n      BENCH_DEVICE: "{ids}"\n'
        '  - name: example.com/hot\n    glob: {paths: ["/dev/hot*"]}\n'
    )


@contextlib.asynccontextmanager
async def serve_ours(work: Path, cdi: Path, kubeconfig: Path, node: str) -> AsyncIterator[tuple[int, Path, Path]]:
    """``kubedevice serve`` with the bench config; yields (pid, registration socket, host root)."""
    root = work / "root"
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "null").touch()
    our_config(work / "bench.yaml", 32)
    kubelet_dir = work / "kubelet"
    for made_by_the_kubelet in ("plugins", "plugins_registry"):  # the driver waits for them, never makes them
        (kubelet_dir / made_by_the_kubelet).mkdir(parents=True)
    argv = [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(work / "bench.yaml"),
        "--node",
        node,
        "--kubelet-dir",
        str(kubelet_dir),
        "--cdi-dir",
        str(cdi),
        "--kubeconfig",
        str(kubeconfig),
        "--host-root",
        str(root),
        "--log-level",
        "warning",
    ]
    registration = kubelet_dir / "plugins_registry" / f"{OURS}-reg.sock"
    with (work / "serve.log").open("ab") as log:
        process = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log)
    try:
        await until(lambda: _true(registration.is_socket() or process.returncode is not None), 30)
        if process.returncode is not None:
            raise RuntimeError(f"kubedevice serve exited: {(work / 'serve.log').read_text()[-2000:]}")
        yield process.pid, registration, root
    finally:
        await go.stop(process)


async def _true(value: bool) -> bool:
    return value


async def until(check: Callable[[], Awaitable[bool]], timeout: float, poll: float = 0.05) -> float:
    """Seconds until ``await check()`` holds; TimeoutError after ``timeout``."""
    start = time.perf_counter()
    while not await check():
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"not within {timeout} s")
        await asyncio.sleep(poll)
    return time.perf_counter() - start


async def device_names(api: AsyncClient, node: str, driver: str) -> list[str]:
    return [d["name"] for s in await go.slices(api, node, driver) for d in s["spec"].get("devices", [])]


async def allocate(api: AsyncClient, namespace: str, peer: Peer, node: str, device: Callable[[int], str]) -> None:
    for size in SIZES:
        peer.claims[size] = [
            go.ref(
                await go.allocated_claim(
                    api,
                    namespace,
                    f"{peer.driver.split('.')[0]}-{size}-{i}",
                    driver=peer.driver,
                    pool=node,
                    devices=[device(i)],
                )
            )
            for i in range(size)
        ]


async def against_go(
    program: Path, kubeconfig: Path, rounds: int, hot_rounds: int, work: Path, cdi: Path, svg: Path | None
) -> None:
    api = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-bench")
    node = namespace = f"kd-bench-{uuid.uuid4().hex[:6]}"
    go_options = go.GoDriverOptions(
        kubeconfig, work / "go" / "kubelet", cdi / "go", node, GO, devices=32, api_qps=10_000
    )
    try:
        async with (
            go.node_and_namespace(api, node, namespace),
            go.running(program, go_options, work / "go.log") as go_process,
            serve_ours(work / "ours", cdi / "ours", kubeconfig, node) as (our_pid, our_registration, host_root),
            DraClient(await register(our_registration)) as our_client,
            DraClient(await register(go_options.registration)) as go_client,
            bare_process(work / "bare.sock", work / "bare.log") as bare_client,
        ):
            ours = Peer("kubedevice", OURS, our_pid, our_client)
            theirs = Peer("Go test driver", GO, go_process.pid, go_client)
            bare = BarePeer("bare grpc.aio", "", 0, bare_client)
            peers = [ours, theirs]
            for peer in peers:  # 32 devices each (no hot device yet)
                await until(lambda p=peer: _has(api, node, p.driver, 32), 30)
            await asyncio.sleep(2)  # settle: publishing done, nothing in flight
            for peer in peers:
                peer.rss_kib["idle"] = sample(peer.pid, 0).rss_kib
            await allocate(api, namespace, ours, node, lambda i: f"bench-bench-{i}")
            await allocate(api, namespace, theirs, node, lambda i: f"device-{i:02d}")
            timed = [*peers, bare]
            for _ in range(3):  # warm-up: connections, caches
                for peer in timed:
                    for size in SIZES:
                        await peer.round(size)
            for peer in timed:
                peer.times.clear()
            freeze_harness_heap()
            for r in range(rounds):
                for size in SIZES:
                    for peer in timed[r % 3 :] + timed[: r % 3]:  # each goes first in turn
                        await peer.round(size)
            await asyncio.sleep(2)
            for peer in peers:
                peer.rss_kib["after"] = sample(peer.pid, 0).rss_kib
            report(peers, rounds)
            report_floor(ours, theirs, bare)
            if svg is not None:
                draw(svg, ours, theirs, bare)
            await hotplug(api, node, host_root, hot_rounds)
    finally:
        await api.close()


def freeze_harness_heap() -> None:
    """The client's start-up heap (the cluster, lightkube, the drivers' set-up) frozen before the
    timed rounds: a full collection in this process paused it 28-123 ms (a gc.callbacks probe),
    landing on whichever driver was being timed. The drivers' own processes are left as they are."""
    gc.collect()
    gc.freeze()


async def _has(api: AsyncClient, node: str, driver: str, count: int) -> bool:
    return len(await device_names(api, node, driver)) == count


def report(peers: Sequence[Peer], rounds: int) -> None:
    ours, theirs = peers
    print(f"\nagainst the Go DRA test driver, claims fetched from the API server ({rounds} rounds, interleaved):")
    print(f"  {'call':24} {'claims':>6}  {'driver':15} {'median ms':>10} {'p99 ms':>8} {'block spread':>13}")
    for call in ("Prepare", "Unprepare"):
        for size in SIZES:
            for peer in peers:
                times = peer.times[call.lower(), size]
                print(
                    f"  {f'Node{call}Resources':24} {size:>6}  {peer.name:15} {statistics.median(times):10.2f} "
                    f"{percentile(times, 0.99):8.2f} {spread(times):12.0f}%"
                )
            a, b = ours.times[call.lower(), size], theirs.times[call.lower(), size]
            print(
                f"  {'':24} {'':>6}  {'ratio ours/Go':15} {statistics.median(a) / statistics.median(b):9.2f}× "
                f"{percentile(a, 0.99) / percentile(b, 0.99):7.2f}×"
            )
    rss = ", ".join(f"{p.name} {p.rss_kib['idle'] / 1024:.1f} / {p.rss_kib['after'] / 1024:.1f}" for p in peers)
    print(
        f"  RSS MiB, idle after start / after the calls: {rss}; "
        f"idle ratio ours/Go {ours.rss_kib['idle'] / theirs.rss_kib['idle']:.2f}×"
    )


def report_floor(ours: Peer, theirs: Peer, bare: Peer) -> None:
    """Where Python's floor is: a bare grpc.aio server in its own process, same client, same rounds."""
    print("  floor: a bare grpc.aio server in its own process, NodeUnprepareResources only, same rounds:")
    for size in SIZES:
        floor, o, g = (p.times["unprepare", size] for p in (bare, ours, theirs))
        print(
            f"  {'':24} {size:>6}  {'bare grpc.aio':15} {statistics.median(floor):10.2f} "
            f"{percentile(floor, 0.99):8.2f} {spread(floor):12.0f}%   bare/Go "
            f"{statistics.median(floor) / statistics.median(g):.2f}×, ours/bare "
            f"{statistics.median(o) / statistics.median(floor):.2f}× (medians)"
        )


def draw(directory: Path, ours: Peer, theirs: Peer, bare: Peer) -> None:
    """Each call's latency distribution, ours against Go's in the same rounds (and the floor's)."""
    note = plots.machine_note()
    for call, extra in (("prepare", ()), ("unprepare", (bare,))):
        panels = [
            plots.Panel(
                f"{size} claim{'s' if size > 1 else ''}", {p.name: p.times[call, size] for p in (ours, theirs, *extra)}
            )
            for size in SIZES
        ]
        title = f"DRA Node{call.title()}Resources, claims from the API server, interleaved rounds"
        plots.ecdf(directory / f"dra-{call}.svg", title, "ms", panels, note)


def spread(times: Sequence[float]) -> float:
    """(max - min) / median of the medians of BLOCKS consecutive blocks of rounds, in percent."""
    size = max(1, len(times) // BLOCKS)
    medians = [statistics.median(times[i : i + size]) for i in range(0, size * BLOCKS, size) if times[i : i + size]]
    return (max(medians) - min(medians)) / statistics.median(medians) * 100


async def hotplug(api: AsyncClient, node: str, host_root: Path, rounds: int) -> None:
    """A device node appears, then vanishes, under kubedevice's host root: time until the slice shows it.

    Twice: each change after a quiet period (longer than the publisher's ``min_interval``: what a
    device plugged into an idle node waits), and back to back, each change made as soon as the
    last one shows (within ``min_interval`` of the last write, so it waits out the rest of it:
    the publisher's write rate limit at work, by design)."""
    quiet = MIN_INTERVAL_SECONDS + 0.1
    for label, pause, first in (("after a quiet period", quiet, 1), ("back to back", 0.0, rounds + 1)):
        added: list[float] = []
        removed: list[float] = []
        for i in range(first, first + rounds):
            name, path = f"hot-hot{i}", host_root / "dev" / f"hot{i}"
            await asyncio.sleep(pause)
            start = time.perf_counter()
            path.touch()
            await until(lambda n=name: _contains(api, node, n, True), 10, HOT_POLL)
            added.append(time.perf_counter() - start)
            await asyncio.sleep(pause)
            start = time.perf_counter()
            path.unlink()
            await until(lambda n=name: _contains(api, node, n, False), 10, HOT_POLL)
            removed.append(time.perf_counter() - start)
        print(
            f"\nkubedevice hotplug → ResourceSlice updated in the API server, {label} ({rounds} rounds, "
            f"polled every {HOT_POLL * 1000:.0f} ms):"
        )
        for what, times in (("device added", added), ("device removed", removed)):
            print(
                f"  {what:15} median {statistics.median(times) * 1000:6.0f} ms, "
                f"p99 {percentile(times, 0.99) * 1000:6.0f} ms, max {max(times) * 1000:6.0f} ms"
            )


async def _contains(api: AsyncClient, node: str, name: str, present: bool) -> bool:
    return (name in await device_names(api, node, OURS)) == present


@contextlib.contextmanager
def cluster_at(directory: Path | None) -> Iterator[Path]:
    """The kubeconfig of the cluster in ``directory``, or of one started (and torn down) for this run."""
    if directory is not None:
        cluster = Cluster(directory)
        if cluster.state() is None:
            raise SystemExit(f"dra_prepare: no cluster in {directory} (scripts/cluster.sh up --dir {directory})")
        yield cluster.kubeconfig
        return
    reason = missing_prerequisite()
    if reason is not None:
        raise SystemExit(f"dra_prepare: cannot start a cluster: {reason}")
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="kdb-")))  # short: socket paths below it are limited
    cluster.up(components.ensure_all())
    state = cluster.state()
    try:
        yield cluster.kubeconfig
    finally:
        cluster.down()
        if state is not None and not leftovers(cluster.dir, state):
            shutil.rmtree(cluster.dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds only (smoke run)")
    parser.add_argument("--cluster-dir", type=Path, help="a cluster started with scripts/cluster.sh up --dir DIR")
    parser.add_argument("--in-process-only", action="store_true", help="part 1 only (no cluster, no Go)")
    parser.add_argument("--rounds", type=int, help="rounds per size (default 200, 5 with --quick)")
    parser.add_argument("--device-metadata", action="store_true", help="part 1 with dra.device_metadata on")
    parser.add_argument("--serve-bare", type=Path, help=argparse.SUPPRESS)  # the floor's own process
    plots.add_svg_option(parser)
    args = parser.parse_args()
    if args.serve_bare is not None:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_bare(args.serve_bare))
        return 0
    rounds, hot_rounds = (5, 3) if args.quick else (200, 30)
    rounds = args.rounds or rounds
    program = None if args.in_process_only else go.binary()
    if program is None and not args.in_process_only:
        print("dra_prepare: needs Go to build the DRA test driver (or --in-process-only)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="kdb-", dir="/tmp"))
    cdi = Path(tempfile.mkdtemp(prefix="kdb-cdi-", dir="/dev/shm" if Path("/dev/shm").is_dir() else "/tmp"))
    try:
        (work / "inproc").mkdir()
        asyncio.run(in_process(rounds, work / "inproc", cdi, args.device_metadata))
        asyncio.run(bare_floor(rounds, work / "inproc"))
        if program is not None:
            with cluster_at(args.cluster_dir) as kubeconfig:
                asyncio.run(against_go(program, kubeconfig, rounds, hot_rounds, work, cdi, plots.svg_dir(args)))
    finally:
        shutil.rmtree(work)
        shutil.rmtree(cdi)
    print(f"\n{noise()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
