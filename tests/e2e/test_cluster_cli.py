"""`scripts/cluster.sh up` / `down` as docs/real-cluster.md tells a user to run them, beside the
session's cluster: the lines `up` prints to paste give a kubectl of the cluster's version and a
working ctr, and `down` says what it stopped and leaves only its logs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kubedevice.testing.cluster import MARKER, Cluster, Ports, State, leftovers

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cluster.sh"


def test_printed_kubectl_and_ctr_work_and_down_keeps_only_the_logs(cluster: Cluster, short_tmp: Path) -> None:
    directory = short_tmp / "cli"
    up = subprocess.run(
        [str(SCRIPT), "up", "--dir", str(directory)], capture_output=True, text=True, timeout=1800, check=False
    )  # the first run builds kubectl
    assert up.returncode == 0, up.stderr
    data = json.loads((directory / "state.json").read_text())
    state = State(ports=Ports(**data.pop("ports")), **data)
    try:
        lines = up.stdout.splitlines()
        paste = lines[lines.index("# to use them in this shell:") + 1 :]
        script = short_tmp / "use.sh"
        script.write_text(
            "\n".join(
                [
                    "shopt -s expand_aliases",
                    *paste,
                    "kubectl get nodes -o name",
                    "kubectl version",
                    "ctr images ls -q",
                    "",
                ]
            )
        )
        used = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False)
        assert used.returncode == 0, used.stderr
        assert "node/kubedevice-node" in used.stdout
        assert "Client Version: v1.36.3" in used.stdout and "Server Version: v1.36.3" in used.stdout
        assert "WARNING" not in used.stderr  # no version skew
        assert "kubedevice.test/envsleep:1" in used.stdout.splitlines()
    finally:
        down = subprocess.run(
            [str(SCRIPT), "down", "--dir", str(directory)], capture_output=True, text=True, timeout=120, check=False
        )
    assert down.returncode == 0, down.stderr
    stopped, files = down.stdout.splitlines()
    assert all(name in stopped for name in ("kube-apiserver", "etcd", "kubelet", "containerd")), stopped
    assert files.startswith("removed: ") and "kept the logs" in files, files
    assert sorted(path.name for path in directory.iterdir()) == sorted([MARKER, "logs", "ns"])
    assert [path.name for path in (directory / "ns").iterdir()] == ["var-log"]
    assert leftovers(directory, state) == []
    assert cluster.api().node_ready(cluster.node_name)  # the session's cluster was not touched
