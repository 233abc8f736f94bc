"""The seed on the real cluster (issue 29): an AMD-like GPU node served by config only, through DRA
with the founding DeviceClass and through the device-plugin API, to pods that do not run as root.

The node is a fake sysfs (``--host-root``) with three GPUs on ``amdgpu`` whose ``pci.ids`` names
and ``mem_info_vram_total`` make the seed's class (examples/dra/class-1.31.yaml, converted to
``resource.k8s.io/v1`` by ``kubedevice dra convert`` as docs/dra-driver.md shows) match one of
them: ``H64`` (64 GiB) satisfies every selector, ``M64`` fails ``model.startsWith("H")`` and
``H32`` the ``memory`` capacity of at least 40Gi. Each GPU's ``card`` and ``renderD`` node and
``/dev/kfd`` are real character devices (the null device's numbers, ``0660 root:render`` as on an
AMD node) made on the machine for the test's length: the cluster shares the machine's ``/dev``,
and containerd creates a container's nodes from the host's. Their numbers (cards 60-62, render
nodes 188-190) are ones a test machine's own GPUs do not take (they start at card0 and
renderD128); ``/dev/kfd`` must not exist yet, or the test fails without touching it.

What the container reports is the test image's: ``--write`` stats and writes each node, ``--cat``
prints the device metadata file; what the runtime created is read from the container's OCI spec
(``ctr containers info``), where each device node is listed once.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube.core.exceptions import ApiError

from kubedevice.testing.cluster import Cluster
from kubedevice.testing.fakehost import FakeHost
from kubedevice.testing.kubeapi import KubeApi
from kubedevice.testing.scenarios import (
    Daemon,
    container_output,
    delete_pods,
    device_pod,
    node_on_this_machine,
    own_namespace,
    unique,
    wait_for,
)
from tests.e2e.test_dra_cluster import Driver, Target

REPO = Path(__file__).resolve().parents[2]
SEED_CLASS = REPO / "examples" / "dra" / "class-1.31.yaml"
SEED_NODE = REPO / "examples" / "dra" / "seed-node.yaml"
DRIVER = "gpu.example.com"
GROUP = "/apis/resource.k8s.io/v1"
KFD = "/dev/kfd"
RENDER_GID = 3100
"""The node's ``render`` group: its GPU nodes are ``0660 root:render``."""
USER = 1000
ENV = {
    "GPU_PCI_ADDRESSES": "{pci_addresses}",
    "GPU_MODELS": "{models}",
    "GPU_DRIVERS": "{drivers}",
    "GPU_PATHS": "{paths}",
}
pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Gpu:
    """One GPU of the fake node: its PCI function, its ``pci.ids`` name, amdgpu's VRAM size in
    bytes and the numbers of its DRM minors."""

    address: str
    device: str
    model: str
    vram: int
    card: int
    render: int

    @property
    def nodes(self) -> tuple[str, str]:
        return f"/dev/dri/card{self.card}", f"/dev/dri/renderD{self.render}"


GPUS = (
    Gpu("0000:03:00.0", "74a1", "H64", 68_702_699_520, 60, 188),  # every selector of the class holds
    Gpu("0000:83:00.0", "74b5", "M64", 68_702_699_520, 61, 189),  # its model does not start with "H"
    Gpu("0000:c3:00.0", "74a5", "H32", 34_359_738_368, 62, 190),  # 32 GiB < 40Gi
)
MATCHING = GPUS[0]
EVERY_NODE = [node for gpu in GPUS for node in gpu.nodes] + [KFD]


@pytest.fixture
def gpu_node(short_tmp: Path) -> Iterator[Path]:
    """The fake node's host root, and its nodes made on the machine while the test runs."""
    host = FakeHost(short_tmp / "host")
    for gpu in GPUS:
        host.pci_device(gpu.address, "1002", gpu.device, "038000", driver="amdgpu")
        host.write(f"/sys/bus/pci/devices/{gpu.address}/mem_info_vram_total", f"{gpu.vram}\n")
        host.drm_node(gpu.address, f"card{gpu.card}")
        host.drm_node(gpu.address, f"renderD{gpu.render}")
    host.class_device("/sys/devices/virtual/kfd/kfd", "kfd", 235, 0, "kfd")
    names = "".join(f"\t{gpu.device}  {gpu.model}\n" for gpu in GPUS)
    host.write("/usr/share/hwdata/pci.ids", f"1002  Advanced Micro Devices, Inc. [AMD/ATI]\n{names}")
    with contextlib.ExitStack() as made:
        for node in EVERY_NODE:
            made.enter_context(node_on_this_machine(Path(node), 0o660, RENDER_GID))
        yield host.root


