"""End to end on the session's real single-node cluster (etcd, API server, scheduler,
controller-manager, kubelet, containerd 2 with CDI): ``kubedevice serve --config
examples/dra-null.yaml`` as the node's DRA driver, a pod with a ResourceClaimTemplate scheduled
onto our slices. The driver runs inside the cluster's mount namespace (``nsenter -m``), so that
the paths it registers are the kubelet's.

Sharing the cluster with the device-plugin tests: pods, claims and templates live in a namespace
of this module's own, every DeviceClass and ResourceSlice made here is deleted after its test, and
no driver outlives its test (a kubelet restart elsewhere would wipe its slices).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod, ServiceAccount
from lightkube.resources.resource_v1 import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice

from kubedevice.testing.scenarios import TEST_IMAGE, container_output, wait_for

REPO = Path(__file__).resolve().parents[2]
DRIVER = "null.example.com"
pytestmark = pytest.mark.e2e


@dataclass
class Target:
    """The session cluster as these tests see it: a lightkube client and this module's namespace."""

    cluster: Target
    client: Client
    namespace: str

    @property
    def node(self) -> str:
        return self.cluster.node_name


@pytest.fixture(scope="module")
def target(cluster: Target) -> Iterator[Target]:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="kubedevice-e2e")
    namespace = f"kd-dra-{uuid.uuid4().hex[:6]}"
    client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    try:
        # pods are admitted only once the controller-manager has made the namespace's account
        wait_for("the namespace's default service account", lambda: _exists(client, ServiceAccount, namespace), 30)
        yield Target(cluster, client, namespace)
    finally:
        client.delete(Namespace, namespace)


def _exists(client: Client, kind: Any, namespace: str) -> bool:
    try:
        client.get(kind, "default", namespace=namespace)
    except ApiError:
        return False
    return True


@pytest.fixture
def device_classes(target: Target) -> Iterator[Callable[[str], None]]:
    """Creates a DeviceClass selecting one driver's devices (examples/dra-null-class.yaml, renamed);
    deletes them, and every slice of their drivers, after the test."""
    made: list[str] = []

    def create(driver: str) -> None:
        [document] = yaml.safe_load_all((REPO / "examples" / "dra-null-class.yaml").read_text())
        document["metadata"]["name"] = driver
        document["spec"]["selectors"][0]["cel"]["expression"] = f'device.driver == "{driver}"'
        target.client.apply(DeviceClass.from_dict(document), force=True)
        made.append(driver)

    yield create
    for driver in made:
        with contextlib.suppress(ApiError):
            target.client.delete(DeviceClass, driver)


@pytest.fixture
def no_slices_left(target: Target) -> Iterator[None]:
    """Deletes this module's drivers' slices after the test (the kubelet would only after 30 s)."""
    yield
    for driver in (DRIVER, HOT, SICK, TAINTED, EVICT):
        for s in our_slices(target, driver):
            with contextlib.suppress(ApiError):
                target.client.delete(ResourceSlice, s.metadata.name)


class Driver:
    """``kubedevice serve`` inside the kubelet's mount namespace; restartable."""

    def __init__(
        self, cluster: Target, log: Path, config: Path = REPO / "examples" / "dra-null.yaml", *extra: str
    ) -> None:
        """``extra``: more ``serve`` arguments (``--host-root``, ...)."""
        self.cluster = cluster
        self.log = log
        self.config = config
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def namespace_pid(self) -> int:
        state = self.cluster.cluster.state()
        assert state is not None
        return state.namespace_pid

    def start(self) -> None:
        argv = [
            "nsenter", "-t", str(self.namespace_pid), "-m", "--",
            sys.executable, "-m", "kubedevice", "serve", "--config", str(self.config),
            "--node", self.cluster.node, "--kubelet-dir", "/var/lib/kubelet", "--cdi-dir", "/run/cdi",
            "--kubeconfig", str(self.cluster.cluster.kubeconfig), "--log-level", "info", *self.extra,
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture
def driver(target: Target, tmp_path: Path, no_slices_left: None) -> Iterator[Driver]:
    running = Driver(target, tmp_path / "driver.log")
    running.start()
    yield running
    running.stop()
    print(running.log.read_text()[-4000:])


def our_slices(target: Target, driver: str = DRIVER) -> list[Any]:
    return list(target.client.list(ResourceSlice, fields={"spec.nodeName": target.node, "spec.driver": driver}))


def published_devices(target: Target, driver: str = DRIVER) -> int:
    return sum(len(s.spec.devices or []) for s in our_slices(target, driver))


def published_paths(target: Target, driver: str) -> list[str]:
    slices = [s.to_dict() for s in our_slices(target, driver)]
    return sorted(d["attributes"]["path"]["string"] for s in slices for d in s["spec"].get("devices", []))


def tainted(target: Target, driver: str, effect: str = "NoSchedule") -> list[dict[str, Any]]:
    """The devices that carry our ``<driver>/unhealthy`` taint with ``effect`` in the API server."""
    return [
        d
        for s in our_slices(target, driver)
        for d in s.to_dict()["spec"].get("devices", [])
        if any(t["key"] == f"{driver}/unhealthy" and t["effect"] == effect for t in d.get("taints") or [])
    ]


def tainted_paths(target: Target, driver: str) -> list[str]:
    return sorted(d["attributes"]["path"]["string"] for d in tainted(target, driver))


def device_names(target: Target, driver: str) -> list[str]:
    return sorted(d["name"] for s in our_slices(target, driver) for d in s.to_dict()["spec"].get("devices", []))


def template_document(name: str, namespace: str, device_class: str = DRIVER) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "null", "exactly": {"deviceClassName": device_class}}]}}},
    }


