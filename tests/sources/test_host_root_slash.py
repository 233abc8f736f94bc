"""Every source kind with the host root ``/`` (the default outside a pod) and with a temp dir.

The node's own ``/dev`` and ``/sys`` are the fixture here: expectations are read straight from
them with ``os`` and ``glob``, so the test checks our host-root joining, not the hardware.
"""

from __future__ import annotations

import glob as globlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubedevice.sources.discovery import find, watched_patterns
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.watch import watch_dirs
from kubedevice.testing import FakeHost

from .conftest import resource

PCI = "/sys/bus/pci/devices"
USB = "/sys/bus/usb/devices"


@pytest.fixture(params=["slash", "tempdir"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> HostRoot:
    """``/`` itself, or a temp dir holding the same device nodes as a FakeHost."""
    if request.param == "slash":
        return HostRoot("/")
    fake = FakeHost(tmp_path / "root")
    for node in ("/dev/null", "/dev/zero", "/dev/full"):
        fake.device_node(node)
    return HostRoot(fake.root)


def test_host_path_of_the_root_itself_is_slash() -> None:
    assert HostRoot("/").host_path("/") == "/"
    assert HostRoot("/").host_path("/dev/null") == "/dev/null"


def test_static_source(root: HostRoot) -> None:
    found = find(resource("name: a.com/null\nstatic: {count: 2, paths: [/dev/null]}"), root)
    assert [f.host_paths for f in found] == [("/dev/null",), ("/dev/null",)]


def test_glob_source(root: HostRoot) -> None:
    config = resource('name: a.com/mem\nglob: {paths: ["/dev/null", "/dev/ful[l]", "/dev/zer*"]}')
    found = find(config, root)
    assert {f.key: f.host_paths for f in found} == {
        "full": ("/dev/full",),
        "null": ("/dev/null",),
        "zero": ("/dev/zero",),
    }
    assert root.root / "dev" in watch_dirs(root, watched_patterns(config))


def _vendors_on_this_node(bus: str, attribute: str) -> dict[str, set[str]]:
    """Vendor ID -> device names, read directly from ``/sys`` (no kubedevice code)."""
    vendors: dict[str, set[str]] = {}
    for entry in sorted(os.listdir(bus)) if os.path.isdir(bus) else []:
        try:
            vendor = Path(bus, entry, attribute).read_text().strip().lower().removeprefix("0x")
        except OSError:
            continue
        vendors.setdefault(vendor, set()).add(entry)
    return vendors


def test_pci_source_finds_this_nodes_functions() -> None:
    vendors = _vendors_on_this_node(PCI, "vendor")
    if not vendors:
        pytest.skip("this node exposes no PCI functions in /sys")
    vendor, addresses = sorted(vendors.items(), key=lambda item: -len(item[1]))[0]
    found = find(resource(f'name: a.com/pci\npci: {{vendor: "{vendor}"}}'), HostRoot("/"))
    assert {f.attributes["pciAddress"]["string"] for f in found} == addresses
    assert all(f.sysfs == f"{PCI}/{f.attributes['pciAddress']['string']}" for f in found)


def test_usb_source_matches_this_nodes_sysfs() -> None:
    vendors = _vendors_on_this_node(USB, "idVendor")
    vendor = next(iter(sorted(vendors)), "ffff")
    found = find(resource(f'name: a.com/usb\nusb: {{vendor: "{vendor}"}}'), HostRoot("/"))
    nodes = {
        f"/dev/bus/usb/{int(Path(USB, d, 'busnum').read_text()):03d}/{int(Path(USB, d, 'devnum').read_text()):03d}"
        for d in vendors.get(vendor, ())
    }
    assert {p for f in found for p in f.host_paths} == {n for n in nodes if os.path.exists(n)}


def test_discover_command_with_default_host_root(tmp_path: Path) -> None:
    """The config's default host root is ``/``: ``discover`` of a glob must list the match."""
    config = tmp_path / "c.yaml"
    config.write_text('resources:\n  - name: a.com/tty\n    glob: {paths: ["/dev/null"]}\n')
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "discover", "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert '"/dev/null"' in result.stdout
    assert globlib.glob("/dev/null") == ["/dev/null"]
