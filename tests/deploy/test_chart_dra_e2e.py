"""The Helm chart in DRA mode on a real single-node Kubernetes (v1.36, containerd 2 with CDI), with
the image scripts/image.sh built and ``image.pullPolicy: Never``: the driver runs as the chart's
DaemonSet pod, publishes its node's ResourceSlices with its own ServiceAccount, the real scheduler
allocates a claim from them and the real kubelet has the pod prepare it; the chart's admission
policy keeps that ServiceAccount to its own node's slices; ``helm uninstall`` leaves nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import clusterkit
from .clusterkit import unique, wait_for
from .helmkit import CHART, REPO, Helm

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
RELEASE = "kd-dra"
FULLNAME = f"{RELEASE}-kubedevice"
SERVICE_ACCOUNT = FULLNAME
DRIVER = "null.example.com"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
RESULTS: dict[str, Any] = {}


def record(key: str, value: Any) -> None:
    RESULTS[key] = value
    print(f"e2e: {key} = {json.dumps(value)}")


def values() -> dict[str, Any]:
    return {
        "image": {"pullPolicy": "Never"},
        "log": {"level": "debug"},
        "dra": {"enabled": True, "driverName": DRIVER},
        "config": {
            "resources": [
                {
                    "name": "example.com/null",
                    "static": {"count": 4, "paths": ["/dev/null"]},
                    "env": {"NULL_DEVICE": "{ids}"},
                }
            ]
        },
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with clusterkit.module_cluster("kd-hd-") as cluster:
        yield cluster


class Release:
    def __init__(self, cluster: Any, helm: Helm, scratch: Path) -> None:
        self.cluster, self.api, self.scratch, self._helm = cluster, cluster.api(), scratch, helm

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = self._helm.run("--kubeconfig", str(self.cluster.kubeconfig), "--namespace", NAMESPACE, *args)
        assert not check or result.returncode == 0, result.stderr
        return result

    def install(self) -> None:
        path = self.scratch / "values.yaml"
        path.write_text(json.dumps({**values(), **clusterkit.api_access(self.cluster)}))
        self.helm("install", RELEASE, str(CHART), "--values", str(path))

    def pods(self) -> list[dict[str, Any]]:
        return [p for p in self.api.pods(NAMESPACE) if p["metadata"]["name"].startswith(f"{FULLNAME}-")]

    def running(self, timeout: float = 120) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            pods = [p for p in self.pods() if not p["metadata"].get("deletionTimestamp")]
            statuses = [s for p in pods for s in p["status"].get("containerStatuses", [])]
            return pods[0] if len(pods) == 1 and statuses and "running" in statuses[0]["state"] else None

        return wait_for("the driver's pod to run", found, timeout, interval=0.2)

    def ready(self, name: str) -> bool:
        conditions = (self.api.pod(name, NAMESPACE) or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def slices(self) -> list[dict[str, Any]]:
        items = self.api.request("GET", f"{SLICES}?fieldSelector=spec.driver%3D{DRIVER}")["items"]
        return [s for s in items if s["spec"].get("nodeName") == self.cluster.node_name]


@pytest.fixture(scope="module")
def release(
    cluster: Any, image_archive: Path, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    clusterkit.import_image(cluster, image_archive)
    release = Release(cluster, helm, tmp_path_factory.mktemp("values"))
    yield release
    release.helm("uninstall", RELEASE, check=False)


def test_dra_install_publishes_from_the_pod_and_a_claim_is_prepared(release: Release) -> None:
    started = time.monotonic()
    release.install()
    pod = release.running()
    name = pod["metadata"]["name"]
    (status,) = pod["status"]["containerStatuses"]
    # The chart's confinement holds in DRA mode too: uid 0, no capability, no new privileges,
    # a read-only root filesystem.
    pid = clusterkit.container_pid(release.cluster, status["containerID"])
    proc = Path(f"/proc/{pid}/status").read_text()
    assert re.search(r"^Uid:\t0\t", proc, re.M) and "NoNewPrivs:\t1" in proc
    for caps in ("CapEff", "CapPrm", "CapBnd"):
        assert re.search(rf"^{caps}:\t0+$", proc, re.M), proc
    root = next(line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines() if line.split()[4] == "/")
    assert "ro" in root.split()[5].split(","), root
    # Registered with the kubelet's plugin watcher and slices published by the pod: nothing else
    # runs this driver here, and the slices carry its field manager.
    slices = wait_for(
        "our node's slices with its 4 devices",
        lambda: (found := release.slices()) and sum(len(s["spec"].get("devices", [])) for s in found) == 4 and found,
        60,
        interval=0.2,
        seen=release.slices,
    )
    record("install_to_slices_s", round(time.monotonic() - started, 1))
    assert {m["manager"] for s in slices for m in s["metadata"]["managedFields"]} == {"kubedevice"}
    assert (release.cluster.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock").exists()
    # Readiness = registered and published: the kubelet's HTTP probe of /readyz passed.
    wait_for("the driver's pod Ready", lambda: release.ready(name), 60, interval=0.2)
    record("install_to_ready_s", round(time.monotonic() - started, 1))

    api = release.api
    [device_class] = yaml.safe_load_all((REPO / "examples" / "dra-null-class.yaml").read_text())
    api.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
    workload = unique("dra-chart")
    template, consumer = clusterkit.claim_objects(workload)
    api.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template)
    api.create_pod(consumer)
    created = time.monotonic()
    running = wait_for("the claim's pod to run", lambda: clusterkit.scenarios.pod_outcome(api, workload), 120, 0.2)
    assert running[0] == "Running", running
    record("claim_pod_running_s", round(time.monotonic() - created, 1))
    claims = api.request("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")["items"]
    (claim,) = [c for c in claims if c["metadata"]["name"].startswith(workload)]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == DRIVER and result["pool"] == release.cluster.node_name
    # The driver prepared it: our CDI spec is on the node and containerd injected its env.
    spec = release.cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{claim['metadata']['uid']}.json"
    assert spec.exists()
    log = clusterkit.scenarios.container_output(release.cluster, api.pod(workload))
    assert f"NULL_DEVICE={result['device']}" in log, log
    api.delete_pod(workload, grace=1)
    wait_for("the pod gone", lambda: api.pod(workload) is None, 60, 0.2)
    wait_for("the claim's CDI spec removed (unprepared)", lambda: not spec.exists(), 30, 0.2)
    api.request("DELETE", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/{workload}")
    api.request("DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{DRIVER}")


def token_for(release: Release, pod: dict[str, Any] | None) -> str:
    """``kubectl create token SA [--bound-object-kind Pod --bound-object-name POD]``: a TokenRequest."""
    spec: dict[str, Any] = {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 600}
    if pod is not None:
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
        }
    answer = release.api.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    token: str = answer["status"]["token"]
    return token


def slice_for(node: str) -> dict[str, Any]:
    """A slice of another driver name: the running driver would delete one of its own that it did
    not publish (which is its job, and not what this test is about)."""
    name = unique("policy")
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "policy-test.example.com",
            "nodeName": node,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }


def test_admission_policy_keeps_the_driver_to_its_own_nodes_slices(release: Release) -> None:
    pod = release.running()
    token = token_for(release, pod)
    # Another node's slice: refused by the policy, with its message.
    status, body = clusterkit.as_token(release.cluster, token, "POST", SLICES, slice_for("another-node"))
    assert status in (403, 422) and "ValidatingAdmissionPolicy" in body, (status, body)
    assert f"on node '{release.cluster.node_name}' may not write ResourceSlices of node 'another-node'" in body
    # A slice that is for no node (all nodes): refused too.
    everywhere = slice_for("x")
    del everywhere["spec"]["nodeName"]
    everywhere["spec"]["allNodes"] = True
    status, body = clusterkit.as_token(release.cluster, token, "POST", SLICES, everywhere)
    assert status in (403, 422) and "not for one node" in body, (status, body)
    # Its own node's: allowed, and so are deleting it.
    own = slice_for(release.cluster.node_name)
    status, body = clusterkit.as_token(release.cluster, token, "POST", SLICES, own)
    assert status == 201, (status, body)
    status, body = clusterkit.as_token(release.cluster, token, "DELETE", f"{SLICES}/{own['metadata']['name']}")
    assert status == 200, (status, body)
    # A token of the same ServiceAccount bound to no pod carries no node: refused.
    unbound = token_for(release, None)
    status, body = clusterkit.as_token(release.cluster, unbound, "POST", SLICES, slice_for(release.cluster.node_name))
    assert status in (403, 422) and "only with a token bound to a pod on a node" in body, (status, body)
    # Someone else's slice of another node cannot be deleted with it either.
    other = slice_for("another-node")
    release.api.request("POST", SLICES, other)  # as cluster admin: the policy matches only our account
    status, body = clusterkit.as_token(release.cluster, token, "DELETE", f"{SLICES}/{other['metadata']['name']}")
    assert status in (403, 422) and "another-node" in body, (status, body)
    release.api.request("DELETE", f"{SLICES}/{other['metadata']['name']}")


def test_uninstall_removes_the_slices_and_leaves_nothing_of_ours(release: Release) -> None:
    assert release.slices()
    started = time.monotonic()
    release.helm("uninstall", RELEASE, "--wait", "--timeout", "90s")
    wait_for("the driver's pod gone", lambda: not release.pods(), 90, interval=0.2)
    # The kubelet deletes a driver's slices 30 s after its last instance unregistered.
    wait_for("our slices gone", lambda: not release.slices(), 90, interval=0.5)
    record("uninstall_to_no_slices_s", round(time.monotonic() - started, 1))
    kubelet = release.cluster.kubelet_dir
    assert not [p.name for p in (kubelet / "plugins_registry").iterdir() if DRIVER in p.name]
    assert not [p.name for p in release.cluster.cdi_dir.glob("kubedevice-*")]
    ours = kubelet / "plugins" / DRIVER
    left = sorted(p.name for p in ours.iterdir()) if ours.exists() else []
    record("left_in_plugin_dir", left)
    assert left == [] and not ours.exists(), left  # no claim prepared: no checkpoint kept
    for path in (
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{FULLNAME}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{FULLNAME}",
        f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/resourceslices-policy-{FULLNAME}",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}",
    ):
        assert release.api.get(path) is None, path
