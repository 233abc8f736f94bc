"""End to end on a REAL single-node cluster (etcd, API server, scheduler, controller-manager,
kubelet, containerd 2 with CDI): ``kubedevice serve --config examples/dra-null.yaml`` as the node's
DRA driver, a pod with a ResourceClaimTemplate scheduled onto our slices.

Needs a cluster started with the project's cluster tool (``scripts/cluster.sh up``,
``kubedevice.testing.cluster``): ``KUBEDEVICE_TEST_CLUSTER_DIR=<its directory>``. The test reads
that directory's layout: ``kubeconfig``, ``state.json`` (node name, the PID of the private mount
namespace in which the kubelet and containerd run), ``ns/run/cdi`` (containerd's CDI directory)
and ``ns/var-log/pods``. The driver runs inside that mount namespace (``nsenter -m``), so that
the paths it registers are the kubelet's. Skipped without the variable.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from lightkube.resources.resource_v1 import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice

CLUSTER = os.environ.get("KUBEDEVICE_TEST_CLUSTER_DIR")
REPO = Path(__file__).resolve().parents[3]
DRIVER = "null.example.com"
IMAGE = "kubedevice.test/envsleep:1"
pytestmark = pytest.mark.skipif(not CLUSTER, reason="no real cluster: set KUBEDEVICE_TEST_CLUSTER_DIR")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.2)


class Cluster:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        state = json.loads((directory / "state.json").read_text())
        self.node = state["node_name"]
        self.namespace_pid = state["namespace_pid"]
        self.cdi_dir = directory / "ns" / "run" / "cdi"
        self.pod_logs = directory / "ns" / "var-log" / "pods"
        self.client = Client(KubeConfig.from_file(directory / "kubeconfig"), field_manager="kubedevice-e2e")


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    assert CLUSTER
    cluster = Cluster(Path(CLUSTER))
    # The cluster's controller-manager runs with --use-service-account-credentials=false, so its
    # controllers act as system:kube-controller-manager, whose role lacks resourceclaims/create
    # (and nodes/patch: the node keeps its not-ready taint, which the pod tolerates): give that
    # user the resource claim controller's own role (idempotent).
    cluster.client.apply(
        ClusterRoleBinding.from_dict(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "kubedevice-e2e-resource-claim-controller"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:controller:resource-claim-controller",
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"}
                ],
            }
        ),
        force=True,
    )
    return cluster


class Driver:
    """``kubedevice serve`` inside the kubelet's mount namespace; restartable."""

    def __init__(self, cluster: Cluster, log: Path, config: Path = REPO / "examples" / "dra-null.yaml") -> None:
        self.cluster = cluster
        self.log = log
        self.config = config
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [
            "nsenter", "-t", str(self.cluster.namespace_pid), "-m", "--",
            sys.executable, "-m", "kubedevice", "serve", "--config", str(self.config),
            "--node", self.cluster.node, "--kubelet-dir", "/var/lib/kubelet", "--cdi-dir", "/run/cdi",
            "--kubeconfig", str(self.cluster.dir / "kubeconfig"), "--log-level", "info",
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture
def driver(cluster: Cluster, tmp_path: Path) -> Iterator[Driver]:
    running = Driver(cluster, tmp_path / "driver.log")
    running.start()
    yield running
    running.stop()
    print(running.log.read_text()[-4000:])


def our_slices(cluster: Cluster, driver: str = DRIVER) -> list[Any]:
    return list(cluster.client.list(ResourceSlice, fields={"spec.nodeName": cluster.node, "spec.driver": driver}))


def published_paths(cluster: Cluster, driver: str) -> list[str]:
    slices = [s.to_dict() for s in our_slices(cluster, driver)]
    return sorted(d["attributes"]["path"]["string"] for s in slices for d in s["spec"].get("devices", []))


def container_log(cluster: Cluster, pod: Any) -> str:
    uid = pod.metadata.uid
    texts = [p.read_text(errors="replace") for p in cluster.pod_logs.glob(f"*_{pod.metadata.name}_{uid}/*/*.log")]
    return "".join(texts)


def template_document(name: str, device_class: str = DRIVER) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "null", "exactly": {"deviceClassName": device_class}}]}}},
    }


