"""``udev``: device nodes selected by udev's database under the host root (``/run/udev/data``).

Many devices are told apart only by what udev knows of them (``ID_VENDOR_ID``,
``ID_SERIAL_SHORT``, ``ID_PATH``, ``ID_INPUT_JOYSTICK``, …) and named stably only by its symlinks
(``/dev/serial/by-id/…``). ``udev: {subsystem, match}`` selects the nodes whose subsystem and
properties match the shell-style patterns (``fnmatch``, case-sensitive), all of ``match``.

Not pyudev: it reads through libudev, which opens the live host's ``/run/udev`` and ``/sys`` and
cannot be pointed at a host root (``/host/run/udev`` in a DaemonSet) or at the fake host of the
tests. The database is small and its format stable and documented by systemd (sd-device's
``device_read_db``), so we read it directly and every host root behaves the same. A device
node's entry is the file ``c<major>:<minor>`` (``b…`` for block devices); each line is
``<key>:<value>``: ``S:`` a symlink relative to ``/dev``, ``E:`` a property ``KEY=VALUE``,
``L:`` link priority, ``I:`` initialisation time, ``G:``/``Q:`` tags, ``V:`` database version;
other keys are ignored, as udev does. The subsystem comes from sysfs (``/sys/dev/char/M:m`` →
its ``subsystem`` link) and ``DEVNAME`` from the device's ``uevent``, so the properties matched
are those ``udevadm info`` shows: ``DEVPATH``, the uevent's, ``SUBSYSTEM`` and the database's.

The device ID comes from the node, as for ``glob`` (``ttyUSB0``, ``input_event3``). ``{devlink}``
is the first of the device's symlinks, ``by-id`` before ``by-path`` before the others (each in
file order), or the node itself when udev made none. udev writes an entry to a temp file and
renames it into place, and deletes it when the device goes: inotify on the directory sees both.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ..apimachinery.validation import C_IDENTIFIER
from ..errors import FieldProblem
from .base import Found, log, stable_key, string_attr
from .fields import Model
from .hostroot import HostRoot
from .source import Source
from .sysfs import numa_nodes


def _quoted_pattern(value: Any) -> Any:
    """YAML reads ``ID_VENDOR_ID: 0403`` as the number 259: ask for quotes rather than guess the text."""
    if not isinstance(value, str):
        raise ValueError(f'{value!r} must be a quoted string: udev property values are text (write "{value}")')
    return value


class UdevConfig(Model):
    """Device nodes by udev's database (``/run/udev/data``): subsystem and properties as shell patterns."""

    subsystem: str | None = Field(default=None, min_length=1)
    match: dict[str, Annotated[str, BeforeValidator(_quoted_pattern)]] = Field(default_factory=dict)

    @field_validator("match")
    @classmethod
    def _property_names(cls, match: dict[str, str]) -> dict[str, str]:
        bad = [key for key in match if not C_IDENTIFIER.match(key)]  # udev's keys are identifiers
        if bad:
            names = ", ".join(map(repr, sorted(bad)))
            raise FieldProblem((bad[0], "[key]"), f"invalid udev property names: {names} (letters, digits and '_')")
        return match

    @model_validator(mode="after")
    def _selects(self) -> UdevConfig:
        if self.subsystem is None and not self.match:
            raise ValueError("set subsystem or match (or both): without either every device node of the host matches")
        return self


DATA = "/run/udev/data"
_DEVNUM = re.compile(r"^([cb])(\d+):(\d+)\Z")
#: Attributes that the per-device env fields read, from udev's usual properties.
_ATTRIBUTE_OF = {"vendor": "ID_VENDOR_ID", "product": "ID_MODEL_ID", "serial": "ID_SERIAL_SHORT"}


def discover(config: UdevConfig, host: HostRoot, stem: str) -> list[Found]:
    found = []
    for name in host.listdir(DATA):
        match = _DEVNUM.match(name)
        if match is None:  # a network interface (n3) or a device without a node (+usb:1-1)
            continue
        try:
            device = _read(config, host, name, match)
        except OSError:  # removed between the listing and the read: the next event rescans
            continue
        if device is not None:
            found.append(device)
    if not found:
        log.warning("%s: no udev device node matches %s", stem, _described(config))
    return sorted(found, key=lambda f: f.key)


