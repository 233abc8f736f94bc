"""What `scripts/cluster.sh down` removes from a cluster directory, on real files (no cluster needed:
``tests/e2e/`` runs the real one). It removes only what ``up`` makes, only where ``up`` left its
marker, keeps the logs, and says so in one line."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kubedevice.testing.cluster import MARKER, Cluster, ClusterError
from kubedevice.testing.cluster.__main__ import main

MADE = {
    "etcd/member/wal/0.wal": 4096 * 16,
    "ns/var-lib/containerd/io.containerd.content.v1.content/blobs/sha256/ab": 4096 * 8,
    "ns/var-lib/kubelet/device-plugins/kubelet.checkpoint": 100,
    "ns/sysctl/vm.overcommit_memory": 2,
    "pki/ca.crt": 500,
    "config/kubelet.yaml": 300,
    "cni/bin/kubedevice-veth": 900,
    "kubeconfig": 700,
    "kubelet.kubeconfig": 700,
    # a further node of `up --nodes 3`
    "node2/ns/var-lib/kubelet/device-plugins/kubelet.checkpoint": 100,
    "node2/ns/var-lib/containerd/io.containerd.content.v1.content/blobs/sha256/cd": 4096 * 8,
    "node2/config/containerd.toml": 300,
    "node2/kubelet.kubeconfig": 700,
    "node3/cni/bin/kubedevice-veth": 900,
}
KEPT = {
    "logs/kubelet.log": 4096 * 2,
    "ns/var-log/pods/default_p_uid/main/0.log": 4096,
    "logs/kubedevice-node-2-kubelet.log": 4096,
    "node2/ns/var-log/pods/default_q_uid/main/0.log": 4096,
}
FOREIGN = {"notes.txt": 10, "mine/data.bin": 4096}
"""Not made by ``up``: the user's own files in the same directory."""


def populate(directory: Path, files: dict[str, int]) -> None:
    for name, size in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "c"
    populate(directory, {**MADE, **KEPT, **FOREIGN})
    (directory / MARKER).write_text("made by up\n")
    return directory


def test_removes_what_up_made_and_keeps_the_logs_and_foreign_files(cluster_dir: Path) -> None:
    with socket.socket(socket.AF_UNIX) as sock:  # a socket up left behind (relay/, ns/run/)
        (cluster_dir / "ns" / "run").mkdir(parents=True)
        sock.bind(str(cluster_dir / "ns" / "run" / "containerd.sock"))
    before = Cluster(cluster_dir).disk_usage()
    result = Cluster(cluster_dir).remove_files()
    assert result is not None
    removed, kept = result
    assert sorted(str(p.relative_to(cluster_dir)) for p in cluster_dir.rglob("*") if p.is_file()) == sorted(
        [*KEPT, *FOREIGN, MARKER]
    )
    assert not (cluster_dir / "etcd").exists() and not (cluster_dir / "ns" / "var-lib").exists()
    assert removed >= sum(MADE.values()) and kept >= sum(KEPT.values())
    assert Cluster(cluster_dir).disk_usage() == before - removed


def test_removes_nothing_without_the_marker(cluster_dir: Path) -> None:
    (cluster_dir / MARKER).unlink()
    assert Cluster(cluster_dir).remove_files() is None
    assert all((cluster_dir / name).is_file() for name in [*MADE, *KEPT, *FOREIGN])


def test_a_symlink_is_removed_as_a_link_never_followed(cluster_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    populate(outside, {"precious": 10})
    (cluster_dir / "pki" / "ca.crt").unlink()
    (cluster_dir / "pki").rmdir()
    (cluster_dir / "pki").symlink_to(outside)
    assert Cluster(cluster_dir).remove_files() is not None
    assert not (cluster_dir / "pki").is_symlink() and (outside / "precious").is_file()


def test_refuses_while_a_cluster_is_recorded(cluster_dir: Path) -> None:
    (cluster_dir / "state.json").write_text(json.dumps({"running": "perhaps"}))
    with pytest.raises(ClusterError, match="run `down` first"):
        Cluster(cluster_dir).remove_files()
    assert (cluster_dir / "etcd" / "member" / "wal" / "0.wal").is_file()


def test_down_says_what_it_stopped_removed_and_kept(cluster_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["down", "--dir", str(cluster_dir), "--keep"]) == 0
    stopped, kept = capsys.readouterr().out.splitlines()
    assert stopped == f"stopped: nothing was running in {cluster_dir}"
    assert kept.startswith("kept: ") and f"MB in {cluster_dir} (--keep)" in kept
    assert (cluster_dir / "etcd" / "member" / "wal" / "0.wal").is_file()

    assert main(["down", "--dir", str(cluster_dir)]) == 0
    _, removed = capsys.readouterr().out.splitlines()
    assert removed.startswith("removed: 0.") and "kept the logs for debugging" in removed
    assert (
        f"{cluster_dir / 'logs'} and {cluster_dir / 'ns' / 'var-log' / 'pods'}, "
        f"{cluster_dir / 'node2' / 'ns' / 'var-log' / 'pods'}" in removed
    )
    assert not (cluster_dir / "etcd").exists() and (cluster_dir / "logs" / "kubelet.log").is_file()


def test_down_in_a_directory_up_did_not_make(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    populate(tmp_path, {"kubeconfig": 5, "etcd/x": 5})
    assert main(["down", "--dir", str(tmp_path)]) == 0
    removed = capsys.readouterr().out.splitlines()[1]
    assert removed == f"removed: nothing ({tmp_path} has no {MARKER}: `up` did not make it)"
    assert (tmp_path / "kubeconfig").is_file() and (tmp_path / "etcd" / "x").is_file()


@pytest.mark.parametrize("nodes", ["0", "6"])
def test_up_refuses_a_node_count_out_of_range_in_one_line(
    tmp_path: Path, nodes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["up", "--dir", str(tmp_path), "--nodes", nodes]) == 2
    assert capsys.readouterr().err == f"kubedevice: --nodes: {nodes} is not between 1 and 5\n"
    assert list(tmp_path.iterdir()) == []  # refused before anything was made
