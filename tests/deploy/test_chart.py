"""The Helm chart: lints, renders with every option, and every object is valid Kubernetes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.config import parse_config
from kubedevice.metrics import parse_address

from .helmkit import CHART, Helm, by_kind, one, validate_all

ALL_OPTIONS = (
    "resourceSlices.enabled=true",
    "metrics.podMonitor.enabled=true",
    "metrics.serviceMonitor.enabled=true",
    "hostRoot.mountAll=true",
    "rollOnConfigChange=true",
    "podAnnotations.team=devices",
    "extraArgs={--log-level,debug}",
    "imagePullSecrets[0].name=regcred",
    "nfd.enabled=true",
)
DRA = ("dra.enabled=true", "dra.driverName=null.example.com")
CLASSES = ("dra.deviceClasses[0].name=null.example.com", "dra.deviceClasses[0].extendedResourceName=example.com/null")
SELECTOR = (
    "config.resources[0].name=example.com/gpu",
    "config.resources[0].static.count=1",
    "config.resources[0].node_selector.example\\.com/accelerator=gpu",
)
VALUE_SETS = {
    "defaults": (),
    "all-options": ALL_OPTIONS,
    "no-monitoring-ns": ("fullnameOverride=kd",),
    "node-selector": (*SELECTOR, "cdi.removeOnUninstall=false"),
    "dra": DRA,
    "dra-all-options": (*DRA, *ALL_OPTIONS, *CLASSES, "dra.rollingUpdate=true", "dra.kubeletDir=/k"),
}


NFD_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert isinstance(c, dict)
    return c


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    return spec


def mounts(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """mountPath -> the mount and its volume's hostPath (if any)."""
    volumes = {v["name"]: v for v in pod_spec(docs)["volumes"]}
    return {m["mountPath"]: {**m, "volume": volumes[m["name"]]} for m in container(docs)["volumeMounts"]}


