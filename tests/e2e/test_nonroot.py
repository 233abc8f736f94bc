"""A pod that does not run as root opens its device, on the real kubelet and containerd.

The device is a character device node made for the test (the null device's numbers) that only
root may open on the host (0600 root:root), as most device nodes are. A container running as
uid 1000 with every capability dropped gets it two ways, each proven by what the container
sees and whether its write succeeds:

- the plain device-plugin path, with containerd's ``device_ownership_from_security_context =
  true`` (the cluster's containerd sets it, as docs/sources.md tells users to): the node is
  created owned by the pod's runAsUser/runAsGroup;
- CDI with ``device_ownership``: the node is created with the spec's group and mode, and the
  pod writes through that supplemental group.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from kubedevice.testing.cluster import Cluster
from kubedevice.testing.scenarios import Daemon, container_output, delete_pods, device_pod, unique, wait_for

pytestmark = pytest.mark.e2e

IN_CONTAINER = "/dev/kd-owned"


def root_only_node(directory: Path) -> Path:
    node = directory / "owned-null"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod(node, 0o600)  # whatever the umask
    return node


def nonroot_pod(name: str, resource: str, groups: list[int]) -> dict[str, Any]:
    pod = device_pod(name, {resource: 1})
    pod["spec"]["securityContext"] = {
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "runAsNonRoot": True,
        "supplementalGroups": groups,
    }
    (container,) = pod["spec"]["containers"]
    container["args"] = ["--write", IN_CONTAINER]
    container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod


def probe(cluster: Cluster, pod_name: str) -> dict[str, str]:
    """The container's own report: its ids, the node's owner and mode, the write's outcome."""
    api = cluster.api()
    pod = wait_for(
        "pod running", lambda: (p := api.pod(pod_name)) and p["status"].get("phase") == "Running" and p, 60.0
    )
    log = container_output(cluster, pod)
    return {
        line.split(" ", 1)[0]: line.split(" ", 1)[1]
        for line in log.splitlines()
        if line.startswith(("id ", "stat ", "write "))
    }


def test_device_plugin_path_with_ownership_from_security_context(cluster: Cluster, short_tmp: Path) -> None:
    resource = "example.com/e2e-owned"
    node = root_only_node(short_tmp)
    config = short_tmp / "config.yaml"
    config.write_text(
        f"resources:\n  - name: {resource}\n    static: {{count: 1, paths: [{node}]}}\n"
        f"    container_path: {IN_CONTAINER}\n"
    )
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    name = unique("nonroot-dp")
    try:
        wait_for("the device in the Node", lambda: cluster.api().resource(cluster.node_name, resource) == (1, 1), 10.0)
        cluster.api().create_pod(nonroot_pod(name, resource, []))
        seen = probe(cluster, name)
        assert seen["id"].startswith("uid=1000 gid=1000"), seen
        assert seen["stat"] == f"{IN_CONTAINER}: uid=1000 gid=1000 mode=600", seen
        assert seen["write"] == f"{IN_CONTAINER}: ok", seen
        assert stat.S_IMODE(node.stat().st_mode) == 0o600 and node.stat().st_uid == 0  # the host's is untouched
    finally:
        delete_pods(cluster.api(), [name])
        assert daemon.stop() == 0, daemon.tail


def test_cdi_device_ownership_gives_the_pod_its_group(cluster: Cluster, short_tmp: Path) -> None:
    resource = "example.com/e2e-owned-cdi"
    node = root_only_node(short_tmp)
    config = short_tmp / "config.yaml"
    config.write_text(
        f"resources:\n  - name: {resource}\n    static: {{count: 1, paths: [{node}]}}\n"
        f"    container_path: {IN_CONTAINER}\n"
        "    cdi: {kind: kubedevice.test/owned, mode: cri}\n"
        "    device_ownership: {uid: 0, gid: 3000, mode: '0660'}\n"
    )
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    name = unique("nonroot-cdi")
    try:
        wait_for("the device in the Node", lambda: cluster.api().resource(cluster.node_name, resource) == (1, 1), 10.0)
        cluster.api().create_pod(nonroot_pod(name, resource, [3000]))
        seen = probe(cluster, name)
        assert seen["id"].startswith("uid=1000 gid=1000") and "3000" in seen["id"], seen
        assert seen["stat"] == f"{IN_CONTAINER}: uid=0 gid=3000 mode=660", seen
        assert seen["write"] == f"{IN_CONTAINER}: ok", seen
    finally:
        delete_pods(cluster.api(), [name])
        assert daemon.stop() == 0, daemon.tail
