"""``dra explain pod/NAME`` and ``dra available`` at fleet scale: ``python benchmarks/explain_fleet.py``.

``--nodes`` (1,000) Node objects without a kubelet, each with one ResourceSlice of 8 devices as
``benchmarks/fleet.py``'s flat variant publishes them, and ``--claims`` (1,000) ResourceClaims
allocated to them (the first device of each node), on the real kube-apiserver of a
``kubedevice.testing.cluster`` cluster (or ``--cluster-dir DIR``). Two pending pods, each with a
claim from a template, that fit on no node: ``in-use`` asks for all 8 devices of a node (each
node has one taken), ``selector`` for a model no device has. The cluster's kube-scheduler
rejects each; then kubedevice explains each, ``--repeat`` times:

- in the process, as the command runs it (:func:`kubedevice.dra.live.cli.load_for_pod`, then
  :func:`~kubedevice.dra.live.podexplain.explain_pod`): wall and CPU time, the LISTs' share (the
  requests and decoding), the allocator's share (its calls, one per node), the requests sent;
- as the command, ``kubedevice dra explain pod/NAME --json`` in a fresh process, from byte code
  as an installed package has it (the imports included: what a user waits for);
- the scheduler's own time to reject the same pod in the same run: the change of its
  ``scheduler_scheduling_attempt_duration_seconds`` (result ``unschedulable``) and of
  ``scheduler_framework_extension_point_duration_seconds`` for Filter, per attempt, read from
  its metrics endpoint inside the cluster's network namespace.

And ``dra available`` on the same cluster, in the process and as the command. Every figure is
printed with the load average of the machine, so a run on a busy machine is read as such;
``--repeat`` takes the median. Not in CI (minutes, most of two cores). Needs root (the cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fleet
import httpx2
from lightkube import KubeConfig
from lightkube.config.client_adapter import AsyncClient, ConnectionParams

from kubedevice.dra import features
from kubedevice.dra.live import cli as live
from kubedevice.dra.live.cluster import Access
from kubedevice.dra.live.podexplain import explain_pod
from kubedevice.testing.cluster import Cluster

DRIVER = "explain.fleet.kubedevice.dev"
PREFIX = "kdx-"
LABEL = "explain.fleet.kubedevice.dev/fleet"
NAMESPACE = "kd-explain"
RESOURCE = "/apis/resource.k8s.io/v1"
PODS = {"in-use": "count: 8 (one of each node's 8 is taken)", "selector": 'model == "kd-none" (no device has it)'}
CONCURRENT = 50
"""Writes in flight while the fleet is made."""


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --- making the fleet ---------------------------------------------------------------------------


class Writer:
    """Raw writes as the cluster's admin, ``CONCURRENT`` at a time."""

    def __init__(self, kubeconfig: Path) -> None:
        config = KubeConfig.from_file(kubeconfig).get()
        assert config is not None
        self.http = AsyncClient(config, ConnectionParams(timeout=httpx2.Timeout(60), trust_env=False))
        self.gate = asyncio.Semaphore(CONCURRENT)

    async def send(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        async with self.gate:
            response = await self.http.request(method, path, json=body)
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code == 409 and method == "POST":  # left by an interrupted run
            return None
        response.raise_for_status()
        return response.json()

    async def close(self) -> None:
        await self.http.aclose()


def node_names(nodes: int) -> list[str]:
    return [f"{PREFIX}{i}" for i in range(nodes)]


def slice_document(node: str) -> dict[str, Any]:
    devices = fleet.slice_specs(fleet.VARIANTS["flat"], "kubedevice", False)[0]["devices"]
    spec = {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}  # fmt: skip
    return {"metadata": {"name": f"{node}-{DRIVER}"}, "spec": spec}


def claim_document(index: int) -> dict[str, Any]:
    exactly = {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}
    return {
        "metadata": {"name": f"held-{index}"},
        "spec": {"devices": {"requests": [{"name": "accel", "exactly": exactly}]}},
    }


def allocation(node: str) -> dict[str, Any]:
    device = fleet.VARIANTS["flat"].ids[0]
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"devices": {"results": [{"request": "accel", "driver": DRIVER, "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [term]}}  # fmt: skip


def pod_document(name: str, template: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {LABEL: "yes"},
            "tolerations": [{"key": key, "operator": "Exists"} for key in fleet.NO_KUBELET_TAINTS],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": "accel", "resourceClaimTemplateName": template}],
            "containers": [{"name": "c", "image": "kubedevice.invalid/never-runs:1",
                            "resources": {"claims": [{"name": "accel"}]}}],
        },
    }  # fmt: skip


def template_document(name: str, count: int, selector: str | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "accel", "exactly": exactly}]}}},
    }


