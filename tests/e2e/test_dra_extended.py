"""Extended resources backed by DRA, the migration path from device plugins, on the session's real
v1.36.3 cluster: a pod that asks for ``example.com/null: 1`` in its container resources (no claim
in its spec) gets a device of ``kubedevice serve --config examples/dra-null.yaml`` through the
DeviceClass of ``examples/dra-null-extended-class.yaml`` (``extendedResourceName``).

What the test leans on, upstream (k8s.io/kubernetes v1.36.3): the ``DRAExtendedResource`` gate is
beta and on by default from 1.36 (``pkg/features/kube_features.go``), so the cluster runs with its
defaults; the scheduler maps a request to a class through the explicit name or the implicit
``deviceclass.resource.kubernetes.io/<class>`` one (``k8s.io/dynamic-resource-allocation/
deviceclass/extendedresourcecache``) and serves it through DRA only where the node's allocatable
has none of it (``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go``,
``filterExtendedResources``); it creates the claim ``<pod>-extended-resources-<random>``, owned by
the pod, annotated ``resource.kubernetes.io/extended-resource-claim: "true"``, and records it in
``pod.status.extendedResourceClaimStatus``, which the kubelet prepares like any other claim
(``pkg/kubelet/cm/dra/manager.go``).

Everything runs in a namespace of this module's own; the class, the pods, the claims and the
driver's slices are deleted after each test.
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
from kubedevice.testing.scenarios import Daemon, container_output, own_namespace, wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DRIVER = "null.example.com"
RESOURCE = "example.com/null"
CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
pytestmark = pytest.mark.e2e


@dataclass
class Target:
    cluster: Cluster
    api: KubeApi
    namespace: str


@pytest.fixture(scope="module")
def target(cluster: Cluster) -> Iterator[Target]:
    api = KubeApi(cluster.kubeconfig)
    try:
        with own_namespace(api, "kd-ext") as namespace:
            yield Target(cluster, api, namespace)
    finally:
        api.close()


def documents(path: Path, kind: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d["kind"] == kind]


def slices_path(target: Target) -> str:
    node = target.cluster.node_name
    return f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName={node},spec.driver={DRIVER}"


def published_devices(target: Target) -> int:
    return sum(len(s["spec"].get("devices") or []) for s in target.api.get(slices_path(target))["items"])


@pytest.fixture
def driver(target: Target, tmp_path: Path) -> Iterator[None]:
    """``kubedevice serve --config examples/dra-null.yaml`` inside the kubelet's mount namespace (so
    the socket paths it registers are the kubelet's); its slices deleted after the test (the
    kubelet would only 30 s after it stops)."""
    state = target.cluster.state()
    assert state is not None
    log = tmp_path / "driver.log"
    argv = [
        "nsenter", "-t", str(state.namespace_pid), "-m", "--",
        sys.executable, "-m", "kubedevice", "serve", "--config", str(EXAMPLES / "dra-null.yaml"),
        "--node", target.cluster.node_name, "--kubelet-dir", "/var/lib/kubelet", "--cdi-dir", "/run/cdi",
        "--kubeconfig", str(target.cluster.kubeconfig), "--log-level", "info",
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        # a slice left by an earlier driver of this name lives on until the kubelet wipes it
        wait_for("the driver's 4 devices published", lambda: published_devices(target) == 4, 60)
        yield
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        for item in target.api.get(slices_path(target))["items"]:
            with contextlib.suppress(ApiError):
                target.api.request("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{item['metadata']['name']}")
        print(log.read_text(errors="replace")[-3000:])


def no_device_plugin_resource(target: Target, resource: str) -> bool:
    """The scheduler takes a request to DRA only where the node's allocatable has none of it; a
    device plugin of an earlier e2e test leaves capacity with allocatable 0 once it stops."""
    return target.api.resource(target.cluster.node_name, resource)[1] == 0


def pod_path(target: Target, name: str) -> str:
    return f"/api/v1/namespaces/{target.namespace}/pods/{name}"


def claim_path(target: Target, name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{target.namespace}/resourceclaims/{name}"


@pytest.mark.parametrize(
    ("class_file", "resource"),
    [
        (EXAMPLES / "dra-null-extended-class.yaml", RESOURCE),
        (REPO / "deploy" / "manifests" / "kubedevice-dra.yaml", RESOURCE),
        (EXAMPLES / "dra-null-class.yaml", f"deviceclass.resource.kubernetes.io/{DRIVER}"),
    ],
    ids=["example-class", "plain-manifests-class", "implicit-class-name"],
)
def test_a_pod_asking_for_an_extended_resource_gets_a_device_through_dra(
    target: Target, driver: None, class_file: Path, resource: str
) -> None:
    """The class the examples ship, the one the plain manifests (= the chart's rendering, tests/deploy)
    ship, and a class without extendedResourceName through its implicit name. Before the class
    exists the same request is unschedulable: the class is what serves it."""
    api = target.api
    [device_class] = documents(class_file, "DeviceClass")
    class_name = device_class["metadata"]["name"]
    wait_for(
        f"no device-plugin {resource} allocatable on the node", lambda: no_device_plugin_resource(target, resource), 60
    )
    early, late = f"null-early-{uuid.uuid4().hex[:6]}", f"null-late-{uuid.uuid4().hex[:6]}"
    try:
        create_pod(target, early, resource)
        message = wait_for("the pod unschedulable without the class", lambda: unschedulable(target, early), 60)
        api.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
        class_created = time.monotonic()
        requeue_seconds = served(target, early, resource, class_name, class_created)

        created = time.monotonic()
        create_pod(target, late, resource)
        start_seconds = served(target, late, resource, class_name, created)
        claim = api.get(claim_path(target, extended_claim(target, late)))
        spec_file = target.cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{claim['metadata']['uid']}.json"
        api.request("DELETE", pod_path(target, late))
        deleted = time.monotonic()
        wait_for("the claim unprepared (its CDI spec removed)", lambda: not spec_file.exists(), 90)
        unprepare_seconds = time.monotonic() - deleted
        wait_for(
            "the claim deleted with its pod", lambda: api.get(claim_path(target, claim["metadata"]["name"])) is None, 90
        )
        print(f"{resource}: without the class {message!r}; class created to that pod running "
              f"{requeue_seconds:.2f} s; a new pod created to running {start_seconds:.2f} s; deleted to "
              f"unprepared {unprepare_seconds:.2f} s, to claim gone {time.monotonic() - deleted:.2f} s")  # fmt: skip
    finally:
        clean_up(target, [early, late], class_name)


def clean_up(target: Target, pods: list[str], class_name: str) -> None:
    """Deletes the pods gracefully (a forced delete removes them before the kubelet has unprepared
    their claims, which then waits for the next driver of this name), waits until they, their
    claims and our CDI specs are gone, then deletes the class."""
    api = target.api
    for name in pods:
        with contextlib.suppress(ApiError):
            api.request("DELETE", pod_path(target, name))
    claims = f"/apis/resource.k8s.io/v1/namespaces/{target.namespace}/resourceclaims"

    def gone() -> bool:
        specs = list(target.cluster.cdi_dir.glob(f"kubedevice-dra-{DRIVER}-*.json"))
        return not specs and not api.get(claims)["items"] and not any(api.get(pod_path(target, n)) for n in pods)

    wait_for("the test's pods, claims and CDI specs gone", gone, 90)
    with contextlib.suppress(ApiError):
        api.request("DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{class_name}")


def create_pod(target: Target, name: str, resource: str) -> None:
    """examples/dra-null-extended-pod.yaml, renamed, asking for one ``resource``."""
    [pod] = documents(EXAMPLES / "dra-null-extended-pod.yaml", "Pod")
    pod["metadata"] = {"name": name, "namespace": target.namespace}
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    pod["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}, "requests": {resource: "1"}}
    target.api.request("POST", f"/api/v1/namespaces/{target.namespace}/pods", pod)


def unschedulable(target: Target, name: str) -> str:
    """The scheduler's message once it has found the pod unschedulable, else ''."""
    conditions = (target.api.get(pod_path(target, name)) or {}).get("status", {}).get("conditions") or []
    return next(
        (c.get("message", "") or "unschedulable" for c in conditions
         if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"),
        "",
    )  # fmt: skip


def extended_claim(target: Target, name: str) -> str:
    pod = target.api.get(pod_path(target, name))
    return str(pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"])


def served(target: Target, name: str, resource: str, class_name: str, since: float) -> float:
    """Waits for the pod to run, checks that it runs on a device of ours through the scheduler's
    special claim, as upstream makes it; the seconds from ``since`` to Running."""
    api = target.api
    running = wait_for(f"pod {name} running", lambda: _running(api.get(pod_path(target, name))), 120)
    took = time.monotonic() - since
    status = running["status"]["extendedResourceClaimStatus"]
    [mapping] = status["requestMappings"]
    assert mapping["containerName"] == "main" and mapping["resourceName"] == resource, status
    claim_name = status["resourceClaimName"]
    assert claim_name.startswith(f"{name}-extended-resources-")
    claim = api.get(claim_path(target, claim_name))
    assert claim["metadata"]["annotations"][CLAIM_ANNOTATION] == "true"
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Pod", running["metadata"]["uid"], True)
    [request] = claim["spec"]["devices"]["requests"]
    assert request["name"] == mapping["requestName"] and request["exactly"]["deviceClassName"] == class_name
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["driver"] == DRIVER and result["pool"] == target.cluster.node_name
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [running["metadata"]["uid"]]
    # the container sees the env of exactly the device the scheduler allocated, through our CDI spec
    log = container_output(target.cluster, running)
    assert f"NULL_DEVICE={result['device']}" in log.splitlines(), log
    assert (target.cluster.cdi_dir / f"kubedevice-dra-{DRIVER}-{claim['metadata']['uid']}.json").exists()
    return took


def _running(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    return pod if pod and pod.get("status", {}).get("phase") == "Running" else None


def test_a_node_still_serving_the_resource_by_device_plugin_keeps_it_there(
    target: Target, driver: None, short_tmp: Path
) -> None:
    """Migration node by node, as upstream decides (``filterExtendedResources``): where a device
    plugin still offers ``example.com/null`` (allocatable > 0) the pod gets the plugin's device and
    no claim, and a request beyond the plugin's devices does not spill over to DRA; once the plugin
    is gone (allocatable 0) the waiting pod is served through DRA."""
    api = target.api
    config = short_tmp / "plugin.yaml"
    config.write_text(yaml.safe_dump({"resources": [
        {"name": RESOURCE, "static": {"count": 1, "paths": ["/dev/null"]}, "env": {"PLUGIN_DEVICE": "{ids}"}},
    ]}))  # fmt: skip
    [device_class] = documents(EXAMPLES / "dra-null-extended-class.yaml", "DeviceClass")
    api.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
    plugin = Daemon(target.cluster, config, short_tmp / "plugin.log")
    by_plugin, waiting = f"null-plugin-{uuid.uuid4().hex[:6]}", f"null-waiting-{uuid.uuid4().hex[:6]}"
    try:
        node = target.cluster.node_name
        wait_for("the device plugin's one device allocatable", lambda: api.resource(node, RESOURCE)[1] == 1, 30)
        create_pod(target, by_plugin, RESOURCE)
        running = wait_for("the pod running", lambda: _running(api.get(pod_path(target, by_plugin))), 120)
        assert "extendedResourceClaimStatus" not in running["status"], running["status"]
        log = container_output(target.cluster, running)
        assert "PLUGIN_DEVICE=null-0" in log.splitlines() and "NULL_DEVICE" not in log, log
        create_pod(target, waiting, RESOURCE)
        message = wait_for("the second pod unschedulable", lambda: unschedulable(target, waiting), 60)
        assert f"Insufficient {RESOURCE}" in message, message
        plugin.stop()
        stopped = time.monotonic()
        served(target, waiting, RESOURCE, device_class["metadata"]["name"], stopped)
        print(f"device plugin stopped to the waiting pod running through DRA: {time.monotonic() - stopped:.2f} s")
    finally:
        plugin.stop()
        clean_up(target, [by_plugin, waiting], device_class["metadata"]["name"])
        print(plugin.tail)
