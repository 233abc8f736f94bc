"""File modes and symlinks: what the daemon creates, and what it refuses to follow or delete."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import pytest

from kubedevice.allocation.cdi import CdiSpecDir, container_edits
from kubedevice.kubelet import checkpoint
from kubedevice.names import endpoint_for
from kubedevice.plugin.manager import Manager
from kubedevice.unixsocket import SocketInUse

from .daemon import SERIAL, Daemon

SERIAL_CDI = f"""\
resources:
  - name: {SERIAL}
    glob: {{paths: ["/dev/ttyUSB*"]}}
    cdi: {{kind: example.com/serial}}
"""


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_created_file_modes(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # the modes must not depend on the umask we were started with
    try:
        daemon = Daemon(tmp_path, SERIAL_CDI)
        daemon.start()
    finally:
        os.umask(old_umask)
    try:
        assert mode(daemon.socket(SERIAL)) == 0o600
        [spec] = daemon.cdi.glob("kubedevice-*.json")
        assert mode(spec) == 0o644
    finally:
        assert daemon.stop() == 0
    path = tmp_path / "kubelet_internal_checkpoint"
    checkpoint.write(path, checkpoint.CheckpointData([], {}))
    assert mode(path) == 0o600


def test_cdi_spec_symlink_is_replaced_never_followed(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    specs = CdiSpecDir(cdi, "example.com/serial")
    specs.path_for("a").symlink_to(outside)
    specs.path_for("b").symlink_to("/dev/zero")  # reading it would never end
    started = time.monotonic()
    specs.sync({"a": container_edits(["/dev/ttyUSB0"], "rw", []), "b": container_edits(["/dev/ttyUSB1"], "rw", [])})
    assert time.monotonic() - started < 5
    assert outside.read_text() == "precious"
    for name in ("a", "b"):
        assert not specs.path_for(name).is_symlink() and "/dev/ttyUSB" in specs.path_for(name).read_text()


def test_cdi_removal_touches_only_regular_files_of_our_kind(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"kind": "example.com/serial"}))
    specs = CdiSpecDir(cdi, "example.com/serial")
    specs.sync({"gone": container_edits(["/dev/ttyUSB0"], "rw", [])})
    specs.path_for("link").symlink_to(outside)  # we never write links: not ours, whatever it points to
    (cdi / "vendor-other.json").write_text("{}")  # not our prefix
    longer = CdiSpecDir(cdi, "example.com/serial-x")  # its names start with our prefix
    longer.sync({"dev": container_edits(["/dev/ttyUSB1"], "rw", [])})
    specs.sync({})
    assert not specs.path_for("gone").exists() and specs.path_for("link").is_symlink()
    assert json.loads(outside.read_text()) == {"kind": "example.com/serial"}
    assert (cdi / "vendor-other.json").exists() and longer.path_for("dev").exists()


@pytest.mark.parametrize("squatter", ["symlink to a socket", "regular file", "directory"])
def test_something_else_at_our_socket_path_is_refused_and_kept(tmp_path: Path, squatter: str) -> None:
    from tests.plugin.conftest import NullPlugin, null_devices

    plugin_dir = tmp_path / "dp"
    plugin_dir.mkdir()
    ours = plugin_dir / endpoint_for("example.com/null")
    target = tmp_path / "elsewhere.sock"
    if squatter == "symlink to a socket":
        import socket

        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(target))
        ours.symlink_to(target)
    elif squatter == "regular file":
        ours.write_text("x")
    else:
        ours.mkdir()

    async def main() -> None:
        with pytest.raises(SocketInUse, match="not a socket"):
            await Manager([NullPlugin(devices=null_devices())], plugin_dir).start()

    asyncio.run(main())
    assert ours.is_symlink() or ours.exists()
    if squatter == "symlink to a socket":
        assert target.is_socket()
