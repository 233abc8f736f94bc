"""One device shared by several pods on the session's real v1.36.3 cluster, as ``dra.sharing``
publishes it: ``capacity`` (examples/dra-shared-capacity.yaml: one device, consumable capacity,
KEP-5075) and ``counters`` (examples/dra-partitionable.yaml: the whole device and its replicas on
one counter set, KEP-4815). The real scheduler allocates, our driver prepares, the containers
print the env they got.

What the tests lean on, upstream (k8s.io/kubernetes v1.36.3, ``pkg/features/kube_features.go``):
``DRAConsumableCapacity`` and ``DRAPartitionableDevices`` are beta and on by default, so the
cluster runs with its defaults. The scheduler's allocator
(``k8s.io/dynamic-resource-allocation/structured/internal/incubating``, ``allocator_incubating.go``
and ``consumable_capacity.go``) gives a device with ``allowMultipleAllocations`` to several claims
while their ``consumedCapacity`` fits its capacity, each result with a ``shareID`` of its own;
and lets devices drawing on one counter set be allocated together only while the set's counters
cover what they consume.

Everything runs in a namespace of this module's own; the classes, pods, claims, the driver and
its slices are gone after each test.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube.core.exceptions import ApiError

from kubedevice.testing.cluster import Cluster
from kubedevice.testing.kubeapi import KubeApi
from kubedevice.testing.scenarios import container_output, own_namespace, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kubedevice" / "examples"
CAPACITY, CAPACITY_DRIVER = "dra-shared-capacity", "shared.example.com"
COUNTERS, COUNTERS_DRIVER = "dra-partitionable", "parts.example.com"
GROUP = "/apis/resource.k8s.io/v1"
pytestmark = pytest.mark.e2e


@dataclass
class Target:
    cluster: Cluster
    api: KubeApi
    namespace: str

    def pod_path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}"

    def dra_path(self, plural: str, name: str = "") -> str:
        """A namespaced resource.k8s.io/v1 collection, or one object of it."""
        return f"{GROUP}/namespaces/{self.namespace}/{plural}/{name}".rstrip("/")


@pytest.fixture(scope="module")
def target(cluster: Cluster) -> Iterator[Target]:
    api = KubeApi(cluster.kubeconfig)
    try:
        with own_namespace(api, "kd-share") as namespace:
            yield Target(cluster, api, namespace)
    finally:
        api.close()


def documents(example: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The example's manifests by (kind, name)."""
    loaded = yaml.safe_load_all((EXAMPLES / f"{example}-pods.yaml").read_text())
    return {(d["kind"], d["metadata"]["name"]): d for d in loaded if isinstance(d, dict)}


def slices_path(target: Target, driver: str) -> str:
    return f"{GROUP}/resourceslices?fieldSelector=spec.nodeName={target.cluster.node_name},spec.driver={driver}"


def published(target: Target, driver: str) -> dict[str, dict[str, Any]]:
    """Our devices in the API server by name."""
    slices = target.api.get(slices_path(target, driver))["items"]
    return {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}


