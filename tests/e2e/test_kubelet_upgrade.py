"""A node's kubelet upgraded one minor release at a time under running pods (issue #22 §1, "Upgrades").

As an operator upgrades a node in place: the control plane already runs the newest release (a
kubelet may not be newer than its API server, and may be up to three minors older: Kubernetes'
version skew policy), the node's kubelet is stopped, its binary swapped for the next minor
release's and started on the same directory, config and kubeconfig: 1.35.4 -> 1.36.3 -> 1.37.2
under a 1.37.2 control plane, each step with the same pods, while ``kubedevice serve`` runs on the
node twice, as a device plugin (outside the namespace, as tests/e2e/test_restart_race.py) and as a
DRA driver (inside it, as tests/e2e/test_multinode.py).

What a step must not do, and what it must: no pod lost or restarted (same UIDs, same container IDs,
restart counts 0); no live claim prepared again or unprepared, not even by the new kubelet's DRA
reconcile loop, which unprepares the claims of pods it does not count as active once a minute
(``pkg/kubelet/cm/dra/manager.go`` ``reconcileLoop``, ``defaultReconcilePeriod``), so the checks wait
past its first run after the new kubelet's start; the driver's checkpoint and the claim's CDI spec
byte-identical; both paths registered again, capacity and slices back, and new pods with a device
or a claim start. Deleting a new claim's pod afterwards proves that an unprepare is seen where it
is counted.

The cluster is the module's own. Releases other than the default take part when their build is
cached, as the validation differential's 1.37 server does (tests/interop/test_validation_apiserver.py):
CI builds the default release only.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.testing import components
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.scenarios import Daemon, delete_pods, device_pod, unique, wait_for, wait_outcome

from .conftest import _session_cluster

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RESOURCE = "example.com/upgrade"
DEVICES = 6
"""The plugin's devices: 3 for the pods placed first, 1 for a new pod after each step, and 2 for the
devices that pods deleted before a step still hold in the new kubelet's first seconds (it rewrites its
device checkpoint only on an allocation: docs/real-cluster.md)."""
DRIVER = "null.example.com"  # examples/dra-null.yaml
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
RECONCILE_PERIOD = 60.0
"""The kubelet's DRA reconcile loop period (``pkg/kubelet/cm/dra/manager.go``, v1.35.4 to v1.37.2)."""
CHAIN = ("1.35", "1.36", "1.37")
"""The kubelet's releases, oldest first: one node upgraded one minor release at a time under a
control plane of the last, as the skew policy allows (a kubelet up to three minors older)."""
PYTHONPATH = {"PYTHONPATH": os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _cached(release: str) -> bool:
    version = components.RELEASES[release]
    return release == components.DEFAULT_RELEASE or (components.cache_dir() / f"kubernetes-{version}").is_dir()


RELEASES = [release for release in CHAIN if _cached(release)]
"""The chain's releases that can run here: the default always (CI builds it, or fails), the others
when their build is cached (tests/interop/test_validation_apiserver.py decides so for its 1.37)."""
STEPS = RELEASES[1:] or [
    pytest.param(
        "",
        marks=pytest.mark.skip(
            reason=f"an upgrade needs two releases of {', '.join(CHAIN)} built; only {', '.join(RELEASES)} is"
        ),
    )
]
"""Each step upgrades the kubelet to this release from the one before it in :data:`RELEASES`."""


@dataclass
class Node:
    """The module's cluster with kubedevice serving on its node both ways, and the pods placed
    under the first kubelet."""

    cluster: Cluster
    plugin: Daemon
    device_pods: list[str] = field(default_factory=list)
    claim_pod: str = ""
    claim: dict[str, Any] = field(default_factory=dict)

    @property
    def driver_log(self) -> Path:
        return self.cluster.node(1).log("kubedevice-dra")

    @property
    def claim_ref(self) -> str:
        return f"default/{self.claim['metadata']['name']}"

    def registrations(self) -> tuple[int, int]:
        """(device plugin Register calls that succeeded, DRA plugin registrations), from serve's logs."""
        plugin = self.plugin.log.read_text(errors="replace").count(f"registered {RESOURCE} with the kubelet")
        dra = self.driver_log.read_text(errors="replace").count(f"registered with the kubelet as DRA driver {DRIVER}")
        return plugin, dra

    def claim_calls(self, ref: str) -> tuple[int, int]:
        """(prepares, unprepares) of claim ``namespace/name`` in the driver's log."""
        text = self.driver_log.read_text(errors="replace")
        return (
            len(re.findall(rf"(?<!un)prepared claim {re.escape(ref)} ", text)),
            len(re.findall(rf"unprepared claim {re.escape(ref)} ", text)),
        )

    def files(self) -> dict[str, str]:
        """SHA-256 of the driver's checkpoint and of the live claim's CDI spec."""
        paths = [
            self.cluster.kubelet_dir / "plugins" / DRIVER / "checkpoint.json",
            self.cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{self.claim['metadata']['uid']}.json",
        ]
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}

    def slice_devices(self) -> int:
        found = self.cluster.api().get(f"{SLICES}?fieldSelector=spec.nodeName={self.cluster.node_name}")
        return sum(len(s["spec"].get("devices") or []) for s in found["items"] if s["spec"]["driver"] == DRIVER)

    def kubelet_version(self) -> str:
        """The kubelet's version as the Node object reports it."""
        node = self.cluster.api().node(self.cluster.node_name) or {}
        return str(node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", ""))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A cluster of the chain's last release whose kubelet is of its first."""
    if len(RELEASES) < 2:
        pytest.skip(f"an upgrade needs two releases of {', '.join(CHAIN)} built; only {', '.join(RELEASES)} is")
    first, last = components.RELEASES[RELEASES[0]], components.RELEASES[RELEASES[-1]]
    for cluster in _session_cluster(nodes=1, version=last, kubelet_version=first):
        yield from _serving(cluster, tmp_path_factory.mktemp("upgrade"))


def _serving(cluster: Cluster, directory: Path) -> Iterator[Node]:
    """Both kinds of kubedevice serving, two device-plugin pods and one pod with a claim, all Running;
    the plugins stopped afterwards."""
    config = directory / "plugin.yaml"
    config.write_text(f"resources:\n  - name: {RESOURCE}\n    static: {{count: {DEVICES}, paths: [/dev/null]}}\n")
    state = Node(cluster, Daemon(cluster, config, directory / "plugin.log"))
    cluster.node(1).spawn(
        "kubedevice-dra",
        [
            sys.executable,
            "-m",
            "kubedevice",
            "serve",
            "--config",
            str(REPO / "examples" / "dra-null.yaml"),
            "--node",
            cluster.node_name,
            "--kubelet-dir",
            "/var/lib/kubelet",
            "--cdi-dir",
            "/run/cdi",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--log-level",
            "info",
        ],
        env=PYTHONPATH,
    )
    api = cluster.api()
    try:
        api.request(
            "POST",
            "/apis/resource.k8s.io/v1/deviceclasses",
            yaml.safe_load((REPO / "examples" / "dra-null-class.yaml").read_text()),
        )
        wait_for("the plugin's devices", lambda: api.resource(cluster.node_name, RESOURCE) == (DEVICES, DEVICES), 30)
        wait_for("the driver's 4 devices published", lambda: state.slice_devices() == 4, 60)
        state.device_pods = [unique("dp"), unique("dp")]
        api.create_pod(device_pod(state.device_pods[0], {RESOURCE: 1}, cluster.node_name))
        api.create_pod(device_pod(state.device_pods[1], {RESOURCE: 2}, cluster.node_name))
        state.claim_pod = _create_claim_pod(cluster)
        for name in [*state.device_pods, state.claim_pod]:
            outcome = wait_outcome(api, name, 120)
            assert outcome[0] == "Running", (name, outcome)
        state.claim = _claim_of(cluster, state.claim_pod)
        yield state
    finally:
        state.plugin.stop()
        cluster.node(1).stop("kubedevice-dra")
        print(state.plugin.tail, state.driver_log.read_text(errors="replace")[-3000:])


def _create_claim_pod(cluster: Cluster) -> str:
    """A pod with a claim from a ResourceClaimTemplate of examples/dra-null-class.yaml's class, left to
    the scheduler; its name."""
    api, name = cluster.api(), unique("claim")
    api.request(
        "POST",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates",
        {
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "null", "exactly": {"deviceClassName": DRIVER}}]}}},
        },
    )
    pod = device_pod(name, {})
    pod["spec"]["resourceClaims"] = [{"name": "null", "resourceClaimTemplateName": name}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "null"}]}
    api.create_pod(pod)
    return name


