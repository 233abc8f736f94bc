"""Three real nodes (``scripts/cluster.sh up --nodes 3``): one control plane, three kubelets, each
with its own containerd, kubelet directory, /run and network namespace.

kubedevice serve runs on every node inside that node's namespaces (``Node.spawn``), as a
DaemonSet's pod would, and the real scheduler, deployment controller and garbage collector do
the rest. The module has its own session cluster (``multinode``), so the one-node tests' cluster
is untouched; it deletes what it creates, and its last test deletes node 3 for good.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.testing.cluster import NODE_IP, Cluster, Node, leftovers
from kubedevice.testing.scenarios import TEST_IMAGE, wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster.sh"
RESOURCE = "example.com/null"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DRA_DRIVER = "null.example.com"  # examples/dra-null.yaml
PYTHONPATH = {"PYTHONPATH": os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _on_node(node: Node, pid_name: str, *argv: str, mount: bool = False) -> subprocess.CompletedProcess[str]:
    """``argv`` in the network (and with ``mount``, the mount) namespace of the node's ``pid_name``."""
    state = node.cluster.state()
    assert state is not None
    spaces = ["-n", "-m"] if mount else ["-n"]
    return subprocess.run(
        ["nsenter", "-t", str(node.pids(state)[pid_name]), *spaces, *argv],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )


def test_every_node_has_a_network_and_directories_of_its_own_without_routes(multinode: Cluster) -> None:
    state = multinode.state()
    assert state is not None
    host = os.readlink("/proc/self/ns/net")
    nodes = multinode.nodes()
    assert [node.name for node in nodes] == ["kubedevice-node", "kubedevice-node-2", "kubedevice-node-3"]
    networks = []
    for node in nodes:
        pids = node.pids(state)
        nets = {os.readlink(f"/proc/{pids[name]}/ns/net") for name in ("containerd", "kubelet")}
        assert len(nets) == 1 and host not in nets, (node.name, nets)
        networks += nets
        routes = _on_node(node, "kubelet", "ip", "-4", "route", "show", "table", "all")
        main = [line for line in routes.stdout.splitlines() if not re.match(r"(local|broadcast) ", line)]
        assert routes.returncode == 0 and all(
            re.fullmatch(rf"10\.88\.\d+\.\d+ dev kd\d+ scope link src {NODE_IP} ?", line) for line in main
        ), main
        for address in ("192.0.2.1", "8.8.8.8"):  # the host's gateway, the internet
            lookup = _on_node(node, "kubelet", "ip", "-4", "route", "get", address)
            assert lookup.returncode != 0 and "unreachable" in lookup.stderr, (node.name, address, lookup)
        api_node = multinode.api().node(node.name)
        assert api_node is not None and {"type": "InternalIP", "address": NODE_IP} in api_node["status"]["addresses"]
    assert len(set(networks)) == len(nodes), networks
    # Each kubelet's /var/lib/kubelet is its node's own directory and no other's.
    for number, node in enumerate(nodes, 1):
        (node.kubelet_dir / "kd-which-node").write_text(str(number))
    seen = [_on_node(node, "kubelet", "cat", "/var/lib/kubelet/kd-which-node", mount=True).stdout for node in nodes]
    assert seen == ["1", "2", "3"]


