"""Dynamic Resource Allocation (``resource.k8s.io``) offline: models, API-server validation,
selector explanations, a one-node allocator and ResourceSlices for discovered devices; and
on the node, the DRA driver (:mod:`kubedevice.dra.driver`).

The selectors' CEL environment is :mod:`kubedevice.dra.cel`, on the engine :mod:`kubedevice.cel`.
Names load on first use: the daemon's config imports :mod:`kubedevice.dra.driverconfig` and
must not pay ~0.25 s for the models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import DecodeError, DeviceClass, ResourceClaim, ResourceSlice, dump, load_file, load_text

__all__ = ["DecodeError", "DeviceClass", "ResourceClaim", "ResourceSlice", "dump", "load_file", "load_text"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import models  # noqa: PLC0415 - lazy on purpose

    return getattr(models, name)
