"""Pods as input to ``kubedevice dra allocate`` and ``dra explain``.

Kept apart from :mod:`.cli` so that the commands only read their inputs (:func:`.inputs.read`)
and hand over: a file may mix Pods and Nodes (core/v1) with the DRA objects, and each pod is
scheduled as the scheduler would, one after the other on the one ``--node`` (the devices an
earlier pod got are in use for the next one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import typer

from ..errors import fail
from . import models
from .explain import explain, render, requests_using, verdicts_json
from .inputs import Inputs
from .models import DeviceClass, DRAObject, NodeObject, Pod, ResourceClaim, ResourceSlice, of_kind
from .pods import PodClaims, PodInputError, claims_for_pod, pod_ref, schedule
from .structured import AllocationError, Node, Unallocatable, allocated_devices


def _target(inputs: Inputs, node: str, labels: Mapping[str, str]) -> tuple[Node, NodeObject | None]:
    """The node to schedule on: its Node object's labels (if given), then ``--label`` on top."""
    found = next((n for n in inputs.nodes if n.metadata.name == node), None)
    merged = {**(found.metadata.labels if found else {}), **labels}
    return Node(node, merged), found


def _pod_claims(
    objects: Sequence[DRAObject],
    claims: Sequence[ResourceClaim],
    pod: Pod,
    node: NodeObject | None,
    features: Mapping[str, bool],
) -> PodClaims:
    try:
        return claims_for_pod(
            pod,
            claims=claims,
            templates=of_kind(list(objects), models.ResourceClaimTemplate),
            classes=of_kind(list(objects), DeviceClass),
            node=node,
            features=features,
        )
    except PodInputError as error:
        fail(str(error))


def _in_use(claims: Sequence[ResourceClaim]) -> list[Any]:
    return allocated_devices([c for c in claims if (c.status or {}).get("allocation")])


def allocate_pods(
    inputs: Inputs, node: str, labels: Mapping[str, str], fmt: Literal["yaml", "json"], features: Mapping[str, bool]
) -> None:
    """Schedule each pod in turn; print every claim a pod uses, allocated and reserved for it.

    A claim two pods share is printed once, reserved for both; a claim made here (from a
    template or for extended resources) has only its ``generateName``.
    """
    target, node_object = _target(inputs, node, labels)
    claims = of_kind(inputs.objects, ResourceClaim)
    classes, slices = of_kind(inputs.objects, DeviceClass), of_kind(inputs.objects, ResourceSlice)
    printed: dict[object, ResourceClaim] = {}
    for pod in inputs.pods:
        pod_claims = _pod_claims(inputs.objects, claims, pod, node_object, features)
        try:
            scheduled = schedule(pod_claims, classes, slices, target, _in_use(claims), features=features)
        except (AllocationError, Unallocatable) as error:
            fail(f"cannot schedule pod {pod_ref(pod)} on node {node}: {error}", 1)
        printed.update(_record(claims, pod_claims, scheduled))
    typer.echo(models.dump(list(printed.values()), fmt) if printed else "", nl=False)


def _record(
    claims: list[ResourceClaim], pod_claims: PodClaims, scheduled: Sequence[ResourceClaim]
) -> dict[object, ResourceClaim]:
    """Put a scheduled pod's claims into ``claims`` so the next pod finds their devices in use.

    Returns them as printed, keyed so that a claim two pods share is printed once (reserved for
    both) and one made here by its identity (it has no name yet).
    """
    shown: dict[object, ResourceClaim] = {}
    for entry, claim in zip(pod_claims.claims, scheduled, strict=True):
        if entry.generated:
            shown[id(claim)] = _without_memory_name(claim)
            claims.append(claim)
            continue
        shown[(claim.metadata.namespace, claim.metadata.name)] = claim
        claims[next(i for i, c in enumerate(claims) if c is entry.claim)] = claim
    return shown


