"""Uninstall or restart: the decision that removes our CDI specs (kubedevice.node.owner), on real files
and a real ``kubedevice serve`` process. The API side is proven on the real cluster
(tests/deploy/test_chart_e2e.py: uninstall removes them, a rolling update keeps them)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kubedevice.allocation.cdi import CdiSpecDir
from kubedevice.config import parse_config
from kubedevice.node.owner import OwnerRef, Seen, cdi_specs, remove_cdi_specs, uninstalled
from kubedevice.testing.waiting import wait_for

CONFIG = """
resources:
  - name: example.com/serial
    static: {count: 2, paths: [/dev/null]}
    cdi: {kind: example.com/serial}
  - name: example.com/plain
    static: {count: 1, paths: [/dev/null]}
"""
P, D, G, U = Seen.PRESENT, Seen.DELETING, Seen.GONE, Seen.UNKNOWN


@pytest.mark.parametrize(
    ("history", "remove"),
    [
        ([P, G], True),  # background deletion: the watch saw it go
        ([P, D], True),  # foreground deletion: still there, being deleted
        ([P, G, U], True),  # the final check failed (uninstall already took our account): the watch decides
        ([P, D, G, U], True),
        ([P], False),  # a restart or rolling update: it is still there
        ([P, U], False),
        ([P, G, P], False),  # re-created meanwhile (a quick reinstall): its pods need the specs
        ([], False),
        ([U], False),
        ([U, U], False),  # never reached the API server: keep
        ([G], False),
        ([U, G], False),  # never seen present: a wrong --owner-daemonset keeps everything
    ],
)
def test_only_a_daemonset_seen_present_then_gone_or_deleting_means_uninstall(history: list[Seen], remove: bool) -> None:
    assert uninstalled(history) is remove


def write_specs(cdi: Path) -> dict[str, Path]:
    ours = CdiSpecDir(cdi, "example.com/serial")
    ours.sync({"a": {"env": ["A=1"]}, "b": {"env": ["B=1"]}})
    other_release = CdiSpecDir(cdi, "example.com/other")  # our prefix, a resource of another config
    other_release.sync({"x": {"env": ["X=1"]}})
    foreign = cdi / "vendor.json"
    foreign.write_text("{}")
    return {
        "ours-a": ours.path_for("a"),
        "ours-b": ours.path_for("b"),
        "other": other_release.path_for("x"),
        "foreign": foreign,
    }


def test_removal_takes_only_the_specs_of_this_configs_cdi_resources(tmp_path: Path) -> None:
    files = write_specs(tmp_path)
    config = parse_config(CONFIG)
    assert sorted(cdi_specs(config, tmp_path)) == sorted([files["ours-a"], files["ours-b"]])
    assert sorted(remove_cdi_specs(config, tmp_path)) == sorted([files["ours-a"], files["ours-b"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([files["other"].name, "vendor.json"])
    assert remove_cdi_specs(config, tmp_path) == []  # again: nothing of ours left, nothing else touched
    assert remove_cdi_specs(config, tmp_path / "missing") == []


@pytest.mark.parametrize("text", ["kube-system", "/name", "ns/", "a/b/c", ""])
def test_owner_must_be_namespace_slash_name(text: str) -> None:
    with pytest.raises(ValueError, match="must be NAMESPACE/NAME"):
        OwnerRef.parse(text)
    assert str(OwnerRef.parse("kube-system/kubedevice")) == "kube-system/kubedevice"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve(tmp: Path, *extra: str) -> list[str]:
    (tmp / "host" / "dev").mkdir(parents=True, exist_ok=True)
    (tmp / "plugins").mkdir(exist_ok=True)
    config = tmp / "config.yaml"
    config.write_text(CONFIG)
    return [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(config),
        "--plugin-dir",
        str(tmp / "plugins"),
        "--host-root",
        str(tmp / "host"),
        "--cdi-dir",
        str(tmp / "cdi"),
        *extra,
    ]


def test_serve_keeps_its_specs_when_the_api_server_cannot_say(tmp_path: Path) -> None:
    """The safe default, with the real daemon: no answer about the DaemonSet, specs kept, reason logged."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{closed_port()}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")
    argv = serve(tmp_path, "--owner-daemonset", "kube-system/kubedevice", "--kubeconfig", str(kubeconfig))
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    cdi = tmp_path / "cdi"

    def started() -> bool:
        assert proc.poll() is None, log.read_text()
        return len(list(cdi.glob("kubedevice-*.json"))) == 2 and "watching DaemonSet" in log.read_text()

    wait_for("both CDI specs and the owner's watch", started, 30, seen=log.read_text)
    specs = sorted(cdi.glob("kubedevice-*.json"))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, log.read_text()
    text = log.read_text()
    assert "cannot read DaemonSet kube-system/kubedevice" in text
    assert "keeping our CDI specs: DaemonSet kube-system/kubedevice was not seen uninstalled" in text
    assert sorted(cdi.glob("kubedevice-*.json")) == specs


def test_serve_refuses_the_owner_option_for_dra_and_a_malformed_one(tmp_path: Path) -> None:
    bad = subprocess.run(
        serve(tmp_path, "--owner-daemonset", "nope"), check=False, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and bad.stderr.strip().endswith("--owner-daemonset 'nope' must be NAMESPACE/NAME")
    dra = tmp_path / "dra.yaml"
    dra.write_text("dra: {driver: null.example.com}\n" + CONFIG)
    argv = [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(dra),
        "--node",
        "n",
        "--owner-daemonset",
        "a/b",
    ]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--owner-daemonset is for device plugins" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