@contextlib.contextmanager
def serving(target: Target, example: str, driver: str, devices: int, log: Path) -> Iterator[dict[str, Any]]:
    """``kubedevice serve --config examples/<example>.yaml`` inside the kubelet's mount namespace
    (so the socket paths it registers are the kubelet's) until its ``devices`` are published, and
    the example's DeviceClass; yields the published devices by name. The driver is stopped and
    its slices deleted after (the kubelet would only 30 s after it stops)."""
    state = target.cluster.state()
    assert state is not None
    argv = [
        "nsenter", "-t", str(state.namespace_pid), "-m", "--",
        sys.executable, "-m", "kubedevice", "serve", "--config", str(EXAMPLES / f"{example}.yaml"),
        "--node", target.cluster.node_name, "--kubelet-dir", "/var/lib/kubelet", "--cdi-dir", "/run/cdi",
        "--kubeconfig", str(target.cluster.kubeconfig), "--log-level", "info",
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    target.api.request("POST", f"{GROUP}/deviceclasses", documents(example)[("DeviceClass", driver)])
    try:
        yield wait_for(f"the driver's {devices} devices published", lambda: _all(target, driver, devices), 60)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        for item in target.api.get(slices_path(target, driver))["items"]:
            with contextlib.suppress(ApiError):
                target.api.request("DELETE", f"{GROUP}/resourceslices/{item['metadata']['name']}")
        with contextlib.suppress(ApiError):
            target.api.request("DELETE", f"{GROUP}/deviceclasses/{driver}")
        print(log.read_text(errors="replace")[-3000:])


def counter_sets(target: Target, driver: str) -> list[Any]:
    """The ``sharedCounters`` of our slices in the API server."""
    slices = target.api.get(slices_path(target, driver))["items"]
    return [s["spec"]["sharedCounters"] for s in slices if "sharedCounters" in s["spec"]]


def _all(target: Target, driver: str, count: int) -> dict[str, dict[str, Any]] | None:
    devices = published(target, driver)
    return devices if len(devices) == count else None


class Pods:
    """The example's pods and claim templates, created in the test's namespace under unique names;
    all deleted gracefully at the end (a forced delete removes a pod before the kubelet has
    unprepared its claims), waiting until they, their claims and our CDI specs are gone."""

    def __init__(self, target: Target, example: str, driver: str) -> None:
        self.target, self.driver = target, driver
        self.manifests = documents(example)
        self.suffix = uuid.uuid4().hex[:6]
        self.pods: list[str] = []
        self.created: dict[str, float] = {}

    def create(self, pod: str, template: str) -> str:
        """A copy of the example's pod on a copy of its template; the new pod's name."""
        name, template_name = f"{pod}-{len(self.pods)}-{self.suffix}", f"{template}-{len(self.pods)}-{self.suffix}"
        copy = dict(self.manifests[("ResourceClaimTemplate", template)])
        copy["metadata"] = {"name": template_name, "namespace": self.target.namespace}
        self.target.api.request("POST", self.target.dra_path("resourceclaimtemplates"), copy)
        manifest = dict(self.manifests[("Pod", pod)])
        manifest["metadata"] = {"name": name, "namespace": self.target.namespace}
        manifest["spec"] = {**manifest["spec"], "terminationGracePeriodSeconds": 1}
        manifest["spec"]["resourceClaims"] = [{"name": "null", "resourceClaimTemplateName": template_name}]
        self.target.api.request("POST", f"/api/v1/namespaces/{self.target.namespace}/pods", manifest)
        self.pods.append(name)
        self.created[name] = time.monotonic()
        return name

    def running(self, name: str, since: float | None = None) -> tuple[dict[str, Any], dict[str, Any], float]:
        """Waits for the pod to run; the pod, its claim and the seconds from ``since`` (its creation)."""
        start = self.created[name] if since is None else since
        pod = wait_for(f"pod {name} running", lambda: _phase(self.target.api.get(self.target.pod_path(name))), 120)
        took = time.monotonic() - start
        [status] = pod["status"]["resourceClaimStatuses"]
        claim = self.target.api.get(self.target.dra_path("resourceclaims", status["resourceClaimName"]))
        return pod, claim, took

    def pending(self, name: str) -> str:
        """Waits until the scheduler calls the pod unschedulable, checks it stays so for 2 s; its message."""
        message = wait_for(f"pod {name} unschedulable", lambda: self._unschedulable(name), 60)
        time.sleep(2)
        assert not (self.target.api.get(self.target.pod_path(name)) or {}).get("spec", {}).get("nodeName"), message
        return message

    def _unschedulable(self, name: str) -> str:
        conditions = (self.target.api.get(self.target.pod_path(name)) or {}).get("status", {}).get("conditions") or []
        return next(
            (c.get("message", "") or "unschedulable" for c in conditions
             if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"),
            "",
        )  # fmt: skip

    def delete(self, name: str) -> float:
        """Deletes the pod and waits until it is gone; the monotonic time of the delete."""
        self.target.api.request("DELETE", self.target.pod_path(name))
        deleted = time.monotonic()
        wait_for(f"pod {name} gone", lambda: self.target.api.get(self.target.pod_path(name)) is None, 90)
        return deleted

    def clean_up(self) -> None:
        api = self.target.api
        for name in self.pods:
            with contextlib.suppress(ApiError):
                api.request("DELETE", self.target.pod_path(name))

        def gone() -> bool:
            specs = list(self.target.cluster.cdi_dir.glob(f"kubedevice-dra-{self.driver}-*.json"))
            return (
                not specs
                and not api.get(self.target.dra_path("resourceclaims"))["items"]
                and not any(api.get(self.target.pod_path(n)) for n in self.pods)
            )

        wait_for("the test's pods, claims and CDI specs gone", gone, 90)
        templates = self.target.dra_path("resourceclaimtemplates")
        for item in api.get(templates)["items"]:
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"{templates}/{item['metadata']['name']}")


def _phase(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    return pod if pod and pod.get("status", {}).get("phase") == "Running" else None


def prepared(target: Target, driver: str, pod: dict[str, Any], claim: dict[str, Any]) -> dict[str, Any]:
    """Checks that our driver prepared the claim (its CDI spec) and the container got the env of
    the device the scheduler allocated (its ``id``, the first replica's for a shared or whole
    device); the allocation's one result."""
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (driver, target.cluster.node_name), result
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    assert (target.cluster.cdi_dir / f"kubedevice-dra-{driver}-{claim['metadata']['uid']}.json").exists()
    log = container_output(target.cluster, pod)
    granted = published(target, driver)[result["device"]]["attributes"]
    first = granted["id"]["string"] if "replica" in granted else f"{granted['id']['string']}::0"
    assert f"NULL_DEVICE={first}" in log.splitlines(), log
    return dict(result)


def test_two_pods_share_one_device_by_its_consumable_capacity(target: Target, short_tmp: Path) -> None:
    """Claims for 2 and 1 of the device's 3 replicas both run on the one device, each result with
    its own shareID and consumedCapacity; a third claim for 1 stays unschedulable until the pod
    with 2 is deleted."""
    with serving(target, CAPACITY, CAPACITY_DRIVER, 1, short_tmp / "driver.log") as devices:
        assert devices["null-0"]["allowMultipleAllocations"] is True, devices
        assert devices["null-0"]["capacity"]["replicas"]["value"] == "3"
        pods = Pods(target, CAPACITY, CAPACITY_DRIVER)
        try:
            two = pods.create("two-replicas-consumer", "two-replicas")
            one = pods.create("one-replica-consumer", "one-replica")
            results, times = [], []
            for name in (two, one):
                pod, claim, took = pods.running(name)
                results.append(prepared(target, CAPACITY_DRIVER, pod, claim))
                times.append(took)
            assert [r["device"] for r in results] == ["null-0", "null-0"]
            assert [r["consumedCapacity"] for r in results] == [{"replicas": "2"}, {"replicas": "1"}]
            assert results[0]["shareID"] and results[1]["shareID"] and results[0]["shareID"] != results[1]["shareID"]

            third = pods.create("one-replica-consumer", "one-replica")
            message = pods.pending(third)
            deleted = pods.delete(two)
            pod, claim, requeued = pods.running(third, since=deleted)
            assert prepared(target, CAPACITY_DRIVER, pod, claim)["consumedCapacity"] == {"replicas": "1"}
            print(f"capacity: created to Running {times[0]:.2f} s and {times[1]:.2f} s; the third pod "
                  f"unschedulable ({message!r}), Running {requeued:.2f} s after the first was deleted")  # fmt: skip
        finally:
            pods.clean_up()


def test_the_whole_device_and_its_replicas_are_never_given_out_at_once(target: Target, short_tmp: Path) -> None:
    """A pod on the whole device keeps a replica pod pending until it is deleted; then two replica
    pods share the counter set side by side, and a pod on the whole device waits until both go."""
    with serving(target, COUNTERS, COUNTERS_DRIVER, 3, short_tmp / "driver.log") as devices:
        assert devices["null-0"]["consumesCounters"] == [
            {"counterSet": "null-0", "counters": {"replicas": {"value": "2"}}}
        ]
        # the pool's second slice, written after the devices' one, holds the counter set
        counter_set = [{"name": "null-0", "counters": {"replicas": {"value": "2"}}}]
        wait_for("the counter set stored", lambda: counter_sets(target, COUNTERS_DRIVER) == [counter_set], 30)
        pods = Pods(target, COUNTERS, COUNTERS_DRIVER)
        try:
            whole = pods.create("whole-consumer", "whole-null")
            pod, claim, whole_took = pods.running(whole)
            assert prepared(target, COUNTERS_DRIVER, pod, claim)["device"] == "null-0"
            first = pods.create("replica-consumer", "replica-null")
            message = pods.pending(first)
            deleted = pods.delete(whole)
            replicas, times = [], []
            for name, since in ((first, deleted), (pods.create("replica-consumer", "replica-null"), None)):
                pod, claim, took = pods.running(name, since)
                replicas.append(prepared(target, COUNTERS_DRIVER, pod, claim)["device"])
                times.append(took)
            assert sorted(replicas) == sorted(n for n in devices if n != "null-0"), replicas

            again = pods.create("whole-consumer", "whole-null")
            pods.pending(again)
            pods.delete(pods.pods[1])
            pods.pending(again)  # one replica still draws on the counter set
            deleted = pods.delete(pods.pods[2])
            pod, claim, whole_again = pods.running(again, since=deleted)
            assert prepared(target, COUNTERS_DRIVER, pod, claim)["device"] == "null-0"
            print(f"counters: whole device created to Running {whole_took:.2f} s; a replica pod unschedulable "
                  f"({message!r}), Running {times[0]:.2f} s after the whole device's pod was deleted; a second "
                  f"replica pod created to Running {times[1]:.2f} s; the whole device again Running "
                  f"{whole_again:.2f} s after the last replica pod was deleted")  # fmt: skip
        finally:
            pods.clean_up()
