"""Why a pod fits or not, on every node of the cluster, as the scheduler would judge it.

For each node: the scheduler's first four filters (:mod:`.nodefilters`), then its DRA filter as
``DynamicResources`` runs it (PreFilter once for the pod: claims being deleted or reserved for
too many pods; Filter per node: an allocated claim's node selector, then the pending claims
allocated together by the allocator), and for a node that fails, the first reason. Nodes are then
grouped by reason, so that 1,000 nodes read as a few lines, each with what the reason is about:
the selector clause that fails on the node's devices, the device taints not tolerated, the
counters left, and who holds the devices in use (claims and the pods they are reserved for).

Explaining N nodes runs the allocator N times; nothing that is the same on every node is done
per node: the pod's claims are made once (per node only when it asks for extended resources,
whose claim depends on the node's allocatable), the allocated devices are grouped by pool once,
and each run reads only the slices of the pools that can serve its node (those naming it, and
those that may serve any node), which ``GatherPools`` would pick from all slices anyway. CEL
selectors are compiled once per expression (the engine caches them).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..available import available
from ..explain import explain, requests_using
from ..models import (
    DeviceClass,
    NodeObject,
    NodeSelector,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from ..pods import PodClaims, PodInputError, claims_for_pod, pod_ref, pod_requests
from ..structured import (
    AllocationError,
    ClaimAllocation,
    DeviceID,
    Shared,
    SharedDevice,
    Unallocatable,
    allocate,
    allocated_devices,
    claim_ref,
    collector_paused,
    node_selector_matches,
)
from .nodefilters import NOT_CHECKED, NodeInfo, PodPlacement, first_failure

DRA = "DynamicResources"
MAX_RESERVED_FOR = 256  # resourceclaim.ResourceClaimReservedForMaxSize: CanBeReserved


@dataclass(frozen=True)
class Workload:
    """What the scheduler reads to place one pod, loaded once."""

    pod: Pod
    placement: PodPlacement
    classes: Sequence[DeviceClass]
    slices: Sequence[ResourceSlice]
    claims: Sequence[ResourceClaim]
    templates: Sequence[ResourceClaimTemplate]
    nodes: Sequence[NodeInfo]
    gates: Mapping[str, bool]
    release: str


@dataclass
class NodeVerdict:
    """One node: whether the pod fits, which filter decided, and the DRA filter's own verdict there."""

    node: str
    fits: bool
    plugin: str = ""
    reason: str = ""
    dra_fits: bool = True
    dra_reason: str = ""
    allocation: list[dict[str, Any]] = field(default_factory=list)
    held: dict[str, list[str]] = field(default_factory=dict)
    """In-use devices of the node's pools -> the claims (and their pods) holding them."""


@dataclass
class Group:
    """Nodes that fail for the same reason, with what the reason is about."""

    plugin: str
    reason: str
    nodes: list[str]
    dra_fits: int = 0
    details: list[str] = field(default_factory=list)
    held: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Explanation:
    pod: str
    pod_wide: str | None
    claims: list[str]
    verdicts: list[NodeVerdict]
    groups: list[Group]
    not_checked: tuple[str, ...] = NOT_CHECKED
    allocator_seconds: float = 0.0
    """Time spent in the allocator's calls (``benchmarks/explain_fleet.py`` reports its share)."""

    @property
    def fitting(self) -> list[NodeVerdict]:
        return [v for v in self.verdicts if v.fits]


# --- which slices and allocated devices concern a node ------------------------------------------


PoolKey = tuple[str, str]


class SliceIndex:
    """The slices and allocated devices each node's allocation can read, indexed once.

    A slice that names its node (``nodeName``) serves only that node's pools; one with
    ``allNodes``, a ``nodeSelector``, ``perDeviceNodeSelection`` or shared counters may serve
    any node (counter sets count for every node in some releases' allocators), so its pool is
    read for every node and ``GatherPools`` decides. A pool is read whole (all its slices on
    every node), as its completeness and counters need.
    """

    def __init__(self, slices: Iterable[ResourceSlice], in_use: Iterable[DeviceID | SharedDevice]) -> None:
        self.by_pool: dict[PoolKey, list[ResourceSlice]] = {}
        self.direct: dict[str, set[PoolKey]] = {}
        self.everywhere: set[PoolKey] = set()
        for slice_ in slices:
            spec = slice_.spec
            key = (spec.driver, spec.pool.name)
            self.by_pool.setdefault(key, []).append(slice_)
            if spec.node_name and not spec.shared_counters:
                self.direct.setdefault(spec.node_name, set()).add(key)
            else:
                self.everywhere.add(key)
        self.in_use: dict[str, list[DeviceID | SharedDevice]] = {}
        for item in in_use:  # by pool name alone: 1.36's allocator keys counters so, across drivers
            device = item.id if isinstance(item, SharedDevice) else item
            self.in_use.setdefault(device.pool, []).append(item)

    def pools(self, node: str) -> list[PoolKey]:
        return sorted(self.direct.get(node, set()) | self.everywhere)

    def slices(self, node: str) -> list[ResourceSlice]:
        return [s for key in self.pools(node) for s in self.by_pool[key]]

    def local(self, node: NodeInfo) -> list[ResourceSlice]:
        """The slices whose devices are for the node (what a person means by "the node's devices")."""
        return [s for s in self.slices(node.name) if _for_node(s, node)]

    def used(self, node: str) -> list[DeviceID | SharedDevice]:
        names = {pool for _, pool in self.pools(node)}
        return [item for pool in sorted(names) for item in self.in_use.get(pool, [])]


