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


DRA_SETS = (
    "dra.enabled=true",
    "dra.driverName=null.example.com",
    "dra.deviceClasses[0].name=null.example.com",
    "dra.deviceClasses[0].extendedResourceName=example.com/null",
)
# The plain manifests let a hand-edited ConfigMap use node_selector without editing RBAC.
PLAIN_SETS = ("nodeLabels.enabled=true",)


def test_plain_manifests_validate_against_kubernetes_openapi() -> None:
    docs = load_manifests()
    assert [d["kind"] for d in docs] == [
        "ServiceAccount",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "DaemonSet",
    ]
    validate_all(docs)
    dra = load_manifests("kubedevice-dra.yaml")
    assert [d["kind"] for d in dra] == [
        "ServiceAccount",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
        "DeviceClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    validate_all(dra, ("1.37.0",))


def test_plain_config_is_accepted_by_the_daemon() -> None:
    config = parse_config(one(load_manifests(), "ConfigMap")["data"]["config.yaml"])
    assert config.resources and str(config.plugin_dir) == "/var/lib/kubelet/device-plugins"
    dra = parse_config(one(load_manifests("kubedevice-dra.yaml"), "ConfigMap")["data"]["config.yaml"])
    assert dra.dra is not None and dra.dra.driver == "null.example.com"


def without_chart_labels(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for label in CHART_ONLY_LABELS:
        doc["metadata"]["labels"].pop(label, None)
    return doc


def test_plain_manifests_equal_the_chart_with_default_values(helm: Helm) -> None:
    """One source of truth in practice: a change to either must be made to both."""
    for name, sets in (("kubedevice.yaml", PLAIN_SETS), ("kubedevice-dra.yaml", DRA_SETS)):
        rendered = [without_chart_labels(d) for d in helm.template(*sets, namespace="kube-system")]
        assert load_manifests(name) == rendered, f"{name} differs from the chart's rendering"


def test_every_flag_in_the_container_command_is_known_to_the_cli() -> None:
    (container,) = one(load_manifests(), "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["kubedevice"]
    subcommand, *args = container["args"]
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
    help_text = subprocess.run(
        [sys.executable, "-m", "kubedevice", subcommand, "--help"], check=True, capture_output=True, text=True, env=env
    ).stdout
    for flag in (arg for arg in args if arg.startswith("--")):
        assert flag in help_text, f"kubedevice {subcommand} has no {flag}"


def test_plain_manifests_may_read_nodes_for_node_selector_and_nothing_more() -> None:
    """get, list and watch on nodes (a ClusterRole: nodes are cluster-scoped), NODE_NAME from the pod's node."""
    docs = load_manifests()
    role, binding, account = one(docs, "ClusterRole"), one(docs, "ClusterRoleBinding"), one(docs, "ServiceAccount")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "kube-system"}
    ]
    (container,) = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert container["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
