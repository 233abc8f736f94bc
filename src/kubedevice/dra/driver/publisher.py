"""ResourceSlice publisher: keeps the API server's slices of this node's pool equal to the driver's.

What ``resourceslice.Controller`` does for Go drivers, for one node-local pool: the slices are
owned by the Node (so they go with it), named ``<node>-<driver>-<index>``, at most 128 devices
each with ``resourceSliceCount`` set. The pool generation goes up by one on every change, so
the scheduler never mixes slices of two versions; slices of older generations and surplus
indexes are deleted. A change of devices or health republishes at once; a watch on our
slices republishes when someone else edits or deletes one; a periodic resync catches the rest.

Its API load is less than ``resourceslice.Controller``'s
(k8s.io/dynamic-resource-allocation/resourceslice/resourceslicecontroller.go): our slices are
listed once and kept by one watch (resumed from its resourceVersion, listed again only on 410
Gone), so a resync or a change compares with that cache and sends nothing when nothing
differs; the Node is read once for its UID (again only after a refused write or an external
deletion of our slices, as when the Node was re-created and the garbage collector took them);
and writes are coalesced per node: after a sync that wrote, the next waits ``min_interval``
and then sends the latest devices in one go, where the Go controller's only coalescing is its
client's rate limiter (QPS 5, burst 10).
An unhealthy device's taint is sent without ``timeAdded`` (the API server stamps it) and keeps
the stamp it got as long as it stays, so a rewrite for another reason does not restart it.
An API server without the DRADeviceTaints feature gate (off by default before 1.36) drops
taints silently; then a tainted device would look healthy, so from then on devices with a
taint are left out of the slices instead, with an error in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import httpx2
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.operators import BinaryOperator, SequenceOperator
from lightkube.resources.core_v1 import Node
from lightkube.resources.resource_v1 import ResourceSlice

from ...errors import api_reason
from ..models import ResourceSlice as SliceModel
from ..models import to_document
from ..validation import validate

RESYNC_SECONDS = 60.0
RETRY_SECONDS = 1.0
MIN_INTERVAL_SECONDS = 0.5
"""The default per-node write rate limit: at most two syncs that write per second, each with
the latest devices; short enough that a change still reaches the API server within a second."""
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


class InvalidSlices(ValueError):
    """The driver's devices make slices the API server would refuse (the message names the field)."""


class SlicePublisher:
    """Publishes ``desired()`` for ``driver`` on ``node``; call :meth:`changed` after every change.

    ``min_interval`` (seconds, default :data:`MIN_INTERVAL_SECONDS`) is the per-node write rate
    limit: after a sync that wrote, the next write waits that long, and whatever changed
    meanwhile goes out in that one write, always the latest devices. The first change after a
    quiet period goes out at once.
    """

    def __init__(
        self,
        client: AsyncClient,
        driver: str,
        node: str,
        desired: Desired,
        *,
        min_interval: float = MIN_INTERVAL_SECONDS,
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
        self._owner_uid: str | None = None
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
        problems = [f"{s.metadata.name}: {e}" for s in desired for e in validate(s)]
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
        self._listed.set()

    async def _owner(self) -> dict[str, Any]:
        """The Node as owner. Its UID is read once and again only after a refused write or an
        external deletion of our slices (the garbage collector's, when the Node was re-created)."""
        if self._owner_uid is None:
            node = (await self._client.get(Node, self.node)).to_dict()
            self._owner_uid = str(node["metadata"]["uid"])
        return {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self._owner_uid, "controller": True}

    async def _inform(self) -> None:
        """One list, then a watch resumed from the last resourceVersion seen; a list again only
        when the server answers 410 Gone (as client-go's reflector, with no periodic re-list)."""
        while True:
            try:
                if self._version is None:
                    await self._relist()
                    self._wake.set()
                async for kind, obj in self._client.watch(
                    ResourceSlice, fields=self._fields(), resource_version=self._version
                ):
                    self._on_event(kind, obj.to_dict())
            except (ApiError, httpx2.HTTPError) as err:
                if _gone(err):
                    self._version = None
                level = logging.DEBUG if self._listed.is_set() else logging.WARNING
                log.log(level, "ResourceSlice list or watch failed, retrying: %s", api_reason(err))
            await asyncio.sleep(RETRY_SECONDS)

    def _on_event(self, kind: str, obj: Slice) -> None:
        """Apply a watch event to the cache; wake the sync loop only for news (not our echo)."""
        version = obj["metadata"].get("resourceVersion")
        if version:
            self._version = version
        number = _version_number(version)
        name = obj["metadata"]["name"]
        cached = self._cache.get(name)
        known = _version_number(cached["metadata"].get("resourceVersion")) if cached is not None else -1
        if number >= 0 and (number <= self._floor or number <= known):
            return  # already known: listed, or written by us
        if kind == "DELETED":
            if cached is None:
                return  # we deleted it
            del self._cache[name]
            self._owner_uid = None  # the garbage collector's doing if the Node was re-created
        else:
            self._cache[name] = obj
        self._wake.set()

    def _remember(self, stored: Slice) -> None:
        self._cache[stored["metadata"]["name"]] = stored


def _version_number(version: str | None) -> int:
    """A resourceVersion as a number, to tell stale events from news. Kubernetes calls them
    opaque, but etcd's revisions are what every API server sends; one that is not a number is
    taken as news (a needless compare, never a missed change)."""
    try:
        return int(version or "")
    except ValueError:
        return -1


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
