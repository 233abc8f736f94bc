"""Device taints and the tolerations of a request, as the scheduler's allocator reads them.

``resourceclaim.ToleratesTaint`` and ``taintPreventsAllocation`` of
``k8s.io/dynamic-resource-allocation`` v0.37.2 (``resourceclaim/devicetoleration.go``,
``structured/internal/incubating/allocator_incubating.go``): only the ``NoSchedule`` and
``NoExecute`` effects keep a device from a request; ``None`` and unknown effects do not. Shared
by the allocator and ``explain``, which names the taint that rules a device out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import Device, ExactDeviceRequest

_BLOCKING = ("NoSchedule", "NoExecute")
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")  # DeviceToleration's order


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``ToleratesTaint``: an empty operator means ``Equal``."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator", "")
    if operator in ("", "Equal"):
        return bool(toleration.get("value", "") == taint.get("value", ""))
    return bool(operator == "Exists")


def untolerated(device: Device, request: ExactDeviceRequest) -> list[Mapping[str, Any]]:
    """The device's ``NoSchedule``/``NoExecute`` taints that no toleration of the request tolerates."""
    tolerations = request.tolerations or []
    return [
        taint
        for taint in device.taints or []
        if taint.get("effect") in _BLOCKING and not any(tolerates(t, taint) for t in tolerations)
    ]


def taint_prevents_allocation(device: Device, request: ExactDeviceRequest) -> bool:
    """``taintPreventsAllocation``."""
    return bool(untolerated(device, request))


def describe(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect``, as kubectl writes a node taint."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def stored_tolerations(request: ExactDeviceRequest) -> tuple[dict[str, Any], ...]:
    """The request's tolerations as the API server stores them: ``operator`` defaulted to ``Equal``.

    Results carry them so (``DeviceRequestAllocationResult.tolerations``).
    """
    stored = []
    for toleration in request.tolerations or []:
        full = {"operator": "Equal", **toleration}
        ordered = {k: full[k] for k in _TOLERATION_FIELDS if k in full}
        stored.append({**ordered, **{k: v for k, v in full.items() if k not in ordered}})
    return tuple(stored)