@pytest.fixture(scope="module")
def plugins(multinode: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``kubedevice serve`` in device-plugin mode on every node: one ``example.com/null`` device each
    (examples/null.yaml with a count of one), so where a pod can run is decided by free devices."""
    config = tmp_path_factory.mktemp("multinode") / "one-null.yaml"
    config.write_text((REPO / "examples" / "null.yaml").read_text().replace("count: 4", "count: 1"))
    assert "count: 1" in config.read_text()
    for node in multinode.nodes():
        node.spawn(
            "kubedevice-plugin",
            [
                sys.executable,
                "-m",
                "kubedevice",
                "serve",
                "--config",
                str(config),
                "--plugin-dir",
                "/var/lib/kubelet/device-plugins",
                "--cdi-dir",
                "/run/cdi",
            ],
            env=PYTHONPATH,
        )
    yield multinode
    for node in multinode.nodes():
        node.stop("kubedevice-plugin")


def test_every_node_has_the_capacity_of_its_own_plugin(plugins: Cluster) -> None:
    api = plugins.api()
    for node in plugins.nodes():
        wait_for(f"{RESOURCE} on {node.name}", lambda n=node: api.resource(n.name, RESOURCE) == (1, 1), 60, 0.2)


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "main",
        "image": TEST_IMAGE,
        "imagePullPolicy": "Never",
        "resources": {"limits": {RESOURCE: "1"}, "requests": {RESOURCE: "1"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container],
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                },
            },
        },
    }


def _pods_of(cluster: Cluster, app: str, phase: str | None = None) -> list[dict[str, Any]]:
    """The app's pods not being deleted: in ``phase``, or (None) in any phase but Failed, which the
    ReplicaSet replaces (a pod the kubelet refused at admission)."""
    return [
        pod
        for pod in cluster.api().pods()
        if pod["metadata"].get("labels", {}).get("app") == app
        and not pod["metadata"].get("deletionTimestamp")
        and (pod["status"].get("phase") == phase if phase else pod["status"].get("phase") != "Failed")
    ]


def _running_by_node(cluster: Cluster, app: str) -> dict[str, dict[str, Any]] | None:
    """Node name → the app's Running pod there, once there is one on every node (and no other)."""
    pods = _pods_of(cluster, app)
    running = {pod["spec"].get("nodeName"): pod for pod in pods if pod["status"].get("phase") == "Running"}
    return running if len(pods) == len(running) == len(cluster.nodes()) else None


@pytest.fixture(scope="module")
def spread(plugins: Cluster) -> Iterator[str]:
    """A Deployment of 3 pods, each needing one device, left to the real scheduler."""
    api = plugins.api()
    for node in plugins.nodes():  # the plugins are up before the pods are created
        wait_for(f"{RESOURCE} on {node.name}", lambda n=node: api.resource(n.name, RESOURCE)[1] == 1, 60, 0.2)
    name = "spread"
    api.request("POST", DEPLOYMENTS, _deployment(name, 3))
    yield name
    api.request("DELETE", f"{DEPLOYMENTS}/{name}", {"propagationPolicy": "Foreground"})
    wait_for("the deployment's pods to be gone", lambda: not _pods_of(plugins, name) or None, 60, 0.2)


def _scale(cluster: Cluster, name: str, replicas: int) -> None:
    """Through the scale subresource, without a resourceVersion: the deployment controller updates
    the Deployment's status all the time, and a PUT of the whole object would conflict."""
    cluster.api().request(
        "PUT",
        f"{DEPLOYMENTS}/{name}/scale",
        {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas},
        },
    )


def test_a_deployment_spreads_over_the_nodes_by_free_devices(plugins: Cluster, spread: str) -> None:
    running = wait_for("one running pod per node", lambda: _running_by_node(plugins, spread), 90, 0.2)
    assert sorted(running) == sorted(node.name for node in plugins.nodes())
    # A fourth pod finds no free device on any node: the scheduler says so and leaves it pending.
    _scale(plugins, spread, 4)
    try:

        def unschedulable() -> str | None:
            for pod in _pods_of(plugins, spread):
                for condition in pod["status"].get("conditions") or []:
                    if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                        return str(condition.get("message", ""))
            return None

        message = wait_for("the fourth pod to be unschedulable", unschedulable, 60, 0.2)
        assert f"3 Insufficient {RESOURCE}" in message, message
    finally:
        _scale(plugins, spread, 3)
    wait_for("three pods again", lambda: _running_by_node(plugins, spread), 60, 0.2)


def test_one_nodes_kubelet_restarts_while_the_others_keep_serving(plugins: Cluster, spread: str) -> None:
    before = wait_for("one running pod per node", lambda: _running_by_node(plugins, spread), 90, 0.2)
    restarted = plugins.node(2)
    healthy_after = restarted.restart_kubelet()
    after = wait_for("one running pod per node", lambda: _running_by_node(plugins, spread), 60, 0.2)
    for node_name, pod in after.items():  # no pod lost, none restarted, on any node
        assert pod["metadata"]["uid"] == before[node_name]["metadata"]["uid"], node_name
        assert [c["restartCount"] for c in pod["status"]["containerStatuses"]] == [0], node_name
    # The restarted node serves again: its pod's replacement can only run there, with its plugin's
    # device, which the kubelet has again only once the plugin registered with the new kubelet.
    api = plugins.api()
    api.delete_pod(before[restarted.name]["metadata"]["name"])
    again = wait_for("a replacement on the restarted node", lambda: _running_by_node(plugins, spread), 90, 0.2)
    assert again[restarted.name]["metadata"]["uid"] != before[restarted.name]["metadata"]["uid"]
    assert all(again[n]["metadata"]["uid"] == before[n]["metadata"]["uid"] for n in again if n != restarted.name)
    # The restarted kubelet may refuse a replacement it admits in its first seconds
    # (UnexpectedAdmissionError, the restart race of docs/real-cluster.md); the ReplicaSet's next runs.
    refused = [
        (pod["spec"].get("nodeName"), pod["status"].get("reason"), pod["status"].get("message"))
        for pod in _pods_of(plugins, spread, "Failed")
    ]
    assert all(node == restarted.name for node, _, _ in refused), refused
    print(f"node 2's kubelet answered healthz {healthy_after:.1f} s after its restart; refused: {refused}")


