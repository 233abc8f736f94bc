"""``dra explain pod/NAME`` agrees with the real kube-scheduler, node for node (issue #30).

A cluster of its own (so that every node and object is this module's): its one real node and
five Node objects without a kubelet (``kubedevice.testing.dralive``: GPUs by model and memory, a
tainted device, a node taint, partitionable GPUs sharing a counter set, a NIC with consumable
capacity), DeviceClasses, ResourceSlices and pods that fit on some nodes, on none, or only after
another pod is deleted; claims already allocated by the scheduler itself, one claim shared by
two pods.

Each pod is created with a scheduling gate, so the scheduler leaves it alone while kubedevice
explains it (``dra explain pod/NAME --json``: the nodes where it fits). Then, for every node,
a copy of the pod that may go to that node only (a required node affinity on its name) is
given to the scheduler: bound means the scheduler's filters pass there, unschedulable that they
do not, and the scheduler's message must name the filter kubedevice named. Then the gate is
lifted: the pod must land on a node kubedevice said fits, or stay pending where it said none.
The run counts pods, nodes and verdicts, and there must be no disagreement.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubedevice.testing import components
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.dralive import (
    DRIVER,
    GPU_CLASS,
    NIC_CLASS,
    Layout,
    Workload,
    memory_at_least,
    memory_is,
    model,
    outcome,
    pinned,
    request,
)
from kubedevice.testing.kubeapi import KubeApi
from kubedevice.testing.waiting import budget, wait_for

from .conftest import _session_cluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "dra.md"
NAMESPACE = "team-a"
GATE = "live.kubedevice.dev/explain-first"
DOC_POD = "mem80"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
DOC_BEGIN = "<!-- dra explain pod/NAME: the output below is checked by tests/e2e/test_dra_live.py -->"
SCHEDULER_SAYS = {  # the scheduler's words for the filter kubedevice names (its ErrReasons)
    "DynamicResources": ("cannot allocate all claims", "resourceclaim not available on the node"),
    "TaintToleration": ("untolerated taint",),
    "NodeAffinity": ("didn't match Pod's node affinity/selector",),
}


@pytest.fixture(scope="module")
def live_cluster() -> Iterator[Cluster]:
    yield from _session_cluster(nodes=1)


@dataclass
class Tally:
    pods: int = 0
    verdicts: int = 0
    nodes: set[str] = field(default_factory=set)
    disagreements: list[str] = field(default_factory=list)


def explain(
    kubeconfig: Path, pod: str, *, text: bool = False, namespace: str = NAMESPACE
) -> subprocess.CompletedProcess[str]:
    """``dra explain pod/NAME`` as a user runs it (JSON unless ``text``)."""
    args = ["dra", "explain", f"pod/{pod}", "-n", namespace, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", *args, *([] if text else ["--json"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def explained(kubeconfig: Path, pod: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    result = explain(kubeconfig, pod, namespace=namespace)
    assert result.returncode in (0, 1) and not result.stderr, result
    report: dict[str, Any] = json.loads(result.stdout)
    assert result.returncode == (0 if report["fits"] else 1)
    return report


def settled(work: Workload, probe: str) -> bool:
    """The probe is gone and no claim holds devices for it (the controller deallocates, the GC deletes)."""
    if work.get_pod(probe) is not None:
        return False
    for claim in work.claims():
        reserved = [r.get("name") for r in (claim.get("status") or {}).get("reservedFor") or []]
        owners = [o.get("name") for o in claim["metadata"].get("ownerReferences") or []]
        allocated = (claim.get("status") or {}).get("allocation")
        if probe in reserved or (probe in owners and allocated):
            return False
    return True


def probe(work: Workload, document: dict[str, Any], node: str, fits: bool) -> str:
    """The scheduler's verdict on ``node`` alone for a copy of the pod; the copy and its devices released.

    A copy expected to fit is given time to be tried again (the scheduler may first try it before
    it has seen the previous copy's devices released); one expected not to fit is watched a moment
    after its first rejection, so a late binding is seen.
    """
    name = f"{document['metadata']['name']}-on-{node}"[:63]
    work.api.request("POST", f"/api/v1/namespaces/{work.namespace}/pods", pinned(document, node, name))
    try:
        if fits:
            seen = wait_for(f"{name} bound", lambda: _bound_or_none(work, name), timeout=30.0, interval=0.1)
        else:
            seen = wait_for(f"{name} decided", lambda: outcome(work.get_pod(name)), timeout=60.0)
            if seen.startswith("unschedulable:"):
                time.sleep(1.0)
                seen = _bound_or_none(work, name) or seen
    except AssertionError:
        seen = outcome(work.get_pod(name)) or "undecided"
    work.delete_pod(name)
    wait_for(f"{name} released", lambda: settled(work, name), timeout=60.0, interval=0.2)
    time.sleep(0.3)  # the scheduler's informers see the release
    return seen


def _bound_or_none(work: Workload, name: str) -> str | None:
    seen = outcome(work.get_pod(name))
    return seen if seen and seen.startswith("bound:") else None


def check(work: Workload, kubeconfig: Path, name: str, tally: Tally) -> set[str]:
    """Explain the gated pod, probe every node of the layout, lift the gate: (where it fits)."""
    document = work.get_pod(name)
    assert document is not None
    report = explained(kubeconfig, name, work.namespace)
    fits = {f["node"] for f in report["fits"]}
    verdicts = {v["node"]: v for v in report["nodes"]}
    tally.pods += 1
    for node, verdict in verdicts.items():
        tally.verdicts += 1
        tally.nodes.add(node)
        if node not in work.layout.nodes:  # the real node: the pods' nodeSelector keeps them off it
            if verdict.get("plugin") != "NodeAffinity":
                tally.disagreements.append(f"{name} on {node}: kubedevice says {verdict}, not NodeAffinity")
            continue
        seen = probe(work, document, node, node in fits)
        if seen.startswith("bound:") != (node in fits):
            tally.disagreements.append(f"{name} on {node}: kubedevice says fits={node in fits}, scheduler: {seen}")
        elif not seen.startswith("bound:") and not any(w in seen for w in SCHEDULER_SAYS[verdict["plugin"]]):
            tally.disagreements.append(f"{name} on {node}: kubedevice names {verdict['plugin']}, scheduler: {seen}")
    _ungate(work, name)
    if fits:
        landed = wait_for(f"{name} bound", lambda: _bound_or_none(work, name), timeout=60.0)
        if landed.removeprefix("bound:") not in fits:
            tally.disagreements.append(f"{name} landed on {landed}, kubedevice said {sorted(fits)}")
    else:
        seen = wait_for(f"{name} decided", lambda: outcome(work.get_pod(name)), timeout=60.0)
        time.sleep(1.0)
        if (outcome(work.get_pod(name)) or "").startswith("bound:") or seen.startswith("bound:"):
            tally.disagreements.append(f"{name}: kubedevice said it fits nowhere, the scheduler bound it")
    return fits


def _ungate(work: Workload, name: str) -> None:
    path = f"/api/v1/namespaces/{work.namespace}/pods/{name}"
    pod = work.api.request("GET", path)
    pod["spec"]["schedulingGates"] = []
    work.api.request("PUT", path, pod)


def gated(work: Workload, name: str, **spec: Any) -> str:
    work.pod(name, schedulingGates=[{"name": GATE}], **spec)
    return name


def test_explain_agrees_with_the_scheduler_on_every_node(live_cluster: Cluster) -> None:
    kubeconfig = live_cluster.kubeconfig
    with KubeApi(kubeconfig) as api:
        layout = Layout("gpu-node")
        work = Workload(api, NAMESPACE, layout)
        tally = Tally()
        try:
            work.setup()
            _templates(work)
            a, b, c, d, _ = layout.nodes
            expected = {
                "train-1": {b},  # 4 H100: only b has 4 without a taint
                "train-2": set(),  # b is taken now
                "tolerant": {c},  # tolerates c's unhealthy GPU
                "half-d": {d},  # a 40Gi partition, kept on d by its own node affinity
                DOC_POD: set(),  # b, c in use; d's counters half drawn; a too small; e tainted
                "net-1": {a},  # 60G of the NIC's 100G
                "net-2": set(),  # 40G left
                "big": set(),  # 8 GPUs: no node has 8
                "share-1": {a},  # the shared claim, allocated on a
                "share-2": {a},  # the same claim: where it is allocated only
            }
            unexpected = []
            for name, wanted in expected.items():
                _create(work, name)
                fits = check(work, kubeconfig, name, tally)
                if fits != wanted:  # the workload is not what it was meant to show
                    unexpected.append((name, sorted(fits), sorted(wanted)))
                if name == DOC_POD:
                    _documented_output_matches(kubeconfig)
            # train-2 fits only once train-1 is deleted (and its claim released)
            for pending in ("mem80", "net-2", "big"):
                work.delete_pod(pending)
            work.delete_pod("train-1")
            wait_for("train-1's devices released", lambda: settled(work, "train-1"), timeout=60.0)
            fits = {f["node"] for f in explained(kubeconfig, "train-2")["fits"]}
            tally.pods += 1
            landed = wait_for("train-2 bound", lambda: _bound_or_none(work, "train-2"), timeout=120.0)
            if fits != {b} or landed != f"bound:{b}":
                tally.disagreements.append(f"train-2 after train-1: kubedevice {sorted(fits)}, scheduler {landed}")
            assert not unexpected, unexpected
        finally:
            work.delete()
    print(
        f"\nagreement: {tally.pods} pods, {len(tally.nodes)} nodes, {tally.verdicts} node verdicts, "
        f"{len(tally.disagreements)} disagreements"
    )
    assert tally.pods == 11 and len(tally.nodes) == 6 and tally.verdicts == 60
    assert not tally.disagreements, "\n".join(tally.disagreements)


DRAWN_PODS = 8
DRAWN_SEED = int(os.environ.get("KUBEDEVICE_DRA_LIVE_SEED", "30"))
"""The seed of the drawn workload (a failure prints it; another seed draws another workload)."""
SELECTORS = ("", model("A100"), model("H100"), memory_at_least(80), memory_is(40))
GPU_COUNTS = (1, 2, 3, 4, 8)
BANDWIDTHS = ("30G", "60G", "100G")


def drawn_claim(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One or two requests (GPUs by count and selector, a request tolerating the unhealthy device
    taint; the NIC's consumable bandwidth), two GPU requests sometimes constrained to one model."""
    requests, gpus = [], []
    for index in range(rng.choice((1, 1, 2))):
        name = f"r{index}"
        if rng.random() < 0.25:
            requests.append(request(name, NIC_CLASS, 1, capacity={"requests": {"bandwidth": rng.choice(BANDWIDTHS)}}))
            continue
        tolerate = [{"key": "unhealthy", "operator": "Exists", "effect": "NoSchedule"}] if rng.random() < 0.3 else []
        extra: dict[str, Any] = {"tolerations": tolerate} if tolerate else {}
        requests.append(request(name, GPU_CLASS, rng.choice(GPU_COUNTS), rng.choice(SELECTORS), **extra))
        gpus.append(name)
    constraints = (
        [{"requests": gpus, "matchAttribute": f"{DRIVER}/model"}] if len(gpus) == 2 and rng.random() < 0.5 else []
    )
    return requests, constraints


def test_explain_agrees_with_the_scheduler_on_drawn_workloads(live_cluster: Cluster) -> None:
    """Pods drawn from a seed, one after another on the same nodes: each explained, probed on every
    node and let go, so the pods before it hold devices where they landed (a pod that fits nowhere
    is deleted, so that nothing pending can take what a later probe frees); before some pods, one
    of those holding devices is deleted, so that what it held is free again."""
    kubeconfig = live_cluster.kubeconfig
    rng = random.Random(DRAWN_SEED)
    with KubeApi(kubeconfig) as api:
        work = Workload(api, "team-drawn", Layout("drawn-node"))
        tally = Tally()
        landed: list[str] = []
        fitting = nowhere = 0
        try:
            work.setup()
            for index in range(DRAWN_PODS):
                if landed and rng.random() < 0.3:
                    gone = landed.pop(rng.randrange(len(landed)))
                    work.delete_pod(gone)
                    wait_for(f"{gone}'s devices released", lambda g=gone: settled(work, g), timeout=60.0)
                name = f"drawn-{index}"
                requests, constraints = drawn_claim(rng)
                work.template(name, requests, constraints)
                infra = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
                gated(work, name, template=name, **({"tolerations": infra} if rng.random() < 0.3 else {}))
                if check(work, kubeconfig, name, tally):
                    fitting += 1
                    landed.append(name)
                else:
                    nowhere += 1
                    work.delete_pod(name)
                    wait_for(f"{name} gone", lambda n=name: settled(work, n), timeout=60.0)
        finally:
            work.delete()
    print(
        f"\ndrawn (seed {DRAWN_SEED}): {tally.pods} pods ({fitting} fit somewhere, {nowhere} nowhere), "
        f"{len(tally.nodes)} nodes, {tally.verdicts} node verdicts, {len(tally.disagreements)} disagreements"
    )
    assert tally.pods == DRAWN_PODS and tally.verdicts == 6 * DRAWN_PODS
    assert fitting and nowhere, "the draw must hold pods that fit and pods that do not"
    assert not tally.disagreements, f"seed {DRAWN_SEED}:\n" + "\n".join(tally.disagreements)


def _templates(work: Workload) -> None:
    tolerate = [{"key": "unhealthy", "operator": "Exists", "effect": "NoSchedule"}]
    work.template("h100x4", [request("gpu", GPU_CLASS, 4, model("H100"))])
    work.template("h100x4-tolerant", [request("gpu", GPU_CLASS, 4, model("H100"), tolerations=tolerate)])
    work.template("mem80", [request("gpu", GPU_CLASS, 1, memory_at_least(80))])
    work.template("half", [request("gpu", GPU_CLASS, 1, memory_is(40))])
    work.template("x8", [request("gpu", GPU_CLASS, 8)])
    work.template("nic60", [request("nic", NIC_CLASS, 1, capacity={"requests": {"bandwidth": "60G"}})])
    work.claim("shared-a100", [request("gpu", GPU_CLASS, 1, model("A100"))])


def _create(work: Workload, name: str) -> None:
    d = work.layout.name("d")
    on_d = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                         "values": [d]}]}]}  # fmt: skip
    specs: dict[str, dict[str, Any]] = {
        "train-1": {"template": "h100x4"},
        "train-2": {"template": "h100x4"},
        "tolerant": {"template": "h100x4-tolerant"},
        "half-d": {
            "template": "half",
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": on_d}},
        },
        DOC_POD: {"template": "mem80"},
        "net-1": {"template": "nic60"},
        "net-2": {"template": "nic60"},
        "big": {"template": "x8"},
        "share-1": {"claim": "shared-a100"},
        "share-2": {"claim": "shared-a100"},
    }
    gated(work, name, **specs[name])