def parse_entry(text: str) -> tuple[list[str], dict[str, str], str | None]:
    """An entry's symlinks (absolute, in file order), its ``E:`` properties and a legacy ``N:`` name."""
    links: list[str] = []
    properties: dict[str, str] = {}
    legacy_name = None
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if len(key) != 1 or not colon or not value:
            continue
        if key == "S" and ".." not in value.split("/"):
            links.append(f"/dev/{value}")
        elif key == "E":
            name, equals, content = value.partition("=")
            if name and equals:
                properties[name] = content
        elif key == "N":
            legacy_name = value
    return links, properties, legacy_name


def _read(config: UdevConfig, host: HostRoot, name: str, devnum: re.Match[str]) -> Found | None:
    links, stored, legacy_name = parse_entry(host.read(f"{DATA}/{name}"))
    if any(k in stored and not fnmatchcase(stored[k], p) for k, p in config.match.items()):
        return None  # decided without touching sysfs: the database's value wins over the uevent's
    block, major, minor = devnum.groups()
    sys_dir = host.resolve(f"/sys/dev/{'block' if block == 'b' else 'char'}/{major}:{minor}")
    if not host.local(sys_dir).is_dir():
        return None  # a stale entry: the device is gone
    uevent = _uevent(host, sys_dir)
    subsystem = host.link_name(f"{sys_dir}/subsystem") or ""
    properties = {"DEVPATH": sys_dir.removeprefix("/sys"), **uevent, "SUBSYSTEM": subsystem, **stored}
    if not _matches(config, subsystem, properties):
        return None
    devname = uevent.get("DEVNAME") or legacy_name
    if not devname or ".." in devname.split("/"):
        return None
    node = f"/dev/{devname}"
    if not host.exists(node):
        log.info("udev device %s: %s not created yet", name, node)
        return None
    links.sort(key=_preference)
    devlink = links[0] if links else node
    attributes = {"subsystem": string_attr(subsystem), "devlink": string_attr(devlink)}
    attributes.update({a: string_attr(properties[p]) for a, p in _ATTRIBUTE_OF.items() if properties.get(p)})
    details = {"subsystem": subsystem, "devlinks": links, "properties": properties}
    key = stable_key(devname.replace("/", "_"))
    numa = numa_nodes(host, sys_dir)
    return Found(key, (host.resolve(node),), numa, sys_dir, attributes, (node,), details)


def _uevent(host: HostRoot, sys_dir: str) -> dict[str, str]:
    """The device's ``uevent`` as properties (``MAJOR``, ``MINOR``, ``DEVNAME``, ``DEVTYPE``, …)."""
    try:
        lines = host.read(f"{sys_dir}/uevent").splitlines()
    except OSError:
        return {}
    pairs = (line.partition("=") for line in lines)
    return {key: value for key, equals, value in pairs if key and equals}


def _matches(config: UdevConfig, subsystem: str, properties: dict[str, str]) -> bool:
    if config.subsystem is not None and not fnmatchcase(subsystem, config.subsystem):
        return False
    return all(k in properties and fnmatchcase(properties[k], p) for k, p in config.match.items())


def _preference(link: str) -> int:
    """``by-id`` names the device wherever it is plugged in; ``by-path`` names the port; then the rest."""
    parts = PurePosixPath(link).parts
    return 0 if "by-id" in parts else 1 if "by-path" in parts else 2


def _described(config: UdevConfig) -> str:
    wanted = ([f"SUBSYSTEM={config.subsystem}"] if config.subsystem else []) + [
        f"{k}={v}" for k, v in config.match.items()
    ]
    return " ".join(wanted)


def watched(config: UdevConfig) -> list[str]:
    """udev's database directory: an entry is renamed into place on add/change and deleted on remove."""
    return [f"{DATA}/*"]


def _several(config: UdevConfig) -> str | None:
    return "udev can match several device nodes"


SOURCE = Source("udev", UdevConfig, discover, watched, several=_several, devlinks=True, sysfs=True)