def pod_document(name: str, namespace: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "null", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "resources": {"claims": [{"name": "null"}]},
                }
            ],
        },
    }


@pytest.mark.release
def test_a_pod_gets_a_null_device_through_our_driver(
    target: Target, driver: Driver, device_classes: Callable[[str], None]
) -> None:
    client = target.client
    device_classes(DRIVER)
    # a slice left by an earlier driver of this name lives on until the kubelet wipes it (30 s)
    wait_for("our 4 devices published", lambda: published_devices(target) == 4, 60)

    suffix = uuid.uuid4().hex[:6]
    template, name = f"one-null-{suffix}", f"null-consumer-{suffix}"
    client.create(ResourceClaimTemplate.from_dict(template_document(template, target.namespace)))
    client.create(Pod.from_dict(pod_document(name, target.namespace, template)))
    try:
        pod = wait_for(
            "the pod running", lambda: _if(client.get(Pod, name, namespace=target.namespace), "Running"), timeout=120
        )
        log = container_output(target.cluster, pod.to_dict())
        [line] = [x for x in log.splitlines() if "NULL_DEVICE=" in x]
        device = line.rsplit("NULL_DEVICE=", 1)[1].strip()
        assert device in {"null-0", "null-1", "null-2", "null-3"}
        claim_name = pod.status.resourceClaimStatuses[0].resourceClaimName
        claim = client.get(ResourceClaim, claim_name, namespace=target.namespace)
        spec_file = target.cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{claim.metadata.uid}.json"
        assert spec_file.exists()

        # a driver restart while the pod runs: nothing prepared is lost
        driver.stop()
        driver.start()
        # checked once the new process has registered and published: it has read its checkpoint
        # and anything it would drop of the claim is gone by then
        wait_for(
            "the restarted driver registered",
            lambda: driver.log.read_text().count(f"registered with the kubelet as DRA driver {DRIVER}") == 2,
            60,
            seen=lambda: driver.log.read_text()[-3000:],
        )
        wait_for("our 4 devices published again", lambda: published_devices(target) == 4, 60)
        assert spec_file.exists()
        assert _if(client.get(Pod, name, namespace=target.namespace), "Running")

        client.delete(Pod, name, namespace=target.namespace, grace_period=0)
        wait_for("the CDI spec removed after the pod is gone", lambda: not spec_file.exists(), timeout=90)
    finally:
        for kind, obj in ((Pod, name), (ResourceClaimTemplate, template)):
            with contextlib.suppress(ApiError):
                client.delete(kind, obj, namespace=target.namespace)


def _if(pod: Any, phase: str) -> Any:
    return pod if pod.status and pod.status.phase == phase else None


HOT = "hot.example.com"


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


@pytest.mark.release
def test_hotplug_and_health_reach_the_slices(
    target: Target, short_tmp: Path, no_slices_left: None, kubernetes_minor: int
) -> None:
    """Before 1.36 ``DRADeviceTaints`` is off: the API server drops the taint, and the publisher
    then leaves the unhealthy device out of the slices instead."""
    config = hot_config(short_tmp)  # the ``path`` attribute keeps 64 characters: keep the paths short
    devices = short_tmp / "dev"
    first = plug(devices, "acc0")
    running = Driver(target, short_tmp / "driver.log", config)
    running.start()
    try:
        wait_for("the first device published", lambda: published_paths(target, HOT) == [first], 30)
        second = plug(devices, "acc1")
        took = time.monotonic()
        wait_for("the hotplugged device published", lambda: published_paths(target, HOT) == [first, second], 2)
        hotplug_seconds = time.monotonic() - took
        (devices / "acc1.ok").unlink()  # its health check fails from now on
        if kubernetes_minor < 36:
            wait_for("the unhealthy device left out", lambda: published_paths(target, HOT) == [first], 5)
            (devices / "acc1.ok").touch()
            wait_for("the recovered device back", lambda: published_paths(target, HOT) == [first, second], 5)
            return
        wait_for("the unhealthy device tainted", lambda: tainted_paths(target, HOT) == [second], 3)
        assert published_paths(target, HOT) == [first, second]
        (devices / "acc1.ok").touch()
        wait_for("the recovered device's taint cleared", lambda: tainted_paths(target, HOT) == [], 3)
        print(f"hotplug to slice: {hotplug_seconds:.2f} s")
    finally:
        running.stop()
        print(running.log.read_text()[-3000:])