def _for_node(slice_: ResourceSlice, node: NodeInfo) -> bool:
    spec = slice_.spec
    if spec.node_name:
        return spec.node_name == node.name
    if spec.node_selector is not None:
        return node_selector_matches(spec.node_selector, node.node)
    return bool(spec.all_nodes or spec.per_device_node_selection)


# --- the pod's claims ---------------------------------------------------------------------------


def holders_of(claims: Iterable[ResourceClaim]) -> dict[DeviceID, list[str]]:
    """Each allocated device -> ``namespace/claim (pod a, pod b)`` for the claims holding it."""
    held: dict[DeviceID, list[str]] = {}
    for claim in claims:
        if not (claim.status or {}).get("allocation"):
            continue
        label = claim_label(claim)
        for item in allocated_devices([claim]):
            device = item.id if isinstance(item, SharedDevice) else item
            if label not in held.setdefault(device, []):
                held[device].append(label)
    return held


def claim_label(claim: ResourceClaim) -> str:
    """``namespace/claim (pod namespace/pod, ...)``: a claim and the pods it is reserved for."""
    pods = [
        f"{claim.metadata.namespace}/{r.get('name')}"
        for r in (claim.status or {}).get("reservedFor") or []
        if isinstance(r, dict) and r.get("resource") == "pods"
    ]
    return f"{claim_ref(claim)} (pod {', '.join(pods)})" if pods else claim_ref(claim)


def _pre_filter(pod: Pod, pod_claims: PodClaims) -> str | None:
    """``PreFilter``'s verdicts for the whole pod: a claim being deleted, or reserved for others to the limit."""
    uid = str((pod.metadata.model_extra or {}).get("uid", ""))
    for entry in pod_claims.claims:
        claim = entry.claim
        if entry.generated:
            continue
        if (claim.metadata.model_extra or {}).get("deletionTimestamp"):
            return f"resourceclaim {claim_ref(claim)} is being deleted"
        status = claim.status or {}
        reserved = [r for r in status.get("reservedFor") or [] if isinstance(r, dict)]
        mine = any(r.get("uid") == uid and r.get("resource") == "pods" for r in reserved) if uid else False
        if status.get("allocation") and len(reserved) >= MAX_RESERVED_FOR and not mine:
            return f"resourceclaim in use: {claim_ref(claim)} is reserved for {len(reserved)} consumers"
    return None


# --- judging one node ---------------------------------------------------------------------------


