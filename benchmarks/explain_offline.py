"""``dra explain pod/NAME`` and ``dra available`` at fleet scale, in one process, no cluster:
``python benchmarks/explain_offline.py [--nodes 1000] [--claims 1000] [--repeat 5]``.

The fleet of ``benchmarks/explain_fleet.py`` (its document generators: ``--nodes`` Nodes, each
with one ResourceSlice of 8 devices, ``--claims`` ResourceClaims allocated one device each, the
two templates and pods that fit nowhere), as the API server answers it: the JSON body of each
request the command sends (``/version``, discovery, one LIST per kind, the pod), each object
with what the server adds (uid, resourceVersion, creationTimestamp, generation, the defaulted
``allocationMode``, the Node lifecycle controller's taints on a Node without a kubelet). An
:class:`~kubedevice.dra.live.cluster.ApiServer` that answers from memory hands them to the
command's own code, :func:`kubedevice.dra.live.cli.load_pod_from` (the bodies parsed and
decoded) and :func:`~kubedevice.dra.live.podexplain.explain_pod` on every node; ``available``
its snapshot, pools and tables. Wall and CPU time (``time.process_time``), the loading's and
the allocator's shares; medians of ``--repeat`` after one run that is not counted, each with
the load average, since a figure is the machine's only when nothing else runs. ``--profile
FILE`` writes one run's cProfile statistics (``python -m pstats FILE``).

Left out, and measured by ``explain_fleet.py`` against a real API server: the requests
themselves (8, answered from the watch cache) and the process's imports.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import explain_fleet as fleet_docs

from kubedevice.dra import features
from kubedevice.dra.live import cli as live
from kubedevice.dra.live.cluster import ApiServer, snapshot
from kubedevice.dra.live.podexplain import explain_pod

API_VERSION = "resource.k8s.io/v1"
NOW = "2026-11-29T12:00:00Z"
TAINTS = [
    {"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": NOW}
    for effect in ("NoSchedule", "NoExecute")
]
"""What the Node lifecycle controller puts on a Node whose kubelet never posts a status."""


def served(document: dict[str, Any], index: int, namespace: str | None = None) -> dict[str, Any]:
    """The document as the API server stores it: the metadata it sets."""
    meta = document["metadata"]
    meta.update({"uid": f"00000000-0000-4000-8000-{index:012d}", "resourceVersion": str(1000 + index),
                 "creationTimestamp": NOW, "generation": 1})  # fmt: skip
    if namespace:
        meta["namespace"] = namespace
    return document


def listed(api_version: str, kind: str, items: list[dict[str, Any]]) -> bytes:
    """One LIST's body as the server sends it (items without apiVersion and kind)."""
    return json.dumps({"apiVersion": api_version, "kind": f"{kind}List", "metadata": {"resourceVersion": "9999"},
                       "items": items}).encode()  # fmt: skip


def fleet(nodes: int, claims: int) -> dict[str, bytes]:
    """The API server's answers by path: ``/version``, discovery, each kind's LIST, the pods."""
    names = fleet_docs.node_names(nodes)
    node_items = []
    for i, name in enumerate(names):
        node = served(fleet_docs.labelled_node(name), i)
        node["spec"] = {"taints": TAINTS}
        node_items.append(node)
    slices = [served(fleet_docs.slice_document(name), i) for i, name in enumerate(names)]
    held = []
    for i in range(claims):
        claim = served(fleet_docs.claim_document(i), i, fleet_docs.NAMESPACE)
        claim["status"] = {"allocation": fleet_docs.allocation(names[i % nodes])}
        held.append(claim)
    model = f'device.attributes["{fleet_docs.DRIVER}"].model == "kd-none"'
    templates = [
        served(fleet_docs.template_document("in-use", 8, None), 0, fleet_docs.NAMESPACE),
        served(fleet_docs.template_document("selector", 1, model), 1, fleet_docs.NAMESPACE),
    ]
    for template in templates:
        template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "ExactCount"
    selectors = [{"cel": {"expression": f'device.driver == "{fleet_docs.DRIVER}"'}}]
    classes = [served({"metadata": {"name": fleet_docs.DRIVER}, "spec": {"selectors": selectors}}, 0)]
    group = f"/apis/{API_VERSION}"
    bodies = {
        "/version": json.dumps({"gitVersion": "v1.36.3"}).encode(),
        "/apis/resource.k8s.io": json.dumps({"versions": [{"version": "v1"}]}).encode(),
        f"{group}/deviceclasses": listed(API_VERSION, "DeviceClass", classes),
        f"{group}/resourceslices": listed(API_VERSION, "ResourceSlice", slices),
        f"{group}/resourceclaims": listed(API_VERSION, "ResourceClaim", held),
        f"{group}/namespaces/{fleet_docs.NAMESPACE}/resourceclaimtemplates": listed(
            API_VERSION, "ResourceClaimTemplate", templates
        ),
        "/api/v1/nodes": listed("v1", "Node", node_items),
    }
    for i, name in enumerate(fleet_docs.PODS):
        pod = served(fleet_docs.pod_document(name, name), i)
        bodies[f"/api/v1/namespaces/{fleet_docs.NAMESPACE}/pods/{name}"] = json.dumps(pod).encode()
    return bodies