async def make_fleet(kubeconfig: Path, nodes: int, claims: int) -> float:
    """Nodes, slices, the class, allocated claims, templates; seconds taken."""
    began = time.monotonic()
    writer = Writer(kubeconfig)
    names = node_names(nodes)
    try:
        await writer.send("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        selectors = [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]
        await writer.send(
            "POST", f"{RESOURCE}/deviceclasses", {"metadata": {"name": DRIVER}, "spec": {"selectors": selectors}}
        )
        await asyncio.gather(*(writer.send("POST", "/api/v1/nodes", labelled_node(n)) for n in names))
        await asyncio.gather(*(writer.send("POST", f"{RESOURCE}/resourceslices", slice_document(n)) for n in names))
        claims_path = f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims"
        await asyncio.gather(*(writer.send("POST", claims_path, claim_document(i)) for i in range(claims)))

        async def allocate(i: int) -> None:
            claim = await writer.send("GET", f"{claims_path}/held-{i}")
            claim["status"] = {"allocation": allocation(names[i % nodes])}
            await writer.send("PUT", f"{claims_path}/held-{i}/status", claim)

        await asyncio.gather(*(allocate(i) for i in range(claims)))
        templates = f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates"
        model = f'device.attributes["{DRIVER}"].model == "kd-none"'
        await writer.send("POST", templates, template_document("in-use", 8, None))
        await writer.send("POST", templates, template_document("selector", 1, model))
    finally:
        await writer.close()
    return time.monotonic() - began


def labelled_node(name: str) -> dict[str, Any]:
    """The Node object of a simulated node, with the label the pods' node selector asks for
    (explain_offline.py serves the same nodes)."""
    document = fleet.node_document(name, "yes")
    document["metadata"]["labels"] = {LABEL: "yes"}
    return document


async def remove_fleet(kubeconfig: Path, nodes: int) -> None:
    writer = Writer(kubeconfig)
    try:
        await writer.send("DELETE", f"/api/v1/namespaces/{NAMESPACE}", missing_ok=True)
        await asyncio.gather(*(writer.send("DELETE", f"{RESOURCE}/resourceslices/{n}-{DRIVER}", missing_ok=True)
                               for n in node_names(nodes)))  # fmt: skip
        await asyncio.gather(*(writer.send("DELETE", f"/api/v1/nodes/{n}", missing_ok=True) for n in node_names(nodes)))
        await writer.send("DELETE", f"{RESOURCE}/deviceclasses/{DRIVER}", missing_ok=True)
    finally:
        await writer.close()


# --- the scheduler's side -----------------------------------------------------------------------


class SchedulerMetrics:
    """The kube-scheduler's /metrics, read inside the cluster's network namespace as the admin."""

    def __init__(self, cluster: Cluster) -> None:
        state = cluster.state()
        assert state is not None
        self.cluster, self.port = cluster, state.ports.scheduler

    def snapshot(self) -> dict[str, float]:
        text = self.cluster.admin_get(self.port, "/metrics")
        found: dict[str, float] = {}
        for line in text.splitlines():
            match = re.match(r"^(\w+)\{([^}]*)\} (\S+)$", line)
            if match is None:
                continue
            name, labels, value = match.group(1), dict(re.findall(r'(\w+)="([^"]*)"', match.group(2))), match.group(3)
            if (
                name.startswith("scheduler_scheduling_attempt_duration_seconds_")
                and labels.get("result") == "unschedulable"
            ):
                found[f"attempt {name.rsplit('_', 1)[1]}"] = found.get(f"attempt {name.rsplit('_', 1)[1]}", 0) + float(
                    value
                )
            elif name.startswith("scheduler_framework_extension_point_duration_seconds_") and labels.get(
                "extension_point"
            ) in ("Filter", "PreFilter", "PostFilter"):
                key = f"{labels['extension_point']} {name.rsplit('_', 1)[1]}"
                found[key] = found.get(key, 0) + float(value)
        return {k: v for k, v in found.items() if not k.endswith("bucket")}


def per_attempt(before: dict[str, float], after: dict[str, float], what: str) -> tuple[float, int]:
    count = int(after.get(f"{what} count", 0) - before.get(f"{what} count", 0))
    total = after.get(f"{what} sum", 0) - before.get(f"{what} sum", 0)
    return (total / count if count else float("nan")), count


async def rejected(kubeconfig: Path, name: str, limit: float = 300.0) -> float:
    """Create the pod and wait for the scheduler's first rejection; seconds from create to it."""
    writer = Writer(kubeconfig)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    try:
        await writer.send("POST", path, pod_document(name, name))
        began = time.monotonic()
        while time.monotonic() - began < limit:
            pod = await writer.send("GET", f"{path}/{name}")
            for condition in (pod.get("status") or {}).get("conditions") or []:
                if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
                    return time.monotonic() - began
            if (pod.get("spec") or {}).get("nodeName"):
                raise SystemExit(f"explain_fleet: pod {name} was scheduled: the fleet is not what it should be")
            await asyncio.sleep(0.05)
    finally:
        await writer.close()
    raise SystemExit(f"explain_fleet: pod {name} not rejected within {limit:g} s")


# --- kubedevice's side --------------------------------------------------------------------------


@dataclass
class Run:
    wall: float
    cpu: float
    load: float
    allocator: float
    requests: int
    nodes: int
    groups: int


@dataclass
class Figures:
    runs: list[Run] = field(default_factory=list)
    command: list[float] = field(default_factory=list)


def explain_once(access: Access, name: str) -> Run:
    """One answer in this process, as the command computes it (the imports already done)."""
    wall, cpu = time.perf_counter(), time.process_time()
    loaded = asyncio.run(live.load_for_pod(access, name, None))
    gates = features.defaults(loaded.snapshot.release)
    explanation = explain_pod(live.workload(loaded, gates))
    assert not explanation.fitting, f"{name} fits somewhere: the fleet is not what it should be"
    return Run(time.perf_counter() - wall, time.process_time() - cpu, loaded.seconds, explanation.allocator_seconds,
               loaded.requests, len(explanation.verdicts), len(explanation.groups))  # fmt: skip


def compiled() -> None:
    """kubedevice's byte code written before the command is timed, as ``pip install`` writes it:
    from a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` every module is compiled again in each
    command (0.4 s of 2.6 s on this machine, cProfile)."""
    import kubedevice  # noqa: PLC0415 - only its location is needed

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(kubedevice.__file__).parent)],
                   env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def command_once(kubeconfig: Path, args: list[str], codes: tuple[int, ...]) -> float:
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "kubedevice", "dra", *args, "--kubeconfig", str(kubeconfig)],
                            capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    took = time.perf_counter() - began
    if result.returncode not in codes:
        raise SystemExit(f"explain_fleet: kubedevice dra {' '.join(args)}: exit {result.returncode}: {result.stderr}")
    return took


