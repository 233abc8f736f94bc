"""What a template may say about one device: what discovery found, and facts read on demand.

The DRA driver's ``attributes``/``capacity`` templates and the device plugin's env templates
name the same facts, so both read them here: the bound ``driver`` (the ``driver`` link of the
device's sysfs directory), its ``driver_version`` (``/sys/module/<module>/version``, the module
found through ``driver/module``), and a PCI device's ``vendor_name`` and ``model`` from the
host's PCI ID database. The database is the host's own ``pci.ids`` (pciutils or hwdata install
it), read through the host root, so names follow the node's package updates; a host without
one (a minimal OS: Talos, Bottlerocket, Container-Optimized OS) falls back to the file
``$KUBEDEVICE_PCI_IDS`` names, which the image sets to its own copy (Debian's ``pci.ids``
package). Without either the facts are unavailable (:class:`FactUnavailable` names the paths
looked at).

A fact is read when a template asks for it, at most once per :class:`DeviceFacts`; the
database is scanned once per vendor asked for and kept while the file is unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache

from ..errors import KubedeviceError
from .base import Found
from .hostroot import HostRoot
from .registry import SOURCES

#: Where distributions put the PCI ID database (pciutils, hwdata), looked up in this order.
PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids")
#: The environment variable naming a PCI ID database for hosts without one (the image's copy).
FALLBACK_ENV = "KUBEDEVICE_PCI_IDS"
#: The facts read on demand, by the name a per-device template uses.
READ_FACTS = ("driver", "driver_version", "vendor_name", "model")
#: Their names in env templates (over the allocated set: one comma-separated entry per device ID).
ENV_FACTS = {f"{name}s": name for name in READ_FACTS}
#: Every field of a per-device template (DRA attributes and capacity).
DEVICE_FIELDS = frozenset({"id", "vendor", "product", "serial", "pci_address", "numa_node", "devlink", *READ_FACTS})
#: Fields only a PCI device has (its IDs look the names up); the others need a sysfs directory.
PCI_FIELDS = frozenset({"pci_address", "vendor_name", "model"})
SYSFS_FIELDS = frozenset({"driver", "driver_version"})


class FactUnavailable(KubedeviceError):
    """A fact that cannot be read; ``path`` is the host file at fault (for the one log line)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


def attribute_text(found: Found, name: str) -> str:
    """An attribute's value as text (``{"string": "10ee"}`` → ``10ee``); empty when the device has none."""
    value = found.attributes.get(name)
    return str(next(iter(value.values()))) if value else ""


class DeviceFacts(Mapping[str, str]):
    """The template fields of one device; a fact that cannot be read raises :class:`FactUnavailable`."""

    def __init__(self, host: HostRoot, found: Found, source_kind: str) -> None:
        self._host, self._found, self._kind = host, found, source_kind
        self._read: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        if name not in DEVICE_FIELDS:
            raise KeyError(name)
        if name not in self._read:
            self._read[name] = self._fact(name)
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(DEVICE_FIELDS))

    def __len__(self) -> int:
        return len(DEVICE_FIELDS)

    def get_or_empty(self, name: str) -> str:
        """The fact, or an empty string when it cannot be read (as env templates show a missing serial)."""
        try:
            return self[name]
        except FactUnavailable:
            return ""

    def _fact(self, name: str) -> str:
        found = self._found
        if name == "id":
            return found.key
        if name == "numa_node":
            if not found.numa_nodes:
                raise FactUnavailable(self._sysfs_file("numa_node"), "the device has no NUMA node")
            return str(found.numa_nodes[0])
        if name in ("driver", "driver_version"):
            driver = self._driver()
            return driver if name == "driver" else self._driver_version(driver)
        if name in ("vendor_name", "model"):
            vendor, device = self._ids("vendor"), self._ids("device")
            vendor_name, model = pci_names(self._host, vendor, device)
            if name == "vendor_name":
                return vendor_name
            if model is None:
                raise FactUnavailable(pci_ids_file(self._host)[0], f"has no device {vendor}:{device}")
            return model
        renamed = {"product": SOURCES[self._kind].product_attribute, "pci_address": "pciAddress"}
        attribute = renamed.get(name, name)
        text = attribute_text(found, attribute)
        if not text:
            raise FactUnavailable(self._sysfs_file(attribute), f"the device has no {name}")
        return text

    def _sysfs_file(self, name: str) -> str:
        return f"{self._found.sysfs}/{name}" if self._found.sysfs else f"device {self._found.key} ({name})"

    def _ids(self, name: str) -> str:
        if self._kind != "pci":
            raise FactUnavailable(self._sysfs_file(name), "only PCI devices have names in pci.ids")
        return attribute_text(self._found, name)

    def _driver(self) -> str:
        found = self._found
        driver = attribute_text(found, "driver") or (
            self._host.link_name(f"{found.sysfs}/driver") if found.sysfs else None
        )
        if not driver:
            raise FactUnavailable(self._sysfs_file("driver"), "no driver is bound to the device")
        return driver

    def _driver_version(self, driver: str) -> str:
        """``/sys/module/<module>/version``: the module behind ``driver/module`` (``vfio-pci`` is
        module ``vfio_pci``), else the driver's own name."""
        module = self._host.link_name(f"{self._found.sysfs}/driver/module") or driver.replace("-", "_")
        path = f"/sys/module/{module}/version"
        try:
            return self._host.read(path)
        except OSError as err:
            raise FactUnavailable(path, err.strerror or "cannot be read") from None