class Judge:
    """The pod against one node after another, with everything node-independent prepared once."""

    def __init__(self, work: Workload) -> None:
        self.work = work
        allocated = [c for c in work.claims if (c.status or {}).get("allocation")]
        self.index = SliceIndex(work.slices, allocated_devices(allocated))
        self.holders = holders_of(allocated)
        self.per_node_claims = any("/" in name for name in pod_requests(work.pod))
        self.pod_wide: str | None = None
        self.allocator_seconds = 0.0
        self.views = Shared()  # each device's CEL view and selector verdicts, for every node's run
        self.shared: PodClaims | None = None
        if not self.per_node_claims:
            self.shared = self._claims(None)

    def _claims(self, node: NodeInfo | None) -> PodClaims | None:
        """The pod's claims (for ``node`` when extended resources make them depend on it)."""
        document = (
            None
            if node is None
            else NodeObject.model_validate(
                {
                    "metadata": {"name": node.name, "labels": dict(node.labels)},
                    "status": {"allocatable": node.allocatable},
                }
            )
        )
        try:
            made = claims_for_pod(
                self.work.pod,
                claims=self.work.claims,
                templates=self.work.templates,
                classes=self.work.classes,
                node=document,
                features=self.work.gates,
            )
        except (PodInputError, ValidationError) as error:
            self.pod_wide = str(error)
            return None
        self.pod_wide = self.pod_wide or _pre_filter(self.work.pod, made)
        return made

    def claims_of(self, node: NodeInfo) -> PodClaims | None:
        return self._claims(node) if self.per_node_claims else self.shared

    def judge(self, node: NodeInfo) -> NodeVerdict:
        verdict = NodeVerdict(node.name, fits=False)
        pod_claims = self.claims_of(node)
        dra_fits, dra_reason, allocation = self._dra(node, pod_claims)
        verdict.dra_fits, verdict.dra_reason, verdict.allocation = dra_fits, dra_reason, allocation
        failure = first_failure(node, self.work.placement)
        if failure is None and pod_claims is not None and pod_claims.unfit is not None:
            failure = ("NodeResourcesFit", pod_claims.unfit)
        if failure is not None:
            verdict.plugin, verdict.reason = failure
        elif not dra_fits:
            verdict.plugin, verdict.reason = DRA, _general(dra_reason, node.name)
        else:
            verdict.fits = True
        if not verdict.fits:
            verdict.held = self._held(node)
        return verdict

    def _held(self, node: NodeInfo) -> dict[str, list[str]]:
        """The node's own devices in use (those of the pools with slices for it) and their holders."""
        local = {(s.spec.driver, s.spec.pool.name) for s in self.index.local(node)}
        held: dict[str, list[str]] = {}
        for item in self.index.used(node.name):
            device = item.id if isinstance(item, SharedDevice) else item
            if (device.driver, device.pool) in local:
                held[str(device)] = self.holders.get(device, [])
        return held

    def _dra(self, node: NodeInfo, pod_claims: PodClaims | None) -> tuple[bool, str, list[dict[str, Any]]]:
        """``DynamicResources``' verdict on the node: (passes, first reason, the allocation it would make)."""
        if self.pod_wide is not None:
            return False, self.pod_wide, []
        if pod_claims is None or not pod_claims.claims:
            return True, "", []
        claims = [c.claim for c in pod_claims.claims]
        for claim in claims:
            selector = ((claim.status or {}).get("allocation") or {}).get("nodeSelector")
            if selector and not _selector_matches(selector, node):
                return (
                    False,
                    f"resourceclaim not available on the node: {claim_ref(claim)} is allocated for other nodes",
                    [],
                )
        pending = [c for c in claims if not (c.status or {}).get("allocation")]
        if not pending:
            return True, "", []
        began = time.perf_counter()
        try:
            results = allocate(
                pending,
                self.work.classes,
                self.index.slices(node.name),
                node.node,
                self.index.used(node.name),
                features=self.work.gates,
                release=self.work.release,
                shared=self.views,
            )
        except Unallocatable as error:
            return False, f"cannot allocate all claims: {error}", []
        except AllocationError as error:
            return False, f"error: {error}", []
        finally:
            self.allocator_seconds += time.perf_counter() - began
        return True, "", _results(results, node.name)


def _selector_matches(selector: Any, node: NodeInfo) -> bool:
    try:
        return node_selector_matches(NodeSelector.model_validate(selector), node.node)
    except ValidationError:
        return False


def _results(results: Sequence[ClaimAllocation], node: str) -> list[dict[str, Any]]:
    return [
        {"claim": claim_ref(r.claim), **result} for r in results for result in r.as_status(node)["devices"]["results"]
    ]


def _general(reason: str, node: str) -> str:
    """A node's reason with the node's name taken out, so that nodes failing alike group together."""
    text = reason.replace(f" on node {node}", "").replace(f"node {node}", "the node")
    if node not in text:  # the common case: no per-node regular expression to compile
        return text
    return re.sub(rf"(?<![\w.-]){re.escape(node)}(?![\w.-])", "<node>", text)


# --- grouping -----------------------------------------------------------------------------------


