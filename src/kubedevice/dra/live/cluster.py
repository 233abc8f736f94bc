"""The cluster as input: the objects a ``dra`` command reads, from the API server.

A question about one pod on 1,000 nodes must not cost the API server 1,000 requests: every kind
is listed once, from the API server's watch cache (``resourceVersion=0`` with
``resourceVersionMatch=NotOlderThan``: served from memory, no etcd read, no pagination), so a
command costs a handful of requests whatever the cluster's size. ``resource.k8s.io`` is read in
the newest version the server serves (v1, v1beta2, v1beta1: discovery says which), and the
objects are decoded by the same models that read files, so every command judges them alike.

Failures are one line each (:mod:`kubedevice.errors`): credentials that cannot be used are a
usage error (exit 2, from :func:`~kubedevice.kubeclient.load_kubectl_config`); an API
server that cannot be reached, refuses us or answers nonsense is a dependency error (exit 1).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from lightkube.config.client_adapter import AsyncClient, ConnectionParams
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import ConfigError
from pydantic import ValidationError

from ...errors import DependencyError, UsageError
from .. import features, models
from ..models import DecodeError, DeviceClass, DRAObject, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from ..structured import collector_paused
from .interning import Interner

TIMEOUT = 30.0
"""Seconds for one request: a LIST of 10,000 slices from the watch cache takes about one."""
WATCH_CACHE = {"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"}
SERVED_ORDER = ("v1", "v1beta2", "v1beta1", "v1alpha3")
"""The resource.k8s.io versions kubedevice reads, best first."""
GROUP_RESOURCES = {
    "DeviceClass": ("deviceclasses", False),
    "ResourceSlice": ("resourceslices", False),
    "ResourceClaim": ("resourceclaims", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates", True),
    "DeviceTaintRule": ("devicetaintrules", False),
}
"""Kind -> (plural, namespaced) of the resource.k8s.io kinds."""
_NOT_FOUND = 404


class ApiAccessError(DependencyError):
    """The API server could not be reached or refused a request: one line naming it (exit 1)."""


@dataclass(frozen=True)
class Access:
    """How the command line reaches the cluster: kubectl's ``--kubeconfig``, ``--context``, ``-n``."""

    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None

    def config(self) -> SingleConfig:
        from ...kubeclient import load_kubectl_config  # noqa: PLC0415 - lightkube's config only when asked

        return load_kubectl_config(self.kubeconfig, self.context)


@dataclass
class ApiServer:
    """One API server as the user of a kubeconfig context; counts the requests it sends."""

    config: SingleConfig
    requests: int = 0
    _client: httpx2.AsyncClient | None = field(default=None, repr=False)

    @property
    def server(self) -> str:
        return str(self.config.cluster.server)

    @property
    def namespace(self) -> str:
        """The context's namespace, as kubectl's default for ``-n``."""
        return str(self.config.namespace or "default")

    def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            try:
                self._client = AsyncClient(self.config, ConnectionParams(timeout=httpx2.Timeout(TIMEOUT)))
            except OSError as err:  # a CA or client certificate file that cannot be read
                raise UsageError(f"kubeconfig: cannot load its certificates: {err.strerror or err}") from None
            except (ConfigError, ValueError, AssertionError) as err:
                raise UsageError(f"kubeconfig: {err or 'no user in the context'}") from None
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def get(self, path: str, params: dict[str, str] | None = None, *, absent_ok: bool = False) -> Any:
        """The decoded JSON at ``path``; None for a 404 when ``absent_ok``."""
        self.requests += 1
        try:
            response = await self.client().get(path, params=params, headers={"Accept": "application/json"})
        except httpx2.TimeoutException:
            raise ApiAccessError(f"API server {self.server}: no answer to GET {path} within {TIMEOUT:g} s") from None
        except httpx2.HTTPError as err:
            raise ApiAccessError(f"cannot reach the API server {self.server}: {_reason(err)}") from None
        if response.status_code == _NOT_FOUND and absent_ok:
            return None
        if response.is_error:
            raise ApiAccessError(f"API server {self.server}: GET {path}: {_status_message(response)}")
        try:
            return response.json()
        except ValueError:
            raise ApiAccessError(f"API server {self.server}: GET {path}: the answer is not JSON") from None

    async def stream(self, path: str, params: dict[str, str]) -> AsyncGenerator[dict[str, Any], None]:
        """The events of a watch, one decoded JSON object each; ends when the server closes it."""
        self.requests += 1
        try:
            async with self.client().stream(
                "GET", path, params={**params, "watch": "true"}, timeout=httpx2.Timeout(TIMEOUT, read=None)
            ) as response:
                if response.is_error:
                    await response.aread()
                    raise ApiAccessError(f"API server {self.server}: WATCH {path}: {_status_message(response)}")
                async for line in response.aiter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx2.TimeoutException:
            raise ApiAccessError(f"API server {self.server}: no answer to WATCH {path} within {TIMEOUT:g} s") from None
        except httpx2.HTTPError as err:
            raise ApiAccessError(f"cannot reach the API server {self.server}: {_reason(err)}") from None


