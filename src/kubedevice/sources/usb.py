"""``usb``: devices by vendor/product (and serial) from ``/sys/bus/usb/devices``.

Each match grants its ``/dev/bus/usb/BBB/DDD`` node (from ``busnum``/``devnum``). The ID is the
sysfs port path (``usb-1-1.2``): stable across restarts and re-plugs into the same port.
"""

from __future__ import annotations

from .base import Found, int_attr, log, stable_key, string_attr
from .hostroot import HostRoot
from .schema import UsbConfig
from .sysfs import attribute, numa_nodes, scan_bus

DEVICES = "/sys/bus/usb/devices"


def discover(config: UsbConfig, host: HostRoot, stem: str) -> list[Found]:
    found = scan_bus(host, DEVICES, lambda name: _read(config, host, name))
    if not found:
        log.warning("%s: no USB device %s:%s present", stem, config.vendor, config.product or "*")
    return found


def _read(config: UsbConfig, host: HostRoot, name: str) -> Found | None:
    if ":" in name:  # an interface (1-1:1.0), not a device
        return None
    sys_dir = f"{DEVICES}/{name}"
    vendor = (attribute(host, sys_dir, "idVendor") or "").lower()
    product = (attribute(host, sys_dir, "idProduct") or "").lower()
    if vendor != config.vendor or (config.product is not None and product != config.product):
        return None
    serial = attribute(host, sys_dir, "serial")
    if config.serial is not None and serial != config.serial:
        return None
    bus, dev = attribute(host, sys_dir, "busnum"), attribute(host, sys_dir, "devnum")
    if not (bus and dev and bus.isdigit() and dev.isdigit()):
        log.warning("USB device %s has no bus/device number; skipped", name)
        return None
    node = f"/dev/bus/usb/{int(bus):03d}/{int(dev):03d}"
    if not host.exists(node):
        log.info("USB device %s: %s not created yet", name, node)
        return None
    attributes = {
        "vendor": string_attr(vendor),
        "product": string_attr(product),
        "bus": int_attr(int(bus)),
        "device": int_attr(int(dev)),
    }
    if serial:
        attributes["serial"] = string_attr(serial)
    nodes = numa_nodes(host, sys_dir)
    if nodes:
        attributes["numaNode"] = int_attr(nodes[0])
    return Found(stable_key(f"usb-{name}"), (host.resolve(node),), nodes, sys_dir, attributes)


def watched(config: UsbConfig) -> list[str]:
    """Device nodes appear under ``/dev/bus/usb`` (sysfs itself sends no inotify events)."""
    return ["/dev/bus/usb/*/*", f"{DEVICES}/*"]
