"""Directories the daemon and the simulators serve sockets in, on a read-only file system.

gRPC's own failure to bind says only "Failed to bind" (the reason goes to its C log) and was a
traceback from ``serve``. Each entry point now says in one line which socket it cannot serve and
the kernel's reason, on a real read-only tmpfs (root, to mount it).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .tmpfs import small_tmpfs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def read_only() -> Iterator[Path]:
    """A tmpfs holding a device plugin directory and a kubelet's DRA directories, remounted
    read-only; at a short path, as a socket's path is at most 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="kd-ro-") as short, small_tmpfs(Path(short) / "ro") as root:
        for directory in ("device-plugins", "kubelet/plugins/null.example.com", "kubelet/plugins_registry"):
            (root / directory).mkdir(parents=True)
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        yield root


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_serve_names_the_socket_it_cannot_serve(read_only: Path, tmp_path: Path) -> None:
    plugins = read_only / "device-plugins"
    done = _run("serve", "--config", str(EXAMPLES / "null.yaml"), "--plugin-dir", str(plugins))
    socket = plugins / "kubedevice-example.com_null.sock"
    assert (done.returncode, done.stderr.splitlines()) == (
        1,
        [f"kubedevice: {socket}: cannot serve a unix socket there: read-only file system"],
    )
    (tmp_path / "claims").mkdir()
    kubelet = read_only / "kubelet"
    dra = _run(
        "serve",
        "--config",
        str(EXAMPLES / "dra-null.yaml"),
        "--node",
        "node-1",
        "--claims-dir",
        str(tmp_path / "claims"),
        "--kubelet-dir",
        str(kubelet),
        "--cdi-dir",
        str(tmp_path / "cdi"),
    )
    # its checkpoint is the first thing it writes there: one line naming it, as for the socket
    assert dra.returncode == 1, dra.stderr
    assert dra.stderr.splitlines()[-1] == (
        f"kubedevice: {kubelet}/plugins/null.example.com/.checkpoint.json.tmp: read-only file system"
    )
    assert "Traceback" not in dra.stderr and "Exception ignored" not in dra.stderr


def test_the_kubelet_simulator_says_so_in_one_line(read_only: Path) -> None:
    plugins = read_only / "device-plugins"
    done = _run("kubelet", "--plugin-dir", str(plugins), "--exit-after", "1")
    assert (done.returncode, done.stderr.splitlines()) == (
        2,
        [f"kubedevice: {plugins}: cannot use as the plugin directory: read-only file system"],
    )