def pod_document(name: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            # the cluster's controller-manager cannot lift the node's not-ready taint (see `cluster`)
            "tolerations": [{"operator": "Exists"}],
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "null", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "resources": {"claims": [{"name": "null"}]},
                }
            ],
        },
    }


def test_a_pod_gets_a_null_device_through_our_driver(cluster: Cluster, driver: Driver) -> None:
    client = cluster.client
    [device_class] = yaml.safe_load_all((REPO / "examples" / "dra-null-class.yaml").read_text())
    client.apply(DeviceClass.from_dict(device_class), force=True)
    # a slice left by an earlier driver of this name lives on until the kubelet wipes it (30 s)
    wait_for("our 4 devices published", lambda: sum(len(s.spec.devices or []) for s in our_slices(cluster)) == 4)

    suffix = uuid.uuid4().hex[:6]
    template, name = f"one-null-{suffix}", f"null-consumer-{suffix}"
    client.create(ResourceClaimTemplate.from_dict(template_document(template)))
    client.create(Pod.from_dict(pod_document(name, template)))
    try:
        pod = wait_for(
            "the pod running", lambda: _if(client.get(Pod, name, namespace="default"), "Running"), timeout=120
        )
        log = wait_for("the container's env in its log", lambda: container_log(cluster, pod))
        [line] = [x for x in log.splitlines() if "NULL_DEVICE=" in x]
        device = line.rsplit("NULL_DEVICE=", 1)[1].strip()
        assert device in {"null-0", "null-1", "null-2", "null-3"}
        claim_name = pod.status.resourceClaimStatuses[0].resourceClaimName
        claim = client.get(ResourceClaim, claim_name, namespace="default")
        spec_file = cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{claim.metadata.uid}.json"
        assert spec_file.exists()

        # a driver restart while the pod runs: nothing prepared is lost
        driver.stop()
        driver.start()
        wait_for("slices after the driver restart", lambda: our_slices(cluster))
        assert spec_file.exists()
        assert _if(client.get(Pod, name, namespace="default"), "Running")

        client.delete(Pod, name, namespace="default", grace_period=0)
        wait_for("the CDI spec removed after the pod is gone", lambda: not spec_file.exists(), timeout=90)
    finally:
        for kind, obj in ((Pod, name), (ResourceClaimTemplate, template)):
            with contextlib.suppress(ApiError):
                client.delete(kind, obj, namespace="default")


def _if(pod: Any, phase: str) -> Any:
    return pod if pod.status and pod.status.phase == phase else None


HOT = "hot.example.com"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield root
    shutil.rmtree(root)


def hot_config(tmp_path: Path) -> Path:
    """Devices are files ``<tmp>/dev/acc?`` (visible in the namespace); health is an exec check."""
    devices = tmp_path / "dev"
    devices.mkdir()
    config = tmp_path / "hot.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dra": {"driver": HOT},
                "resources": [
                    {
                        "name": "example.com/hot",
                        "glob": {"paths": [f"{devices}/acc?"]},
                        "health": {
                            "checks": [{"type": "exec", "argv": ["test", "-e", "{path}.ok"]}],
                            "interval_seconds": 0.2,
                            "failure_threshold": 1,
                        },
                    }
                ],
            }
        )
    )
    return config


def plug(devices: Path, name: str) -> str:
    (devices / f"{name}.ok").touch()
    (devices / name).touch()
    return str(devices / name)


def test_hotplug_and_health_reach_the_slices(cluster: Cluster, short_tmp: Path) -> None:
    config = hot_config(short_tmp)  # the ``path`` attribute keeps 64 characters: keep the paths short
    devices = short_tmp / "dev"
    first = plug(devices, "acc0")
    running = Driver(cluster, short_tmp / "driver.log", config)
    running.start()
    try:
        wait_for("the first device published", lambda: published_paths(cluster, HOT) == [first], 30)
        second = plug(devices, "acc1")
        took = time.monotonic()
        wait_for("the hotplugged device published", lambda: published_paths(cluster, HOT) == [first, second], 2)
        hotplug_seconds = time.monotonic() - took
        (devices / "acc1.ok").unlink()  # its health check fails from now on
        wait_for("the unhealthy device withdrawn", lambda: published_paths(cluster, HOT) == [first], 3)
        (devices / "acc1.ok").touch()
        wait_for("the recovered device back", lambda: published_paths(cluster, HOT) == [first, second], 3)
        print(f"hotplug to slice: {hotplug_seconds:.2f} s")
    finally:
        running.stop()
        print(running.log.read_text()[-3000:])


