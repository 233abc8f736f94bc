"""Every device source, by the key that selects it in a resource (``pci: {...}``).

The resource schema, discovery and ``kubedevice discover`` read this and nothing else to know
what sources exist; their order is the order error messages list them in.
"""

from __future__ import annotations

from typing import Any

from . import glob, pci, static, udev, usb
from .source import Source

SOURCES: dict[str, Source[Any]] = {
    source.kind: source for source in (static.SOURCE, glob.SOURCE, usb.SOURCE, pci.SOURCE, udev.SOURCE)
}
SOURCE_KINDS = tuple(SOURCES)