def _slices(cluster: Cluster, node: str) -> list[dict[str, Any]]:
    found = cluster.api().get(f"{SLICES}?fieldSelector=spec.nodeName={node},spec.driver={DRA_DRIVER}")
    return list(found["items"])


def _kill(node: Node, name: str) -> None:
    """SIGKILL, as a machine that vanishes: nothing gets to clean up."""
    state = node.cluster.state()
    assert state is not None
    os.kill(node.pids(state)[name], signal.SIGKILL)
    node.stop(name)  # reaped and forgotten


def test_a_deleted_node_loses_its_slices_to_the_garbage_collector(multinode: Cluster) -> None:
    kept, gone = multinode.node(2), multinode.node(3)
    api = multinode.api()
    for node in (kept, gone):
        node.spawn(
            "kubedevice-dra",
            [
                sys.executable,
                "-m",
                "kubedevice",
                "serve",
                "--config",
                str(REPO / "examples" / "dra-null.yaml"),
                "--node",
                node.name,
                "--kubelet-dir",
                "/var/lib/kubelet",
                "--cdi-dir",
                "/run/cdi",
                "--kubeconfig",
                str(multinode.kubeconfig),
            ],
            env=PYTHONPATH,
        )
    try:
        for node in (kept, gone):
            wait_for(f"{node.name}'s slices", lambda n=node: _slices(multinode, n.name), 60, 0.2)
        node_object = api.node(gone.name)
        assert node_object is not None
        uid = node_object["metadata"]["uid"]
        [owned] = _slices(multinode, gone.name)
        assert owned["metadata"]["ownerReferences"][0]["uid"] == uid, owned["metadata"]
        kept_slices = {s["metadata"]["uid"] for s in _slices(multinode, kept.name)}
        # Node 3 vanishes: its kubelet first (it would delete the driver's slices when the driver's
        # socket goes), then the driver; the slices outlive both, until the Node is deleted.
        _kill(gone, "kubelet")
        _kill(gone, "kubedevice-dra")
        time.sleep(2)
        assert [s["metadata"]["uid"] for s in _slices(multinode, gone.name)] == [owned["metadata"]["uid"]]
        api.request("DELETE", f"/api/v1/nodes/{gone.name}")
        wait_for(
            "the garbage collector to delete node 3's slices",
            lambda: not _slices(multinode, gone.name) or None,
            60,
            0.2,
        )
        # The other nodes keep theirs, untouched; no slice of the driver names the deleted node.
        assert {s["metadata"]["uid"] for s in _slices(multinode, kept.name)} == kept_slices
        every = api.get(f"{SLICES}?fieldSelector=spec.driver={DRA_DRIVER}")["items"]
        assert {s["spec"]["nodeName"] for s in every} == {kept.name}, every
    finally:
        kept.stop("kubedevice-dra")
        for leftover in _slices(multinode, kept.name):
            api.request("DELETE", f"{SLICES}/{leftover['metadata']['name']}")


def test_an_up_interrupted_while_a_further_node_starts_leaves_nothing(multinode: Cluster, short_tmp: Path) -> None:
    """Next to the running 3-node cluster: a second `up --nodes 3` SIGTERMed once node 3's containerd
    is starting stops what it started on every node, and nothing of it stays on the host."""
    directory = short_tmp / "second"
    up = subprocess.Popen(
        [str(SCRIPT), "up", "--dir", str(directory), "--nodes", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    second = Cluster(directory)

    def node3_starting() -> bool:
        state = second.state()
        return state is not None and len(state.nodes) == 2 and "containerd" in state.nodes[1].pids

    try:
        wait_for("the second cluster's node 3 to start containerd", node3_starting, 120, 0.05)
    except AssertionError:
        up.kill()
        pytest.fail(f"up did not get to node 3: {up.communicate()}")
    state = second.state()
    assert state is not None and state.nodes[0].pids["kubelet"] and state.nodes[1].namespace_pid
    up.send_signal(signal.SIGTERM)
    _, err = up.communicate(timeout=120)
    assert up.returncode == 130, err
    assert second.state() is None, err
    assert leftovers(directory, state) == []
    assert all(multinode.running().values())  # the first cluster is untouched
