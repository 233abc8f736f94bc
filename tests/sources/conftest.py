"""Fake node trees for the source tests (built with the same helper the docs use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

FOUR_CONFIGS = """\
resources:
  - name: example.com/null
    static: {count: 4, paths: [/dev/null]}
  - name: example.com/serial
    glob: {paths: ["/dev/ttyUSB*"]}
  - name: example.com/coral
    usb: {vendor: "1a6e", product: "089a"}
  - name: example.com/fpga
    pci: {vendor: "10ee", class: "1200", vfio: true}
"""


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path / "root")


def resource(text: str, **overrides: Any) -> ResourceConfig:
    data = yaml.safe_load(text)
    data.update(overrides)
    return ResourceConfig.model_validate(data)


def populate(host: FakeHost) -> None:
    """A node with everything the four configs look for, plus decoys they must ignore."""
    host.device_node("/dev/null")
    host.device_node("/dev/ttyUSB0")
    host.device_node("/dev/ttyUSB1")
    host.device_node("/dev/ttyS0")
    host.usb_device(1, 4, "1a6e", "089a", port="1-2", serial="coral-a")
    host.usb_device(1, 7, "18d1", "9302", port="1-3")  # a Coral after firmware load: other product
    host.pci_device("0000:3b:00.0", "10ee", "903f", "120000", numa_node=1, iommu_group=41, driver="vfio-pci")
    host.pci_device("0000:5e:00.0", "10ee", "5020", "058000", numa_node=0, iommu_group=42, driver="vfio-pci")
    host.pci_device("0000:af:00.0", "8086", "0d5c", "120000", numa_node=1, iommu_group=43, driver="vfio-pci")
