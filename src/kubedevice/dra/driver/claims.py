"""Where the driver reads ResourceClaims: the API server, or a directory of files.

The API source is what runs on a node. The file source lets the kubelet side be driven
without a cluster (tests, ``kubedevice`` tools): a claim is the same ``resource.k8s.io/v1``
object the API server would return, stored as YAML or JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.resource_v1 import ResourceClaim

from ...errors import api_reason
from .model import Claim
from .state import ClaimError


class ApiClaims:
    """Claims fetched from the API server, one GET each (the kubelet sends only claims for this node)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, namespace: str, name: str) -> Claim:
        try:
            obj = await self._client.get(ResourceClaim, name, namespace=namespace)
        except ApiError as err:
            raise ClaimError(f"cannot get claim {namespace}/{name}: {api_reason(err)}") from None
        except httpx2.HTTPError as err:
            raise ClaimError(f"cannot get claim {namespace}/{name}: {err}") from None
        return Claim.from_object(obj.to_dict())


class FileClaims:
    """Claims read from ``<directory>/*.yaml|*.yml|*.json`` at each request (edit files between calls)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    async def get(self, namespace: str, name: str) -> Claim:
        for obj in self._objects():
            meta = obj.get("metadata") or {}
            if obj.get("kind") == "ResourceClaim" and meta.get("namespace") == namespace and meta.get("name") == name:
                return Claim.from_object(obj)
        raise ClaimError(f"cannot get claim {namespace}/{name}: not found in {self.directory}")

    def _objects(self) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = []
        for path in sorted(self.directory.glob("*")):
            if path.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                documents = list(yaml.safe_load_all(path.read_text()))
            except (OSError, yaml.YAMLError) as err:
                raise ClaimError(f"{path}: cannot read claims: {err}") from None
            objects.extend(d for d in documents if isinstance(d, dict))
        return objects
