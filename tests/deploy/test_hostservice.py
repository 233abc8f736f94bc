"""``kubedevice host-service``: what the chart's hostService writes on a node, and takes away.

The node is a temp directory (its ``/run/systemd/system`` says systemd runs there, as
sd_booted(3) checks); the host's systemctl is a script that records its arguments. Install and
uninstall run as the command the init container and the supervising pod run.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from kubedevice import __version__
from kubedevice.node.hostservice import MARK, Layout, Paths, Systemctl, config_body, copy_runtime
from kubedevice.node.hostservice_cli import Supervisor

from . import unitkit

CONFIG = {
    "plugin_dir": "/var/lib/kubelet/device-plugins",
    "host_root": "/host",
    "cdi_dir": "/var/run/cdi",
    "resources": [{"name": "example.com/null", "static": {"count": 2, "paths": ["/dev/null"]}}],
}
OURS = sorted(
    [
        "etc/kubedevice/config.yaml",
        "etc/systemd/system/kubedevice.service",
        "etc/systemd/system/kubelet.service.wants/kubedevice.service",
        "etc/systemd/system/multi-user.target.wants/kubedevice.service",
        "opt/kubedevice",
    ]
)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def node(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "systemd" / "system" / "multi-user.target.wants").mkdir(parents=True)
    (root / "etc" / "systemd" / "system" / "containerd.service").write_text("[Unit]\n")  # not ours
    (root / "etc" / "systemd" / "system" / "multi-user.target.wants" / "containerd.service").symlink_to(
        "/etc/systemd/system/containerd.service"
    )
    return root


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """An image root: merged /usr, an interpreter and the virtualenv's entry point."""
    root = tmp_path / "image"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").write_text("#!interpreter\n")
    (root / "bin").symlink_to("usr/bin")
    (root / "opt" / "kubedevice" / "bin").mkdir(parents=True)
    entry = root / "opt" / "kubedevice" / "bin" / "kubedevice"
    entry.write_text("#!/opt/kubedevice/bin/python\n")
    entry.chmod(0o755)
    return root


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path


@pytest.fixture
def systemctl(tmp_path: Path) -> tuple[str, Path]:
    calls = tmp_path / "systemctl.calls"
    script = tmp_path / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    script.chmod(0o755)
    return str(script), calls


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", "host-service", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def install(node: Path, image: Path, config: Path, systemctl: tuple[str, Path]) -> subprocess.CompletedProcess[str]:
    return cli(
        "install",
        "--host-root",
        str(node),
        "--image-root",
        str(image),
        "--config",
        str(config),
        "--systemctl",
        systemctl[0],
    )