def explain_pod(work: Workload) -> Explanation:
    """Every node judged, the failures grouped by reason (largest group first), details for each."""
    with collector_paused():  # 1,000 allocator runs make no cycles: no collection walks the workload
        judge = Judge(work)
        verdicts = [judge.judge(node) for node in work.nodes]
    groups: dict[tuple[str, str], Group] = {}
    firsts: dict[tuple[str, str], NodeInfo] = {}
    by_name = {n.name: n for n in work.nodes}
    counts: dict[tuple[str, str], list[list[int]]] = {}
    for verdict in verdicts:
        if verdict.fits:
            continue
        key = (verdict.plugin, COUNT.sub("#", verdict.reason))
        group = groups.setdefault(key, Group(verdict.plugin, verdict.reason, []))
        counts.setdefault(key, []).append([int(n) for n in COUNT.findall(verdict.reason)])
        firsts.setdefault(key, by_name[verdict.node])
        group.nodes.append(verdict.node)
        group.dra_fits += verdict.dra_fits
        for device, holders in verdict.held.items():
            known = group.held.setdefault(device, [])
            known += [h for h in holders if h not in known]
    for key, group in groups.items():
        group.reason = _merged(key[1], counts[key])
        if group.plugin == DRA:
            group.details = _details(judge, firsts[key], group.reason)
    ordered = sorted(groups.values(), key=lambda g: (-len(g.nodes), g.plugin, g.reason))
    claims = [claim_ref(c.claim) for c in (judge.shared.claims if judge.shared else ())]
    return Explanation(
        pod_ref(work.pod), judge.pod_wide, claims, verdicts, ordered, allocator_seconds=judge.allocator_seconds
    )


COUNT = re.compile(r"(?<![\w./-])\d+(?![\w./-])")
"""A number standing alone in a reason (a count of devices), not part of a name."""


def _merged(pattern: str, numbers: Sequence[Sequence[int]]) -> str:
    """The group's reason with each count as its value, or its range (``0..3``) where nodes differ."""
    parts = pattern.split("#")
    text = parts[0]
    for i, part in enumerate(parts[1:]):
        values = [row[i] for row in numbers]
        low, high = min(values), max(values)
        text += (str(low) if low == high else f"{low}..{high}") + part
    return text


def _details(judge: Judge, node: NodeInfo, reason: str) -> list[str]:
    """What a DRA reason is about on one node of its group: failing selector clauses, taints, counters."""
    pod_claims = judge.claims_of(node)
    if pod_claims is None:
        return []
    slices = judge.index.local(node)
    found: list[str] = []
    for entry in pod_claims.claims:
        if (entry.claim.status or {}).get("allocation"):
            continue
        for device_class in [c for c in judge.work.classes if requests_using(c, entry.claim)]:
            found += _class_details(device_class, slices, entry.claim, judge.work.gates)
    if "counters" in reason or "capacity" in reason:
        found += _left(slices, judge.work.claims, counters="counters" in reason, capacity="capacity" in reason)
    return found


def _class_details(
    device_class: DeviceClass, slices: Sequence[ResourceSlice], claim: ResourceClaim, gates: Mapping[str, bool]
) -> list[str]:
    misses: dict[str, int] = {}
    obstacles: dict[str, int] = {}
    for verdict in explain(device_class, slices, claim, gates):
        failed = next((s for s in verdict.selectors if not s.matched), None)
        if failed is not None:
            what = f"{failed.origin}: {failed.clause or failed.expression}"
            what += f" ({failed.error})" if failed.error else " is false"
            misses[what] = misses.get(what, 0) + 1
            continue
        for reason in verdict.ruled_out:
            obstacles[reason] = obstacles.get(reason, 0) + 1
    lines = [f"{what} on {_devices(n)}" for what, n in misses.items()]
    lines += [f"{why} on {_devices(n)}" for why, n in obstacles.items()]
    return lines


def _left(
    slices: Sequence[ResourceSlice], claims: Sequence[ResourceClaim], *, counters: bool, capacity: bool
) -> list[str]:
    """What is left of the node's pools' shared counters and of its devices' consumable capacity."""
    allocated = [("", c) for c in claims if (c.status or {}).get("allocation")]
    pools = available([("", s) for s in slices], allocated)
    lines = [
        f"counter {c.counter} of set {c.counter_set} in pool {p.driver}/{p.name}: {c.left} of {c.total} left"
        for p in pools
        for c in p.counters
        if counters
    ]
    return lines + [
        f"capacity {name} of {p.driver}/{p.name}/{d.name}: {left} of {total} left"
        for p in pools
        for d in p.devices
        for name, (total, left) in d.capacity.items()
        if capacity
    ]


def _devices(count: int) -> str:
    return "1 device" if count == 1 else f"{count} devices"


def compress(names: Iterable[str]) -> str:
    """``gpu-0, gpu-1, gpu-2, gpu-7`` -> ``gpu-0..2, gpu-7``: runs of a name with a number at its end."""
    runs: list[tuple[str, int, int]] = []
    plain: list[str] = []
    for name in sorted(set(names), key=_numbered):
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if match is None:
            plain.append(name)
            continue
        prefix, number = match.group(1), int(match.group(2))
        if runs and runs[-1][0] == prefix and runs[-1][2] == number - 1:
            runs[-1] = (prefix, runs[-1][1], number)
        else:
            runs.append((prefix, number, number))
    shown = [f"{p}{a}" if a == b else f"{p}{a}..{b}" for p, a, b in runs]
    return ", ".join(plain + shown)


