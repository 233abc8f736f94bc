"""The Helm chart's DaemonSet on every node of a real 3-node cluster (``cluster.sh up --nodes 3``):
the image scripts/image.sh built, imported with ctr into each node's own containerd (no registry).

Every node is a private namespace with its own kubelet and containerd; the daemon's pods run with
the host network of their node, where 127.0.0.1 reaches the API server (through the node's relay).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import clusterkit
from .clusterkit import delete_pods, device_pod, unique, wait_for
from .helmkit import CHART, Helm

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
RELEASE = "kubedevice"
RESOURCE = "example.com/fleet"
DEVICES = 2


@pytest.fixture(scope="module")
def fleet(image_archive: Path) -> Iterator[Any]:
    directory = clusterkit.cluster_dir("kd-hm-")
    cluster = clusterkit.start(directory, nodes=3)
    try:
        for node in cluster.nodes():  # each node's containerd has images of its own
            done = subprocess.run([str(cluster.binaries.containerd / "ctr"), "--address", str(node.containerd_socket),
                                   "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", "--snapshotter",
                                   "native", str(image_archive)], capture_output=True, text=True, timeout=300,
                                  check=False)
            assert done.returncode == 0, (node.name, done.stderr[-2000:])
        yield cluster
    finally:
        clusterkit.stop(cluster)
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def _helm(helm: Helm, cluster: Any, *args: str) -> None:
    done = helm.run("--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE, *args)
    assert done.returncode == 0, done.stderr


def _daemon_pods(cluster: Any) -> list[dict[str, Any]]:
    return [pod for pod in cluster.api().pods(NAMESPACE) if pod["metadata"]["name"].startswith(f"{RELEASE}-")]


def _running_on_every_node(cluster: Any) -> dict[str, dict[str, Any]] | None:
    pods = [pod for pod in _daemon_pods(cluster) if not pod["metadata"].get("deletionTimestamp")]
    running = {pod["spec"].get("nodeName"): pod for pod in pods
               if any("running" in status["state"] for status in pod["status"].get("containerStatuses", []))}
    return running if len(pods) == len(running) == len(cluster.nodes()) else None


def test_the_daemonset_serves_every_node_and_uninstall_leaves_none(fleet: Any, helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({
        "image": {"pullPolicy": "Never"},
        "config": {"resources": [{"name": RESOURCE, "static": {"count": DEVICES, "paths": ["/dev/null"]}}]},
        **clusterkit.api_access(fleet)}))
    api = fleet.api()
    names = [node.name for node in fleet.nodes()]
    started = time.monotonic()
    _helm(helm, fleet, "install", RELEASE, str(CHART), "--values", str(values))
    try:
        running = wait_for("a daemon pod running on every node", lambda: _running_on_every_node(fleet), 180, 0.5)
        assert sorted(running) == sorted(names)
        for name in names:
            wait_for(f"{RESOURCE} on {name}", lambda n=name: api.resource(n, RESOURCE) == (DEVICES, DEVICES), 60, 0.2)
        print(f"install to capacity on {len(names)} nodes: {time.monotonic() - started:.1f} s")
        # Each node's own daemon gives its devices: a pod asking for all of them runs on every node.
        pods = {name: unique("fleet") for name in names}
        for name, pod in pods.items():
            api.create_pod(device_pod(pod, {RESOURCE: DEVICES}, name))
        wait_for("a device pod running on every node",
                 lambda: all((api.pod(p) or {}).get("status", {}).get("phase") == "Running" for p in pods.values()),
                 90, 0.2)
        delete_pods(api, list(pods.values()))
    finally:
        _helm(helm, fleet, "uninstall", RELEASE, "--wait")
    wait_for("no daemon pod left", lambda: not _daemon_pods(fleet) or None, 90, 0.5)
    for name in names:  # no node keeps a device of ours once its plugin's socket is gone
        wait_for(f"no allocatable {RESOURCE} on {name}", lambda n=name: api.resource(n, RESOURCE)[1] == 0, 60, 0.2)
    for node in fleet.nodes():  # our sockets gone from every node: only the kubelet's files remain
        assert sorted(p.name for p in node.plugin_dir.iterdir()) == ["kubelet.sock", "kubelet_internal_checkpoint"]
