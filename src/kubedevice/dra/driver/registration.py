"""Registration through the kubelet's plugin watcher (``pluginregistration.Registration``).

The kubelet watches ``<kubelet-dir>/plugins_registry/`` for sockets, calls ``GetInfo`` on a new
one and answers with ``NotifyRegistrationStatus``. We announce type ``DRAPlugin``, the driver
name, the absolute path of the DRA socket (as the kubelet sees it) and the gRPC services we
serve; the kubelet picks ``v1.DRAPlugin`` when offered. For the health stream a 1.37 kubelet
picks the first of ``v1.DRAResourceHealth``, ``v1alpha1.DRAResourceHealth`` that is listed
(``pickHealthService``); a 1.36 kubelet ignores the list and always watches ``v1alpha1``, and
accepts names it does not know. So both are listed and served. A rejection is logged and
leaves us not ready.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpc import aio

from ...api import pluginregistration_v1_pb2 as regpb
from ...api import pluginregistration_v1_pb2_grpc as regpb_grpc

PLUGIN_TYPE = "DRAPlugin"
SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")
LOGGED_ERROR = 1024
"""Characters of a rejection's reason that are logged: any peer of the socket can send one."""
log = logging.getLogger("kubedevice.dra.registration")


@dataclass(frozen=True, slots=True)
class Sockets:
    """Where the two sockets go: the same layout as ``kubeletplugin.Start``'s defaults.

    With a rolling-update UID both names carry it, so an old and a new driver pod can be
    registered side by side during a DaemonSet update.
    """

    kubelet_dir: Path
    driver: str
    uid: str = ""

    @property
    def registration(self) -> Path:
        part = f"-{self.uid}" if self.uid else ""
        return self.kubelet_dir / "plugins_registry" / f"{self.driver}{part}-reg.sock"

    @property
    def kubelet_dirs(self) -> tuple[Path, Path]:
        """The kubelet's ``plugins/`` and ``plugins_registry/``: it creates both at start, we never do."""
        return self.kubelet_dir / "plugins", self.registration.parent

    @property
    def plugin_dir(self) -> Path:
        return self.kubelet_dir / "plugins" / self.driver

    @property
    def dra(self) -> Path:
        part = f"-{self.uid}" if self.uid else ""
        return self.plugin_dir / f"dra{part}.sock"


class RegistrationServicer(regpb_grpc.RegistrationServicer):  # type: ignore[misc]
    """Answers the plugin watcher; ``on_status`` learns whether the kubelet accepted us."""

    def __init__(self, driver: str, endpoint: Path, on_status: Callable[[bool, str], None]) -> None:
        self._info = regpb.PluginInfo(
            type=PLUGIN_TYPE, name=driver, endpoint=str(endpoint), supported_versions=list(SERVICES)
        )
        self._on_status = on_status

    async def GetInfo(self, request: regpb.InfoRequest, context: aio.ServicerContext[Any, Any]) -> regpb.PluginInfo:
        return self._info

    async def NotifyRegistrationStatus(
        self, request: regpb.RegistrationStatus, context: aio.ServicerContext[Any, Any]
    ) -> regpb.RegistrationStatusResponse:
        if request.plugin_registered:
            log.info("registered with the kubelet as DRA driver %s", self._info.name)
        else:
            reason = request.error[:LOGGED_ERROR] + ("..." if len(request.error) > LOGGED_ERROR else "")
            log.error("the kubelet rejected DRA driver %s: %s", self._info.name, reason)
        self._on_status(request.plugin_registered, request.error)
        return regpb.RegistrationStatusResponse()
