"""The test cluster's API calls over lightkube, the client library the DRA driver already depends on.

:class:`KubeApi` reads a kubeconfig (the cluster's admin one, certificates embedded) and serves
the calls the e2e and deploy tests, ``benchmarks/real_kubelet.py`` and ``Cluster.up`` make again
and again: nodes, pods, events, through lightkube's sync ``Client`` and typed resources. It
returns plain dicts (``to_dict()``, the API's own field names) because that is what the tests
index and compare with other documents; ``client`` is there for anything typed.

Two calls do not go through the ``Client``, on purpose, over the HTTP client lightkube builds from
the same kubeconfig (same CA, same client certificate), and raise lightkube's ``ApiError``:

* :meth:`KubeApi.ready`: ``/readyz`` is an endpoint, not a resource, and lightkube has no call for it.
* :meth:`KubeApi.request` and :meth:`KubeApi.get` by URL path. The ``Client`` addresses objects only
  by resource class, name and namespace; the deploy tests and ``test_cluster_tool.py`` name what
  they touch by path (a ServiceAccount's ``token`` subresource, ClusterRoleBindings, DeviceClasses,
  ResourceClaimTemplates, lists with ``?fieldSelector=``), and ``test_chart_dra_e2e.py`` sends the
  same paths with a bearer token to show what the driver's own account may do: one spelling for both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx2
from lightkube import Client, KubeConfig
from lightkube.config.client_adapter import Client as HttpClient
from lightkube.config.client_adapter import ConnectionParams
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Event, Node, Pod

__all__ = ["ApiError", "KubeApi"]

_NOT_FOUND = 404
T = TypeVar("T")


class KubeApi:
    """One API server, as the user of ``kubeconfig``; close() or ``with`` releases its connections."""

    def __init__(self, kubeconfig: Path, timeout: float = 10.0) -> None:
        config = KubeConfig.from_file(kubeconfig).get()
        assert config is not None  # from_file refuses a kubeconfig without a current context
        self.server = config.cluster.server
        # trust_env off: a proxy or CA bundle from the environment must not apply to a test cluster.
        limit = httpx2.Timeout(timeout)
        self.client = Client(config, timeout=limit, trust_env=False, field_manager="kubedevice-test")
        self._http = HttpClient(config, ConnectionParams(timeout=limit, trust_env=False))

    def close(self) -> None:
        self.client.close()
        self._http.close()

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- by URL path -----------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """``method path`` with a JSON body; the decoded answer. ApiError for an error status."""
        response = self._http.request(method, path, json=body, headers={"Accept": "application/json"})
        if response.is_error:
            if response.headers.get("Content-Type") == "application/json":
                raise ApiError(request=response.request, response=response)
            response.raise_for_status()
        return response.json() if response.content else None

    def get(self, path: str) -> Any:
        """The object at ``path``, or None if it does not exist."""
        try:
            return self.request("GET", path)
        except ApiError as err:
            if err.status.code == _NOT_FOUND:
                return None
            raise

    def ready(self) -> bool:
        """Whether the API server answers ``/readyz`` with 200 (False while it is not listening yet)."""
        try:
            return self._http.get("/readyz", timeout=2).status_code == 200
        except httpx2.TransportError:  # refused, reset, timed out: not (yet) serving
            return False

    # --- typed, through lightkube's Client ----------------------------------------------------------

    def node(self, name: str) -> dict[str, Any] | None:
        return _absent_as_none(lambda: self.client.get(Node, name).to_dict())

    def node_ready(self, name: str) -> bool:
        conditions = (self.node(name) or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def node_taints(self, name: str) -> list[Any]:
        return list((self.node(name) or {}).get("spec", {}).get("taints", []))

    def resource(self, node: str, resource: str) -> tuple[int, int]:
        """(capacity, allocatable) of an extended resource on ``node``; (0, 0) when absent."""
        status = (self.node(node) or {}).get("status", {})
        return (int(status.get("capacity", {}).get(resource, 0)), int(status.get("allocatable", {}).get(resource, 0)))

    def create_pod(self, pod: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
        return self.client.create(cast(Pod, Pod.from_dict(pod)), namespace=namespace).to_dict()

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        return _absent_as_none(lambda: self.client.get(Pod, name, namespace=namespace).to_dict())

    def pods(self, namespace: str = "default") -> list[dict[str, Any]]:
        return [pod.to_dict() for pod in self.client.list(Pod, namespace=namespace)]

    def delete_pod(self, name: str, namespace: str = "default", grace: int = 0) -> None:
        """Delete without waiting; a pod that is already gone is fine."""
        _absent_as_none(lambda: self.client.delete(Pod, name, namespace=namespace, grace_period=grace))

    def events(self, namespace: str = "default") -> list[dict[str, Any]]:
        return [event.to_dict() for event in self.client.list(Event, namespace=namespace)]


def _absent_as_none(call: Callable[[], T]) -> T | None:
    """``call()``, or None when the API server says 404 (the object does not exist)."""
    try:
        return call()
    except ApiError as err:
        if err.status.code == _NOT_FOUND:
            return None
        raise
