"""The cluster's private network: nothing it runs can send a packet off the machine.

The probe test runs only after the isolation is checked (from the host's network a probe on a pod
IP would leave through its default route).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

import pytest

from kubedevice.testing.cluster import NODE_IP, Cluster
from kubedevice.testing.scenarios import delete_pods, device_pod, unique, wait_for

pytestmark = pytest.mark.e2e

COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "containerd", "kubelet")


def _in_cluster_net(cluster: Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    state = cluster.state()
    assert state is not None
    return subprocess.run(
        ["nsenter", "-t", str(state.pids["kubelet"]), "-n", *argv],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )


def _assert_isolated(cluster: Cluster) -> None:
    state = cluster.state()
    assert state is not None
    host = os.readlink("/proc/self/ns/net")
    nets = {name: os.readlink(f"/proc/{state.pids[name]}/ns/net") for name in COMPONENTS}
    assert len(set(nets.values())) == 1 and host not in nets.values(), (host, nets)
    routes = _in_cluster_net(cluster, "ip", "-4", "route", "show", "table", "all")
    assert routes.returncode == 0, routes.stderr
    main = [line for line in routes.stdout.splitlines() if not re.match(r"(local|broadcast) ", line)]
    # Only the pods' /32 routes onto their veth pairs (the other end is in the pod's namespace).
    assert all(re.fullmatch(rf"10\.88\.\d+\.\d+ dev kd\d+ scope link src {NODE_IP} ?", line) for line in main), main
    for address in ("10.88.255.250", "192.0.2.1", "8.8.8.8"):  # no pod, the host's gateway, the internet
        lookup = _in_cluster_net(cluster, "ip", "-4", "route", "get", address)
        assert lookup.returncode != 0 and "unreachable" in lookup.stderr, (address, lookup)


def test_every_component_runs_in_a_private_network_without_routes(cluster: Cluster) -> None:
    _assert_isolated(cluster)
    node = cluster.api().node(cluster.node_name)
    assert {"type": "InternalIP", "address": NODE_IP} in node["status"]["addresses"]


def _probe_failures(cluster: Cluster, name: str) -> list[str]:
    return [
        event["message"]
        for event in cluster.api().events()
        if event["involvedObject"]["name"] == name and event["reason"] == "Unhealthy"
    ]


def test_a_probe_on_the_pod_ip_reaches_the_pod_and_nothing_else(cluster: Cluster) -> None:
    _assert_isolated(cluster)  # never send a probe from a network with a way out
    name = unique("probe")
    pod = device_pod(name, {}, cluster.node_name)
    pod["spec"]["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
    api = cluster.api()
    api.create_pod(pod)
    try:
        # The kubelet dialled the pod's address over the pod's veth pair: the pod (listening on
        # no port) refused it. A host that answered would have to be on that pair. (A first
        # failure may be another one, a timeout on a busy machine: wait for the refusal.)
        def refused() -> str | None:
            ip = str((api.pod(name) or {}).get("status", {}).get("podIP", ""))
            messages = _probe_failures(cluster, name)
            return ip if ip and any(f"{ip}:8080" in m and "connection refused" in m for m in messages) else None

        failures = functools.partial(_probe_failures, cluster, name)
        ip = wait_for("a readiness probe refused on the pod's address", refused, 60, 0.2, seen=failures)
        assert ip.startswith("10.88."), ip
        routes = _in_cluster_net(cluster, "ip", "-4", "route", "get", ip)
        assert re.match(rf"{re.escape(ip)} dev kd\d+ src {NODE_IP}", routes.stdout), routes
    finally:
        delete_pods(api, [name])


def test_a_host_network_pod_runs_in_the_clusters_network(cluster: Cluster) -> None:
    name = unique("hostnet")
    pod = device_pod(name, {}, cluster.node_name)
    pod["spec"]["hostNetwork"] = True
    api = cluster.api()
    api.create_pod(pod)
    try:
        wait_for("the host-network pod to run", lambda: api.pod(name)["status"].get("phase") == "Running", 60, 0.2)
        assert api.pod(name)["status"]["podIP"] == NODE_IP  # the node's address: only the cluster's network has it
    finally:
        delete_pods(api, [name])