def test_install_writes_exactly_the_unit_config_links_and_runtime(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path]
) -> None:
    before = tree(node)
    done = install(node, image, config, systemctl)
    assert done.returncode == 0, done.stderr
    rootfs = f"opt/kubedevice/{__version__}/rootfs"
    copied = {f"{rootfs}/{p}" for p in tree(image)}
    mount_points = {
        f"{rootfs}/{p}"
        for p in (
            "proc",
            "sys",
            "dev",
            "run",
            "tmp",
            "etc",
            "etc/kubedevice",
            "var",
            "var/lib",
            "var/lib/kubelet",
            "var/lib/kubelet/device-plugins",
            "var/run",
            "var/run/cdi",
            "host",
            "host/dev",
            "host/sys",
            "host/run",
            "host/run/udev",
        )
    }
    dirs = {
        "etc/kubedevice",
        "etc/systemd/system/kubelet.service.wants",
        "opt",
        "opt/kubedevice",
        f"opt/kubedevice/{__version__}",
        f"opt/kubedevice/{__version__}/.complete",
        "opt/kubedevice/.kubedevice-host-service",
        rootfs,
    }
    assert tree(node) - before == {*OURS, *copied, *mount_points, *dirs}
    assert systemctl[1].read_text().splitlines() == ["daemon-reload", "restart kubedevice.service"]
    # The copy is the image's: its files, links and modes.
    assert (node / rootfs / "bin").readlink() == Path("usr/bin")
    assert os.access(node / rootfs / "opt/kubedevice/bin/kubedevice", os.X_OK)
    # The unit as systemd reads it: ordered before the kubelet, notify, run inside the copy.
    assert (node / "etc/systemd/system/kubedevice.service").read_text().startswith(MARK + "\n")
    unit = unitkit.parse((node / "etc/systemd/system/kubedevice.service").read_text())
    assert unit["Unit"]["Before"] == ["kubelet.service"]
    assert unit["Service"]["Type"] == ["notify"]
    assert unit["Service"]["RootDirectory"] == [f"/{rootfs}"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target kubelet.service"]
    (start,) = unit["Service"]["ExecStart"]
    assert (node / rootfs / start.split()[0].lstrip("/")).is_file(), "ExecStart exists inside RootDirectory"
    # The image's environment where it matters outside a container: only /dev, /sys and udev are
    # bound under the host root, so the host's pci.ids is not there and the image's copy is used.
    env = dict(item.split("=", 1) for line in unit["Service"]["Environment"] for item in line.split())
    dockerfile = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text()
    assert env["KUBEDEVICE_PCI_IDS"] == re.findall(r"KUBEDEVICE_PCI_IDS=(\S+)", dockerfile)[-1]
    for link in OURS[2:4]:
        assert (node / link).readlink() == Path("/etc/systemd/system/kubedevice.service")
    assert config_body(node / "etc/kubedevice/config.yaml") == config.read_bytes()


def test_a_second_install_copies_nothing_and_only_starts(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path]
) -> None:
    assert install(node, image, config, systemctl).returncode == 0
    marker = node / "opt" / "kubedevice" / __version__ / ".complete"
    stamp = marker.stat().st_ino
    assert install(node, image, config, systemctl).returncode == 0
    assert marker.stat().st_ino == stamp
    assert systemctl[1].read_text().splitlines()[2:] == ["daemon-reload", "start kubedevice.service"]


def test_uninstall_leaves_nothing_of_ours_and_keeps_foreign_files(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path]
) -> None:
    before = tree(node)
    assert install(node, image, config, systemctl).returncode == 0
    foreign = node / "etc" / "kubedevice" / "notes.txt"  # someone else's file in a directory we use
    foreign.write_text("mine\n")
    done = cli("uninstall", "--host-root", str(node), "--systemctl", systemctl[0])
    assert done.returncode == 0, done.stderr
    assert tree(node) == {*before, "etc/kubedevice", "etc/kubedevice/notes.txt", "opt"}
    assert foreign.read_text() == "mine\n"
    assert systemctl[1].read_text().splitlines()[2:] == ["stop kubedevice.service", "daemon-reload"]
    # Nothing of ours left: a second uninstall removes nothing and calls nothing.
    again = cli("uninstall", "--host-root", str(node), "--systemctl", systemctl[0])
    assert again.returncode == 0 and "nothing of ours" in again.stdout
    assert len(systemctl[1].read_text().splitlines()) == 4


def test_uninstall_keeps_a_config_replaced_by_hand(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path]
) -> None:
    assert install(node, image, config, systemctl).returncode == 0
    (node / "etc/kubedevice/config.yaml").write_text("resources: []\n")
    assert cli("uninstall", "--host-root", str(node), "--systemctl", systemctl[0]).returncode == 0
    assert (node / "etc/kubedevice/config.yaml").read_text() == "resources: []\n"
    assert not (node / "etc/systemd/system/kubedevice.service").exists()


def test_install_refuses_a_unit_installed_by_hand(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path]
) -> None:
    hand = node / "etc/systemd/system/kubedevice.service"
    hand.write_text("[Unit]\nDescription=by hand\n")
    done = install(node, image, config, systemctl)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "kubedevice.service exists and was not written by kubedevice host-service" in done.stderr
    assert hand.read_text() == "[Unit]\nDescription=by hand\n"
    assert not (node / "opt" / "kubedevice").exists() and not systemctl[1].exists()


