"""The host-service mode: deploy/systemd/kubedevice.service, verified by systemd and run as
systemd would run it on a node whose kubelet starts after it."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubedevice.kubelet import KubeletSimulator
from kubedevice.testing.waiting import eventually

from . import unitkit
from .imagekit import Image

pytestmark = pytest.mark.image

CONFIG = unitkit.REPO / "src" / "kubedevice" / "examples" / "null.yaml"


def test_the_unit_starts_before_the_kubelet_and_is_enabled_at_boot() -> None:
    unit = unitkit.parse(unitkit.UNIT.read_text())
    assert "kubelet.service" in unit["Unit"]["Before"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert unit["Service"]["Restart"] == ["always"]
    (start,) = unit["Service"]["ExecStart"]
    assert start.startswith("/opt/kubedevice/bin/kubedevice serve --config /etc/kubedevice/config.yaml ")
    assert "--plugin-dir /var/lib/kubelet/device-plugins" in start


def test_systemd_analyze_verify_accepts_the_unit(image: Image) -> None:
    """Verified with the image's /opt/kubedevice in place: verify also checks that ExecStart exists."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed; the unit is still parsed and run by the other tests")
    venv = image.rootfs / "opt" / "kubedevice"
    script = (
        'mount -t tmpfs tmpfs /opt && mkdir /opt/kubedevice && mount --bind "$1" /opt/kubedevice && '
        'exec systemd-analyze verify "$2"'
    )
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-ec", script, "verify", str(venv), str(unitkit.UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
    # ... and it does look: without the virtualenv the same unit is refused.
    missing = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-ec",
            'mount -t tmpfs tmpfs /opt && exec systemd-analyze verify "$1"',
            "verify",
            str(unitkit.UNIT),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode != 0 and "/opt/kubedevice/bin/kubedevice" in missing.stderr


@pytest.fixture
def host(image: Image, tmp_path: Path) -> Iterator[Path]:
    """A node's root: the image's Debian with /opt/kubedevice, plus the config the docs install."""
    root = tmp_path / "host"
    subprocess.run(["cp", "-a", str(image.rootfs), str(root)], check=True, timeout=300)
    (root / "etc" / "kubedevice").mkdir()
    shutil.copy(CONFIG, root / "etc" / "kubedevice" / "config.yaml")
    yield root


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """Unix socket paths below it must stay under 108 bytes (pytest's tmp_path can exceed that)."""
    with tempfile.TemporaryDirectory(prefix="kd-") as path:
        yield Path(path)


def test_exec_start_waits_for_the_kubelet_registers_and_stops_cleanly(host: Path, short_tmp: Path) -> None:
    tmp_path = short_tmp
    plugin_dir = tmp_path / "device-plugins"
    plugin_dir.mkdir()
    log = tmp_path / "daemon.log"
    daemon = unitkit.start(host, plugin_dir, log)
    try:
        asyncio.run(_kubelet_after_daemon(daemon, plugin_dir, log))
        status = Path(f"/proc/{daemon.pid}/status").read_text()
        assert "CapBnd:\t0000000000000000" in status and "NoNewPrivs:\t1" in status, status
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0, log.read_text()[-3000:]
        assert not [p.name for p in plugin_dir.glob("*.sock")], "our sockets are removed"
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


async def _kubelet_after_daemon(daemon: subprocess.Popen[bytes], plugin_dir: Path, log: Path) -> None:
    """The boot order the unit sets: the daemon is up and waiting before kubelet.sock exists."""

    def serving() -> bool:
        assert daemon.poll() is None, log.read_text()[-3000:]
        return any(plugin_dir.glob("*.sock"))

    await eventually("the daemon's socket", serving, 30, seen=lambda: log.read_text()[-3000:])
    assert any(plugin_dir.glob("kubedevice-*.sock")), log.read_text()[-3000:]
    assert not (plugin_dir / "kubelet.sock").exists()
    sim = KubeletSimulator(plugin_dir)
    await sim.start()
    try:
        await sim.wait_until(lambda: len(getattr(sim.resources.get("example.com/null"), "devices", {})) == 4, 30)
    finally:
        await sim.stop()
