"""kubedevice: Kubernetes device plugins in Python.

The library surface for writing a plugin in a few lines::

    from kubedevice import Device, DeviceSpec, ContainerAllocation, Plugin, serve

See ``docs/writing-a-plugin.md``.
"""

from .device import ContainerAllocation, Device, DeviceError, DeviceSpec, Health, Mount
from .plugin.base import Plugin, PreferredAllocator, PreStarter

__version__ = "0.1.0"

__all__ = [
    "ContainerAllocation",
    "Device",
    "DeviceError",
    "DeviceSpec",
    "Health",
    "Mount",
    "Plugin",
    "PreStarter",
    "PreferredAllocator",
    "__version__",
]
