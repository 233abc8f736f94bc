"""A DRA workload on a real cluster for ``dra explain pod/NAME`` and ``dra available``: nodes that
are only Node objects, their ResourceSlices, DeviceClasses and pods the real scheduler places.

The scheduler needs no kubelet to decide where a pod goes: a Node object with room for pods and
the node's ResourceSlices are all it reads. Such a Node gets the ``not-ready`` taint when it is
created (the ``TaintNodesByCondition`` admission) and, without a kubelet's heartbeats, the
``unreachable`` taints later; the pods here tolerate both, so those taints never decide (the
taints a test sets itself do). Pods bound to such a node stay Pending (no kubelet runs them) but
hold their claims' devices, as on a real node.

The shapes cover what the scheduler's DRA filter judges: device selectors (model, memory),
counts, a device taint and a request tolerating it, a node taint, partitionable devices sharing
a counter set, a device with consumable capacity shared between claims, a claim shared by two
pods (its allocation's node selector), claims already allocated, and pods that fit only after
another pod is deleted. Used by ``tests/e2e/test_dra_live.py`` and ``docs/dra.md``'s example.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .kubeapi import ApiError, KubeApi

DRIVER = "live.kubedevice.dev"
GPU_CLASS = "gpu.live.kubedevice.dev"
NIC_CLASS = "nic.live.kubedevice.dev"
NODE_LABEL = "live.kubedevice.dev/pool"
NO_KUBELET_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
RESOURCE = "/apis/resource.k8s.io/v1"
ROOM = {"pods": "110", "cpu": "64", "memory": "512Gi"}
GiB = "Gi"


def node_document(name: str, labels: dict[str, str], taints: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """A Node as a kubelet registers it: Ready, room for pods. Status is kept on create."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "a Node object without a kubelet",
             "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": spec,
        "status": {"capacity": ROOM, "allocatable": ROOM, "conditions": [ready]},
    }


def gpu(name: str, model: str, memory: int, **extra: Any) -> dict[str, Any]:
    """A GPU device: type, model and memory attributes, memory as capacity too."""
    return {
        "name": name,
        "attributes": {"type": {"string": "gpu"}, "model": {"string": model}},
        "capacity": {"memory": {"value": f"{memory}{GiB}"}},
        **extra,
    }


def slice_document(
    node: str, devices: list[dict[str, Any]], counters: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    name = f"{node}-{'counters' if counters else 'devices'}"
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                            "resourceSliceCount": 2 if _partitioned(node) else 1}}  # fmt: skip
    if counters:
        spec["sharedCounters"] = counters
    else:
        spec["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def _partitioned(node: str) -> bool:
    return node.endswith("-d")


def class_document(name: str, device_type: str) -> dict[str, Any]:
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "{device_type}"'
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """The nodes of the workload: ``prefix-a`` … ``prefix-e``."""

    prefix: str

    def name(self, letter: str) -> str:
        return f"{self.prefix}-{letter}"

    @property
    def nodes(self) -> list[str]:
        return [self.name(letter) for letter in "abcde"]

    def node_documents(self) -> list[dict[str, Any]]:
        label = {NODE_LABEL: self.prefix}
        infra = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
        return [node_document(n, label, infra if n.endswith("-e") else ()) for n in self.nodes]

    def slice_documents(self) -> list[dict[str, Any]]:
        a, b, c, d, e = self.nodes
        unhealthy = {"taints": [{"key": "unhealthy", "value": "true", "effect": "NoSchedule"}]}
        nic = {
            "name": "nic-0",
            "attributes": {"type": {"string": "nic"}},
            "allowMultipleAllocations": True,
            "capacity": {"bandwidth": {"value": "100G"}},
        }
        counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]

        def part(name: str, memory: int) -> dict[str, Any]:
            consumes = [{"counterSet": "gpu-0", "counters": {"memory": {"value": f"{memory}Gi"}}}]
            return gpu(name, "H100", memory, consumesCounters=consumes)

        return [
            slice_document(a, [gpu(f"gpu-{i}", "A100", 40) for i in range(4)] + [nic]),
            slice_document(b, [gpu(f"gpu-{i}", "H100", 80) for i in range(4)]),
            slice_document(
                c, [gpu("gpu-0", "H100", 80, **unhealthy)] + [gpu(f"gpu-{i}", "H100", 80) for i in (1, 2, 3)]
            ),
            slice_document(d, [part("gpu-0", 80), part("gpu-0-half-0", 40), part("gpu-0-half-1", 40)]),
            slice_document(d, [], counters),
            slice_document(e, [gpu(f"gpu-{i}", "H100", 80) for i in range(4)]),
        ]


def request(name: str, device_class: str, count: int = 1, selector: str = "", **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count, **extra}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def model(name: str) -> str:
    return f'device.attributes["{DRIVER}"].model == "{name}"'