def _claim_of(cluster: Cluster, pod_name: str) -> dict[str, Any]:
    pod = cluster.api().pod(pod_name) or {}
    [status] = pod["status"]["resourceClaimStatuses"]
    return dict(
        cluster.api().get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{status['resourceClaimName']}")
    )


def _containers(cluster: Cluster, names: list[str]) -> dict[str, tuple[str, str, list[tuple[str, int]]]]:
    """Pod name → (UID, phase, [(container ID, restart count)])."""
    found = {}
    for name in names:
        pod = cluster.api().pod(name) or {"metadata": {}, "status": {}}
        statuses = pod["status"].get("containerStatuses", [])
        found[name] = (
            pod["metadata"].get("uid", ""),
            pod["status"].get("phase", ""),
            [(c.get("containerID", ""), c["restartCount"]) for c in statuses],
        )
    return found


@dataclass
class Upgrade:
    """One step: the kubelet's versions, what was seen before it, and how long the new kubelet took."""

    old: str
    new: str
    before_pods: dict[str, tuple[str, str, list[tuple[str, int]]]]
    before_files: dict[str, str]
    before_registrations: tuple[int, int]
    started: float = 0.0
    """monotonic time of the new kubelet's start."""
    healthy_after_s: float = 0.0
    registered_after_s: float = 0.0