@pytest.mark.parametrize(
    "sets", [(), ALL_OPTIONS, DRA, (*DRA, *CLASSES)], ids=["defaults", "all-options", "dra", "dra-classes"]
)
def test_helm_lint_strict_passes(helm: Helm, sets: tuple[str, ...]) -> None:
    args = [arg for item in sets for arg in ("--set", item)]
    result = helm.run("lint", "--strict", "--kube-version", "1.34.0", str(CHART), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_every_rendered_object_validates_against_kubernetes_openapi(helm: Helm, name: str) -> None:
    docs = helm.template(*VALUE_SETS[name])
    assert {"ConfigMap", "DaemonSet"} <= {d["kind"] for d in docs}
    # DRA mode needs resource.k8s.io/v1 and admissionregistration v1 policies: Kubernetes 1.34+.
    validate_all(docs, ("1.37.0",) if name.startswith("dra") else None)


def test_daemonset_has_the_node_agent_essentials(helm: Helm) -> None:
    docs = helm.template()
    ds = one(docs, "DaemonSet")
    spec = pod_spec(docs)
    assert spec["priorityClassName"] == "system-node-critical"
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    assert {"operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    c = container(docs)
    assert c["resources"] == {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    security = c["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False


def test_container_command_is_the_documented_serve_line(helm: Helm) -> None:
    c = container(helm.template())
    assert [*c["command"], *c["args"]] == [
        "kubedevice",
        "serve",
        "--config",
        "/etc/kubedevice/config.yaml",
        "--host-root",
        "/host",
        "--metrics-address",
        ":9500",
        "--log-format",
        "json",
        "--log-level",
        "info",
        "--owner-daemonset",
        "kube-system/kubedevice",
    ]


def test_probes_and_ports_point_at_the_metrics_server(helm: Helm) -> None:
    c = container(helm.template("metrics.port=9611"))
    args = c["args"]
    _, port = parse_address(args[args.index("--metrics-address") + 1])
    (declared,) = c["ports"]
    assert (declared["name"], declared["containerPort"]) == ("metrics", port) == ("metrics", 9611)
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_host_mounts_are_the_right_paths_and_modes(helm: Helm) -> None:
    m = mounts(helm.template())
    plugin = m["/var/lib/kubelet/device-plugins"]
    assert plugin["volume"]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"
    assert not plugin.get("readOnly")  # the daemon creates its sockets there
    for host_path in ("/dev", "/sys", "/run/udev"):  # udev's database: the udev: source
        mount = m[f"/host{host_path}"]
        assert mount["readOnly"] is True
        assert mount["volume"]["hostPath"]["path"] == host_path
    cdi = m["/var/run/cdi"]
    assert not cdi.get("readOnly") and cdi["volume"]["hostPath"]["type"] == "DirectoryOrCreate"
    pod_resources = m["/var/lib/kubelet/pod-resources"]  # the kubelet's PodResources API, for /metrics
    assert pod_resources["readOnly"] is True
    assert pod_resources["volume"]["hostPath"] == {"path": "/var/lib/kubelet/pod-resources"}
    config = m["/etc/kubedevice"]
    assert "subPath" not in config  # a subPath mount would never see a changed ConfigMap
    assert config["volume"]["configMap"]["name"] == one(helm.template(), "ConfigMap")["metadata"]["name"]


def test_whole_host_root_option_replaces_dev_and_sys(helm: Helm) -> None:
    m = mounts(helm.template("hostRoot.mountAll=true", "hostRoot.path=/rootfs"))
    assert m["/rootfs"]["volume"]["hostPath"]["path"] == "/"
    assert m["/rootfs"]["readOnly"] is True and m["/rootfs"]["mountPropagation"] == "HostToContainer"
    assert "/rootfs/dev" not in m and "/host/dev" not in m


def test_configmap_carries_a_config_the_daemon_accepts_with_the_mounted_paths(helm: Helm) -> None:
    docs = helm.template("pluginDir=/var/lib/k0s/kubelet/device-plugins", "cdi.dir=/etc/cdi")
    text = one(docs, "ConfigMap")["data"]["config.yaml"]
    config = parse_config(text)
    assert [r.name for r in config.resources] == ["example.com/null"]
    assert str(config.plugin_dir) == "/var/lib/k0s/kubelet/device-plugins"
    assert str(config.host_root) == "/host"
    assert str(config.cdi_dir) == "/etc/cdi"
    m = mounts(docs)
    assert {str(config.plugin_dir), str(config.cdi_dir)} <= set(m)
    assert m[str(config.plugin_dir)]["volume"]["hostPath"]["path"] == str(config.plugin_dir)
    # where the daemon derives the PodResources socket: the plugin directory's parent
    assert m["/var/lib/k0s/kubelet/pod-resources"]["volume"]["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"


def test_custom_resources_from_a_values_file_reach_the_config(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "resources": [
                        {"name": "example.com/null", "static": {"count": 2, "paths": ["/dev/null"]}},
                        {"name": "example.com/tty", "glob": {"paths": ["/dev/ttyUSB*"]}},
                    ]
                }
            }
        )
    )
    config = parse_config(one(helm.template(values=[values]), "ConfigMap")["data"]["config.yaml"])
    assert [r.name for r in config.resources] == ["example.com/null", "example.com/tty"]


def test_without_the_uninstall_clean_up_there_is_no_api_access_at_all(helm: Helm) -> None:
    docs = helm.template("cdi.removeOnUninstall=false")
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert pod_spec(docs)["automountServiceAccountToken"] is False
    assert "--owner-daemonset" not in container(docs)["args"]


def test_uninstall_clean_up_may_only_read_and_watch_its_own_daemonset(helm: Helm) -> None:
    docs = helm.template(namespace="devices", release="gpu")
    daemonset, account = one(docs, "DaemonSet"), one(docs, "ServiceAccount")
    args = container(docs)["args"]
    assert args[args.index("--owner-daemonset") + 1] == f"devices/{daemonset['metadata']['name']}"
    assert pod_spec(docs)["serviceAccountName"] == account["metadata"]["name"]
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")
    role, binding = one(docs, "Role"), one(docs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "devices"
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["daemonsets"],
            "resourceNames": [daemonset["metadata"]["name"]],
            "verbs": ["get", "watch"],
        }
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "devices"}
    ]


NODE_READER = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]


def node_reader(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in by_kind(docs, "ClusterRole") if d["metadata"]["name"].endswith("-node-labels")]


def test_a_node_selector_in_the_config_grants_reading_nodes_and_the_node_name(helm: Helm) -> None:
    """Alone (no uninstall clean-up): a ServiceAccount, get/list/watch on nodes, NODE_NAME; nothing else."""
    docs = helm.template(*SELECTOR, "cdi.removeOnUninstall=false", namespace="devices")
    config = parse_config(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config.resources[0].node_selector == {"example.com/accelerator": "gpu"}
    account, role, binding = one(docs, "ServiceAccount"), one(docs, "ClusterRole"), one(docs, "ClusterRoleBinding")
    assert role["rules"] == NODE_READER and not by_kind(docs, "Role")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "devices"}
    ]
    assert pod_spec(docs)["automountServiceAccountToken"] is True
    assert pod_spec(docs)["serviceAccountName"] == account["metadata"]["name"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container(docs)["env"]}
    assert env == {"NODE_NAME": "spec.nodeName"}