def _numbered(name: str) -> tuple[str, int, str]:
    match = re.fullmatch(r"(.*?)(\d+)", name)
    return (match.group(1), int(match.group(2)), name) if match else (name, -1, name)


# --- output -------------------------------------------------------------------------------------

SHOWN_NODES = 8
"""Node names listed per group in the text (``--json`` lists all)."""
SHOWN_FITS = 20


def _names(nodes: Sequence[str], limit: int = SHOWN_NODES) -> str:
    more = f", ... ({len(nodes) - limit} more)" if len(nodes) > limit else ""
    return ", ".join(nodes[:limit]) + more


def _nodes(count: int) -> str:
    return "1 node" if count == 1 else f"{count} nodes"


def held_lines(held: Mapping[str, Sequence[str]]) -> list[str]:
    """``in use: gpu-0..7 of pool p held by ns/c (pod ns/p)``, devices with the same holders together."""
    by_holders: dict[tuple[str, ...], list[str]] = {}
    for device, holders in held.items():
        by_holders.setdefault(tuple(holders), []).append(device.rpartition("/")[2])
    lines = []
    for holders, devices in by_holders.items():
        who = ", ".join(holders[:SHOWN_NODES]) + (
            f", ... ({len(holders) - SHOWN_NODES} more)" if len(holders) > SHOWN_NODES else ""
        )
        lines.append(f"in use: {compress(devices)} held by {who or 'unknown claims'}")
    return lines


def render(explanation: Explanation, header: Sequence[str] = ()) -> str:
    """The grouped answer: failing groups (largest first), then where the pod fits and with which devices."""
    lines = [*header]
    if explanation.pod_wide is not None:
        lines.append(f"For every node, DRA: {explanation.pod_wide}")
    failing = sum(len(g.nodes) for g in explanation.groups)
    if failing:
        lines.append(f"Does not fit on {_nodes(failing)}:")
    for group in explanation.groups:
        lines.append(f"  {_nodes(len(group.nodes))}: {group.plugin}: {group.reason}")
        if group.plugin != DRA:
            passes = group.dra_fits
            lines.append(
                f"      (the DRA filter alone passes on {passes} of them)"
                if passes
                else "      (the DRA filter fails there too)"
            )
        lines += [f"      {line}" for line in group.details]
        if group.plugin == DRA and "in use" in group.reason:
            lines += [f"      {line}" for line in held_lines(group.held)]
        lines.append(f"      nodes: {_names(group.nodes)}")
    fitting = explanation.fitting
    lines.append(f"Fits on {_nodes(len(fitting))}" + (":" if fitting else "."))
    for verdict in fitting[:SHOWN_FITS]:
        devices = ", ".join(
            f"{r['claim']}/{r['request']}: {r['driver']}/{r['pool']}/{r['device']}" for r in verdict.allocation
        )
        lines.append(f"  {verdict.node}" + (f": {devices}" if devices else ""))
    if len(fitting) > SHOWN_FITS:
        lines.append(f"  ... ({len(fitting) - SHOWN_FITS} more nodes: --json lists them all)")
    lines.append(f"Not checked (need the node's other pods or volumes): {', '.join(explanation.not_checked)}.")
    return "\n".join(lines) + "\n"


def as_json(explanation: Explanation, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the text says, every node named."""
    return {
        "pod": explanation.pod,
        **extra,
        "claims": explanation.claims,
        **({"podWide": explanation.pod_wide} if explanation.pod_wide is not None else {}),
        "fits": [{"node": v.node, "allocation": v.allocation} for v in explanation.fitting],
        "doesNotFit": [
            {
                "plugin": g.plugin,
                "reason": g.reason,
                "count": len(g.nodes),
                "nodes": g.nodes,
                "draFilterPassesOn": g.dra_fits,
                **({"details": g.details} if g.details else {}),
                **({"inUse": g.held} if g.held and g.plugin == DRA and "in use" in g.reason else {}),
            }
            for g in explanation.groups
        ],
        "nodes": [
            {
                "node": v.node,
                "fits": v.fits,
                **({"plugin": v.plugin, "reason": v.reason} if not v.fits else {}),
                "draFilterPasses": v.dra_fits,
                **({"draReason": v.dra_reason} if v.dra_reason else {}),
            }
            for v in explanation.verdicts
        ],
        "notChecked": list(explanation.not_checked),
    }
