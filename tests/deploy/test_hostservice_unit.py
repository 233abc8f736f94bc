"""The unit ``kubedevice host-service install`` writes, run from the files it wrote as systemd would.

The image built by scripts/image.sh is installed onto a temp node; then, as systemd starts the
unit, its ``RootDirectory=`` becomes the root of a private mount namespace with the API file
systems (``MountAPIVFS=``), every ``BindPaths=``/``BindReadOnlyPaths=`` entry bound from the
node, and ``ExecStart`` runs there with no capability and ``NOTIFY_SOCKET`` set: it must send
``READY=1`` before any kubelet exists, then register with a kubelet started after it.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubedevice import __version__
from kubedevice.kubelet import KubeletSimulator

from . import unitkit
from .imagekit import Image

pytestmark = pytest.mark.image

CONFIG = {
    "plugin_dir": "/var/lib/kubelet/device-plugins",
    "host_root": "/host",
    "cdi_dir": "/var/run/cdi",
    "resources": [{"name": "example.com/null", "static": {"count": 3, "paths": ["/dev/null"]}}],
}


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kd-") as path:
        yield Path(path)


def _source(path: str, node: Path, plugin_dir: Path, cdi_dir: Path) -> str:
    """Where a bound host path is in this test: the node's files, the kubelet's test directory,
    a scratch CDI directory, and this machine's /dev and /sys (read-only) as the host's."""
    if path == CONFIG["plugin_dir"]:
        return str(plugin_dir)
    if path == CONFIG["cdi_dir"]:
        return str(cdi_dir)
    if path.startswith(("/dev", "/sys")):
        return path
    return str(node / path.lstrip("/"))


def test_the_installed_unit_runs_the_copied_image_and_registers_after_ready(
    image: Image, tmp_path: Path, short_tmp: Path
) -> None:
    node = tmp_path / "node"
    (node / "run/systemd/system").mkdir(parents=True)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubedevice",
            "host-service",
            "install",
            "--host-root",
            str(node),
            "--image-root",
            str(image.rootfs),
            "--config",
            str(config),
            "--systemctl",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (node / f"opt/kubedevice/{__version__}/rootfs/usr/bin/python3").exists()
    plugin_dir, cdi_dir = short_tmp / "device-plugins", short_tmp / "cdi"
    plugin_dir.mkdir()
    cdi_dir.mkdir()
    log = tmp_path / "unit.log"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(short_tmp / "sock"))
        notify.settimeout(60)
        script = unitkit.installed_unit_script(node, lambda path: _source(path, node, plugin_dir, cdi_dir), short_tmp)
        with log.open("wb") as out:
            daemon = subprocess.Popen(
                ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-ec", script],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            try:
                assert notify.recv(64) == b"READY=1"
            except TimeoutError:
                pytest.fail(f"no READY=1: {log.read_text()[-3000:]}")
            assert not (plugin_dir / "kubelet.sock").exists(), "ready before any kubelet, as the unit orders"
            asyncio.run(_register(plugin_dir))
            daemon.terminate()
            assert daemon.wait(timeout=30) == 0, log.read_text()[-3000:]
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()


async def _register(plugin_dir: Path) -> None:
    sim = KubeletSimulator(plugin_dir)
    await sim.start()
    try:
        await sim.wait_until(lambda: len(getattr(sim.resources.get("example.com/null"), "devices", {})) == 3, 30)
    finally:
        await sim.stop()
