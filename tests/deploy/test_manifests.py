"""The plain manifests: valid Kubernetes, a config the daemon accepts, and in step with the chart."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from typing import Any

from kubedevice.config import parse_config

from .helmkit import Helm, load_manifests, one, validate_all

CHART_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


def test_plain_manifests_validate_against_kubernetes_openapi() -> None:
    docs = load_manifests()
    assert [d["kind"] for d in docs] == ["ConfigMap", "DaemonSet"]
    validate_all(docs)


def test_plain_config_is_accepted_by_the_daemon() -> None:
    config = parse_config(one(load_manifests(), "ConfigMap")["data"]["config.yaml"])
    assert config.resources and str(config.plugin_dir) == "/var/lib/kubelet/device-plugins"


def without_chart_labels(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for label in CHART_ONLY_LABELS:
        doc["metadata"]["labels"].pop(label, None)
    return doc


def test_plain_manifests_equal_the_chart_with_default_values(helm: Helm) -> None:
    """One source of truth in practice: a change to either must be made to both."""
    rendered = {d["kind"]: without_chart_labels(d) for d in helm.template(namespace="kube-system")}
    for doc in load_manifests():
        assert doc == rendered[doc["kind"]], f"{doc['kind']} differs from the chart's default rendering"


def test_every_flag_in_the_container_command_is_known_to_the_cli() -> None:
    (container,) = one(load_manifests(), "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["kubedevice"]
    subcommand, *args = container["args"]
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
    help_text = subprocess.run([sys.executable, "-m", "kubedevice", subcommand, "--help"], check=True,
                               capture_output=True, text=True, env=env).stdout
    for flag in (arg for arg in args if arg.startswith("--")):
        assert flag in help_text, f"kubedevice {subcommand} has no {flag}"
