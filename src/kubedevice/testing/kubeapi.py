"""A minimal Kubernetes API client over HTTPS with a client certificate (standard library only).

The tests need a handful of calls (nodes, pods, events); a full client library would be a new
dependency for that.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeApi:
    def __init__(self, server: str, ca: Path, cert: Path, key: Path) -> None:
        self.server = server
        self._context = ssl.create_default_context(cafile=str(ca))
        self._context.load_cert_chain(str(cert), str(key))

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self._context, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            raise ApiError(err.code, err.read().decode(errors="replace")[:500]) from None

    def get(self, path: str) -> Any:
        """The object, or None if it does not exist."""
        try:
            return self.request("GET", path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def ready(self) -> bool:
        try:
            request = urllib.request.Request(self.server + "/readyz")
            with urllib.request.urlopen(request, context=self._context, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def node(self, name: str) -> Any:
        return self.get(f"/api/v1/nodes/{name}")

    def node_ready(self, name: str) -> bool:
        node = self.node(name)
        conditions = (node or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def node_taints(self, name: str) -> list[Any]:
        return list((self.node(name) or {}).get("spec", {}).get("taints", []))

    def resource(self, node: str, resource: str) -> tuple[int, int]:
        """(capacity, allocatable) of an extended resource on ``node``; (0, 0) when absent."""
        status = (self.node(node) or {}).get("status", {})
        return (int(status.get("capacity", {}).get(resource, 0)),
                int(status.get("allocatable", {}).get(resource, 0)))

    def create_pod(self, pod: dict[str, Any], namespace: str = "default") -> Any:
        return self.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    def pod(self, name: str, namespace: str = "default") -> Any:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def pods(self, namespace: str = "default") -> list[Any]:
        return list(self.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"])

    def delete_pod(self, name: str, namespace: str = "default", grace: int = 0) -> None:
        try:
            self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                         {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace})
        except ApiError as err:
            if err.status != 404:
                raise

    def events(self, namespace: str = "default") -> list[Any]:
        return list(self.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"])
