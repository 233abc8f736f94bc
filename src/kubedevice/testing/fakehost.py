"""A fake sysfs/devfs tree in a directory, laid out like the kernel's.

Tests, benchmarks and ``docs/sources.md`` build node hardware with it and point kubedevice at
the directory as its host root. Device nodes are regular files (no ``mknod`` privilege
needed); the sysfs layout matches the kernel's: ``/sys/bus/<bus>/devices/<name>`` are
symlinks into ``/sys/devices/...``, attributes are one-line files, ``iommu_group`` and
``driver`` are symlinks whose last component is the group number or driver name.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_PCI_ROOT = "/sys/devices/pci0000:00"
_USB_HOST = _PCI_ROOT + "/0000:00:14.0"


class FakeHost:
    """Builds a node's ``/dev`` and ``/sys`` under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, host_path: str) -> Path:
        return self.root / host_path.lstrip("/")

    def write(self, host_path: str, content: str = "") -> Path:
        """Create a file (a device node or a sysfs attribute), its directories included."""
        local = self.path(host_path)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(content)
        return local

    def device_node(self, host_path: str) -> str:
        """A character device stand-in; returns its host path."""
        self.write(host_path)
        return host_path

    def symlink(self, host_path: str, target: str) -> None:
        local = self.path(host_path)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.symlink_to(target)

    def remove(self, host_path: str) -> None:
        """Remove a file, a symlink or a whole directory (a device unplugged)."""
        local = self.path(host_path)
        if local.is_symlink() or local.is_file():
            local.unlink()
        elif local.is_dir():
            shutil.rmtree(local)

    def _attributes(self, sys_dir: str, **attributes: str) -> None:
        for name, value in attributes.items():
            self.write(f"{sys_dir}/{name}", value + "\n")

    def _bus_link(self, bus: str, name: str, sys_dir: str) -> None:
        link = f"/sys/bus/{bus}/devices/{name}"
        self.path(link).parent.mkdir(parents=True, exist_ok=True)
        self.symlink(link, os.path.relpath(sys_dir, f"/sys/bus/{bus}/devices"))

    # -- USB ------------------------------------------------------------------------
    def usb_device(
        self,
        bus: int,
        device: int,
        vendor: str,
        product: str,
        *,
        port: str | None = None,
        serial: str | None = None,
        create_node: bool = True,
    ) -> str:
        """A USB device on ``bus`` (root hub and an interface included); returns its sysfs name."""
        self._usb_root_hub(bus)
        name = port or f"{bus}-{device}"
        sys_dir = f"{_USB_HOST}/usb{bus}/{name}"
        attributes = {
            "idVendor": vendor,
            "idProduct": product,
            "busnum": str(bus),
            "devnum": str(device),
            "dev": f"189:{(bus - 1) * 128 + device - 1}",
        }
        if serial is not None:
            attributes["serial"] = serial
        self._attributes(sys_dir, **attributes)
        self._attributes(f"{sys_dir}/{name}:1.0", bInterfaceClass="ff", bInterfaceNumber="00")
        self._bus_link("usb", name, sys_dir)
        self._bus_link("usb", f"{name}:1.0", f"{sys_dir}/{name}:1.0")
        if create_node:
            self.device_node(f"/dev/bus/usb/{bus:03d}/{device:03d}")
        return name

    def _usb_root_hub(self, bus: int) -> None:
        sys_dir = f"{_USB_HOST}/usb{bus}"
        if self.path(sys_dir).exists():
            return
        self._attributes(sys_dir, idVendor="1d6b", idProduct="0002", busnum=str(bus), devnum="1")
        self._bus_link("usb", f"usb{bus}", sys_dir)
        self.device_node(f"/dev/bus/usb/{bus:03d}/001")

    def unplug_usb(self, name: str) -> None:
        """Remove a USB device the way the kernel does: device node, bus link, sysfs directory."""
        sys_dir = self.path(f"/sys/bus/usb/devices/{name}").resolve()
        bus = int((sys_dir / "busnum").read_text())
        device = int((sys_dir / "devnum").read_text())
        self.remove(f"/dev/bus/usb/{bus:03d}/{device:03d}")
        self.remove(f"/sys/bus/usb/devices/{name}:1.0")
        self.remove(f"/sys/bus/usb/devices/{name}")
        shutil.rmtree(sys_dir)

    # -- PCI ------------------------------------------------------------------------
    def pci_device(
        self,
        address: str,
        vendor: str,
        device: str,
        pci_class: str,
        *,
        numa_node: int = -1,
        iommu_group: int | None = None,
        driver: str | None = None,
    ) -> str:
        """A PCI function (``pci_class`` is the 6 hex digits of ``class``); returns its address."""
        sys_dir = f"{_PCI_ROOT}/{address}"
        self._attributes(
            sys_dir,
            vendor=f"0x{vendor}",
            device=f"0x{device}",
            # the kernel also has subsystem_vendor, revision, ... that sources must ignore
            subsystem_vendor=f"0x{vendor}",
            numa_node=str(numa_node),
            **{"class": f"0x{pci_class}"},
        )
        self._bus_link("pci", address, sys_dir)
        if iommu_group is not None:
            group_dir = f"/sys/kernel/iommu_groups/{iommu_group}"
            self.path(group_dir + "/devices").mkdir(parents=True, exist_ok=True)
            self.symlink(f"{group_dir}/devices/{address}", os.path.relpath(sys_dir, group_dir + "/devices"))
            self.symlink(f"{sys_dir}/iommu_group", os.path.relpath(group_dir, sys_dir))
        if driver is not None:
            driver_dir = f"/sys/bus/pci/drivers/{driver}"
            self.path(driver_dir).mkdir(parents=True, exist_ok=True)
            self.symlink(f"{sys_dir}/driver", os.path.relpath(driver_dir, sys_dir))
        if driver == "vfio-pci" and iommu_group is not None:
            self.device_node("/dev/vfio/vfio")
            self.device_node(f"/dev/vfio/{iommu_group}")
        return address

    def numa_distances(self, matrix: list[list[int]]) -> None:
        """``/sys/devices/system/node/node<i>/distance`` rows (the SLIT the kernel exposes)."""
        for node, row in enumerate(matrix):
            self.write(f"/sys/devices/system/node/node{node}/distance", " ".join(map(str, row)) + "\n")
