"""The host root behaves like a chroot: nothing we advertise can point outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubedevice.sources.hostroot import HostRoot, HostRootError
from kubedevice.testing import FakeHost


def test_nonexistent_host_root_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HostRootError, match="does not exist") as info:
        HostRoot(tmp_path / "missing")
    assert "\n" not in str(info.value)


def test_absolute_symlinks_resolve_inside_the_root(host: FakeHost) -> None:
    host.device_node("/dev/ttyUSB0")
    host.symlink("/dev/serial/by-id/usb-FTDI-if00", "/dev/ttyUSB0")  # absolute, as udev makes on a node
    host.symlink("/dev/escape", "../../../../../../etc/passwd")
    root = HostRoot(host.root)
    assert root.resolve("/dev/serial/by-id/usb-FTDI-if00") == "/dev/ttyUSB0"
    assert root.resolve("/dev/escape") == "/etc/passwd"  # '..' stops at the root
    assert root.local(root.resolve("/dev/escape")).is_relative_to(host.root.resolve())


def test_glob_pairs_each_match_with_its_canonical_node_and_drops_dangling_ones(host: FakeHost) -> None:
    host.device_node("/dev/ttyUSB0")
    host.symlink("/dev/serial/by-id/a", "../../ttyUSB0")
    host.symlink("/dev/serial/by-id/b", "/dev/ttyUSB0")
    host.symlink("/dev/serial/by-id/dangling", "/dev/ttyUSB9")
    root = HostRoot(host.root)
    assert root.glob("/dev/serial/by-id/*") == [
        ("/dev/serial/by-id/a", "/dev/ttyUSB0"),
        ("/dev/serial/by-id/b", "/dev/ttyUSB0"),
    ]


def test_glob_works_with_the_real_root(tmp_path: Path) -> None:
    """The default host root is "/" (the daemon on a node): matches are plain host paths."""
    (tmp_path / "acc0").touch()
    assert HostRoot(Path("/")).glob(f"{tmp_path}/acc?") == [(f"{tmp_path}/acc0", f"{tmp_path}/acc0")]


def test_symlink_loops_are_reported(host: FakeHost) -> None:
    host.symlink("/dev/a", "/dev/b")
    host.symlink("/dev/b", "/dev/a")
    with pytest.raises(HostRootError, match="too many levels"):
        HostRoot(host.root).resolve("/dev/a")


def test_missing_directory_is_absent_hardware_not_an_error(host: FakeHost) -> None:
    assert HostRoot(host.root).listdir("/sys/bus/usb/devices") == []
