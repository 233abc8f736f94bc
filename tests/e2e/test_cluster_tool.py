"""scripts/cluster.sh itself: an interrupted `up` leaves nothing behind, next to the session's cluster."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from kubedevice.testing.cluster import Cluster, Ports, State, leftovers
from kubedevice.testing.waiting import wait_for

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster.sh"


def test_interrupted_up_leaves_nothing_while_another_cluster_runs(cluster: Cluster, short_tmp: Path) -> None:
    directory = short_tmp / "second"
    up = subprocess.Popen(
        [str(SCRIPT), "up", "--dir", str(directory)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    state_file = directory / "state.json"
    try:  # interrupt once the node's processes are starting (state.json is replaced whole)
        wait_for(
            "up to start containerd",
            lambda: state_file.exists() and "containerd" in json.loads(state_file.read_text())["pids"],
            120,
        )
    except AssertionError:
        up.kill()
        pytest.fail(f"up did not get to containerd: {up.communicate()}")
    data = json.loads(state_file.read_text())
    state = State(ports=Ports(**data.pop("ports")), **data)
    session = cluster.state()
    assert session is not None and state.ports != session.ports
    up.send_signal(signal.SIGTERM)
    _, err = up.communicate(timeout=120)
    assert up.returncode == 130, err
    assert not state_file.exists(), err
    assert leftovers(directory, state) == []
    assert cluster.api().node_ready(cluster.node_name)  # the session's cluster was not touched


def test_controllers_act_as_their_own_service_accounts(cluster: Cluster) -> None:
    """As in a real cluster: each controller has its account and role, so the node lifecycle
    controller lifts the node's not-ready taint and the resource claim controller may create
    claims from templates (test_dra_cluster.py's pods need both, and tolerate nothing)."""
    api = cluster.api()
    assert api.node_taints(cluster.node_name) == []
    for controller in ("node-controller", "resource-claim-controller"):
        assert api.get(f"/api/v1/namespaces/kube-system/serviceaccounts/{controller}") is not None, controller


def test_the_test_node_evicts_no_pod_for_its_disk(cluster: Cluster) -> None:
    """The kubelet of a test node runs with disk-pressure eviction off, as its own ``/configz``
    (read inside the cluster's network namespace, as the admin) says: the node shares the
    machine's disk, and with the kubelet's defaults a CI run on a machine with 16% free had every
    pod of its e2e tests evicted for DiskPressure."""
    state = cluster.state()
    assert state is not None
    config = json.loads(cluster.admin_get(state.ports.kubelet, "/configz"))["kubeletconfig"]
    assert config["evictionHard"] == {"imagefs.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%"}
    conditions = {c["type"]: c["status"] for c in cluster.api().node(cluster.node_name)["status"]["conditions"]}
    assert conditions["DiskPressure"] == "False"
