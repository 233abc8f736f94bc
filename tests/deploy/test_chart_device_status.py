"""``dra.deviceStatus``: the config asks the driver for ``status.devices`` and RBAC grants exactly
the one call it makes (a server-side apply, i.e. ``patch``, on ``resourceclaims/status``)."""

from __future__ import annotations

from typing import Any

from kubedevice.config import parse_config

from .helmkit import Helm, one

DRA = ("dra.enabled=true", "dra.driverName=null.example.com")


def granted(docs: list[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    role = one(docs, "ClusterRole")
    rules = role["rules"]
    return {(g, r): sorted(rule["verbs"]) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}


def test_device_status_adds_the_config_flag_and_a_patch_of_claim_status_only(helm: Helm) -> None:
    off, on = helm.template(*DRA), helm.template(*DRA, "dra.deviceStatus=true")
    configs = [parse_config(one(docs, "ConfigMap")["data"]["config.yaml"]).dra for docs in (off, on)]
    assert [c.device_status if c is not None else None for c in configs] == [False, True]
    assert ("resource.k8s.io", "resourceclaims/status") not in granted(off)
    assert granted(on) == {**granted(off), ("resource.k8s.io", "resourceclaims/status"): ["patch"]}