def test_nodes_are_read_only_when_needed(helm: Helm) -> None:
    assert not node_reader(helm.template()) and "env" not in container(helm.template())
    assert node_reader(helm.template("nodeLabels.enabled=true"))[0]["rules"] == NODE_READER
    with_uninstall = helm.template(*SELECTOR)  # both roles, one account
    assert len(node_reader(with_uninstall)) == 1 and len(by_kind(with_uninstall, "Role")) == 1
    assert len(by_kind(with_uninstall, "ServiceAccount")) == 1
    # DRA mode refuses node_selector (serve says so): no grant for it there.
    assert not node_reader(helm.template(*DRA, "nodeLabels.enabled=true"))


# --- DRA mode ----------------------------------------------------------------------------------


def test_dra_mode_config_is_a_dra_config_the_daemon_accepts(helm: Helm) -> None:
    docs = helm.template(*DRA, "dra.rollingUpdate=true")
    config = parse_config(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config.dra is not None and config.dra.driver == "null.example.com" and config.dra.rolling_update
    assert [r.name for r in config.resources] == ["example.com/null"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container(docs)["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid"}


def test_dra_mode_runs_serve_for_its_node_without_the_uninstall_flag(helm: Helm) -> None:
    args = container(helm.template(*DRA, "dra.kubeletDir=/var/lib/k0s/kubelet"))["args"]
    assert args[args.index("--node") + 1] == "$(NODE_NAME)"  # the kubelet expands it from the env
    assert args[args.index("--kubelet-dir") + 1] == "/var/lib/k0s/kubelet"
    assert "--owner-daemonset" not in args  # serve refuses it with dra: claims' specs go on unprepare


def test_dra_mode_mounts_only_the_plugin_watcher_its_plugin_dir_cdi_and_the_host_view(helm: Helm) -> None:
    docs = helm.template(*DRA)
    host_paths = {
        path: m["volume"]["hostPath"]["path"] for path, m in mounts(docs).items() if "hostPath" in m["volume"]
    }
    assert host_paths == {
        "/var/lib/kubelet/plugins_registry": "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins": "/var/lib/kubelet/plugins",
        "/var/lib/kubelet/pod-resources": "/var/lib/kubelet/pod-resources",
        "/var/run/cdi": "/var/run/cdi",
        "/host/dev": "/dev",
        "/host/sys": "/sys",
        "/host/run/udev": "/run/udev",
    }


def test_dra_mode_rbac_is_exactly_what_the_driver_calls(helm: Helm) -> None:
    docs = helm.template(*DRA, namespace="devices")
    account, role, binding = one(docs, "ServiceAccount"), one(docs, "ClusterRole"), one(docs, "ClusterRoleBinding")
    assert pod_spec(docs)["serviceAccountName"] == account["metadata"]["name"]
    assert pod_spec(docs)["automountServiceAccountToken"] is True
    granted = {
        (g, r): sorted(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    # publisher.py: list, watch, create, replace (update), delete slices and get the Node;
    # claims.py: get a claim. No patch, no deletecollection, no get of slices.
    assert granted == {
        ("resource.k8s.io", "resourceslices"): ["create", "delete", "list", "update", "watch"],
        ("resource.k8s.io", "resourceclaims"): ["get"],
        ("", "nodes"): ["get"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "devices"}
    ]
    assert not by_kind(docs, "Role")


def test_dra_mode_admission_policy_binds_the_drivers_account_to_its_node(helm: Helm) -> None:
    docs = helm.template(*DRA, namespace="devices", release="gpu")
    policy, binding = one(docs, "ValidatingAdmissionPolicy"), one(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["resourceslices"] and rule["operations"] == ["CREATE", "UPDATE", "DELETE"]
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == 'request.userInfo.username == "system:serviceaccount:devices:gpu-kubedevice"'
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert "authentication.kubernetes.io/node-name" in variables["userNodeName"]
    assert 'request.operation == "DELETE" ? oldObject : object' in variables["objectNodeName"]
    assert not by_kind(helm.template(*DRA, "dra.admissionPolicy.enabled=false"), "ValidatingAdmissionPolicy")
    assert not by_kind(helm.template(), "ValidatingAdmissionPolicy")


def test_dra_mode_needs_a_driver_name(helm: Helm) -> None:
    version = ("--kube-version", "1.34.0")
    result = helm.run("template", "x", str(CHART), *version, "--set", "dra.enabled=true")
    assert result.returncode != 0 and "dra.driverName is required" in result.stderr
    result = helm.run(
        "template", "x", str(CHART), *version, "--set", "dra.enabled=true", "--set", "dra.driverName=Bad_Name"
    )
    assert result.returncode != 0 and "/dra/driverName" in result.stderr


CLASS_VALUES = """
dra:
  enabled: true
  driverName: null.example.com
  deviceClasses:
    - name: null.example.com
      extendedResourceName: example.com/null
    - name: null-only
      selectors:
        - cel: {expression: 'device.attributes["null.example.com"].resource == "example.com/null"'}
"""


def test_dra_mode_ships_the_device_classes_asked_for_selecting_the_drivers_devices(helm: Helm, tmp_path: Path) -> None:
    """Each class selects ``device.driver == driverName`` first, then its own selectors; only the
    one given an extendedResourceName carries it. The API server's validation (``dra validate``) and
    the OpenAPI schema of 1.37 accept them."""
    values = tmp_path / "values.yaml"
    values.write_text(CLASS_VALUES)
    docs = helm.template(values=[values])
    extended, first = by_kind(docs, "DeviceClass")
    driver = {"cel": {"expression": 'device.driver == "null.example.com"'}}
    assert extended["metadata"]["name"] == "null.example.com"
    assert extended["spec"] == {"extendedResourceName": "example.com/null", "selectors": [driver]}
    assert first["metadata"]["name"] == "null-only"
    only_null = 'device.attributes["null.example.com"].resource == "example.com/null"'
    assert first["spec"] == {"selectors": [driver, {"cel": {"expression": only_null}}]}
    assert extended["metadata"]["labels"]["app.kubernetes.io/instance"] == "kubedevice"
    validate_all([extended, first], ("1.37.0",))
    rendered = tmp_path / "classes.yaml"
    rendered.write_text(yaml.safe_dump_all([extended, first]))
    checked = subprocess.run(
        [sys.executable, "-m", "kubedevice", "dra", "validate", str(rendered)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_device_classes_only_in_dra_mode_and_none_by_default(helm: Helm) -> None:
    assert not by_kind(helm.template(*DRA), "DeviceClass")
    assert not by_kind(helm.template(*CLASSES), "DeviceClass")  # no driver to select


@pytest.mark.parametrize(
    ("bad", "complaint"),
    [
        ("dra.deviceClasses[0].extendedResourceName=null", "/dra/deviceClasses/0/extendedResourceName"),
        ("dra.deviceClasses[0].extendedResourceName=kubernetes.io/null", "/dra/deviceClasses/0/extendedResourceName"),
        ("dra.deviceClasses[0].extendedResourceName=Example.com/null", "/dra/deviceClasses/0/extendedResourceName"),
        ("dra.deviceClasses[0].name=Null_Class", "/dra/deviceClasses/0/name"),
        ("dra.deviceClasses[0].extendedName=example.com/null", "extendedName"),
    ],
)
def test_device_class_values_are_checked_naming_the_key(helm: Helm, bad: str, complaint: str) -> None:
    """The extended resource name as the API server's IsExtendedResourceName takes it: domain-qualified,
    not in kubernetes.io (pkg/apis/resource/validation, validateDeviceClassSpec)."""
    result = helm.run(
        "template",
        "x",
        str(CHART),
        "--kube-version",
        "1.34.0",
        *(a for s in (*DRA, *CLASSES[:1], bad) for a in ("--set", s)),
    )
    assert result.returncode != 0
    assert complaint in result.stderr, result.stderr


def test_resource_slices_get_a_least_privilege_service_account(helm: Helm) -> None:
    docs = helm.template("resourceSlices.enabled=true", namespace="devices")
    account = one(docs, "ServiceAccount")
    spec = pod_spec(docs)
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    assert spec["automountServiceAccountToken"] is True
    role, binding = one(docs, "ClusterRole"), one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "devices"}
    ]
    granted = {
        (group, resource) for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
    }
    assert granted == {("resource.k8s.io", "resourceslices"), ("", "nodes")}
    nodes = next(r for r in role["rules"] if r["resources"] == ["nodes"])
    assert nodes["verbs"] == ["get"]
    env = {e["name"]: e for e in container(docs)["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_pod_monitor_selects_the_daemonset_pods_on_the_metrics_port(helm: Helm) -> None:
    docs = helm.template("metrics.podMonitor.enabled=true", "metrics.podMonitor.labels.release=prom")
    monitor = one(docs, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    pod_labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in container(docs)["ports"]}
    assert endpoint["path"] == "/metrics" and re.fullmatch(r"\d+[smh]", endpoint["interval"])


def test_service_monitor_reaches_pods_through_a_headless_service(helm: Helm) -> None:
    docs = helm.template("metrics.serviceMonitor.enabled=true")
    monitor, service = one(docs, "ServiceMonitor"), one(docs, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    pod_labels = one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container(docs)["ports"]}
    assert not by_kind(helm.template(), "Service")


def test_config_checksum_rolls_pods_only_when_asked(helm: Helm) -> None:
    def annotations(*sets: str) -> dict[str, str]:
        meta: dict[str, Any] = one(helm.template(*sets), "DaemonSet")["spec"]["template"]["metadata"]
        return dict(meta.get("annotations", {}))

    assert "checksum/config" not in annotations()
    first = annotations("rollOnConfigChange=true")["checksum/config"]
    assert annotations("rollOnConfigChange=true", "podLabels.a=b")["checksum/config"] == first
    second = annotations(
        "rollOnConfigChange=true",
        "config.resources[0].static.count=8",
        "config.resources[0].name=example.com/null",
        "config.resources[0].static.paths={/dev/null}",
    )
    assert second["checksum/config"] != first


@pytest.mark.parametrize(
    ("bad", "complaint"),
    [
        ("metrics.port=99999", "/metrics/port"),
        ("log.format=xml", "/log/format"),
        ("pluginDir=relative", "/pluginDir"),
        ("typo=1", "typo"),
        ("config.resources=null", "resources"),
        ("hostRoot.path=/", "/hostRoot/path"),
    ],
)
def test_values_schema_rejects_bad_values_naming_the_key(helm: Helm, bad: str, complaint: str) -> None:
    result = helm.run("template", "x", str(CHART), "--set", bad)
    assert result.returncode != 0
    assert complaint in result.stderr


def test_release_name_and_overrides_shape_object_names(helm: Helm) -> None:
    assert one(helm.template(release="gpu"), "DaemonSet")["metadata"]["name"] == "gpu-kubedevice"
    assert one(helm.template(release="kubedevice-a"), "DaemonSet")["metadata"]["name"] == "kubedevice-a"
    assert one(helm.template("fullnameOverride=dp"), "ConfigMap")["metadata"]["name"] == "dp"


@pytest.mark.parametrize("sets", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_least_privilege_under_every_option(helm: Helm, sets: tuple[str, ...]) -> None:
    """No host namespaces, no capability, no escalation, seccomp on, and only the host paths needed."""
    docs = helm.template(*sets)
    spec = pod_spec(docs)
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container(docs)["securityContext"]
    assert security["privileged"] is False and "add" not in security["capabilities"]
    assert security["capabilities"]["drop"] == ["ALL"] and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    writable = {
        "/var/lib/kubelet/device-plugins",
        "/var/run/cdi",
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins",
        "/k/plugins_registry",
        "/k/plugins",
        NFD_DIR,
    }
    for path, mount in mounts(docs).items():
        host = mount["volume"].get("hostPath")
        if host is None:
            continue
        read_only = {"/dev", "/sys", "/run/udev", "/", "/var/lib/kubelet/pod-resources", "/k/pod-resources"}
        assert host["path"] in writable | read_only, path
        assert mount.get("readOnly") is True or host["path"] in writable, path


def test_nfd_writes_the_feature_file_into_nfds_features_dir(helm: Helm) -> None:
    """nfd.enabled: NFD's features.d mounted at the same path and serve --features-file in it."""
    args = container(helm.template("nfd.enabled=true"))["args"]
    assert args[args.index("--features-file") + 1] == f"{NFD_DIR}/kubedevice"
    mount = mounts(helm.template("nfd.enabled=true"))[NFD_DIR]
    assert mount["volume"]["hostPath"] == {"path": NFD_DIR, "type": "DirectoryOrCreate"}
    assert not mount.get("readOnly")
    moved = container(helm.template("nfd.enabled=true", "nfd.featuresDir=/srv/features.d/"))["args"]
    assert moved[moved.index("--features-file") + 1] == "/srv/features.d/kubedevice"
    assert "--features-file" not in container(helm.template())["args"]
    dra = helm.template(*DRA, "nfd.enabled=true")
    assert "--features-file" not in container(dra)["args"] and NFD_DIR not in mounts(dra)