def memory_at_least(gib: int) -> str:
    return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{gib}Gi")) >= 0'


def memory_is(gib: int) -> str:
    return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{gib}Gi")) == 0'


@dataclass
class Workload:
    """The objects of one run, in one namespace, on one :class:`Layout`; :meth:`delete` removes them all."""

    api: KubeApi
    namespace: str
    layout: Layout
    created: list[str] = field(default_factory=list)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self.api.request("POST", path, body)
        meta = answer["metadata"]
        self.created.append(f"{path}/{meta['name']}")
        return answer

    def setup(self) -> None:
        """Namespace, Nodes, DeviceClasses, ResourceSlices."""
        self.create("/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        for node in self.layout.node_documents():
            self.create("/api/v1/nodes", node)
        for name, kind in ((GPU_CLASS, "gpu"), (NIC_CLASS, "nic")):
            if self.api.get(f"{RESOURCE}/deviceclasses/{name}") is None:
                self.create(f"{RESOURCE}/deviceclasses", class_document(name, kind))
        for document in self.layout.slice_documents():
            self.create(f"{RESOURCE}/resourceslices", document)

    def template(self, name: str, requests: list[dict[str, Any]], constraints: Sequence[dict[str, Any]] = ()) -> None:
        devices: dict[str, Any] = {"requests": requests, **({"constraints": list(constraints)} if constraints else {})}
        body = {"metadata": {"name": name}, "spec": {"spec": {"devices": devices}}}
        self.create(f"{RESOURCE}/namespaces/{self.namespace}/resourceclaimtemplates", body)

    def claim(self, name: str, requests: list[dict[str, Any]]) -> None:
        body = {"metadata": {"name": name}, "spec": {"devices": {"requests": requests}}}
        self.create(f"{RESOURCE}/namespaces/{self.namespace}/resourceclaims", body)

    def pod(self, name: str, *, template: str = "", claim: str = "", **spec: Any) -> dict[str, Any]:
        return self.create(f"/api/v1/namespaces/{self.namespace}/pods", self.pod_document(name, template, claim, spec))

    def pod_document(self, name: str, template: str, claim: str, spec: dict[str, Any]) -> dict[str, Any]:
        """A pod of one container using one claim (from ``template`` or named ``claim``), on the layout's nodes."""
        source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
        tolerations = [{"key": key, "operator": "Exists"} for key in NO_KUBELET_TAINTS]
        return {
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "nodeSelector": {NODE_LABEL: self.layout.prefix},
                "tolerations": tolerations + list(spec.pop("tolerations", [])),
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "devices", **source}],
                "containers": [{"name": "c", "image": "kubedevice.invalid/never-runs:1",
                                "resources": {"claims": [{"name": "devices"}]}}],
                **spec,
            },
        }  # fmt: skip

    def get_pod(self, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.api.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        return found

    def delete_pod(self, name: str) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
        try:
            self.api.request("DELETE", path, {"gracePeriodSeconds": 0})
        except ApiError as err:
            if err.status.code != 404:
                raise

    def claims(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.api.request("GET", f"{RESOURCE}/namespaces/{self.namespace}/resourceclaims")[
            "items"
        ]
        return items

    def delete(self) -> None:
        """Everything created, newest first (pods at once, without grace: no kubelet finishes them)."""
        for path in reversed(self.created):
            try:
                self.api.request("DELETE", path, {"gracePeriodSeconds": 0} if "/pods/" in path else None)
            except ApiError as err:
                if err.status.code != 404:
                    raise


def outcome(pod: dict[str, Any] | None) -> str | None:
    """``bound`` (and where), ``unschedulable``, or None while the scheduler has not decided."""
    if pod is None:
        return None
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return f"bound:{node}"
    for condition in (pod.get("status") or {}).get("conditions") or []:
        failed = condition.get("type") == "PodScheduled" and condition.get("status") == "False"
        if failed and condition.get("reason") in ("Unschedulable", "SchedulerError"):
            return f"unschedulable:{condition.get('message', '')}"
    return None


def pinned(document: dict[str, Any], node: str, name: str) -> dict[str, Any]:
    """A copy of a pod that may go to ``node`` only: its name ANDed into each required node
    affinity term (a pod without one gets one term). No scheduling gates.

    The copy's claims: a template makes it a claim of its own; a named claim is shared.
    """
    spec = json.loads(json.dumps(document["spec"]))
    spec.pop("schedulingGates", None)
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]})
    for term in required["nodeSelectorTerms"]:
        term["matchFields"] = [*term.get("matchFields", []), field]
    return {"metadata": {"name": name, "namespace": document["metadata"]["namespace"]}, "spec": spec}


def plain(items: Iterable[str]) -> list[str]:
    return sorted(set(items))
