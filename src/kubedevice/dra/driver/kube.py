"""The Kubernetes API client: lightkube, and how the driver finds its credentials.

lightkube is asyncio-native (the driver is one event loop), ships typed models of
``resource.k8s.io/v1`` for the Kubernetes version it tracks, and pulls in only an HTTP client;
the official ``kubernetes`` client is synchronous and large, ``kubernetes_asyncio`` is async
but just as large. Every call goes through lightkube except one: the claim GETs of
NodePrepareResources, which ``apiget`` sends over kept connections with the credentials this
client resolved (``AsyncClient.config``), falling back to lightkube for anything but a 200.
"""

from __future__ import annotations

from pathlib import Path

from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ConfigError

FIELD_MANAGER = "kubedevice"


class KubeAccessError(Exception):
    """No usable API server credentials (one line for the command line)."""


def client(kubeconfig: Path | None = None) -> AsyncClient:
    """``--kubeconfig``, else the in-cluster service account, else ``$KUBECONFIG`` or ``~/.kube/config``."""
    try:
        config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
    except (ConfigError, OSError) as err:
        where = str(kubeconfig) if kubeconfig else "the in-cluster config, $KUBECONFIG or ~/.kube/config"
        raise KubeAccessError(f"cannot load API server credentials from {where}: {err}") from None
    return AsyncClient(config, field_manager=FIELD_MANAGER)