def _documented_output_matches(kubeconfig: Path) -> None:
    """``kubectl dra explain`` (kubectl finding the plugin on PATH) prints what docs/dra.md shows.

    The pod is first given to the scheduler, so that its message is in the output; the claim's
    random suffix is written ``xxxxx``. ``KUBEDEVICE_WRITE_DOCS=1`` writes the output into the doc.
    """
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kubectl-dra").exists(), "kubectl-dra is installed with the package (scripts/install.sh)"
    result = subprocess.run(
        [
            str(components.kubectl()),
            "dra",
            "explain",
            f"pod/{DOC_POD}",
            "-n",
            NAMESPACE,
            "--kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "KUBECONFIG": str(kubeconfig)},
    )
    assert result.returncode == 1 and not result.stderr, result
    shown = re.sub(r"(-devices-)[a-z0-9]{5}\b", r"\1xxxxx", result.stdout)
    text = DOC.read_text()
    begin = text.index(DOC_BEGIN)
    start = text.index("```text\n", begin) + len("```text\n")
    end = text.index("```", start)
    if os.environ.get("KUBEDEVICE_WRITE_DOCS") == "1":
        DOC.write_text(text[:start] + shown + text[end:])
        return
    assert text[start:end] == shown, f"docs/dra.md shows something else; kubectl dra explain printed:\n{shown}"


def test_available_watch_draws_again_when_the_scheduler_allocates(live_cluster: Cluster) -> None:
    """``available --watch --json``: one line per drawing, from one watch per kind; a pod bound and
    deleted shows as its devices taken (held by the pod) and free again; Ctrl-C ends it quietly."""
    kubeconfig = live_cluster.kubeconfig
    with KubeApi(kubeconfig) as api:
        work = Workload(api, "team-w", Layout("watch-node"))
        argv = [sys.executable, "-m", "kubedevice", "dra", "available", "--watch", "--json", "--driver", DRIVER,
                "--node", work.layout.name("b"), "--kubeconfig", str(kubeconfig)]  # fmt: skip
        watcher = None
        try:
            work.setup()
            work.template("h100x4", [request("gpu", GPU_CLASS, 4, model("H100"))])
            watcher = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
            )
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout or []], daemon=True).start()

            def drawing(check: Any) -> list[dict[str, Any]]:
                deadline = time.monotonic() + budget(60)
                while time.monotonic() < deadline:
                    pools = json.loads(lines.get(timeout=max(0.1, deadline - time.monotonic())))
                    if check(pools):
                        return pools  # type: ignore[no-any-return]
                raise AssertionError(f"no such drawing within {budget(60):g} s")

            def summary(pools: list[dict[str, Any]]) -> dict[str, int]:
                return pools[0]["summary"] if pools else {}

            drawing(lambda p: summary(p).get("free") == 4)
            work.pod("w-1", template="h100x4")
            taken = drawing(lambda p: summary(p).get("allocated") == 4)
            held = [h for d in taken[0]["devices"] for h in d["heldBy"]]
            assert len(held) == 4 and all(h.endswith("(pod team-w/w-1)") for h in held), held
            work.delete_pod("w-1")
            drawing(lambda p: summary(p).get("free") == 4)
        finally:
            if watcher is not None:
                os.killpg(watcher.pid, signal.SIGINT)
                try:
                    _, err = watcher.communicate(timeout=budget(30))
                except subprocess.TimeoutExpired:
                    os.killpg(watcher.pid, signal.SIGKILL)  # never left behind
                    watcher.communicate()
                    raise
                assert watcher.returncode == 130 and err == "", (watcher.returncode, err)
            work.delete()