def available_once(access: Access) -> Run:
    wall, cpu = time.perf_counter(), time.process_time()
    api_requests: list[int] = []

    async def load() -> Any:
        from kubedevice.dra.live.cluster import ApiServer, snapshot  # noqa: PLC0415

        api = ApiServer(access.config())
        try:
            return await snapshot(api, live.Filters().kinds(), release=None)
        finally:
            api_requests.append(api.requests)
            await api.close()

    snap = asyncio.run(load())
    loaded = time.perf_counter() - wall
    pools = live.pools_of(snap, live.Filters(), features.defaults(snap.release))
    live.report_text(pools, live.holders(snap))
    return Run(time.perf_counter() - wall, time.process_time() - cpu, loaded, 0.0, api_requests[0], len(pools), 0)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(label: str, figures: Figures, extra: str = "") -> None:
    runs = figures.runs
    wall, load = median([r.wall for r in runs]), median([r.load for r in runs])
    print(
        f"{label}: wall {wall:.2f} s (LISTs and decoding {load:.2f} s, "
        f"allocator {median([r.allocator for r in runs]):.2f} s), CPU {median([r.cpu for r in runs]):.2f} s, "
        f"{runs[0].requests} requests, {runs[0].nodes} nodes/pools, {runs[0].groups} groups; "
        f"as a command {median(figures.command):.2f} s{extra}; load {loadavg()}",
        flush=True,
    )


