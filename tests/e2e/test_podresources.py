"""Which pod holds which device, on the session's real v1.36.3 node: the kubelet's PodResources API.

A pod holds two devices through our device plugin and another two through our DRA driver; the
daemons' per-device metric names the real pod, namespace and container, read from the real
kubelet's ``<root>/pod-resources/kubelet.sock``. The Go client of the interop suite
(``tests/interop/podresources``, the official k8s.io/kubelet v0.36.3 stubs) reads the same
socket: the kubelet's bytes are Go's deterministic encoding, our client decodes and re-encodes
them byte for byte, both read the same holders, and what the simulators reproduce (``Get`` of an
unknown pod, no topology for a device without, the accumulated CDI lists) is what it does.

Everything runs in a namespace of this module's own, under resource and driver names of its own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube.core.exceptions import ApiError
from prometheus_client.parser import text_string_to_metric_families

from kubedevice.api import podresources_v1_pb2 as prpb
from kubedevice.api.convert import pod_resources_from_pb
from kubedevice.podresources.client import PodResourcesClient, socket_in
from kubedevice.podresources.model import DeviceIds, holders
from kubedevice.testing import gobuild
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.kubeapi import KubeApi
from kubedevice.testing.scenarios import Daemon, device_pod, own_namespace, wait_for

REPO = Path(__file__).resolve().parents[2]
RESOURCE = "example.com/e2e-podres"
DRIVER = "podres.example.com"
GROUP = "/apis/resource.k8s.io/v1"
IMAGE = "kubedevice.test/envsleep:1"
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def go_client() -> Path:
    binary = gobuild.build(REPO / "tests" / "interop" / "podresources", ".", "podresources")
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build the k8s.io/kubelet v0.36.3 PodResources client")
    return binary


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[KubeApi]:
    client = KubeApi(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def namespace(api: KubeApi) -> Iterator[str]:
    with own_namespace(api, "kd-podres") as name:
        yield name


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def go_read(binary: Path, kubelet_socket: Path, *pods: str) -> dict[str, Any]:
    argv = [str(binary), str(kubelet_socket), *pods]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def kubelets_bytes(answer: dict[str, Any], kind: type[Any]) -> Any:
    """The message the kubelet sent, after checking that its bytes are Go's deterministic encoding
    and that our decoding writes them back unchanged."""
    assert "code" not in answer, answer
    raw = base64.b64decode(answer["raw"])
    assert raw == base64.b64decode(answer["canonical"])
    message = kind.FromString(raw)
    assert message.SerializeToString(deterministic=True) == raw
    return message


def null_config(path: Path) -> Path:
    path.write_text(f"resources:\n  - name: {RESOURCE}\n    static: {{count: 3, paths: [/dev/null]}}\n")
    return path


def test_device_plugin_devices_are_named_with_the_real_pod(
    cluster: Cluster, api: KubeApi, namespace: str, go_client: Path, short_tmp: Path
) -> None:
    port = free_port()
    config = null_config(short_tmp / "config.yaml")
    daemon = Daemon(cluster, config, short_tmp / "serve.log", "--metrics-address", f"127.0.0.1:{port}")
    name = f"holder-{uuid.uuid4().hex[:6]}"
    try:
        wait_for("3 devices", lambda: api.resource(cluster.node_name, RESOURCE) == (3, 3), 20)
        api.create_pod(device_pod(name, {RESOURCE: 2}), namespace)
        wait_for(
            "the pod running",
            lambda: ((api.pod(name, namespace) or {}).get("status") or {}).get("phase") == "Running",
            120,
        )

        metric = wait_for("the pod in the metric", lambda: _labelled(port, name), 10)
        held = {dict(k)["device"] for k, v in metric.items() if dict(k)["pod"] == name}
        assert len(held) == 2, metric
        for labels, value in metric.items():
            where = dict(labels)
            expected = (name, namespace, "main") if where["device"] in held else ("", "", "")
            assert (where["pod"], where["namespace"], where["container"], value) == (*expected, 1.0), metric
        assert scrape(port, "kubedevice_pod_resources_up") == {(): 1.0}

        kubelet = socket_in(cluster.kubelet_dir)
        answer = go_read(go_client, kubelet, f"{namespace}/{name}", f"{namespace}/absent")
        listed = kubelets_bytes(answer["list"], prpb.ListPodResourcesResponse)
        assert {
            h.device for h in holders(pod_resources_from_pb(p) for p in listed.pod_resources) if h.pod == name
        } == held
        got = pod_resources_from_pb(
            kubelets_bytes(answer["get"][f"{namespace}/{name}"], prpb.GetPodResourcesResponse).pod_resources
        )
        [main] = got.containers
        assert sorted(main.devices, key=lambda d: d.ids) == [DeviceIds(RESOURCE, (d,), None) for d in sorted(held)]
        assert answer["get"][f"{namespace}/absent"] == {
            "code": "Unknown",
            "message": f"pod absent in namespace {namespace} not found",  # as the simulator says it
        }
        allocatable = kubelets_bytes(answer["allocatable"], prpb.AllocatableResourcesResponse)
        ours = sorted(
            (d.device_ids[0], d.HasField("topology")) for d in allocatable.devices if d.resource_name == RESOURCE
        )
        assert ours == [(f"e2e-podres-{i}", False) for i in range(3)]  # used or not, once each

        async def ours_too() -> Any:
            async with PodResourcesClient(kubelet) as client:
                return await client.get(namespace, name)

        mine = asyncio.run(ours_too())
        # the kubelet lists a container's device IDs in its map's order, which Go randomizes per call
        assert sorted(holders([mine]), key=repr) == sorted(holders([got]), key=repr)
    finally:
        with contextlib.suppress(ApiError):
            api.delete_pod(name, namespace)
        daemon.stop()
        print(daemon.tail)


def _labelled(port: int, pod: str) -> dict[tuple[tuple[str, str], ...], float] | None:
    metric = scrape(port, "kubedevice_device_healthy")
    return metric if any(dict(k).get("pod") == pod for k in metric) and len(metric) == 3 else None


def dra_config(path: Path) -> Path:
    path.write_text(
        f"dra:\n  driver: {DRIVER}\nresources:\n  - name: example.com/podres\n"
        '    static: {count: 4, paths: [/dev/null]}\n    env:\n      NULL_DEVICE: "{ids}"\n'
    )
    return path


@contextlib.contextmanager
def dra_driver(cluster: Cluster, api: KubeApi, config: Path, port: int, log: Path) -> Iterator[None]:
    """Our DRA driver inside the kubelet's mount namespace (its paths are the kubelet's), its class;
    both gone after, with its slices."""
    state = cluster.state()
    assert state is not None
    argv = [
        "nsenter", "-t", str(state.namespace_pid), "-m", "--",
        sys.executable, "-m", "kubedevice", "serve", "--config", str(config),
        "--node", cluster.node_name, "--kubelet-dir", "/var/lib/kubelet", "--cdi-dir", "/run/cdi",
        "--kubeconfig", str(cluster.kubeconfig), "--metrics-address", f"127.0.0.1:{port}",
    ]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    selector = [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]
    api.request("POST", f"{GROUP}/deviceclasses", {"metadata": {"name": DRIVER}, "spec": {"selectors": selector}})
    slices = f"{GROUP}/resourceslices?fieldSelector=spec.nodeName={cluster.node_name},spec.driver={DRIVER}"
    try:
        wait_for(
            "4 devices published",
            lambda: sum(len(s["spec"].get("devices") or []) for s in api.get(slices)["items"]) == 4,
            60,
        )
        yield
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        for item in api.get(slices)["items"]:
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"{GROUP}/resourceslices/{item['metadata']['name']}")
        with contextlib.suppress(ApiError):
            api.request("DELETE", f"{GROUP}/deviceclasses/{DRIVER}")
        print(log.read_text(errors="replace")[-3000:])


def test_dra_devices_are_named_with_claim_and_pod_as_the_kubelet_lists_them(
    cluster: Cluster, api: KubeApi, namespace: str, go_client: Path, short_tmp: Path
) -> None:
    port = free_port()
    name, template = f"dra-holder-{uuid.uuid4().hex[:6]}", "two-devices"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with dra_driver(cluster, api, dra_config(short_tmp / "dra.yaml"), port, short_tmp / "driver.log"):
        request = {"name": "pair", "exactly": {"deviceClassName": DRIVER, "count": 2}}
        api.request("POST", f"{GROUP}/namespaces/{namespace}/resourceclaimtemplates", {
            "metadata": {"name": template}, "spec": {"spec": {"devices": {"requests": [request]}}},
        })  # fmt: skip
        api.request("POST", pods, {
            "metadata": {"name": name},
            "spec": {
                "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                "resourceClaims": [{"name": "pair", "resourceClaimTemplateName": template}],
                "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                "resources": {"claims": [{"name": "pair"}]}}],
            },
        })  # fmt: skip
        try:
            pod = wait_for("the pod running", lambda: _running(api.get(f"{pods}/{name}")), 120)
            claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            metric = scrape(port, "kubedevice_dra_device_healthy")
            held = {dict(k)["device"]: dict(k) for k in metric if dict(k)["pod"]}
            assert len(held) == 2 and len(metric) == 4, metric
            for labels in held.values():
                assert (labels["driver"], labels["pool"]) == (DRIVER, cluster.node_name)
                assert (labels["claim"], labels["pod"], labels["namespace"], labels["container"]) == (
                    claim, name, namespace, "main"
                )  # fmt: skip

            answer = go_read(go_client, socket_in(cluster.kubelet_dir), f"{namespace}/{name}")
            got = kubelets_bytes(answer["get"][f"{namespace}/{name}"], prpb.GetPodResourcesResponse)
            [main] = got.pod_resources.containers
            [dynamic] = main.dynamic_resources
            assert (dynamic.claim_name, dynamic.claim_namespace) == (claim, namespace)
            assert {r.device_name for r in dynamic.claim_resources} == set(held)
            # the kubelet's accumulation, which the simulator reproduces: the second device of a
            # driver carries the first one's CDI IDs too
            assert [len(r.cdi_devices) for r in dynamic.claim_resources] == [1, 2]
            first, second = dynamic.claim_resources
            assert second.cdi_devices[0] == first.cdi_devices[0]
        finally:
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"{pods}/{name}")  # gracefully: the kubelet unprepares first
            wait_for("the pod gone", lambda: api.get(f"{pods}/{name}") is None, 90)
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"{GROUP}/namespaces/{namespace}/resourceclaimtemplates/{template}")


def _running(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    return pod if pod and pod.get("status", {}).get("phase") == "Running" else None
