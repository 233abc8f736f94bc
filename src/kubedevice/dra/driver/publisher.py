"""ResourceSlice publisher: keeps the API server's slices of this node's pool equal to the driver's.

What ``resourceslice.Controller`` does for Go drivers, for one node-local pool: the slices are
owned by the Node (so they go with it), named ``<node>-<driver>-<index>``, at most 128 devices
each with ``resourceSliceCount`` set. The pool generation goes up by one on every change, so
the scheduler never mixes slices of two versions; slices of older generations and surplus
indexes are deleted. A change of devices or health republishes at once; a watch on our
slices republishes when someone else edits or deletes one; a periodic resync catches the rest.

Its API load is less than ``resourceslice.Controller``'s
(k8s.io/dynamic-resource-allocation/resourceslice/resourceslicecontroller.go): our slices come
from one watch-list request (``sendInitialEvents``: the slices as ADDED events, then a bookmark
annotated ``k8s.io/initial-events-end``, then changes on the same stream; the WatchList gate is
beta and on by default in 1.34-1.37, k8s.io/apiserver pkg/features/kube_features.go) kept open
and resumed from its resourceVersion, streamed again only on 410 Gone; an API server that
refuses it (the gate off: 422) gets a LIST and a WATCH instead, as client-go's reflector falls
back (k8s.io/client-go tools/cache/reflector.go). A resync or a change compares with that cache
and sends nothing when nothing differs. The Node's UID comes from the pod's service-account
token when it names this node (``nodeidentity``), else from one Node GET (again only after a
refused write or an external deletion of our slices, as when the Node was re-created and the
garbage collector took them). So start-up in a pod is one watch and one create per slice, and
a restart with the same devices one watch: Go's controller sends a watch-list, a Node GET and
the creates at start-up, and a watch and a Node GET at a restart. Writes are coalesced per
node: after a sync that wrote, the next waits ``min_interval`` and then sends the latest
devices in one go, where the Go controller's only coalescing is its client's rate limiter
(QPS 5, burst 10).
An unhealthy device's taint is sent without ``timeAdded`` (the API server stamps it) and keeps
the stamp it got as long as it stays, so a rewrite for another reason does not restart it.
An API server without the DRADeviceTaints feature gate (off by default before 1.36) drops
taints silently; then a tainted device would look healthy, so from then on devices with a
taint are left out of the slices instead, with an error in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import httpx2
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.core.selector import build_selector
from lightkube.models.meta_v1 import Status
from lightkube.operators import BinaryOperator, SequenceOperator
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceSlice

from ...errors import KubedeviceError, api_reason
from .. import features
from ..models import ResourceSlice as SliceModel
from ..models import to_document
from ..validation import validate
from .nodeidentity import SERVICE_ACCOUNT_TOKEN, node_uid

#: The gates slices are checked under before a write: every gate on, so a slice is well-formed
#: whatever its cluster enables (list attributes, say, for ``dra.numa_node_attribute: list``); an
#: API server with a gate off drops that field and refuses the write, as upstream expects of drivers.
_CHECKED_UNDER = features.all_on()

RESYNC_SECONDS = 60.0
RETRY_SECONDS = 1.0
MIN_INTERVAL_SECONDS = 0.5
"""The default per-node write rate limit: at most two syncs that write per second, each with
the latest devices; short enough that a change still reaches the API server within a second."""
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a watch-list's initial events (metav1.InitialEventsAnnotationKey)."""
UNCOMPRESSED = {"Accept-Encoding": "identity"}
"""The watch's request header. From 1.37 the API server gzips a watch-list's response when the
client accepts gzip (the WatchListCompression gate, beta and on by default: k8s.io/apiserver
pkg/features/kube_features.go), closing the gzip stream at every flush and starting a new one
(``perFlushGzipWriter``, pkg/endpoints/handlers/watch.go): the body is many gzip members. Go's
gzip reader reads them all; httpx's reads the first only (the initial events and their closing
bookmark) and silently drops the rest, so every change after the snapshot, the kubelet's wipe of
the node's slices among them, would never be seen. Our stream is one node's few slices: sent
uncompressed."""
log = logging.getLogger("kubedevice.dra.publisher")

Desired = Callable[[], Sequence[SliceModel]]
Slice = dict[str, Any]