def _without_memory_name(claim: ResourceClaim) -> ResourceClaim:
    """A claim made here has only a ``generateName``: the API server picks its name."""
    shown = claim.model_copy(deep=True)
    shown.metadata.name = ""
    return shown


def explain_pods(
    inputs: Inputs,
    classes: Sequence[DeviceClass],
    slices: Sequence[ResourceSlice],
    target: tuple[str, Mapping[str, str]],
    features: Mapping[str, bool],
    *,
    as_json: bool,
) -> bool:
    """Per pod: each claim's classes with every device's selector verdicts, then the scheduling answer.

    Returns whether every pod can be scheduled. The answer names the first request or constraint
    that fails and what rules devices out (in use, selectors, taints, counters, other nodes).
    Pods are scheduled in turn, as by ``allocate``: what an earlier pod gets is in use for later ones.
    """
    node, node_object = _target(inputs, target[0], target[1])
    claims = of_kind(inputs.objects, ResourceClaim)
    objects = [*inputs.objects, *classes]
    reports, all_fit = [], True
    for pod in inputs.pods:
        pod_claims = _pod_claims(objects, claims, pod, node_object, features)
        report, scheduled = _explain_pod(pod_claims, classes, slices, node, claims, features=features)
        if scheduled is None:
            all_fit = False
        else:
            _record(claims, pod_claims, scheduled)
        reports.append(report)
        if not as_json:
            typer.echo(_render_pod(report, pod_claims, classes, slices), nl=False)
    if as_json:
        typer.echo(json.dumps(reports, indent=2))
    return all_fit


def _explain_pod(
    pod_claims: PodClaims,
    classes: Sequence[DeviceClass],
    slices: Sequence[ResourceSlice],
    node: Node,
    claims: Sequence[ResourceClaim],
    *,
    features: Mapping[str, bool],
) -> tuple[dict[str, Any], list[ResourceClaim] | None]:
    report: dict[str, Any] = {"pod": pod_ref(pod_claims.pod), "node": node.name}
    report["claims"] = [
        {
            "claim": c.claim.metadata.name,
            "podClaim": c.pod_claim,
            "classes": [
                verdicts_json(dc, explain(dc, slices, c.claim, features)) for dc in _classes_of(c.claim, classes)
            ],
        }
        for c in pod_claims.claims
    ]
    try:
        scheduled = schedule(pod_claims, classes, slices, node, _in_use(claims), features=features)
    except (AllocationError, Unallocatable) as error:
        return {**report, "schedulable": False, "reason": str(error)}, None
    report["allocation"] = {c.metadata.name: (c.status or {}).get("allocation") for c in scheduled}
    return {**report, "schedulable": True}, scheduled


def _classes_of(claim: ResourceClaim, classes: Sequence[DeviceClass]) -> list[DeviceClass]:
    return [c for c in classes if requests_using(c, claim)]


def _render_pod(
    report: Mapping[str, Any], pod_claims: PodClaims, classes: Sequence[DeviceClass], slices: Sequence[ResourceSlice]
) -> str:
    lines = [f"Pod {report['pod']} on node {report['node']}:"]
    for entry in pod_claims.claims:
        source = f"spec.resourceClaims {entry.pod_claim}" if entry.pod_claim else "extended resources"
        lines.append(f"  claim {entry.claim.metadata.name} ({source}):")
        for device_class in _classes_of(entry.claim, classes):
            requests = ", ".join(requests_using(device_class, entry.claim))
            lines.append(f"    DeviceClass {device_class.metadata.name} (requests {requests}):")
            text = render(explain(device_class, slices, entry.claim))
            lines += [f"      {line}" for line in text.splitlines()]
    if report["schedulable"]:
        lines.append("  schedulable: yes")
        for claim, allocation in report["allocation"].items():
            for result in allocation["devices"]["results"]:
                device = f"{result['driver']}/{result['pool']}/{result['device']}"
                lines.append(f"    claim {claim}, request {result['request']}: {device}")
    else:
        lines.append(f"  schedulable: no: {report['reason']}")
    return "\n".join(lines) + "\n"