def test_install_without_systemd_fails_in_one_line(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path]
) -> None:
    (node / "run" / "systemd" / "system").rmdir()
    done = install(node, image, config, systemctl)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("kubedevice: no systemd on this host") and len(done.stderr.splitlines()) == 1
    assert not (node / "opt" / "kubedevice").exists() and not systemctl[1].exists()


def test_supervisor_syncs_the_config_reloads_and_reports_served_sockets(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path], tmp_path: Path
) -> None:
    assert install(node, image, config, systemctl).returncode == 0
    ready = tmp_path / "ready"
    short = Path(tempfile.mkdtemp(prefix="kd-")) / "n"  # socket paths must stay under 108 bytes
    short.symlink_to(node)
    supervisor = Supervisor(Layout(short, __version__), config, Systemctl(systemctl[0]), ready)
    supervisor.sync_config()
    assert systemctl[1].read_text().splitlines()[2:] == [], "unchanged: no reload"
    changed = {**CONFIG, "resources": [{"name": "example.com/null", "static": {"count": 3, "paths": ["/dev/null"]}}]}
    config.write_text(yaml.safe_dump(changed))
    supervisor.sync_config()
    assert config_body(node / "etc/kubedevice/config.yaml") == config.read_bytes()
    assert systemctl[1].read_text().splitlines()[2:] == ["reload kubedevice.service"]
    good = config.read_bytes()
    config.write_text("resources: [{name: x}]\n")  # refused by the daemon: not installed
    supervisor.sync_config()
    assert config_body(node / "etc/kubedevice/config.yaml") == good
    # Readiness: the unit's socket accepts connections on the node's plugin directory.
    supervisor.report_ready()
    assert not ready.exists()
    plugin_dir = node / "var/lib/kubelet/device-plugins"
    plugin_dir.mkdir(parents=True)
    path = short / "var/lib/kubelet/device-plugins/kubedevice-example.com_null.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        supervisor.report_ready()
        assert ready.exists()
    supervisor.report_ready()  # the file stays, nothing listens: not ready
    assert not ready.exists()
    path.unlink()
    shutil.rmtree(short.parent)


def test_supervisor_stops_on_sigterm_and_keeps_the_unit_without_an_owner(
    node: Path, image: Path, config: Path, systemctl: tuple[str, Path], tmp_path: Path
) -> None:
    assert install(node, image, config, systemctl).returncode == 0
    supervisor = Supervisor(Layout(node, __version__), config, Systemctl(systemctl[0]), tmp_path / "ready")

    async def run_then_stop() -> None:
        task = asyncio.create_task(supervisor.run(None, 0.05))
        await asyncio.sleep(0.3)
        os.kill(os.getpid(), 15)
        await asyncio.wait_for(task, 10)

    asyncio.run(run_then_stop())
    assert (node / "etc/systemd/system/kubedevice.service").is_file()


def test_a_mount_point_behind_an_absolute_link_of_the_image_is_left_to_systemd(node: Path, image: Path) -> None:
    """The image's /var/run is a link to /run: a CDI directory under /var/run must not be made in
    the init container's own /run (where the link leads outside the copy)."""
    (image / "var").mkdir()
    (image / "var" / "run").symlink_to("/run")
    outside = Path("/run") / f"kd-test-{os.getpid()}"
    paths = Paths(
        plugin_dir="/var/lib/kubelet/device-plugins", cdi_dir=f"/var/run/{outside.name}/cdi", host_root="/host"
    )
    layout = Layout(node, __version__)
    try:
        assert copy_runtime(image, layout, paths)
        assert not outside.exists(), "a mount point was made outside the copied image"
        rootfs = layout.on_host(layout.rootfs)
        assert (rootfs / "var" / "run").is_symlink()
        assert (rootfs / "var" / "lib" / "kubelet" / "device-plugins").is_dir()
        assert (rootfs / "host" / "run" / "udev").is_dir()
    finally:
        shutil.rmtree(outside, ignore_errors=True)
