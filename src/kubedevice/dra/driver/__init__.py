"""A DRA driver on the node: kubelet plugin (registration, prepare/unprepare, health) and slices.

Modules, one concern each (as in kubernetes-sigs/dra-example-driver): ``registration`` (plugin
watcher), ``server`` (the DRA gRPC services), ``state`` (prepare/unprepare), ``claims`` (where
ResourceClaims come from), ``opaque`` (class and claim configuration), ``cdi`` (per-claim CDI
specs), ``checkpoint``, ``devicestatus`` (the claims' ``status.devices``), ``publisher``
(ResourceSlices), ``health``, ``driver`` (the library class), ``service`` (running it),
``config`` (the ``dra:`` config section) and ``daemon`` (``kubedevice serve`` with ``dra:``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .driver import AttributeProvider, DraDriver
    from .opaque import ConfigHandler
    from .service import DriverService, ServiceOptions, serve

__all__ = ["AttributeProvider", "ConfigHandler", "DraDriver", "DriverService", "ServiceOptions", "serve"]
_HOME = {"AttributeProvider": "driver", "ConfigHandler": "opaque", "DraDriver": "driver", "DriverService": "service"}


def __getattr__(name: str) -> Any:
    """Load on first use: the config loads ``.config`` and must not pay for gRPC or the API client."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME.get(name, 'service')}", __name__), name)