@dataclass
class InMemory(ApiServer):
    """The API server's answers from memory, parsed from their bodies as the client parses them."""

    bodies: dict[str, bytes] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return "memory"

    async def get(self, path: str, params: dict[str, str] | None = None, *, absent_ok: bool = False) -> Any:
        self.requests += 1
        body = self.bodies.get(path)
        if body is None and absent_ok:
            return None
        assert body is not None, f"nothing at {path}"
        return json.loads(body)


@dataclass
class Run:
    wall: float
    cpu: float
    loading: float
    allocator: float
    summary: str


def explain_once(bodies: dict[str, bytes], name: str) -> Run:
    """As ``kubedevice dra explain pod/NAME`` runs after its requests are answered."""
    wall, cpu = time.perf_counter(), time.process_time()
    api = InMemory(None, bodies=bodies)  # type: ignore[arg-type]
    loaded = asyncio.run(live.load_pod_from(api, fleet_docs.NAMESPACE, name, None))
    explanation = explain_pod(live.workload(loaded, features.defaults(loaded.snapshot.release)))
    took = time.perf_counter() - wall, time.process_time() - cpu
    assert not explanation.fitting, f"{name} fits somewhere: the fleet is not what it should be"
    summary = f"{len(explanation.verdicts)} nodes, {loaded.requests} requests; " + "; ".join(
        f"{len(g.nodes)} x {g.reason}" for g in explanation.groups
    )
    return Run(*took, loaded.seconds, explanation.allocator_seconds, summary)


def available_once(bodies: dict[str, bytes]) -> Run:
    """As ``kubedevice dra available`` runs after its requests are answered."""
    wall, cpu = time.perf_counter(), time.process_time()
    api = InMemory(None, bodies=bodies)  # type: ignore[arg-type]
    snap = asyncio.run(snapshot(api, live.Filters().kinds(), release=None))
    loaded = time.perf_counter() - wall
    pools = live.pools_of(snap, live.Filters(), features.defaults(snap.release))
    live.report_text(pools, live.holders(snap))
    return Run(time.perf_counter() - wall, time.process_time() - cpu, loaded, 0.0, f"{len(pools)} pools")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(label: str, repeat: int, once: Callable[[], Run]) -> None:
    once()  # the CEL programs compiled, the models' validators built: what every later run shares
    runs = [once() for _ in range(repeat)]

    def median(values: list[float]) -> float:
        return statistics.median(values)

    wall, loading = median([r.wall for r in runs]), median([r.loading for r in runs])
    print(
        f"{label}: wall {wall:.2f} s (parsing and decoding {loading:.2f} s, "
        f"allocator {median([r.allocator for r in runs]):.2f} s), CPU {median([r.cpu for r in runs]):.2f} s; "
        f"walls {', '.join(f'{r.wall:.2f}' for r in runs)}; load {loadavg()}\n    {runs[0].summary}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=1000, help="allocated claims (one device each, round robin)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=[*fleet_docs.PODS, "available"], help="one measurement")
    parser.add_argument("--profile", type=Path, help="write one run's cProfile statistics of --only here")
    args = parser.parse_args()
    if args.nodes < 1 or args.claims < 0 or args.repeat < 1 or (args.profile and not args.only):
        print("explain_offline: --nodes, --repeat >= 1, --claims >= 0; --profile needs --only", file=sys.stderr)
        return 2
    bodies = fleet(args.nodes, args.claims)
    runs: dict[str, Callable[[], Run]] = {name: lambda n=name: explain_once(bodies, n) for name in fleet_docs.PODS}
    runs["available"] = lambda: available_once(bodies)
    chosen = {k: v for k, v in runs.items() if args.only in (None, k)}
    print(f"{args.nodes} nodes x 8 devices, {args.claims} allocated claims; load before {loadavg()}", flush=True)
    if args.profile:
        (once,) = chosen.values()
        once()
        profile = cProfile.Profile()
        profile.runcall(once)
        profile.dump_stats(args.profile)
        return 0
    for label, once in chosen.items():
        measure(f"explain pod/{label}" if label in fleet_docs.PODS else label, args.repeat, once)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    raise SystemExit(main())