@pytest.mark.release
def test_a_kubelet_restart_registers_the_driver_again(target: Target, short_tmp: Path, no_slices_left: None) -> None:
    """The kubelet wipes its node's slices when it starts and re-registers the drivers it finds."""
    config = hot_config(short_tmp)
    first = plug(short_tmp / "dev", "acc0")
    running = Driver(target, short_tmp / "driver.log", config)
    running.start()
    registered = f"registered with the kubelet as DRA driver {HOT}"
    try:
        wait_for("the device published", lambda: published_paths(target, HOT) == [first], 30)
        assert running.log.read_text().count(registered) == 1
        target.cluster.restart_kubelet()
        restarted = time.monotonic()
        wait_for("a second registration", lambda: running.log.read_text().count(registered) == 2, 60)
        print(f"registered again {time.monotonic() - restarted:.2f} s after the kubelet answered healthz")
        wait_for("slices back after the kubelet restart", lambda: published_paths(target, HOT) == [first], 60)
    finally:
        running.stop()


SICK = "sick.example.com"
TAINTED = "tainted.example.com"
EVICT = "evict.example.com"


def marker_config(directory: Path, driver: str, marker: Path, taint: str = "NoSchedule") -> Path:
    """One null device of ``driver`` whose exec health check looks for ``marker``."""
    config = directory / f"{driver}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dra": {"driver": driver, "unhealthy_taint": taint},
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
    return config