def nonroot(pod: dict[str, Any], containers: dict[str, list[str]], groups: list[int]) -> dict[str, Any]:
    """``pod`` run as ``USER`` (user and group) with the supplemental ``groups``, every capability
    dropped; one container per entry of ``containers`` (name: the test image's arguments), each
    like the pod's first."""
    pod["spec"]["securityContext"] = {
        "runAsUser": USER,
        "runAsGroup": USER,
        "runAsNonRoot": True,
        "supplementalGroups": groups,
    }
    template = pod["spec"]["containers"][0]
    template["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    pod["spec"]["containers"] = [{**template, "name": name, "args": args} for name, args in containers.items()]
    return pod


def probed(log: str) -> dict[str, str]:
    """Per node path, what ``--write`` saw: ``stat`` (owner and mode) and ``write`` (``ok`` or the error)."""
    seen: dict[str, str] = {}
    for line in log.splitlines():
        verb, _, rest = line.partition(" ")
        if verb in ("stat", "write"):
            path, _, outcome = rest.partition(": ")
            seen[f"{verb} {path}"] = outcome
    return seen


def env(log: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in log.splitlines() if line.startswith("GPU_"))


def runtime_devices(cluster: Cluster, pod: dict[str, Any], container: str) -> list[str]:
    """The device nodes the runtime created in ``container``: its OCI spec's ``linux.devices``."""
    [status] = [s for s in pod["status"]["containerStatuses"] if s["name"] == container]
    container_id = status["containerID"].removeprefix("containerd://")
    info = subprocess.run(
        [*cluster.ctr_command(), "containers", "info", container_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return sorted(d["path"] for d in json.loads(info.stdout)["Spec"]["linux"].get("devices") or [])


def assert_only_its_gpu(seen: dict[str, str], gpu: Gpu, owner: str) -> None:
    """The container opens ``gpu``'s nodes and ``/dev/kfd`` (as ``owner``, ``uid=… gid=…``), and
    the other GPUs' nodes do not exist in it."""
    for node in (*gpu.nodes, KFD):
        assert seen[f"stat {node}"] == f"{owner} mode=660", seen
        assert seen[f"write {node}"] == "ok", seen
    for other in GPUS:
        if other != gpu:
            for node in other.nodes:
                assert seen[f"write {node}"].endswith("no such file or directory"), seen


def running(api: KubeApi, name: str, namespace: str) -> dict[str, Any]:
    return wait_for(
        f"pod {name} running",
        lambda: (p := api.pod(name, namespace)) and p["status"].get("phase") == "Running" and p,
        120,
        seen=lambda: api.pod(name, namespace),
    )


# -- DRA: the seed's class, the scheduler's choice, the metadata file ------------------------------


def seed_class() -> dict[str, Any]:
    """The founding class as ``kubedevice dra convert`` writes it for resource.k8s.io/v1 (the
    walk-through's command), ``suitableNodes`` left out with its warning."""
    command = ["dra", "convert", "--output-version", "resource.k8s.io/v1", str(SEED_CLASS)]
    converted = subprocess.run(
        [sys.executable, "-m", "kubedevice", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "spec.suitableNodes has no place in resource.k8s.io/v1: left out" in converted.stderr
    document: dict[str, Any] = yaml.safe_load(converted.stdout)
    assert document["apiVersion"] == "resource.k8s.io/v1" and "suitableNodes" not in document["spec"]
    return document


def dra_config(directory: Path) -> Path:
    """The walk-through's node config (examples/dra/seed-node.yaml) with what an AMD node's pods
    need: ``/dev/kfd`` beside each GPU, env facts, and the device metadata file."""
    config = yaml.safe_load(SEED_NODE.read_text())
    for resource in config["resources"]:
        resource["shared_paths"] = [KFD]
        resource["env"] = ENV
    config["dra"]["device_metadata"] = True
    path = directory / "seed-node.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def slices_path(node: str) -> str:
    return f"{GROUP}/resourceslices?fieldSelector=spec.nodeName={node},spec.driver={DRIVER}"


def published(api: KubeApi, node: str) -> dict[str, dict[str, Any]]:
    """Our devices in the API server by name."""
    return {d["name"]: d for s in api.get(slices_path(node))["items"] for d in s["spec"].get("devices") or []}


@pytest.fixture
def dra_target(cluster: Cluster) -> Iterator[tuple[Target, KubeApi]]:
    """A namespace of the test's own, as test_dra_cluster.py's driver wants it, and the API."""
    with KubeApi(cluster.kubeconfig) as api, own_namespace(api, "kd-seed") as namespace:
        yield Target(cluster, api.client, namespace), api


@contextlib.contextmanager
def serving_seed(target: Target, api: KubeApi, host_root: Path, log: Path) -> Iterator[dict[str, dict[str, Any]]]:
    """The converted seed class and ``kubedevice serve`` as the node's DRA driver until its three
    GPUs are published (yielded by name); the driver stopped, its slices and the class deleted after."""
    created = api.request("POST", f"{GROUP}/deviceclasses", seed_class())
    driver = Driver(target, log, dra_config(log.parent), "--host-root", str(host_root))
    try:
        seed = yaml.safe_load(SEED_CLASS.read_text())
        assert created["spec"]["selectors"] == seed["spec"]["selectors"]  # the four, as the seed has them
        driver.start()
        yield wait_for(
            "the three GPUs published",
            lambda: (devices := published(api, target.node)) and len(devices) == len(GPUS) and devices,
            60,
            seen=lambda: log.read_text(errors="replace")[-3000:],
        )
    finally:
        driver.stop()
        for item in api.get(slices_path(target.node))["items"]:
            with contextlib.suppress(ApiError):
                api.request("DELETE", f"{GROUP}/resourceslices/{item['metadata']['name']}")
        with contextlib.suppress(ApiError):
            api.request("DELETE", f"{GROUP}/deviceclasses/large-gpu.example.com")
        print(log.read_text(errors="replace")[-3000:])


def unschedulable(api: KubeApi, name: str, namespace: str) -> str:
    """The scheduler's message once it called the pod unschedulable; empty until then."""
    conditions = (api.pod(name, namespace) or {}).get("status", {}).get("conditions") or []
    return next(
        (c.get("message") or "unschedulable" for c in conditions
         if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"),
        "",
    )  # fmt: skip


def claim_specs(cluster: Cluster) -> list[str]:
    """Our driver's CDI specs for prepared claims: each claim's devices, and its metadata file's."""
    return sorted(
        p.name for p in cluster.cdi_dir.glob("*.json") if p.name.startswith((f"kubedevice-dra-{DRIVER}-", f"{DRIVER}_"))
    )


METADATA = f"/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/{DRIVER}-metadata.json"
"""Where the container finds the metadata of its claim from a template (pod claim ``gpu``, request ``gpu``)."""


def claim_pod(name: str, template: str) -> dict[str, Any]:
    """A pod whose claim ``gpu`` comes from ``template``: container ``probe`` writes every GPU node,
    container ``meta`` prints the claim's metadata file; both use the claim."""
    pod = device_pod(name, {})
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return nonroot(pod, {"probe": ["--write", *EVERY_NODE], "meta": ["--cat", METADATA]}, [])


def metadata_document(log: str) -> dict[str, Any]:
    """The first object of the metadata file (the newest API version) the container printed."""
    text = log.split(f"cat {METADATA}:\n", 1)[1].split(f"\nend {METADATA}", 1)[0]
    document, _ = json.JSONDecoder().raw_decode(text)
    return dict(document)


def test_a_nonroot_pod_gets_the_gpu_the_seed_class_selects_through_dra(
    cluster: Cluster, dra_target: tuple[Target, KubeApi], gpu_node: Path, short_tmp: Path
) -> None:
    """The pod's claim gets the H64, the one GPU every selector of the class holds for; a second
    pod on the same template then finds no GPU (two are free, but the model and the capacity
    selector each rule one out) and stays unschedulable."""
    target, api = dra_target
    namespace = target.namespace
    template, name, second = "seed-gpu", unique("seed-gpu"), unique("seed-gpu")
    with serving_seed(target, api, gpu_node, short_tmp / "driver.log") as devices:
        models = {d["attributes"]["model"]["string"]: device for device, d in devices.items()}
        assert sorted(models) == sorted(gpu.model for gpu in GPUS)
        request = {"name": "gpu", "exactly": {"deviceClassName": "large-gpu.example.com"}}
        api.request(
            "POST",
            f"{GROUP}/namespaces/{namespace}/resourceclaimtemplates",
            {"metadata": {"name": template}, "spec": {"spec": {"devices": {"requests": [request]}}}},
        )
        api.create_pod(claim_pod(name, template), namespace)
        try:
            pod = running(api, name, namespace)
            [status] = pod["status"]["resourceClaimStatuses"]
            claim = api.get(f"{GROUP}/namespaces/{namespace}/resourceclaims/{status['resourceClaimName']}")
            [result] = claim["status"]["allocation"]["devices"]["results"]
            assert result == {"request": "gpu", "driver": DRIVER, "pool": cluster.node_name, "device": models["H64"]}
            api.create_pod(claim_pod(second, template), namespace)
            refused = wait_for(f"pod {second} unschedulable", lambda: unschedulable(api, second, namespace), 60)
            assert "cannot allocate all claims" in refused, refused
            assert not (api.pod(second, namespace) or {})["spec"].get("nodeName"), refused
            print(f"the scheduler on the second pod: {refused}")

            probe = container_output(cluster, pod, container="probe")
            # the nodes the spec leaves without an owner are the container's user's (CDI's Apply)
            assert_only_its_gpu(probed(probe), MATCHING, f"uid={USER} gid={USER}")
            assert env(probe) == {
                "GPU_PCI_ADDRESSES": MATCHING.address,
                "GPU_MODELS": MATCHING.model,
                "GPU_DRIVERS": "amdgpu",
                "GPU_PATHS": ",".join(MATCHING.nodes),
            }
            for container in ("probe", "meta"):
                assert runtime_devices(cluster, pod, container) == sorted([*MATCHING.nodes, KFD])

            metadata = metadata_document(container_output(cluster, pod, container="meta"))
            assert (metadata["kind"], metadata["apiVersion"]) == ("DeviceMetadata", "metadata.resource.k8s.io/v1beta1")
            assert metadata["metadata"]["name"] == claim["metadata"]["name"]
            assert metadata["metadata"]["uid"] == claim["metadata"]["uid"]
            assert metadata["podClaimName"] == "gpu"
            [described] = metadata["requests"]
            assert described["name"] == result["request"]
            [device] = described["devices"]
            assert (device["driver"], device["pool"], device["name"]) == (DRIVER, result["pool"], result["device"])
            assert device["attributes"] == devices[result["device"]]["attributes"]
        finally:
            for pod_name in (name, second):
                with contextlib.suppress(ApiError):
                    api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod_name}")
            wait_for(
                "the pods gone and the claim unprepared (its CDI specs removed)",
                lambda: not api.pod(name, namespace) and not api.pod(second, namespace) and not claim_specs(cluster),
                90,
                seen=lambda: claim_specs(cluster),
            )


# -- the device-plugin API -----------------------------------------------------------------------

CDI_KIND = "kubedevice.test/gpu"


def device_plugin_config(directory: Path, resource: str) -> Path:
    """Every AMD display GPU of the node as ``resource``, with ``/dev/kfd``, the env facts, and,
    through CDI, each node ``0660 root:render`` in the container as on the node."""
    config = directory / "gpu.yaml"
    gpu = {
        "name": resource,
        "pci": {"vendor": "1002", "class": "03", "nodes": ["card", "render"]},
        "shared_paths": [KFD],
        "env": ENV,
        "cdi": {"kind": CDI_KIND, "mode": "cri"},
        "device_ownership": {"uid": 0, "gid": RENDER_GID, "mode": "0660"},
    }
    config.write_text(yaml.safe_dump({"resources": [gpu]}))
    return config


def test_a_nonroot_pod_gets_one_gpu_its_kfd_and_env_through_the_device_plugin_api(
    cluster: Cluster, gpu_node: Path, short_tmp: Path
) -> None:
    """A pod in the render group asks for one GPU; the runtime creates its nodes from the CDI spec
    ``device_ownership`` writes, ``/dev/kfd`` (a ``shared_paths`` node) included."""
    resource = "example.com/e2e-gpu"
    daemon = Daemon(
        cluster, device_plugin_config(short_tmp, resource), short_tmp / "serve.log", "--host-root", str(gpu_node)
    )
    api = cluster.api()
    name = unique("seed-gpu-dp")
    try:
        wait_for(
            "the three GPUs in the Node",
            lambda: api.resource(cluster.node_name, resource) == (3, 3),
            10,
            seen=lambda: daemon.tail,
        )
        api.create_pod(nonroot(device_pod(name, {resource: 1}), {"main": ["--write", *EVERY_NODE]}, [RENDER_GID]))
        pod = running(api, name, "default")
        log = container_output(cluster, pod)
        facts = env(log)
        [gpu] = [g for g in GPUS if g.address == facts["GPU_PCI_ADDRESSES"]]
        assert facts == {
            "GPU_PCI_ADDRESSES": gpu.address,
            "GPU_MODELS": gpu.model,
            "GPU_DRIVERS": "amdgpu",
            "GPU_PATHS": ",".join(gpu.nodes),
        }
        assert_only_its_gpu(probed(log), gpu, f"uid=0 gid={RENDER_GID}")
        assert runtime_devices(cluster, pod, "main") == sorted([*gpu.nodes, KFD])
    finally:
        delete_pods(api, [name])
        assert daemon.stop() == 0, daemon.tail
        for spec in cluster.cdi_dir.glob(f"kubedevice-{CDI_KIND.replace('/', '-')}-*.json"):
            spec.unlink()  # a stopped daemon leaves its specs for containers yet to start