def measure(label: str, repeat: int, once: Callable[[], Run], command: Callable[[], float]) -> Figures:
    figures = Figures()
    for _ in range(repeat):
        figures.runs.append(once())
        figures.command.append(command())
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=1000, help="allocated claims (one device each, round robin)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster-dir", type=Path, help="a cluster started with scripts/cluster.sh up --dir DIR")
    parser.add_argument("--keep", action="store_true", help="leave the fleet on the cluster (a re-run reuses it)")
    args = parser.parse_args()
    if args.nodes < 1 or args.claims < 0 or args.repeat < 1:
        print("explain_fleet: --nodes and --repeat must be at least 1, --claims at least 0", file=sys.stderr)
        return 2
    with fleet.cluster_at(args.cluster_dir) as cluster:
        kubeconfig = cluster.kubeconfig
        compiled()
        print(f"load before: {loadavg()}", flush=True)
        took = asyncio.run(make_fleet(kubeconfig, args.nodes, args.claims))
        print(
            f"fleet: {args.nodes} nodes x 8 devices, {args.claims} allocated claims, made in {took:.0f} s", flush=True
        )
        scheduler = SchedulerMetrics(cluster)
        access = Access(kubeconfig, None, NAMESPACE)
        try:
            for name, what in PODS.items():
                before = scheduler.snapshot()
                seen = asyncio.run(rejected(kubeconfig, name))
                after = scheduler.snapshot()
                attempt, attempts = per_attempt(before, after, "attempt")
                filters, _ = per_attempt(before, after, "Filter")
                args_ = ["explain", f"pod/{name}", "-n", NAMESPACE, "--json"]
                figures = measure(name, args.repeat, lambda n=name: explain_once(access, n),
                                  lambda a=args_: command_once(kubeconfig, a, (1,)))  # fmt: skip
                extra = (f"; scheduler: attempt {attempt:.2f} s (Filter {filters:.2f} s) over {attempts} attempt(s), "
                         f"rejected {seen:.1f} s after create")  # fmt: skip
                report(f"explain pod/{name} [{what}]", figures, extra)
            figures = measure("available", args.repeat, lambda: available_once(access),
                              lambda: command_once(kubeconfig, ["available", "--json"], (0,)))  # fmt: skip
            report("available", figures)
        finally:
            if not args.keep:
                asyncio.run(remove_fleet(kubeconfig, args.nodes))
        print(f"load after: {loadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    raise SystemExit(main())
