"""sysfs and devfs entries vanishing while discovery walks them (USB and PCI, a real fake tree).

A thread plugs and unplugs devices the way the kernel does while discovery runs over and over:
no exception may escape discovery, every answer names only devices that existed at some point,
and once the churn stops the answer is exact.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from kubedevice.sources.discovery import find
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

ROUNDS = 400


def churn_usb(host: FakeHost, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        port = 2 + n % 6
        name = host.usb_device(1, port, "1a6e", "089a", port=f"1-{port}")
        host.unplug_usb(name)
        n += 1


def churn_pci(host: FakeHost, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        address = f"0000:3b:00.{n % 6}"
        host.pci_device(address, "10ee", "9038", "120000", numa_node=0, iommu_group=10 + n % 6, driver="vfio-pci")
        sys_dir = host.path(f"/sys/bus/pci/devices/{address}").resolve()
        host.remove(f"/sys/bus/pci/devices/{address}")
        host.remove(f"/sys/kernel/iommu_groups/{10 + n % 6}/devices/{address}")
        shutil.rmtree(sys_dir)
        n += 1


CASES = {
    "usb": ({"name": "example.com/usb", "usb": {"vendor": "1a6e", "product": "089a"}}, churn_usb, "usb-1-"),
    "pci": (
        {"name": "example.com/fpga", "pci": {"vendor": "10ee", "class": "1200", "vfio": True}},
        churn_pci,
        "0000:3b:00.",
    ),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_discovery_while_entries_vanish(tmp_path: Path, kind: str) -> None:
    raw, churn, prefix = CASES[kind]
    fake = FakeHost(tmp_path / "root")
    if kind == "usb":
        fake.usb_device(1, 9, "1a6e", "089a", port="1-9")  # one device that stays
    else:
        fake.pci_device("0000:5e:00.0", "10ee", "9038", "120000", iommu_group=50, driver="vfio-pci")
    config, host = ResourceConfig.model_validate(raw), HostRoot(fake.root)
    stop = threading.Event()
    worker = threading.Thread(target=churn, args=(fake, stop))
    worker.start()
    try:
        for _ in range(ROUNDS):
            keys = {f.key for f in find(config, host)}
            stayer = "usb-1-9" if kind == "usb" else "0000:5e:00.0"
            assert stayer in keys
            assert all(k == stayer or k.startswith(prefix) or k.startswith(f"usb-{prefix[4:]}") for k in keys), keys
    finally:
        stop.set()
        worker.join(10)
    assert {f.key for f in find(config, host)} == {"usb-1-9" if kind == "usb" else "0000:5e:00.0"}
