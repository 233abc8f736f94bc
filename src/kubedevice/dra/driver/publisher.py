"""ResourceSlice publisher: keeps the API server's slices of this node's pool equal to the driver's.

What ``resourceslice.Controller`` does for Go drivers, for one node-local pool: the slices are
owned by the Node (so they go with it), named ``<node>-<driver>-<index>``, at most 128 devices
each with ``resourceSliceCount`` set. The pool generation goes up by one on every change, so
the scheduler never mixes slices of two versions; slices of older generations and surplus
indexes are deleted. A change of devices or health republishes at once; a watch on our
slices republishes when someone else edits or deletes one; a periodic resync catches the rest.
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
    """Publishes ``desired()`` for ``driver`` on ``node``; call :meth:`changed` after every change."""

    def __init__(self, client: AsyncClient, driver: str, node: str, desired: Desired) -> None:
        self._client = client
        self.driver = driver
        self.node = node
        self._desired = desired
        self._wake = asyncio.Event()
        self.generation = 0
        self.published = asyncio.Event()
        self.on_publish: Callable[[float], None] | None = None
        self.taints_dropped = False
        """The API server dropped the taints we wrote: tainted devices are left out since."""

    def changed(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Sync now and after every change, external edit or resync period, until cancelled."""
        watcher = asyncio.create_task(self._watch())
        try:
            while True:
                self._wake.clear()
                try:
                    await self.sync()
                except InvalidSlices as err:  # retrying cannot help: wait for the devices to change
                    log.error("not publishing ResourceSlices: %s", err)
                except (ApiError, httpx2.HTTPError) as err:
                    log.warning("publishing ResourceSlices failed, retrying: %s", api_reason(err))
                    await asyncio.sleep(RETRY_SECONDS)
                    continue
                # Not asyncio.wait_for: on 3.11 it swallows a cancellation that arrives as the
                # event is set, and the driver would never stop.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESYNC_SECONDS):
                        await self._wake.wait()
        finally:
            watcher.cancel()

    async def sync(self) -> None:
        """One reconciliation: bump the generation and rewrite if anything differs, delete the rest."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        desired = self._desired()
        problems = [f"{s.metadata.name}: {e}" for s in desired for e in validate(s)]
        if problems:
            raise InvalidSlices(f"{problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        wanted = [to_document(s) for s in desired]
        if self.taints_dropped:
            _leave_out_tainted(wanted)
        existing = {s["metadata"]["name"]: s for s in await self._list()}
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
                stored = await self._client.create(obj)
            else:
                stored = await self._client.replace(obj)
            if not self.taints_dropped and _taints(stored.to_dict()["spec"]) != _taints(document["spec"]):
                log.error(
                    "the API server dropped the device taints of ResourceSlice %s (is the DRADeviceTaints "
                    "feature gate off?): unhealthy devices are left out of the slices from now on; enable "
                    "the gate or set dra.unhealthy_taint: off",
                    document["metadata"]["name"],
                )
                self.taints_dropped = True
                self._wake.set()  # publish again at once, without the devices the scheduler takes for healthy

    async def _delete(self, name: str) -> None:
        try:
            await self._client.delete(ResourceSlice, name)
        except ApiError as err:
            if err.status.code != 404:
                raise

    def _fields(self) -> dict[str, str | BinaryOperator | SequenceOperator]:
        return {"spec.nodeName": self.node, "spec.driver": self.driver}

    async def _list(self) -> list[Slice]:
        return [s.to_dict() async for s in self._client.list(ResourceSlice, fields=self._fields())]

    async def _owner(self) -> dict[str, Any]:
        """The Node as owner, read at each write: a re-created Node has a new UID."""
        node = (await self._client.get(Node, self.node)).to_dict()
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.node,
            "uid": node["metadata"]["uid"],
            "controller": True,
        }

    async def _watch(self) -> None:
        """Wake the sync loop on any event on our slices (someone edited or deleted one)."""
        while True:
            try:
                async for _event, _slice in self._client.watch(ResourceSlice, fields=self._fields()):
                    self._wake.set()
            except (ApiError, httpx2.HTTPError) as err:
                log.debug("ResourceSlice watch ended: %s", api_reason(err))
            await asyncio.sleep(RETRY_SECONDS)


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