def contains(actual: Any, wanted: Any) -> bool:
    """``wanted`` is in ``actual``: equal, except that the server may add fields (defaults)
    and leaves out empty lists and maps."""
    if actual is None and wanted in ([], {}):
        return True
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(contains(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(actual, list) and len(actual) == len(wanted) and all(map(contains, actual, wanted))
    return bool(actual == wanted)


class InvalidSlices(KubedeviceError, ValueError):
    """The driver's devices make slices the API server would refuse (the message names the field)."""


class SlicePublisher:
    """Publishes ``desired()`` for ``driver`` on ``node``; call :meth:`changed` after every change.

    ``min_interval`` (seconds, default :data:`MIN_INTERVAL_SECONDS`) is the per-node write rate
    limit: after a sync that wrote, the next write waits that long, and whatever changed
    meanwhile goes out in that one write, always the latest devices. The first change after a
    quiet period goes out at once. ``token_file`` is the service-account token read once for the
    Node's UID (:mod:`.nodeidentity`); None, or a token about another node, means a Node GET.
    """

    def __init__(
        self,
        client: AsyncClient,
        driver: str,
        node: str,
        desired: Desired,
        *,
        min_interval: float = MIN_INTERVAL_SECONDS,
        token_file: Path | None = SERVICE_ACCOUNT_TOKEN,
    ) -> None:
        self._client = client
        self.driver = driver
        self.node = node
        self._desired = desired
        self.min_interval = min_interval
        self._wake = asyncio.Event()
        self.generation = 0
        self.published = asyncio.Event()
        self.on_publish: Callable[[float], None] | None = None
        self.taints_dropped = False
        """The API server dropped the taints we wrote: tainted devices are left out since."""
        self._cache: dict[str, Slice] = {}
        """Our slices as the API server has them: listed once, then kept by the watch and our writes."""
        self._listed = asyncio.Event()
        self._version: str | None = None
        """The resourceVersion the watch resumes from; None: list again (start, or 410 Gone)."""
        self._floor = 0
        """Watch events at or below the last list's resourceVersion are already in the cache."""
        self._deleted_at: dict[str, int] = {}
        """The resourceVersion of each deletion the watch reported since the last list."""
        self._owner_uid: str | None = None
        self._token_file = token_file
        """Read for the UID at the first write only: later a GET, since the token may be stale."""
        self.watch_list = True
        """Streams start with the slices (watch-list); False once the API server refused that."""
        self._informing = False
        self._again_now = False

    def changed(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Sync now and after every change, external edit or resync period, until cancelled."""
        informer = asyncio.create_task(self._inform())
        self._informing = True
        try:
            await self._listed.wait()
            while True:
                self._wake.clear()
                try:
                    wrote = await self.sync()
                except InvalidSlices as err:  # retrying cannot help: wait for the devices to change
                    log.error("not publishing ResourceSlices: %s", err)
                    wrote = False
                except (ApiError, httpx2.HTTPError) as err:
                    log.warning("publishing ResourceSlices failed, retrying: %s", api_reason(err))
                    await self._refused(err)
                    await asyncio.sleep(RETRY_SECONDS)
                    continue
                if wrote and not self._again_now:
                    await asyncio.sleep(self.min_interval)  # the rate limit: changes meanwhile wait
                self._again_now = False
                # Not asyncio.wait_for: on 3.11 it swallows a cancellation that arrives as the
                # event is set, and the driver would never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESYNC_SECONDS):
                        await self._wake.wait()
        finally:
            self._informing = False
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)

    async def sync(self) -> bool:
        """One reconciliation against the cache: bump the generation and rewrite if anything
        differs, delete the rest; True if it wrote. Without :meth:`run` the cache is one list
        plus this publisher's own writes."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        desired = self._desired()
        problems = [f"{s.metadata.name}: {e}" for s in desired for e in validate(s, _CHECKED_UNDER)]
        if problems:
            raise InvalidSlices(f"{problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        wanted = [to_document(s) for s in desired]
        if self.taints_dropped:
            _leave_out_tainted(wanted)
        existing = await self._existing()
        generation = max((int(s["spec"]["pool"].get("generation", 0)) for s in existing.values()), default=0)
        names = [w["metadata"]["name"] for w in wanted]
        up_to_date = set(existing) == set(names) and all(
            _matches(existing[w["metadata"]["name"]], w, generation) for w in wanted
        )
        if up_to_date:
            self.generation = generation
        else:
            generation += 1
            await self._write(wanted, existing, generation)
            self.generation = generation
            log.info("published %d ResourceSlices, pool generation %d", len(wanted), generation)
            if self.on_publish is not None:
                self.on_publish(loop.time() - start)
        self.published.set()
        return not up_to_date

    async def _existing(self) -> dict[str, Slice]:
        if not self._listed.is_set():
            if self._informing:
                await self._listed.wait()
            else:
                await self._relist()
        return dict(self._cache)

    async def _write(self, wanted: list[Slice], existing: dict[str, Slice], generation: int) -> None:
        owner = await self._owner()
        names = {w["metadata"]["name"] for w in wanted}
        obsolete = [name for name in existing if name not in names]
        for name in obsolete:  # first, so devices that are gone stop being allocated
            await self._delete(name)
        _keep_taint_times(wanted, existing.values())
        for document in wanted:
            document["spec"]["pool"]["generation"] = generation
            document["metadata"]["ownerReferences"] = [owner]
            current = existing.get(document["metadata"]["name"])
            if current is not None:
                document["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            obj = cast(ResourceSlice, ResourceSlice.from_dict(document))
            if current is None:
                stored = (await self._client.create(obj)).to_dict()
            else:
                stored = (await self._client.replace(obj)).to_dict()
            self._remember(stored)
            if not self.taints_dropped and _taints(stored["spec"]) != _taints(document["spec"]):
                log.error(
                    "the API server dropped the device taints of ResourceSlice %s (is the DRADeviceTaints "
                    "feature gate off?): unhealthy devices are left out of the slices from now on; enable "
                    "the gate or set dra.unhealthy_taint: off",
                    document["metadata"]["name"],
                )
                self.taints_dropped = True
                self._again_now = True  # publish again at once, past the rate limit: a one-off
                self._wake.set()

    async def _delete(self, name: str) -> None:
        self._cache.pop(name, None)  # its DELETED event then finds nothing: not someone else's doing
        try:
            await self._client.delete(ResourceSlice, name)
        except ApiError as err:
            if err.status.code != 404:
                raise

    async def _refused(self, err: BaseException) -> None:
        """After a refused write: a conflict or a missing slice means the cache is behind (list
        again, the RBAC role has no ``get`` of slices); anything else may be the owner (a
        re-created Node has a new UID): read the Node again at the next write."""
        code = getattr(getattr(err, "status", None), "code", None)
        if code in (404, 409):
            with contextlib.suppress(ApiError, httpx2.HTTPError):
                await self._relist()
        else:
            self._owner_uid = None

    def _fields(self) -> dict[str, str | BinaryOperator | SequenceOperator]:
        return {"spec.nodeName": self.node, "spec.driver": self.driver}

    async def _relist(self) -> None:
        """Fill the cache from one LIST; the watch resumes from the list's resourceVersion."""
        listing = self._client.list(ResourceSlice, fields=self._fields())
        self._cache = {s.metadata.name: s.to_dict() async for s in listing if s.metadata and s.metadata.name}
        self._version = listing.resourceVersion
        self._floor = _version_number(self._version)
        self._deleted_at.clear()  # a list is newer than every deletion seen before it
        self._listed.set()

    async def _owner(self) -> dict[str, Any]:
        """The Node as owner. Its UID comes from the token at the first write, else from a GET;
        read again only after a refused write or an external deletion of our slices (the
        garbage collector's, when the Node was re-created or the token's UID was stale)."""
        if self._owner_uid is None and self._token_file is not None:
            self._owner_uid = node_uid(self.node, self._token_file)
            self._token_file = None
        if self._owner_uid is None:
            node = (await self._client.get(Node, self.node)).to_dict()
            self._owner_uid = str(node["metadata"]["uid"])
        return {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self._owner_uid, "controller": True}

    async def _inform(self) -> None:
        """One stream that starts with our slices (watch-list), then kept: resumed from the last
        resourceVersion when the server ends it, streamed again from the start only on 410 Gone
        (as client-go's reflector, with no periodic re-list). Where the API server refuses a
        watch-list, a LIST and a WATCH instead, from then on."""
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            try:
                if self._version is None and not self.watch_list:
                    await self._relist()
                    self._wake.set()
                await self._stream()
                if loop.time() - began >= RETRY_SECONDS:
                    continue  # the server's watch timeout: resume at once
            except (ApiError, httpx2.HTTPError, ValueError, LookupError, TypeError) as err:
                # the last three: an event that is not a watch event (bad JSON, no type or
                # object); the informer must outlive anything a server sends
                if self._version is None and self.watch_list and _watch_list_refused(err):
                    log.info("the API server refuses watch-list (%s): listing and watching instead", api_reason(err))
                    self.watch_list = False
                    continue
                if _gone(err):
                    self._version = None
                level = logging.DEBUG if self._listed.is_set() else logging.WARNING
                log.log(level, "ResourceSlice list or watch failed, retrying: %s", api_reason(err))
            await asyncio.sleep(RETRY_SECONDS)

    async def _stream(self) -> None:
        """One watch request, applied to the cache until the server ends it. Without a
        resourceVersion it is a watch-list: the initial ADDED events are collected and become
        the cache at the ``k8s.io/initial-events-end`` bookmark, as a list would."""
        initial: dict[str, Slice] | None = {} if self._version is None else None
        async with contextlib.aclosing(self._watch(initial is not None)) as events:
            async for event in events:
                initial = self._apply(event, initial)

    def _apply(self, event: dict[str, Any], initial: dict[str, Slice] | None) -> dict[str, Slice] | None:
        """One watch event: into the watch-list's snapshot while it streams (returned; None
        once it became the cache at its closing bookmark), else into the cache."""
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            raise ApiError(status=cast(Status, Status.from_dict(obj)))
        if kind == "BOOKMARK":
            annotations = obj["metadata"].get("annotations") or {}
            if initial is not None and annotations.get(INITIAL_EVENTS_END) == "true":
                self._listed_from(initial, obj["metadata"]["resourceVersion"])
                initial = None
            elif initial is None:
                self._version = obj["metadata"]["resourceVersion"]
        elif initial is not None:
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                initial.pop(name, None)
            else:
                initial[name] = obj
        else:
            self._on_event(kind, obj)
        return initial

    async def _watch(self, initial: bool) -> AsyncGenerator[dict[str, Any], None]:
        """The events of one watch request, decoded. Sent through lightkube's own HTTP client (its
        TLS and credentials) because its ``watch`` has neither ``sendInitialEvents`` nor bookmarks."""
        params: dict[str, str] = {"allowWatchBookmarks": "true", "fieldSelector": self._selector()}
        if initial:
            params |= {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
        elif self._version is not None:
            params["resourceVersion"] = self._version
        generic = self._client._client
        prepared = generic.prepare_request("list", ResourceSlice, watch=True, params=params)
        http = generic._client
        timeout = generic._watch_timeout  # no read timeout: a watch is quiet for minutes
        request = http.build_request(
            prepared.method, prepared.url, params=prepared.params, headers=UNCOMPRESSED, timeout=timeout
        )
        response = await http.send(request, stream=True)
        try:
            if not response.is_success:
                await response.aread()
                raise _error(response)
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            await response.aclose()

    def _selector(self) -> str:
        return build_selector({"spec.nodeName": self.node, "spec.driver": self.driver}, for_fields=True)

    def _listed_from(self, initial: dict[str, Slice], version: str) -> None:
        """The watch-list's snapshot becomes the cache, as a list's would; our writes newer than
        it (sent while it streamed) stay."""
        floor = _version_number(version)
        newer = {n: s for n, s in self._cache.items() if _version_number(s["metadata"].get("resourceVersion")) > floor}
        self._cache = initial | newer
        self._version = version
        self._floor = floor
        self._deleted_at.clear()  # as after a list
        self._listed.set()
        self._wake.set()

    def _on_event(self, kind: str, obj: Slice) -> None:
        """Apply a watch event to the cache; wake the sync loop only for news (not our echo)."""
        version = obj["metadata"].get("resourceVersion")
        if version:
            self._version = version
        number = _version_number(version)
        name = obj["metadata"]["name"]
        if number >= 0 and number <= self._known(name):
            return  # already known: listed, written by us, or deleted since
        cached = self._cache.get(name)
        if kind == "DELETED":
            if number >= 0:
                self._deleted_at[name] = number
            if cached is None:
                return  # we deleted it
            del self._cache[name]
            self._owner_uid = None  # the garbage collector's doing if the Node was re-created
        else:
            self._cache[name] = obj
        self._wake.set()

    def _remember(self, stored: Slice) -> None:
        """Our write's answer into the cache, unless the watch already brought a later state of
        the slice: the garbage collector deletes a slice with a stale owner UID within
        milliseconds, and its DELETED event can be applied before the create's answer is read;
        storing the answer then would keep a deleted slice in the cache for good."""
        name = stored["metadata"]["name"]
        number = _version_number(stored["metadata"].get("resourceVersion"))
        if number < 0 or number > self._known(name):
            self._cache[name] = stored

    def _known(self, name: str) -> int:
        """The latest resourceVersion the cache reflects for ``name``: the last list's, the
        cached slice's or its deletion's."""
        cached = self._cache.get(name)
        version = _version_number(cached["metadata"].get("resourceVersion")) if cached is not None else -1
        return max(self._floor, version, self._deleted_at.get(name, -1))


def _version_number(version: str | None) -> int:
    """A resourceVersion as a number, to tell stale events from news. Kubernetes calls them
    opaque, but etcd's revisions are what every API server sends; one that is not a number is
    taken as news (a needless compare, never a missed change)."""
    try:
        return int(version or "")
    except ValueError:
        return -1


def _error(response: httpx2.Response) -> httpx2.HTTPError:
    """A refused request as lightkube raises it (``ApiError`` with the server's Status), or
    httpx's own error when the body is not a Status."""
    try:
        return ApiError(request=response.request, response=response)
    except (ValueError, TypeError, KeyError):
        return httpx2.HTTPStatusError(f"HTTP {response.status_code}", request=response.request, response=response)


def _watch_list_refused(err: BaseException) -> bool:
    """The API server will not serve a watch-list: 422 (``sendInitialEvents is forbidden for watch
    unless the WatchList feature gate is enabled``, k8s.io/apimachinery pkg/apis/meta/internalversion/
    validation/validation.go) or a 400 from a server that knows no such option."""
    code = getattr(getattr(err, "status", None), "code", None)
    return code in (400, 422)


def _gone(err: BaseException) -> bool:
    """410 Gone: the watch's resourceVersion was compacted away; only a new list helps."""
    code = getattr(getattr(err, "status", None), "code", None)
    response = getattr(err, "response", None)
    return code == 410 or getattr(response, "status_code", None) == 410


def _leave_out_tainted(wanted: list[Slice]) -> None:
    for document in wanted:
        devices = document["spec"].get("devices") or []
        document["spec"]["devices"] = [d for d in devices if not d.get("taints")]


def _keep_taint_times(wanted: list[Slice], existing: Iterable[Slice]) -> None:
    """Give each wanted taint the ``timeAdded`` the server gave the same taint of the same device."""
    stamped = {
        (device["name"], taint.get("key"), taint.get("value", ""), taint.get("effect")): taint["timeAdded"]
        for s in existing
        for device in s["spec"].get("devices") or []
        for taint in device.get("taints") or []
        if taint.get("timeAdded")
    }
    for document in wanted:
        for device in document["spec"].get("devices") or []:
            for taint in device.get("taints") or []:
                key = (device["name"], taint.get("key"), taint.get("value", ""), taint.get("effect"))
                if key in stamped:
                    taint["timeAdded"] = stamped[key]


def _matches(actual: Slice, wanted: Slice, generation: int) -> bool:
    pool = actual["spec"]["pool"]
    spec = dict(wanted["spec"])
    spec["pool"] = {**spec["pool"], "generation": generation}
    owners = actual["metadata"].get("ownerReferences") or []
    return (
        pool.get("generation") == generation
        and contains(actual["spec"], spec)
        and _taints(actual["spec"]) == _taints(spec)
        and len(owners) == 1
    )


def _taints(spec: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each device's taints without the server's ``timeAdded``: compared exactly, as
    :func:`contains` would take a taint we dropped (a recovered device) for a server default."""
    return [
        (d["name"], [(t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in d.get("taints") or []])
        for d in spec.get("devices") or []
    ]