def _reason(err: BaseException) -> str:
    """The innermost cause's text: ``[Errno 111] Connect call failed`` as ``connection refused``."""
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    errno = getattr(err, "errno", None)
    text = (os.strerror(errno) if isinstance(errno, int) else None) or str(err) or type(err).__name__
    return text[:1].lower() + text[1:]


def _status_message(response: httpx2.Response) -> str:
    """A Status's message (``pods "x" is forbidden: ...``), else the HTTP status line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"{response.status_code} {response.reason_phrase}"


# --- what the server is -------------------------------------------------------------------------


def release_of(git_version: str) -> str:
    """``v1.36.3`` (or ``v1.36.3-gke.1``) -> ``1.36``."""
    major, _, rest = git_version.lstrip("v").partition(".")
    minor = "".join(c for c in rest.partition(".")[0] if c.isdigit())
    return f"{major}.{minor}"


async def server_release(api: ApiServer) -> tuple[str, str]:
    """(``v1.36.3``, ``1.36``) from ``/version``, or one line when kubedevice does not know that release."""
    answer = await api.get("/version")
    git_version = str(answer.get("gitVersion", "")) if isinstance(answer, dict) else ""
    release = release_of(git_version)
    if release not in features.RELEASES:
        known = f"{features.RELEASES[0]} to {features.RELEASES[-1]}"
        raise ApiAccessError(
            f"API server {api.server} runs Kubernetes {git_version or 'of an unknown release'}: kubedevice knows "
            f"DRA of {known} (--kubernetes-version picks one to judge with)"
        )
    return git_version, release


async def served_version(api: ApiServer) -> str:
    """The newest resource.k8s.io version the server serves, from discovery."""
    answer = await api.get(f"/apis/{features.API_GROUP}", absent_ok=True)
    served = {str(v.get("version")) for v in (answer or {}).get("versions", []) if isinstance(v, dict)}
    for version in SERVED_ORDER:
        if version in served:
            return version
    raise ApiAccessError(
        f"API server {api.server} serves no {features.API_GROUP} version kubedevice reads "
        f"({', '.join(SERVED_ORDER)}): is DynamicResourceAllocation off?"
    )


# --- listing ------------------------------------------------------------------------------------


def resource_path(kind: str, version: str, namespace: str | None = None) -> str:
    plural, namespaced = GROUP_RESOURCES[kind]
    where = f"/namespaces/{namespace}" if namespaced and namespace else ""
    return f"/apis/{features.API_GROUP}/{version}{where}/{plural}"


@dataclass(frozen=True)
class Listed:
    """The items of one LIST, each with ``apiVersion`` and ``kind`` set, and the list's resourceVersion."""

    items: list[dict[str, Any]]
    resource_version: str


async def list_items(api: ApiServer, path: str, kind: str, api_version: str) -> Listed:
    """One LIST from the watch cache; items get the ``apiVersion`` and ``kind`` a list leaves out."""
    answer = await api.get(path, WATCH_CACHE)
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise ApiAccessError(f"API server {api.server}: GET {path}: not a list")
    items = [stamped(item, kind, api_version) for item in answer["items"] if isinstance(item, dict)]
    return Listed(items, str((answer.get("metadata") or {}).get("resourceVersion", "")))


