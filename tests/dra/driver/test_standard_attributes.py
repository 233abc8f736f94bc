"""``resource.kubernetes.io/pciBusID`` and ``pcieRoot`` on a fake sysfs tree, computed as
``k8s.io/dynamic-resource-allocation/deviceattribute`` computes them, and published by the driver."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubedevice.dra.cli import app
from kubedevice.dra.deviceattribute import PCI_BUS_ID, PCIE_ROOT, PciAttributeError, pcie_root, standard_attributes
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.models import load_text
from kubedevice.dra.validation import validate
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

DRIVER = "gpu.example.com"


def behind_bridge(host: FakeHost, address: str, root: str, bridge: str) -> None:
    """Move a function from the fake host's default root complex to ``/sys/devices/<root>/<bridge>/``,
    as a device behind a root port sits on real machines, and point its bus link there."""
    old = host.path(f"/sys/devices/pci0000:00/{address}")
    new_dir = f"/sys/devices/{root}/{bridge}/{address}"
    host.path(new_dir).parent.mkdir(parents=True)
    shutil.move(old, host.path(new_dir))
    link = f"/sys/bus/pci/devices/{address}"
    host.remove(link)
    host.symlink(link, os.path.relpath(new_dir, "/sys/bus/pci/devices"))


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    fake = FakeHost(tmp_path / "root")
    fake.pci_device("0000:3b:00.0", "10de", "20b0", "030200", numa_node=0, iommu_group=41, driver="vfio-pci")
    fake.pci_device("0000:af:00.0", "10de", "20b0", "030200", numa_node=1, iommu_group=42, driver="vfio-pci")
    behind_bridge(fake, "0000:af:00.0", "pci0000:ae", "0000:ae:00.0")
    return fake


def test_the_root_complex_is_the_first_directory_below_sys_devices(host: FakeHost) -> None:
    hostroot = HostRoot(host.root)
    assert pcie_root(hostroot, "0000:3b:00.0") == "pci0000:00"
    assert pcie_root(hostroot, "0000:af:00.0") == "pci0000:ae"


@pytest.mark.parametrize(
    ("bus_id", "link", "message"),
    [
        ("0000:3B:00.0", None, "invalid PCI Bus ID format: 0000:3B:00.0"),  # upstream wants lowercase hex
        ("3b:00.0", None, "invalid PCI Bus ID format: 3b:00.0"),
        ("", None, "PCI Bus ID cannot be empty"),
        ("0000:01:00.0", None, "failed to read symlink for PCI Bus ID bus/pci/devices/0000:01:00.0"),
        ("0000:02:00.0", "../../../devices/platform/0000:02:00.0",
         "it must start with devices/pci: devices/platform/0000:02:00.0"),
        ("0000:03:00.0", "../../../devices/pci0000:00/0000:04:00.0", "it must end with 0000:03:00.0"),
        ("0000:05:00.0", "/sys/devices/pci0000:00/0000:05:00.0", "it must start with devices/pci"),  # absolute
    ],
)  # fmt: skip
def test_bus_ids_and_links_upstream_refuses(host: FakeHost, bus_id: str, link: str | None, message: str) -> None:
    if link is not None:
        host.symlink(f"/sys/bus/pci/devices/{bus_id}", link)
    with pytest.raises(PciAttributeError, match=message):
        pcie_root(HostRoot(host.root), bus_id)


RESOURCE = 'name: example.com/gpu\npci: {vendor: "10de", vfio: true}\n'


def test_the_driver_publishes_them_beside_its_own_attributes(host: FakeHost) -> None:
    driver = DraDriver(DRIVER, [ConfiguredPlugin(ResourceConfig.model_validate(yaml.safe_load(RESOURCE)), host.root)])
    [slice_] = driver.slices("node-1")
    assert validate(slice_) == []
    published = {
        d.name: {k: a.string for k, a in d.attributes.items() if k in (PCI_BUS_ID, PCIE_ROOT, "pciAddress", "id")}
        for d in slice_.spec.devices
    }
    assert list(published.values()) == [
        {"id": "0000:3b:00.0", "pciAddress": "0000:3b:00.0", PCI_BUS_ID: "0000:3b:00.0", PCIE_ROOT: "pci0000:00"},
        {"id": "0000:af:00.0", "pciAddress": "0000:af:00.0", PCI_BUS_ID: "0000:af:00.0", PCIE_ROOT: "pci0000:ae"},
    ]


def test_a_root_that_cannot_be_found_leaves_the_bus_id(host: FakeHost) -> None:
    """Upstream's two functions are independent: a broken link costs the root, not the bus ID."""
    link = "/sys/bus/pci/devices/0000:3b:00.0"
    host.remove(link)
    host.symlink(link, "../../../devices/platform/0000:3b:00.0")
    found = standard_attributes(HostRoot(host.root), {"pciAddress": {"string": "0000:3b:00.0"}})
    assert found == {PCI_BUS_ID: {"string": "0000:3b:00.0"}}
    assert standard_attributes(HostRoot(host.root), {"id": {"string": "null0"}}) == {}


def test_dra_slices_previews_them(host: FakeHost, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"resources:\n  - {RESOURCE.replace(chr(10), chr(10) + '    ').rstrip()}\n")
    args = ["slices", "--config", str(config), "--host-root", str(host.root), "--node", "n", "--driver", DRIVER]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    [slice_] = load_text(result.output)
    assert [d.attributes[PCIE_ROOT].string for d in slice_.spec.devices] == ["pci0000:00", "pci0000:ae"]
