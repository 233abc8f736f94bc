"""The scheduler's node filters before DynamicResources that can be judged exactly from a Node.

kube-scheduler v1.36 runs its Filter plugins per node in a fixed order and stops at the first
that fails (``getDefaultPlugins``: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit, the volume plugins, PodTopologySpread, InterPodAffinity, then
DynamicResources). The first four read only the pod and the Node, so ``dra explain pod/NAME``
judges them exactly and names one that decides; the others read every pod on the node (ports,
cpu and memory in use, spreading, affinity to other pods) or volumes, which this tool does not
list, so they are named as not checked. Each reason is the plugin's own ``ErrReason`` text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..models import NodeSelector
from ..structured import Node, node_selector_matches
from ..structured.taints import describe, tolerates

NOT_CHECKED = (
    "NodePorts",
    "NodeResourcesFit (cpu, memory, pods; extended resources are checked)",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
)
"""The default Filter plugins whose verdict needs the other pods or volumes: not judged here."""
_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")  # helper.DoNotScheduleTaintsFilterFunc
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@dataclass(frozen=True)
class NodeInfo:
    """The fields of a Node the filters read."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> NodeInfo:
        meta, spec = document.get("metadata") or {}, document.get("spec") or {}
        taints = tuple(t for t in spec.get("taints") or [] if isinstance(t, dict))
        allocatable = (document.get("status") or {}).get("allocatable") or {}
        labels = dict(meta.get("labels") or {})
        return cls(str(meta.get("name", "")), labels, taints, spec.get("unschedulable") is True, allocatable)

    @property
    def node(self) -> Node:
        """The allocator's view: name and labels."""
        return Node(self.name, self.labels)


@dataclass(frozen=True)
class PodPlacement:
    """What a pod asks of its node: ``spec.nodeName``, ``nodeSelector``, required node affinity, tolerations."""

    node_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: NodeSelector | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    conflict: str = ""

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> PodPlacement:
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        affinity, conflict = None, ""
        if isinstance(required, dict):
            try:
                affinity = NodeSelector.model_validate(required)
            except ValidationError:
                conflict = "the pod's required node affinity cannot be read"
        tolerations = tuple(t for t in spec.get("tolerations") or [] if isinstance(t, dict))
        selector = dict(spec.get("nodeSelector") or {})
        return cls(str(spec.get("nodeName") or ""), selector, affinity, tolerations, conflict)


def _tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """``TolerationsTolerateTaint``: the pod's tolerations read as the device ones (same rules)."""
    return any(tolerates(t, taint) for t in tolerations)


def untolerated_taint(node: NodeInfo, pod: PodPlacement) -> Mapping[str, Any] | None:
    """``FindMatchingUntoleratedTaint`` over the NoSchedule and NoExecute taints."""
    for taint in node.taints:
        if taint.get("effect") in _DO_NOT_SCHEDULE and not _tolerated(taint, pod.tolerations):
            return taint
    return None


def affinity_matches(node: NodeInfo, pod: PodPlacement) -> bool:
    """``GetRequiredNodeAffinity(pod).Match``: every nodeSelector label, and the required terms."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return pod.affinity is None or node_selector_matches(pod.affinity, node.node)


def first_failure(node: NodeInfo, pod: PodPlacement) -> tuple[str, str] | None:
    """(plugin, reason) of the first of the four filters that rejects the node, in the scheduler's order."""
    if node.unschedulable and not _tolerated(UNSCHEDULABLE_TAINT, pod.tolerations):
        return "NodeUnschedulable", "node(s) were unschedulable"
    if pod.node_name and pod.node_name != node.name:
        return "NodeName", "node(s) didn't match the requested node name"
    taint = untolerated_taint(node, pod)
    if taint is not None:
        return "TaintToleration", f"node(s) had untolerated taint(s) ({describe(taint)})"
    if pod.conflict or not affinity_matches(node, pod):
        return "NodeAffinity", "node(s) didn't match Pod's node affinity/selector"
    return None