def stamped(item: dict[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    """A listed or watched item as a command reads it: ``apiVersion`` and ``kind`` set (a list and
    a watch event leave them out), ``managedFields`` dropped."""
    meta = item.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)  # who wrote which field: nothing a command reads
    item["apiVersion"], item["kind"] = api_version, kind
    return item


def decode(items: Sequence[dict[str, Any]], release: str, server: str) -> list[DRAObject]:
    """The DRA objects as the models that read files decode them; ``server`` for the error line.

    An object of the canonical version is validated by its model directly: what the API server
    sends is stored, so already valid and defaulted, and the file path's checks (nulls, fields of
    other releases, defaulting) cost three times the validation (``benchmarks/explain_fleet.py``).
    Anything the model refuses, and every other version, takes the file path, which converts
    versions and words the error. The slices' identical parts are decoded once (:mod:`.interning`).
    """
    decoded = []
    interner = Interner()
    for item in items:
        model = _CANONICAL.get(item["kind"]) if item["apiVersion"] == _CANONICAL_VERSION else None
        if model is not None:
            document = interner.slice_document(item) if model is ResourceSlice else item
            try:
                decoded.append(model.model_validate(document, strict=True))
                continue
            except ValidationError:
                pass
        name = (item.get("metadata") or {}).get("name", "")
        try:
            decoded.append(models.from_document(item, f'{item["kind"]} "{name}"', release))
        except DecodeError as error:
            raise ApiAccessError(f"API server {server}: {error.first()}") from None
    return decoded


_CANONICAL_VERSION = f"{features.API_GROUP}/v1"
_CANONICAL: dict[str, type[DRAObject]] = {
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "ResourceClaim": ResourceClaim,
    "ResourceClaimTemplate": ResourceClaimTemplate,
}


# --- one snapshot of what a command reads -------------------------------------------------------


@dataclass
class Snapshot:
    """The objects of the kinds asked for, as one moment's watch cache holds them."""

    git_version: str
    """The server's ``/version`` (empty when ``--kubernetes-version`` made asking needless)."""
    release: str
    """The release whose defaults judge the objects: ``--kubernetes-version``, else the server's."""
    api_version: str
    """``resource.k8s.io/v1`` (or the newest version the server serves)."""
    objects: dict[str, list[DRAObject]]
    raw: dict[str, list[dict[str, Any]]]
    """Each kind's items as listed (the core kinds, Node, are only here)."""
    resource_versions: dict[str, str]

    def of(self, kind: type[T]) -> list[T]:
        return models.of_kind(self.objects.get(kind.__name__, []), kind)

    def __repr__(self) -> str:
        """What it holds, counted: ``asyncio.run`` formats the repr of its coroutine's result when
        it puts back the SIGINT handler (the handler it set names the task, and ``signal.signal``
        words the old handler while looking it up), and the dataclass's repr of 1,000 slices
        took seconds (``benchmarks/explain_offline.py``)."""
        counts = ", ".join(f"{kind} {len(items)}" for kind, items in self.raw.items())
        return f"Snapshot({self.git_version or self.release}, {self.api_version}: {counts})"


T = TypeVar("T", DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)
NODES = "Node"


async def snapshot(
    api: ApiServer, kinds: Sequence[str], *, release: str | None, namespaces: dict[str, str | None] | None = None
) -> Snapshot:
    """One LIST per kind (``Node`` for the core Nodes), all at once; ``namespaces`` limits a
    namespaced kind to one namespace (absent: all). ``release`` None: the server's ``/version``.

    The cyclic collector is paused meanwhile (:func:`~kubedevice.dra.structured.collector_paused`):
    parsing and decoding 1,000 slices makes hundreds of thousands of objects and no cycles, and
    the collections they set off walked all that was made before to free nothing, more than
    half the time (``benchmarks/explain_offline.py``).
    """
    with collector_paused():
        asked = await asyncio.gather(served_version(api), server_release(api) if release is None else _given(release))
        version, (git_version, chosen) = asked
        api_version = f"{features.API_GROUP}/{version}"
        where = namespaces or {}

        def path(kind: str) -> str:
            return "/api/v1/nodes" if kind == NODES else resource_path(kind, version, where.get(kind))

        listed = await asyncio.gather(
            *(list_items(api, path(k), k, "v1" if k == NODES else api_version) for k in kinds)
        )
        raw = {kind: result.items for kind, result in zip(kinds, listed, strict=True)}
        objects = {kind: decode(raw[kind], chosen, api.server) for kind in kinds if kind != NODES}
    versions = {kind: result.resource_version for kind, result in zip(kinds, listed, strict=True)}
    return Snapshot(git_version, chosen, api_version, objects, raw, versions)


async def _given(release: str) -> tuple[str, str]:
    return "", release
