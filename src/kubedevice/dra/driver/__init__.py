"""A DRA driver on the node: kubelet plugin (registration, prepare/unprepare, health) and slices.

Modules, one concern each (as in kubernetes-sigs/dra-example-driver): ``registration`` (plugin
watcher), ``server`` (the DRA gRPC services), ``state`` (prepare/unprepare), ``claims`` (where
ResourceClaims come from), ``cdi`` (per-claim CDI specs), ``checkpoint``, ``publisher``
(ResourceSlices), ``health``, ``driver`` (the library class), ``service`` (running it),
``config`` (the ``dra:`` config section) and ``daemon`` (``kubedevice serve`` with ``dra:``).
"""

from .driver import AttributeProvider, DraDriver
from .service import DriverService, ServiceOptions, serve

__all__ = ["AttributeProvider", "DraDriver", "DriverService", "ServiceOptions", "serve"]