@pytest.fixture(scope="module", params=STEPS, ids=lambda release: f"to-{release}")
def upgrade(node: Node, request: pytest.FixtureRequest) -> Upgrade:
    """One step of the chain, done once for the tests below: swap the kubelet, then wait until both
    paths have registered with the new one."""
    cluster = node.cluster
    step = Upgrade(
        cluster.node(1).kubelet_version,
        components.RELEASES[request.param],
        _containers(cluster, [*node.device_pods, node.claim_pod]),
        node.files(),
        node.registrations(),
    )
    assert node.kubelet_version() == step.old
    assert all(
        uid and phase == "Running" and containers and all(cid for cid, _ in containers)
        for uid, phase, containers in step.before_pods.values()
    ), step.before_pods
    assert node.claim_calls(node.claim_ref) == (1, 0)
    plugin, dra = step.before_registrations
    step.started = time.monotonic()
    step.healthy_after_s = cluster.node(1).upgrade_kubelet(request.param)
    assert cluster.node(1).kubelet_version == step.new
    wait_for(
        "both paths registered with the new kubelet", lambda: node.registrations() == (plugin + 1, dra + 1), 60, 0.1
    )
    step.registered_after_s = time.monotonic() - step.started
    return step


def test_the_node_runs_the_new_kubelet_and_both_paths_registered_again(node: Node, upgrade: Upgrade) -> None:
    api = node.cluster.api()
    wait_for(f"the Node to report kubelet {upgrade.new}", lambda: node.kubelet_version() == upgrade.new, 30)
    wait_for(
        "the plugin's devices advertised again",
        lambda: api.resource(node.cluster.node_name, RESOURCE) == (DEVICES, DEVICES),
        30,
    )
    # The new kubelet deletes its node's slices when it starts; the driver publishes them again.
    wait_for("the driver's 4 devices published again", lambda: node.slice_devices() == 4, 60)
    print(
        f"{upgrade.old} -> {upgrade.new}: the new kubelet answered healthz {upgrade.healthy_after_s:.1f} s after "
        f"its start; both plugins registered {upgrade.registered_after_s:.1f} s after it"
    )


def test_new_pods_with_a_device_and_a_claim_start_after_the_upgrade(node: Node, upgrade: Upgrade) -> None:
    api, name = node.cluster.api(), unique("dp-after")
    api.create_pod(device_pod(name, {RESOURCE: 1}, node.cluster.node_name))
    outcome = wait_outcome(api, name, 60)
    assert outcome[0] == "Running", outcome
    delete_pods(api, [name])


def test_no_pod_lost_or_restarted_and_no_claim_unprepared(node: Node, upgrade: Upgrade) -> None:
    """Checked once the new kubelet's DRA reconcile loop has run with its pod sources ready: it runs
    at the kubelet's start (sources not ready yet: nothing done), then every period."""
    reconciled = upgrade.started + RECONCILE_PERIOD + 5.0
    time.sleep(max(0.0, reconciled - time.monotonic()))
    after = _containers(node.cluster, [*node.device_pods, node.claim_pod])
    assert after == upgrade.before_pods  # same pods, same containers, same restart counts
    assert all(count == 0 for _, _, containers in after.values() for _, count in containers), after
    # The kubelet prepares a pod's claims only when it creates the pod's sandbox: not again here.
    assert node.claim_calls(node.claim_ref) == (1, 0)
    assert node.files() == upgrade.before_files


def test_a_claim_made_after_the_upgrade_is_prepared_and_unprepared(node: Node, upgrade: Upgrade) -> None:
    """The counterpart of the check above: the new kubelet's unprepare shows where it is counted."""
    cluster = node.cluster
    api = cluster.api()
    name = _create_claim_pod(cluster)
    outcome = wait_outcome(api, name, 120)
    assert outcome[0] == "Running", outcome
    ref = f"default/{_claim_of(cluster, name)['metadata']['name']}"
    assert node.claim_calls(ref) == (1, 0)
    delete_pods(api, [name])
    wait_for("the new claim unprepared", lambda: node.claim_calls(ref) == (1, 1), 60)
    assert node.claim_calls(node.claim_ref) == (1, 0)
    assert (cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{node.claim['metadata']['uid']}.json").exists()