def test_a_kubelet_restart_registers_the_driver_again(cluster: Cluster, short_tmp: Path) -> None:
    """The kubelet wipes its node's slices when it starts and re-registers the drivers it finds."""
    tool = pytest.importorskip("kubedevice.testing.cluster", reason="needs the cluster tool's restart_kubelet")
    config = hot_config(short_tmp)
    first = plug(short_tmp / "dev", "acc0")
    running = Driver(cluster, short_tmp / "driver.log", config)
    running.start()
    registered = f"registered with the kubelet as DRA driver {HOT}"
    try:
        wait_for("the device published", lambda: published_paths(cluster, HOT) == [first], 30)
        assert running.log.read_text().count(registered) == 1
        tool.Cluster(cluster.dir).restart_kubelet()
        restarted = time.monotonic()
        wait_for("a second registration", lambda: running.log.read_text().count(registered) == 2)
        print(f"registered again {time.monotonic() - restarted:.2f} s after the kubelet answered healthz")
        wait_for("slices back after the kubelet restart", lambda: published_paths(cluster, HOT) == [first])
    finally:
        running.stop()


SICK = "sick.example.com"


def test_a_health_change_reaches_the_pod_status(cluster: Cluster, short_tmp: Path) -> None:
    """One null device of its own driver whose exec check looks for a marker file; the kubelet
    shows its health in the status of the pod using it."""
    marker = short_tmp / "ok"
    marker.touch()
    config = short_tmp / "sick.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dra": {"driver": SICK},
                "resources": [
                    {
                        "name": "example.com/null",
                        "static": {"count": 1, "paths": ["/dev/null"]},
                        "health": {
                            "checks": [{"type": "exec", "argv": ["test", "-e", str(marker)]}],
                            "interval_seconds": 0.2,
                            "failure_threshold": 1,
                        },
                    }
                ],
            }
        )
    )
    client = cluster.client
    [device_class] = yaml.safe_load_all((REPO / "examples" / "dra-null-class.yaml").read_text())
    device_class["metadata"]["name"] = SICK
    device_class["spec"]["selectors"][0]["cel"]["expression"] = f'device.driver == "{SICK}"'
    client.apply(DeviceClass.from_dict(device_class), force=True)
    running = Driver(cluster, short_tmp / "driver.log", config)
    running.start()
    suffix = uuid.uuid4().hex[:6]
    template, name = f"sick-null-{suffix}", f"sick-consumer-{suffix}"
    try:
        wait_for("our slice", lambda: our_slices(cluster, SICK), 30)
        client.create(ResourceClaimTemplate.from_dict(template_document(template, SICK)))
        client.create(Pod.from_dict(pod_document(name, template)))
        wait_for("the pod running", lambda: _if(client.get(Pod, name, namespace="default"), "Running"), timeout=120)

        def healths() -> list[str]:
            pod = client.get(Pod, name, namespace="default").to_dict()
            return [
                r.get("health", "")
                for status in pod["status"].get("containerStatuses", [])
                for entry in status.get("allocatedResourcesStatus") or []
                for r in entry.get("resources") or []
            ]

        wait_for("the device's health in the pod status", lambda: healths() == ["Healthy"], 30)
        marker.unlink()
        wait_for("Unhealthy in the pod status", lambda: healths() == ["Unhealthy"], 30)
        marker.touch()
        wait_for("Healthy again in the pod status", lambda: healths() == ["Healthy"], 30)
    finally:
        for kind, obj in ((Pod, name), (ResourceClaimTemplate, template)):
            with contextlib.suppress(ApiError):
                client.delete(kind, obj, namespace="default", grace_period=0)
        running.stop()
        print(running.log.read_text()[-3000:])
