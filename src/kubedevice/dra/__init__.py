"""Dynamic Resource Allocation (``resource.k8s.io``) offline: models, API-server validation,
selector explanations, a one-node allocator and ResourceSlices for discovered devices.

The CEL engine the selectors run on is :mod:`kubedevice.dra.cel`.
"""

from .models import DecodeError, DeviceClass, ResourceClaim, ResourceSlice, dump, load_file, load_text

__all__ = ["DecodeError", "DeviceClass", "ResourceClaim", "ResourceSlice", "dump", "load_file", "load_text"]
