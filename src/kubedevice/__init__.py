"""kubedevice: Kubernetes device plugins in Python.

The library surface for writing a plugin in a few lines::

    from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin
    from kubedevice.plugin.manager import serve

``serve`` stays in its module: importing this package must not load grpc, which the command
line's ``--help`` and its tools do without. See ``docs/writing-a-plugin.md``.
"""

import os

# grpc's C core reads GRPC_VERBOSITY once, when grpc is first imported, and left unset it prints
# its INFO lines raw on stderr, outside our log format (``chttp2_transport.cc:...] Got goaway``
# when a kubelet goes away, which we already log in our words). Set here, before anything of ours
# imports grpc: the ``kubedevice`` command loads this package before its own modules, and a
# library plugin imports it. ERROR keeps the C core's real errors; a user's own setting wins
# (GRPC_VERBOSITY=INFO to debug grpc).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

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