def test_a_tainted_device_is_not_given_to_a_new_pod(
    target: Target, short_tmp: Path, no_slices_left: None, device_classes: Callable[[str], None]
) -> None:
    """The real scheduler honours our NoSchedule taint: a pod whose claim can only get the
    unhealthy device stays unschedulable (one whose claim tolerates the taint gets it), and is
    scheduled once the device recovers."""
    marker = short_tmp / "ok"
    marker.touch()
    client = target.client
    device_classes(TAINTED)
    running = Driver(target, short_tmp / "driver.log", marker_config(short_tmp, TAINTED, marker))
    running.start()
    suffix = uuid.uuid4().hex[:6]
    template, name = f"tainted-null-{suffix}", f"tainted-consumer-{suffix}"
    try:
        wait_for("our slice", lambda: device_names(target, TAINTED) == ["null-0"], 30)
        marker.unlink()
        took = time.monotonic()
        wait_for("the taint in the API server", lambda: [d["name"] for d in tainted(target, TAINTED)] == ["null-0"], 3)
        taint_seconds = time.monotonic() - took
        client.create(ResourceClaimTemplate.from_dict(template_document(template, target.namespace, TAINTED)))
        client.create(Pod.from_dict(pod_document(name, target.namespace, template)))

        def unschedulable() -> str:
            pod = client.get(Pod, name, namespace=target.namespace).to_dict()
            conditions = pod.get("status", {}).get("conditions") or []
            return next(
                (c.get("message", "") for c in conditions
                 if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"),
                "",
            )  # fmt: skip

        message = wait_for("the pod reported unschedulable", unschedulable, 60)
        time.sleep(2)  # and it stays so
        pod = client.get(Pod, name, namespace=target.namespace)
        assert pod.spec is not None and not pod.spec.nodeName, message
        # a claim that tolerates the taint gets the device anyway
        tolerating = template_document(f"{template}-tol", target.namespace, TAINTED)
        request = tolerating["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        request["tolerations"] = [{"key": f"{TAINTED}/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]
        client.create(ResourceClaimTemplate.from_dict(tolerating))
        client.create(Pod.from_dict(pod_document(f"{name}-tol", target.namespace, f"{template}-tol")))
        wait_for(
            "the tolerating pod scheduled",
            lambda: client.get(Pod, f"{name}-tol", namespace=target.namespace).spec.nodeName,
            60,
        )
        client.delete(Pod, f"{name}-tol", namespace=target.namespace, grace_period=0)
        marker.touch()
        healed = time.monotonic()
        wait_for("the taint cleared", lambda: tainted(target, TAINTED) == [], 3)
        wait_for(
            "the pod scheduled on the recovered device",
            lambda: client.get(Pod, name, namespace=target.namespace).spec.nodeName,
            60,
        )
        print(f"unhealthy to taint in the API server: {taint_seconds:.2f} s; "
              f"recovery to pod scheduled: {time.monotonic() - healed:.2f} s; scheduler said: {message}")  # fmt: skip
    finally:
        for kind, obj in ((Pod, name), (Pod, f"{name}-tol"), (ResourceClaimTemplate, template),
                          (ResourceClaimTemplate, f"{template}-tol")):  # fmt: skip
            with contextlib.suppress(ApiError):
                client.delete(kind, obj, namespace=target.namespace, grace_period=0)
        running.stop()
        print(running.log.read_text()[-3000:])


@pytest.mark.release
def test_a_health_change_reaches_the_pod_status(
    target: Target,
    short_tmp: Path,
    no_slices_left: None,
    device_classes: Callable[[str], None],
    kubernetes_minor: int,
) -> None:
    """One null device of its own driver whose exec check looks for a marker file; the kubelet
    shows its health in the status of the pod using it."""
    if kubernetes_minor < 36:
        pytest.skip("ResourceHealthStatus is alpha and off by default before 1.36: no health in the pod status")
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
    client = target.client
    device_classes(SICK)
    running = Driver(target, short_tmp / "driver.log", config)
    running.start()
    suffix = uuid.uuid4().hex[:6]
    template, name = f"sick-null-{suffix}", f"sick-consumer-{suffix}"
    try:
        wait_for("our slice", lambda: our_slices(target, SICK), 30)
        client.create(ResourceClaimTemplate.from_dict(template_document(template, target.namespace, SICK)))
        client.create(Pod.from_dict(pod_document(name, target.namespace, template)))
        wait_for(
            "the pod running", lambda: _if(client.get(Pod, name, namespace=target.namespace), "Running"), timeout=120
        )

        def healths() -> list[str]:
            pod = client.get(Pod, name, namespace=target.namespace).to_dict()
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
        # The kubelet reads a device not reported for 30 s as Unknown (a pod sync, at least
        # every 60-90 s, shows it): the driver must keep reporting while nothing changes.
        deadline = time.monotonic() + 100
        while time.monotonic() < deadline:
            assert healths() == ["Healthy"], healths()
            time.sleep(1)
    finally:
        for kind, obj in ((Pod, name), (ResourceClaimTemplate, template)):
            with contextlib.suppress(ApiError):
                client.delete(kind, obj, namespace=target.namespace, grace_period=0)
        running.stop()
        print(running.log.read_text()[-3000:])


def test_with_no_execute_a_pod_using_the_device_is_evicted(
    target: Target, short_tmp: Path, no_slices_left: None, device_classes: Callable[[str], None]
) -> None:
    """``dra.unhealthy_taint: NoExecute``: the kube-controller-manager's device taint eviction
    controller (DRADeviceTaints, on by default in 1.36) evicts the running pod."""
    marker = short_tmp / "ok"
    marker.touch()
    client = target.client
    device_classes(EVICT)
    running = Driver(target, short_tmp / "driver.log", marker_config(short_tmp, EVICT, marker, "NoExecute"))
    running.start()
    suffix = uuid.uuid4().hex[:6]
    template, name = f"evict-null-{suffix}", f"evict-consumer-{suffix}"
    try:
        wait_for("our slice", lambda: device_names(target, EVICT) == ["null-0"], 30)
        client.create(ResourceClaimTemplate.from_dict(template_document(template, target.namespace, EVICT)))
        pod = client.create(Pod.from_dict(pod_document(name, target.namespace, template)))
        wait_for(
            "the pod running", lambda: _if(client.get(Pod, name, namespace=target.namespace), "Running"), timeout=120
        )
        marker.unlink()
        took = time.monotonic()
        wait_for("the NoExecute taint", lambda: tainted(target, EVICT, "NoExecute"), 3)
        taint_seconds = time.monotonic() - took

        def evicted() -> str:
            try:
                current = client.get(Pod, name, namespace=target.namespace).to_dict()
            except ApiError:
                return "deleted"
            if current["metadata"]["uid"] != pod.metadata.uid:  # type: ignore[union-attr]
                return "deleted"
            conditions = current.get("status", {}).get("conditions") or []
            return next((c.get("reason", "") for c in conditions if c["type"] == "DisruptionTarget"), "")

        reason = wait_for("the pod evicted", evicted, 60)
        print(f"NoExecute: unhealthy to taint {taint_seconds:.2f} s, to eviction {time.monotonic() - took:.2f} s "
              f"({reason})")  # fmt: skip
    finally:
        for kind, obj in ((Pod, name), (ResourceClaimTemplate, template)):
            with contextlib.suppress(ApiError):
                client.delete(kind, obj, namespace=target.namespace, grace_period=0)
        running.stop()
        print(running.log.read_text()[-3000:])
