"""The kubelet-restart race (kubernetes #133382, #125579) on the real kubelet.

Only the kubelet restarts; pods requesting a device are created, bound to the node, as soon as
it answers healthz. kubedevice re-registers within the kubelet's admission window and loses no
pod; the Kubernetes sample device plugin, which re-registers seconds later, loses them. One
device pod keeps running across the restarts: the kubelet rewrites its device checkpoint only on
an allocation, so pods deleted just before a restart would otherwise still hold their devices
in the first second after it, whatever the plugin does (docs/user-guide.md, troubleshooting);
8 devices leave room for the keeper, the previous round's 3 and this round's 3.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedevice.testing.cluster import Cluster
from kubedevice.testing.scenarios import (
    Daemon,
    delete_pods,
    device_pod,
    kubelet_restart_round,
    unique,
    wait_for,
    wait_outcome,
)

pytestmark = pytest.mark.e2e

ROUNDS = 5
SAMPLE_RESOURCE = "example.com/resource"


def _keeper(cluster: Cluster, resource: str) -> str:
    api = cluster.api()
    name = unique("keeper")
    api.create_pod(device_pod(name, {resource: 1}, cluster.node_name))
    assert wait_outcome(api, name)[0] == "Running"
    return name


@pytest.mark.release
def test_kubedevice_loses_no_pod_over_repeated_kubelet_restarts(cluster: Cluster, short_tmp: Path) -> None:
    resource = "example.com/e2e-race"
    config = short_tmp / "config.yaml"
    config.write_text(f"resources:\n  - name: {resource}\n    static: {{count: 8, paths: [/dev/null]}}\n")
    daemon = Daemon(cluster, config, short_tmp / "serve.log")
    api = cluster.api()
    keeper = ""
    try:
        wait_for("8 devices", lambda: api.resource(cluster.node_name, resource) == (8, 8), 10.0)
        keeper = _keeper(cluster, resource)
        rounds = [kubelet_restart_round(cluster, resource, pods=3) for _ in range(ROUNDS)]
        failed = {name: outcome for r in rounds for name, outcome in r.outcomes.items() if outcome[0] != "Running"}
        assert not failed, f"pods lost over {ROUNDS} kubelet restarts: {failed}"
        assert api.pod(keeper)["status"]["phase"] == "Running"
    finally:
        if keeper:
            delete_pods(api, [keeper])
        assert daemon.stop() == 0


def test_sample_device_plugin_loses_pods_created_right_after_a_restart(cluster: Cluster) -> None:
    """The same scenario on k8s.io/kubernetes/test/images/sample-device-plugin: proof that the
    scenario catches a slow re-registration (and the comparison benchmarks/real_kubelet.py reports)."""
    api = cluster.api()
    cluster.spawn(
        "sample-device-plugin",
        [str(cluster.binaries.kube("sample-device-plugin"))],
        env={"PLUGIN_SOCK_DIR": "/var/lib/kubelet/device-plugins"},
    )
    keeper = ""
    try:
        wait_for(
            "the sample plugin's 2 devices", lambda: api.resource(cluster.node_name, SAMPLE_RESOURCE) == (2, 2), 20.0
        )
        keeper = _keeper(cluster, SAMPLE_RESOURCE)
        result = kubelet_restart_round(cluster, SAMPLE_RESOURCE, pods=1)
        assert result.admission_errors == 1, result
    finally:
        if keeper:
            delete_pods(api, [keeper])
        cluster.stop("sample-device-plugin")
