"""The chart's ``hostService``: its pod installs and supervises the systemd unit, off by default.

The rendered init container's command line is run for real (``kubedevice host-service
install``) against a temp node, with only the node, image and systemctl pointed at test paths.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from kubedevice.node.hostservice_cli import app

from .helmkit import CHART, Helm, by_kind, one, validate_all

ON = ("hostService.enabled=true",)


def spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    return result


def test_off_by_default_the_pod_is_the_daemon_itself(helm: Helm) -> None:
    pod = spec(helm.template())
    assert "initContainers" not in pod and "hostPID" not in pod
    assert pod["containers"][0]["args"][0] == "serve"


def test_on_it_lints_and_every_object_validates(helm: Helm) -> None:
    lint = helm.run("lint", "--strict", "--kube-version", "1.34.0", str(CHART), "--set", ON[0])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    validate_all(helm.template(*ON))


def test_the_init_container_installs_and_the_main_container_supervises(helm: Helm) -> None:
    docs = helm.template(*ON, "hostService.nodeRoot=/srv/node", namespace="devices", release="gpu")
    pod = spec(docs)
    assert pod["hostPID"] is True, "systemctl runs in PID 1's namespaces"
    (init,) = pod["initContainers"]
    (main,) = pod["containers"]
    assert init["args"][:2] == ["host-service", "install"] and main["args"][:2] == ["host-service", "supervise"]
    assert init["securityContext"]["privileged"] and main["securityContext"]["privileged"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["node"]["hostPath"] == {"path": "/srv/node", "type": "Directory"}
    for c in (init, main):
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        assert mounts["/node"] == "node" and mounts["/etc/kubedevice"] == "config"
        assert c["args"][c["args"].index("--host-root") + 1] == "/node"
    # Uninstall is seen by the owner check: its own DaemonSet, with a token allowed only that.
    daemonset = one(docs, "DaemonSet")["metadata"]["name"]
    assert main["args"][main["args"].index("--owner-daemonset") + 1] == f"devices/{daemonset}"
    assert pod["automountServiceAccountToken"] is True
    assert one(docs, "Role")["rules"][0]["resourceNames"] == [daemonset]
    # Readiness: the file the supervisor keeps while the unit's sockets are served, on a writable /tmp.
    ready = main["readinessProbe"]["exec"]["command"]
    assert ready[:2] == ["test", "-e"]
    default = {p.name: p.default for p in typer.main.get_command(app).commands["supervise"].params}
    assert Path(ready[2]) == default["ready_file"]
    assert {m["mountPath"]: m["name"] for m in main["volumeMounts"]}["/tmp"] == "tmp"
    assert not by_kind(docs, "ClusterRole")


def test_the_rendered_install_command_runs(helm: Helm, tmp_path: Path) -> None:
    """The init container's arguments as rendered, then the node, image and systemctl redirected."""
    docs = helm.template(*ON)
    (init,) = spec(docs)["initContainers"]
    node, image = tmp_path / "node", tmp_path / "image"
    (node / "run/systemd/system").mkdir(parents=True)
    (image / "opt/kubedevice/bin").mkdir(parents=True)
    config = tmp_path / "config.yaml"
    config.write_text(one(docs, "ConfigMap")["data"]["config.yaml"])
    calls = tmp_path / "calls"
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    systemctl.chmod(0o755)
    assert init["args"][init["args"].index("--systemctl") + 1] == "nsenter -t 1 -m -u -i -n -p -- systemctl"
    overrides = [
        "--host-root",
        str(node),
        "--config",
        str(config),
        "--image-root",
        str(image),
        "--systemctl",
        str(systemctl),
    ]
    done = subprocess.run(
        [sys.executable, "-m", *init["command"], *init["args"], *overrides],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == ["daemon-reload", "restart kubedevice.service"]
    unit = (node / "etc/systemd/system/kubedevice.service").read_text()
    # The unit binds the host's directories where the ConfigMap's config expects them.
    cfg = yaml.safe_load(config.read_text())
    assert f"BindPaths={cfg['plugin_dir']} {cfg['cdi_dir']}\n" in unit
    assert f"/dev:{cfg['host_root']}/dev " in unit


@pytest.mark.parametrize(
    ("sets", "complaint"),
    [
        (("dra.enabled=true", "dra.driverName=null.example.com"), "hostService.enabled: the host service has no API"),
        (("resourceSlices.enabled=true",), "hostService.enabled: the host service has no API"),
        (("cdi.removeOnUninstall=false",), "hostService.enabled needs cdi.removeOnUninstall"),
        (("hostService.nodeRoot=node",), "/hostService/nodeRoot"),
    ],
)
def test_what_a_host_service_cannot_do_is_refused_naming_the_key(
    helm: Helm, sets: tuple[str, ...], complaint: str
) -> None:
    args = [arg for item in (*ON, *sets) for arg in ("--set", item)]
    result = helm.run("template", "x", str(CHART), "--kube-version", "1.34.0", *args)
    assert result.returncode != 0 and complaint in result.stderr, result.stderr
