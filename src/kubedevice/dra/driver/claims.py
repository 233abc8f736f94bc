"""Where the driver reads ResourceClaims: the API server, or a directory of files.

The API source is what runs on a node. The file source lets the kubelet side be driven
without a cluster (tests, ``kubedevice`` tools): a claim is the same ``resource.k8s.io/v1``
object the API server would return, stored as YAML or JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.resource_v1 import ResourceClaim

from ...errors import api_reason
from ..nodeclaims import Claim
from .apiget import KeptGets, Unanswered, target
from .state import ClaimError


class ApiClaims:
    """Claims fetched from the API server, one GET each (the kubelet sends only claims for this node).

    A claim comes over :class:`~kubedevice.dra.driver.apiget.KeptGets` (kept connections, about
    a tenth of lightkube's CPU per GET). An error the API server explains (a ``Status``, such as
    an unknown claim's 404) is reported with its message, as lightkube's ``ApiError`` would be,
    without asking twice, and so is no answer within the timeout; anything else (a refused token, a
    broken connection, credentials it cannot use) is asked again through lightkube, so every error
    reads as lightkube reports it.
    """

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._kept: KeptGets | None = None
        self._tried = False

    async def get(self, namespace: str, name: str) -> Claim:
        kept = self._fast()
        if kept is not None:
            try:
                body = await kept.get(kept.object_path("resource.k8s.io/v1", namespace, "resourceclaims", name))
                return Claim.from_object(json.loads(body))
            except Unanswered as err:
                if err.final:
                    raise ClaimError(f"cannot get claim {namespace}/{name}: {err}") from None
                if err.status == 401:  # a rotated token: read the credentials again for the next GET
                    self._kept, self._tried = None, False
                elif (message := _status_message(err.body)) is not None:  # as lightkube's ApiError says it
                    raise ClaimError(f"cannot get claim {namespace}/{name}: {message}") from None
            except (ValueError, TypeError, AttributeError, KeyError):
                pass  # not a claim as we know it: lightkube's decoding says what is wrong
        return await self._slow(namespace, name)

    def _fast(self) -> KeptGets | None:
        """Built on first use (in the event loop); None for good when the kubeconfig needs lightkube."""
        if not self._tried:
            self._tried = True
            where = target(self._client.config)
            if self._kept is not None:
                self._kept.close()
            self._kept = KeptGets(where) if where is not None else None
        return self._kept

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()

    async def _slow(self, namespace: str, name: str) -> Claim:
        try:
            obj = await self._client.get(ResourceClaim, name, namespace=namespace)
        except ApiError as err:
            raise ClaimError(f"cannot get claim {namespace}/{name}: {api_reason(err)}") from None
        except httpx2.HTTPError as err:
            raise ClaimError(f"cannot get claim {namespace}/{name}: {err}") from None
        return Claim.from_object(obj.to_dict())


def _status_message(body: bytes) -> str | None:
    """``message`` of a ``Status`` answer (what ``api_reason`` gives for lightkube's ApiError), if it is one."""
    try:
        status = json.loads(body)
    except ValueError:
        return None
    message = status.get("message") if isinstance(status, dict) and status.get("kind") == "Status" else None
    return message if isinstance(message, str) and message else None


class FileClaims:
    """Claims read from ``<directory>/*.yaml|*.yml|*.json`` at each request (edit files between calls).

    Each file is read at every request but parsed again only when its bytes changed (a stat
    could miss an edit within one timestamp tick): a prepare of N claims reads the files N times,
    and parsing every file per claim made 10,000 unknown claims in one call take 27 s, past the
    kubelet's 45 s deadline under load (1.4 s now)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._parsed: dict[Path, tuple[bytes, list[dict[str, Any]]]] = {}

    async def get(self, namespace: str, name: str) -> Claim:
        for obj in self._objects():
            meta = obj.get("metadata") or {}
            if obj.get("kind") == "ResourceClaim" and meta.get("namespace") == namespace and meta.get("name") == name:
                return Claim.from_object(obj)
        raise ClaimError(f"cannot get claim {namespace}/{name}: not found in {self.directory}")

    def _objects(self) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = []
        seen: dict[Path, tuple[bytes, list[dict[str, Any]]]] = {}
        for path in sorted(self.directory.glob("*")):
            if path.suffix not in (".yaml", ".yml", ".json"):
                continue
            seen[path] = self._read(path)
            objects.extend(seen[path][1])
        self._parsed = seen  # files gone since are forgotten
        return objects

    def _read(self, path: Path) -> tuple[bytes, list[dict[str, Any]]]:
        try:
            raw = path.read_bytes()
            cached = self._parsed.get(path)
            if cached is not None and cached[0] == raw:
                return cached
            documents = list(yaml.safe_load_all(raw.decode()))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise ClaimError(f"{path}: cannot read claims: {err}") from None
        # the parsed objects are shared between calls: Claim.from_object only reads them
        return raw, [d for d in documents if isinstance(d, dict)]