def env_facts(host: HostRoot, source_kind: str, devices: Sequence[Found]) -> dict[str, str]:
    """The read facts' env fields: per device, comma-separated; a fact that cannot be read is empty."""
    each = [DeviceFacts(host, found, source_kind) for found in devices]
    return {plural: ",".join(facts.get_or_empty(name) for facts in each) for plural, name in ENV_FACTS.items()}


def pci_ids_file(host: HostRoot) -> tuple[str, str]:
    """The PCI ID database to read, as named in messages and as opened: the first present under
    the host root, else the file ``$KUBEDEVICE_PCI_IDS`` names (the image's copy)."""
    for path in PCI_IDS_PATHS:
        if host.exists(path):
            return path, str(host.local(host.resolve(path)))
    fallback = os.environ.get(FALLBACK_ENV)
    if fallback and os.path.isfile(fallback):
        return f"{fallback} (${FALLBACK_ENV}: the host has none)", fallback
    looked = ", ".join(PCI_IDS_PATHS) + (f"; nor ${FALLBACK_ENV}'s {fallback}" if fallback else "")
    raise FactUnavailable(PCI_IDS_PATHS[0], f"no PCI ID database on the host (looked in {looked})")


def pci_names(host: HostRoot, vendor: str, device: str) -> tuple[str, str | None]:
    """The vendor's and the device's names in the host's ``pci.ids`` (a vendor's newest devices
    may be missing from an older file: None)."""
    path, local = pci_ids_file(host)
    try:
        stat = os.stat(local)
        block = _vendor_block(local, stat.st_mtime_ns, stat.st_size, vendor.lower())
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "is not UTF-8 text"
        raise FactUnavailable(path, reason or "cannot be read") from None
    if block is None:
        raise FactUnavailable(path, f"has no vendor {vendor}")
    vendor_name, devices = block
    return vendor_name, devices.get(device.lower())


@lru_cache(maxsize=32)
def _vendor_block(local: str, _mtime_ns: int, _size: int, vendor: str) -> tuple[str, dict[str, str]] | None:
    """One vendor's name and device names; the file's time and size in the key drop a stale copy.

    The format (pciutils' ``pci.ids``): ``vvvv  name`` at the start of a line, its devices as
    ``\\tdddd  name``, subsystems indented twice, and the class list from the first ``C `` line.
    """
    name: str | None = None
    devices: dict[str, str] = {}
    with open(local, encoding="utf-8") as lines:
        for line in lines:
            if name is None:
                if line.startswith(vendor) and line[4:6] == "  ":
                    name = line[6:].strip()
                elif line.startswith("C "):
                    return None
            elif line.startswith("\t\t") or line.startswith("#"):
                continue
            elif line.startswith("\t"):
                devices[line[1:5].lower()] = line[7:].strip()
            elif line.strip():
                break
    return (name, devices) if name is not None else None
