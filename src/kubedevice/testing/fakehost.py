"""A fake sysfs/devfs tree in a directory, laid out like the kernel's.

Tests, benchmarks and ``docs/sources.md`` build node hardware with it and point kubedevice at
the directory as its host root. Device nodes are regular files (no ``mknod`` privilege
needed); the sysfs layout matches the kernel's: ``/sys/bus/<bus>/devices/<name>`` are
symlinks into ``/sys/devices/...``, attributes are one-line files, ``iommu_group`` and
``driver`` are symlinks whose last component is the group number or driver name.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

_PCI_ROOT = "/sys/devices/pci0000:00"
_USB_HOST = _PCI_ROOT + "/0000:00:14.0"
_UDEV_DATA = "/run/udev/data"
#: Directories that group class devices (``tty/``, ``hidraw/``) rather than being devices themselves.
_CLASS_DIRS = {"tty", "video4linux", "hidraw", "input", "sound"}


class FakeHost:
    """Builds a node's ``/dev`` and ``/sys`` under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._sound_minor = 0

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
        """Remove a USB device the way the kernel does: class nodes (with udev's entries and links),
        device node, bus links of the device and its interfaces, sysfs directory."""
        sys_dir = self.path(f"/sys/bus/usb/devices/{name}").resolve()
        bus = int((sys_dir / "busnum").read_text())
        device = int((sys_dir / "devnum").read_text())
        for uevent in sorted(sys_dir.rglob("uevent")):
            self._remove_class_device(uevent.parent)
        self.remove(f"/dev/bus/usb/{bus:03d}/{device:03d}")
        for interface in sorted(self.path("/sys/bus/usb/devices").glob(f"{name}:*")):
            interface.unlink()
        self.remove(f"/sys/bus/usb/devices/{name}")
        shutil.rmtree(sys_dir)

    def usb_interface(self, name: str, number: int, interface_class: str = "ff") -> str:
        """Interface ``<name>:1.<number>`` of a USB device (kept if it exists); returns its sysfs path."""
        local = self.path(f"/sys/bus/usb/devices/{name}").resolve().relative_to(self.root.resolve())
        interface = f"/{local.as_posix()}/{name}:1.{number}"
        if not self.path(interface).exists():
            self._attributes(interface, bInterfaceClass=interface_class, bInterfaceNumber=f"{number:02x}")
            self._bus_link("usb", f"{name}:1.{number}", interface)
        return interface

    def usb_class_node(self, name: str, devname: str, *, interface: int = 0, create_node: bool = True) -> str:
        """A class device below interface ``interface`` of USB device ``name``, laid out as the kernel does
        for its kind, which ``devname`` tells: ``ttyACM0`` (cdc_acm: ``tty/ttyACM0``), ``ttyUSB0``
        (usb-serial: ``ttyUSB0/tty/ttyUSB0``), ``video0``, ``hidraw0`` and ``input/event3`` (below the
        interface's HID device), ``snd/controlC1`` and ``snd/pcmC1D0p`` (``sound/card1/…``).

        ``create_node=False`` leaves out the ``/dev`` node (devtmpfs creates it last). Returns its
        ``/dev`` path.
        """
        top = self.usb_interface(name, interface, "02" if devname.startswith("tty") else "ff")
        subsystem, relative, major, minor = self._class_layout(name, devname, interface)
        for parent in PurePosixPath(relative).parents:  # the kernel's intermediate devices, no node
            if parent.parts and parent.name not in _CLASS_DIRS and not self.path(f"{top}/{parent}/uevent").exists():
                self.write(f"{top}/{parent}/uevent", "")
        return self.class_device(f"{top}/{relative}", devname, major, minor, subsystem, create_node=create_node)

    def _class_layout(self, name: str, devname: str, interface: int) -> tuple[str, str, int, int]:
        """``(subsystem, path below the interface, major, minor)`` of a class node named ``devname``."""
        leaf = PurePosixPath(devname).name
        number = int(re.sub(r"^\D*(\d+).*$", r"\1", leaf) or 0)
        sys_dir = self.path(f"/sys/bus/usb/devices/{name}")
        hid = f"0003:{(sys_dir / 'idVendor').read_text().strip().upper()}:"
        hid += f"{(sys_dir / 'idProduct').read_text().strip().upper()}.{interface + 1:04X}"
        if leaf.startswith("ttyACM"):
            return "tty", f"tty/{leaf}", 166, number
        if leaf.startswith("tty"):
            return "tty", f"{leaf}/tty/{leaf}", 188, number
        if leaf.startswith("video"):
            return "video4linux", f"video4linux/{leaf}", 81, number
        if leaf.startswith("hidraw"):
            return "hidraw", f"{hid}/hidraw/{leaf}", 241, number
        if leaf.startswith("event"):
            return "input", f"{hid}/input/input{number + 10}/{leaf}", 13, 64 + number
        card = int(re.sub(r"^\D+C(\d+).*$", r"\1", leaf))
        self._sound_minor += 1
        return "sound", f"sound/card{card}/{leaf}", 116, self._sound_minor

    def class_device(
        self, sys_dir: str, devname: str, major: int, minor: int, subsystem: str, *, create_node: bool = True
    ) -> str:
        """A character class device at ``sys_dir``: its ``uevent``, ``dev``, ``subsystem`` link, the
        ``/sys/class`` and ``/sys/dev/char/M:m`` links, and its ``/dev/<devname>`` node; returns that path."""
        self.write(f"{sys_dir}/uevent", f"MAJOR={major}\nMINOR={minor}\nDEVNAME={devname}\n")
        self.write(f"{sys_dir}/dev", f"{major}:{minor}\n")
        class_dir = f"/sys/class/{subsystem}"
        self.path(class_dir).mkdir(parents=True, exist_ok=True)
        self.symlink(f"{sys_dir}/subsystem", os.path.relpath(class_dir, sys_dir))
        leaf = PurePosixPath(sys_dir).name
        self.symlink(f"{class_dir}/{leaf}", os.path.relpath(sys_dir, class_dir))
        self.symlink(f"/sys/dev/char/{major}:{minor}", os.path.relpath(sys_dir, "/sys/dev/char"))
        node = f"/dev/{devname}"
        if create_node:
            self.device_node(node)
        return node

    def _remove_class_device(self, local_dir: Path) -> None:
        """A class device's ``/dev`` node, its links and its udev entry (with udev's symlinks)."""
        fields = dict(line.partition("=")[::2] for line in (local_dir / "uevent").read_text().splitlines())
        if "DEVNAME" not in fields:
            return
        devnum = f"{fields['MAJOR']}:{fields['MINOR']}"
        self.remove_udev_entry(f"c{devnum}")
        self.remove(f"/dev/{fields['DEVNAME']}")
        self.remove(f"/sys/dev/char/{devnum}")
        subsystem = local_dir / "subsystem"
        if subsystem.is_symlink():
            self.remove(f"/sys/class/{os.path.basename(os.readlink(subsystem))}/{local_dir.name}")

    # -- udev -----------------------------------------------------------------------
    def udev_entry(self, node: str, *, links: Sequence[str] = (), properties: Mapping[str, str] | None = None) -> str:
        """udev's database entry of the class device whose ``/dev`` path is ``node``, and its symlinks.

        Written as udev does: to a temp file renamed into ``/run/udev/data/c<major>:<minor>`` (so a
        watcher sees a moved-to, and never half a file); ``links`` are absolute (``/dev/serial/by-id/…``),
        stored relative to ``/dev`` in ``S:`` lines in the given order and created as relative symlinks.
        Returns the entry's host path.
        """
        devnum = self._devnum_of(node)
        lines = [f"S:{link.removeprefix('/dev/')}" for link in links]
        lines += ["I:4180211", *(f"E:{k}={v}" for k, v in (properties or {}).items()), "G:systemd", "Q:systemd", "V:1"]
        entry = f"{_UDEV_DATA}/c{devnum}"
        temp = self.write(f"{_UDEV_DATA}/.#c{devnum}new", "\n".join(lines) + "\n")
        for link in links:
            self.remove(link)
            self.symlink(link, os.path.relpath(node, PurePosixPath(link).parent))
        temp.rename(self.path(entry))
        return entry

    def remove_udev_entry(self, name: str) -> None:
        """Delete database entry ``name`` (``c188:0``) and the symlinks it lists, as udev does on remove."""
        entry = self.path(f"{_UDEV_DATA}/{name}")
        if not entry.is_file():
            return
        for line in entry.read_text().splitlines():
            if line.startswith("S:"):
                self.remove(f"/dev/{line[2:]}")
        entry.unlink()

    def _devnum_of(self, node: str) -> str:
        """``major:minor`` of a class device made by :meth:`class_device`, found through ``/sys/dev/char``."""
        devname = node.removeprefix("/dev/")
        for link in sorted(self.path("/sys/dev/char").iterdir()):
            uevent = link / "uevent"
            if uevent.is_file() and f"DEVNAME={devname}\n" in uevent.read_text():
                return link.name
        raise ValueError(f"no class device has the node {node}")

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
        parent: str | None = None,
        root_bus: str = "pci0000:00",
    ) -> str:
        """A PCI function (``pci_class`` is the 6 hex digits of ``class``); returns its address.

        ``parent`` is the address of the bridge (a switch's downstream port) it sits below, as
        ``drivers/pci/probe.c`` nests a bus's devices in its bridge's directory; without one it sits
        on the host bridge ``root_bus`` (``pci0000:00``, or ``pci0000:80`` on the second socket).
        """
        sys_dir = f"{self.pci_dir(parent)}/{address}" if parent else f"/sys/devices/{root_bus}/{address}"
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
            self.bind_pci(address, driver)
        return address

    def bind_pci(self, address: str, driver: str | None) -> None:
        """Rebind a PCI function (``None``: unbind) as the kernel does, ``/dev/vfio`` nodes included.

        The group node exists while any member of the group is bound to vfio-pci; the function
        keeps its ``driver`` link and the driver's directory links back to it. The old driver's
        class devices (DRM and accel minors, ...) go with it, and devtmpfs removes their nodes;
        a new driver's are made by its builder (:meth:`pci_class_node`), as its probe would.
        """
        sys_dir = self.pci_dir(address)
        old = self.path(f"{sys_dir}/driver")
        if old.is_symlink():
            self.remove(f"/sys/bus/pci/drivers/{os.path.basename(os.readlink(old))}/{address}")
            old.unlink()
            self._remove_function_nodes(sys_dir)
        if driver is not None:
            driver_dir = f"/sys/bus/pci/drivers/{driver}"
            self.remove(f"{driver_dir}/{address}")  # a function unplugged without unbinding
            self.symlink(f"{driver_dir}/{address}", os.path.relpath(sys_dir, driver_dir))
            self.symlink(f"{sys_dir}/driver", os.path.relpath(driver_dir, sys_dir))
        group = self.path(f"{sys_dir}/iommu_group")
        if group.is_symlink():
            self._vfio_group_node(os.path.basename(os.readlink(group)))

    def pci_dir(self, address: str) -> str:
        """The function's own sysfs directory, wherever it sits in the hierarchy."""
        local = self.path(f"/sys/bus/pci/devices/{address}").resolve()
        return "/" + local.relative_to(self.root.resolve()).as_posix()

    def pci_class_node(
        self, address: str, class_dir: str, devname: str, major: int, minor: int, *, create_node: bool = True
    ) -> str:
        """A class device of a PCI function's driver: ``<function>/<class_dir>/<name>`` (``name``: the
        last part of ``devname``) with ``dev`` and
        ``uevent`` (``DEVNAME``), as ``device_create`` makes it below its parent device
        (``drivers/base/core.c``: a class device of a parent sits in a ``<class>`` glue directory).

        ``drm_node`` and ``accel_node`` name the DRM and accel minors; other drivers' classes
        (gasket's ``apex``) come through here. Returns the ``/dev`` path.
        """
        sys_dir = f"{self.pci_dir(address)}/{class_dir}/{PurePosixPath(devname).name}"
        return self.class_device(sys_dir, devname, major, minor, class_dir, create_node=create_node)

    def drm_node(self, address: str, name: str, *, create_node: bool = True) -> str:
        """A DRM minor of the function: ``card<N>`` (major 226, minor N) or ``renderD<N>`` (minor N,
        from 128), in ``<function>/drm/`` with ``DEVNAME=dri/<name>`` (``drivers/gpu/drm/drm_sysfs.c``:
        ``drm_sysfs_minor_alloc`` names them, ``drm_devnode`` puts them in ``dri/``)."""
        minor = int(name.removeprefix("renderD").removeprefix("card"))
        return self.pci_class_node(address, "drm", f"dri/{name}", 226, minor, create_node=create_node)

    def accel_node(self, address: str, index: int, *, major: int = 261, create_node: bool = True) -> str:
        """An accel minor, ``<function>/accel/accel<N>`` with ``DEVNAME=accel/accel<N>``
        (``drivers/accel/drm_accel.c``: ``accel_devnode``; its major is dynamic, 261 on most hosts)."""
        name = f"accel{index}"
        return self.pci_class_node(address, "accel", f"accel/{name}", major, index, create_node=create_node)

    def nvidia_gpu_info(self, address: str, minor: int, model: str) -> str:
        """``/proc/driver/nvidia/gpus/<address>/information`` as the NVIDIA driver prints it
        (``kernel-open/nvidia/nv-procfs.c``), and ``/dev/nvidia<minor>`` (made by nvidia-modprobe
        or the driver's udev rule, never by devtmpfs: no class device names it). Returns the node."""
        self.write(
            f"/proc/driver/nvidia/gpus/{address}/information",
            f"Model: \t\t {model}\nIRQ:   \t\t {140 + minor}\n"
            f"GPU UUID: \t GPU-{minor:08x}-0000-0000-0000-000000000000\n"
            f"Video BIOS: \t 92.00.45.00.03\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
            f"DMA Mask: \t 0x7fffffffffff\nBus Location: \t {address}\nDevice Minor: \t {minor}\n"
            "GPU Excluded:\t No\n",
        )
        return self.device_node(f"/dev/nvidia{minor}")

    def _remove_function_nodes(self, sys_dir: str) -> None:
        """Every class device below the function (not its child functions'): nodes, links, directories."""
        top = self.path(sys_dir)
        for directory, subdirs, files in os.walk(top):
            subdirs[:] = [d for d in subdirs if not re.match(r"^[0-9a-f]{4}:", d)]
            if "dev" in files:
                self._remove_class_device(Path(directory))
        for glue in [d for d in top.iterdir() if d.is_dir() and not d.is_symlink()]:
            if not re.match(r"^[0-9a-f]{4}:", glue.name) and any(glue.rglob("dev")):
                shutil.rmtree(glue)

    def _vfio_group_node(self, group: str) -> None:
        """``/dev/vfio/<group>`` (and the container node) while a member is on vfio-pci, else gone."""
        members = self.path(f"/sys/kernel/iommu_groups/{group}/devices")
        drivers = [member / "driver" for member in members.iterdir()]
        if any(d.is_symlink() and os.path.basename(os.readlink(d)) == "vfio-pci" for d in drivers):
            self.device_node("/dev/vfio/vfio")
            self.device_node(f"/dev/vfio/{group}")
        else:
            self.remove(f"/dev/vfio/{group}")

    def numa_distances(self, matrix: list[list[int]]) -> None:
        """``/sys/devices/system/node/node<i>/distance`` rows (the SLIT the kernel exposes)."""
        for node, row in enumerate(matrix):
            self.write(f"/sys/devices/system/node/node{node}/distance", " ".join(map(str, row)) + "\n")
