"""Prepared claims: prepare and unprepare, serialized, idempotent, one answer per claim.

What Go drivers get from ``kubeletplugin.Helper`` plus the example driver's state: claims are
fetched before taking the lock (slow API calls must not hold up other requests), then every
prepare and unprepare runs under one lock, writes the claim's CDI spec and records the claim
in the checkpoint. A claim already prepared is answered from the checkpoint without fetching
it again; unpreparing an unknown claim succeeds. A bad claim gets its own error and never
fails the others. With device metadata (:mod:`.metadata`) a prepare also writes the claim's
metadata files and their CDI specs, and an unprepare removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from ...allocation.cdi import CdiError, Spec
from ...device import EMPTY_ALLOCATION, ContainerAllocation, Device
from ...errors import KubedeviceError
from ...plugin.base import Plugin
from ..nodeclaims import AllocatedDevice, Claim, ClaimRef, PreparedClaim, PreparedDevice, PrepareResult
from . import checkpoint as ckpt
from .cdi import ClaimSpecs
from .metadata import AttributeLookup, Document, MetadataFiles, add_device_ids, describe
from .opaque import configs_for, edits_for

log = logging.getLogger("kubedevice.dra.state")


class ClaimError(KubedeviceError):
    """A claim that cannot be fetched; the message names it and says why."""


class ClaimSource(Protocol):
    """Where ResourceClaims come from: the API server, or files for offline tests."""

    async def get(self, namespace: str, name: str) -> Claim: ...


@dataclass(frozen=True, slots=True)
class Offered:
    """A device this driver publishes, with the plugin that grants it."""

    plugin: Plugin
    device: Device


Resolver = Callable[[str], Offered | None]


class PrepareFailed(KubedeviceError):
    """One claim cannot be prepared (its message goes into that claim's answer)."""


class ClaimState:
    """The prepared claims of one driver on one node, persisted in a checkpoint."""

    def __init__(
        self,
        driver: str,
        pool: str,
        resolve: Resolver,
        specs: ClaimSpecs,
        *,
        checkpoint_path: Path,
        boot_id: str,
        shared_lock: Path | None = None,
        metadata: MetadataFiles | None = None,
        attributes: AttributeLookup | None = None,
    ) -> None:
        """``shared_lock``: a file to ``flock`` around every change, for two driver instances
        (a rolling update) sharing the checkpoint; each then re-reads it under the lock.
        ``metadata``: where claims' device metadata goes; it is written for new claims only with
        ``attributes`` (the devices' attributes by name), and restored and removed for claims that
        have it either way (the kubelet holds its CDI IDs until it unprepares them)."""
        self.driver = driver
        self.pool = pool
        self._resolve = resolve
        self._specs = specs
        self._metadata = metadata
        self._attributes = attributes
        self._path = checkpoint_path
        self._boot_id = boot_id
        self._lock = asyncio.Lock()
        self._shared_lock = shared_lock
        with _flocked(shared_lock):
            self._checkpoint, stale = ckpt.load(checkpoint_path, boot_id)
            self._recover(stale)

    def _exclusive(self) -> contextlib.AbstractAsyncContextManager[object]:
        """This instance's lock; in a rolling update also the shared one. The plain lock alone
        without a generator-based context manager around it: that was a quarter of a one-claim
        unprepare's own time in a profile."""
        return self._lock if self._shared_lock is None else self._exclusive_shared(self._shared_lock)

    @contextlib.asynccontextmanager
    async def _exclusive_shared(self, shared_lock: Path) -> AsyncIterator[None]:
        """This instance's lock, then the shared one (in a thread: flock blocks) and a fresh checkpoint."""
        async with self._lock:
            handle = await asyncio.to_thread(_lock_file, shared_lock)
            try:
                self._checkpoint, _ = ckpt.load(self._path, self._boot_id)
                yield
            finally:
                handle.close()

    def prepared(self) -> dict[str, PreparedClaim]:
        return {uid: e.claim for uid, e in self._checkpoint.claims.items()}

    def is_prepared(self, uid: str) -> bool:
        return uid in self._checkpoint.claims

    def _recover(self, stale: Mapping[str, ckpt.Entry]) -> None:
        """After a restart: restore missing specs of prepared claims, remove every other spec of ours."""
        for uid, entry in self._checkpoint.claims.items():
            if entry.cdi_spec is not None and not self._specs.exists(uid):
                log.warning("restoring the CDI spec of prepared claim %s/%s", entry.claim.namespace, entry.claim.name)
                self._specs.write(uid, entry.cdi_spec)
        for uid in (self._specs.owned_claims() | set(stale)) - set(self._checkpoint.claims):
            log.info("removing the CDI spec of claim %s, which is not prepared", uid)
            self._specs.remove(uid)
        if self._metadata is not None:
            with_metadata = self._with_metadata(self._checkpoint.claims)
            self._metadata.remove_others(with_metadata)
            for ref, document in with_metadata:
                self._metadata.write(ref, document)  # unchanged files are left as they are
        ckpt.save(self._path, self._checkpoint)

    @staticmethod
    def _with_metadata(entries: Mapping[str, ckpt.Entry]) -> list[tuple[ClaimRef, Document]]:
        return [
            (ClaimRef(e.claim.namespace, e.claim.name, uid), e.metadata)
            for uid, e in entries.items()
            if e.metadata is not None
        ]

    # -- prepare ------------------------------------------------------------------------------
    async def prepare(self, refs: Sequence[ClaimRef], source: ClaimSource) -> dict[str, PrepareResult]:
        """Prepare every claim; the answer has one entry per claim UID."""
        wanted = [r for r in refs if r.uid not in self._checkpoint.claims]
        answers = await asyncio.gather(*(self._fetch(r, source) for r in wanted))
        fetched = dict(zip(wanted, answers, strict=True))  # by ref: a repeated UID with another name is its own fetch
        async with self._exclusive():
            results: dict[str, PrepareResult] = {}
            added: list[str] = []
            for ref in refs:
                entry = self._checkpoint.claims.get(ref.uid)
                if entry is not None:
                    results[ref.uid] = self._again(ref.uid, entry)
                    continue
                claim = fetched.get(ref) or await self._fetch(ref, source)  # prepared and gone meanwhile
                if isinstance(claim, str):
                    results[ref.uid] = PrepareResult(error=claim)
                    continue
                try:
                    results[ref.uid] = PrepareResult(devices=tuple(await self._prepare_one(ref, claim)))
                    added.append(ref.uid)
                except (PrepareFailed, CdiError) as err:
                    results[ref.uid] = PrepareResult(error=str(err))
            if added:
                self._persist_or_undo(added, results)
            return results

    async def _fetch(self, ref: ClaimRef, source: ClaimSource) -> Claim | str:
        try:
            claim = await source.get(ref.namespace, ref.name)
        except ClaimError as err:
            return str(err)
        if claim.uid != ref.uid:
            return f"claim {ref.namespace}/{ref.name} was replaced: its UID is {claim.uid}, not {ref.uid}"
        if not claim.allocated:
            return f"claim {ref} is not allocated"
        return claim

    def _again(self, uid: str, entry: ckpt.Entry) -> PrepareResult:
        """A repeated prepare: the same answer, and the CDI spec and metadata back if someone removed them."""
        try:
            if entry.cdi_spec is not None and not self._specs.exists(uid):
                self._specs.write(uid, entry.cdi_spec)
            if entry.metadata is not None and self._metadata is not None:
                self._metadata.write(ClaimRef(entry.claim.namespace, entry.claim.name, uid), entry.metadata)
        except CdiError as err:
            return PrepareResult(error=str(err))
        return PrepareResult(devices=tuple(entry.claim.devices))

    async def _prepare_one(self, ref: ClaimRef, claim: Claim) -> list[PreparedDevice]:
        mine = [r for r in claim.results if r.driver == self.driver and r.pool == self.pool]
        offered = self._offered(ref, mine)
        grants = await self._grants(mine, offered)
        self._configure(ref, claim, mine, offered, grants)
        spec: Spec | None = None
        metadata, metadata_ids = self._write_metadata(ref, claim, mine)
        if grants:
            try:
                spec = self._specs.spec(ref.uid, list(grants.items()))
                self._specs.write(ref.uid, spec)
            except CdiError:
                self._remove_metadata(ref, metadata)
                raise
        requests: dict[str, dict[str, None]] = {}
        for result in mine:
            requests.setdefault(result.device, {})[result.base_request] = None
        devices = [
            PreparedDevice(
                tuple(requests[result.device]),
                result.pool,
                result.device,
                (self._specs.device_id(ref.uid, result.device), *offered[result.device].device.grant.cdi_devices),
                result.share_id,
            )
            for result in _unique(mine)
        ]
        if metadata_ids:
            devices = add_device_ids(devices, metadata_ids)
        entry = ckpt.Entry(PreparedClaim(ref.namespace, ref.name, devices), spec, metadata)
        self._checkpoint.claims[ref.uid] = entry
        log.info("prepared claim %s: %s", ref, ", ".join(d.device for d in devices) or "no devices of this driver")
        return devices

    def _write_metadata(
        self, ref: ClaimRef, claim: Claim, results: Sequence[AllocatedDevice]
    ) -> tuple[Document | None, dict[str, str]]:
        """The claim's device metadata written (when enabled and it has devices of ours) and, per
        base request, its CDI device ID."""
        if self._metadata is None or self._attributes is None or not results:
            return None, {}
        try:
            document = describe(claim, results, self.driver, self._attributes)
        except ValueError as err:  # the devices' attributes cannot be computed (SliceError)
            raise PrepareFailed(f"claim {ref}: device metadata: {err}") from err
        return document, self._metadata.write(ref, document)

    def _remove_metadata(self, ref: ClaimRef, document: Document | None) -> str | None:
        """Remove a claim's metadata files; then put back those of a prepared claim of the same
        namespace and name (another UID: the old claim of a deleted and re-created name), whose
        files share the claim's directory."""
        if document is None or self._metadata is None:
            return None
        error = self._metadata.remove(ref.namespace, ref.name, ref.uid, document)
        for other, other_document in self._with_metadata(self._checkpoint.claims):
            if other.uid != ref.uid and (other.namespace, other.name) == (ref.namespace, ref.name):
                try:
                    self._metadata.write(other, other_document)
                except CdiError as err:
                    log.warning("%s", err)
        return error

    def _offered(self, ref: ClaimRef, results: Sequence[AllocatedDevice]) -> dict[str, Offered]:
        offered: dict[str, Offered] = {}
        missing: list[str] = []
        for result in results:
            found = self._resolve(result.device)
            if found is None:
                missing.append(result.device)
            else:
                offered[result.device] = found
        if missing:
            raise PrepareFailed(f"claim {ref}: devices {', '.join(sorted(set(missing)))} are not offered by this node")
        return offered

    async def _grants(
        self, results: Sequence[AllocatedDevice], offered: Mapping[str, Offered]
    ) -> dict[str, ContainerAllocation]:
        """Per device, its own nodes and mounts; the first device of a request carries the envs
        that the plugin's ``allocate`` gives for all devices of that request (the merged grants
        plus the config's env templates), so a container sees what Allocate would give it."""
        by_request: dict[str, list[AllocatedDevice]] = {}
        for result in _unique(results):
            by_request.setdefault(result.base_request, []).append(result)
        grants: dict[str, ContainerAllocation] = {}
        for members in by_request.values():
            first = offered[members[0].device]
            merged = await _allocate(first.plugin, [offered[m.device].device for m in members])
            for index, member in enumerate(members):
                own = offered[member.device].device.grant
                envs = merged.envs if index == 0 else {}  # as one container would get them from Allocate
                grants.setdefault(member.device, ContainerAllocation(envs, own.mounts, own.devices))
        return grants

    def _configure(
        self,
        ref: ClaimRef,
        claim: Claim,
        results: Sequence[AllocatedDevice],
        offered: Mapping[str, Offered],
        grants: dict[str, ContainerAllocation],
    ) -> None:
        """Add what the class's and the claim's opaque config (and ``adminAccess``) ask for to each
        device's edits. An admin-access result is prepared like any other: the kubelet plugin
        helper reserves nothing, so a device already prepared for another claim is no obstacle."""
        for result in _unique(results):
            plugin, device = offered[result.device].plugin, offered[result.device].device
            try:
                configs = configs_for(claim.config, result, self.driver)
                edits = edits_for(plugin, device, configs, result.admin_access)
            except Exception as err:
                if not isinstance(err, ValueError):
                    log.exception("apply_config hook of %s failed", plugin.resource_name)
                raise PrepareFailed(f"claim {ref}: device {result.device} (request {result.request}): {err}") from err
            if edits != EMPTY_ALLOCATION:
                grants[result.device] = ContainerAllocation.merge([edits, grants[result.device]])

    def _persist_or_undo(self, added: Iterable[str], results: dict[str, PrepareResult]) -> None:
        try:
            ckpt.save(self._path, self._checkpoint)
        except OSError as err:
            message = f"cannot write the checkpoint {self._path}: {err.strerror or err}"
            for uid in added:
                entry = self._checkpoint.claims.pop(uid)
                self._specs.remove(uid)
                self._remove_metadata(ClaimRef(entry.claim.namespace, entry.claim.name, uid), entry.metadata)
                results[uid] = PrepareResult(error=message)

    # -- unprepare ----------------------------------------------------------------------------
    async def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        """Unprepare every claim; per UID an error message, empty when done (or never prepared)."""
        async with self._exclusive():
            uids = [r.uid for r in refs]
            failed = self._specs.remove_each(uids)  # gone before we answer: a container may start next
            errors = dict.fromkeys(uids, "")
            errors.update(failed)
            removed: dict[str, ckpt.Entry] = {}
            logged = log.isEnabledFor(logging.INFO)  # once per call, not per claim
            claims = self._checkpoint.claims
            for ref in refs:
                entry = None if ref.uid in failed else claims.pop(ref.uid, None)
                if entry is not None and entry.metadata is not None:
                    error = self._remove_metadata(
                        ClaimRef(entry.claim.namespace, entry.claim.name, ref.uid), entry.metadata
                    )
                    if error is not None:
                        claims[ref.uid] = entry
                        errors[ref.uid] = error
                        continue
                if entry is not None:
                    removed[ref.uid] = entry
                    if logged:
                        log.info("unprepared claim %s", ref)
            if removed:
                try:
                    ckpt.save(self._path, self._checkpoint)
                except OSError as err:
                    self._checkpoint.claims.update(removed)
                    for uid in removed:
                        errors[uid] = f"cannot write the checkpoint {self._path}: {err.strerror or err}"
            return errors


def _unique(results: Iterable[AllocatedDevice]) -> list[AllocatedDevice]:
    """One result per device (several requests may share a device through ``shareID``: first wins)."""
    seen: dict[str, AllocatedDevice] = {}
    for result in results:
        seen.setdefault(result.device, result)
    return list(seen.values())


async def _allocate(plugin: Plugin, devices: list[Device]) -> ContainerAllocation:
    """The plugin's grant for one request's devices; a failing hook fails that claim only."""
    try:
        answer = plugin.allocate(devices)
        return await answer if inspect.isawaitable(answer) else answer
    except Exception as err:
        log.exception("allocate hook of %s failed", plugin.resource_name)
        ids = ", ".join(d.id for d in devices)
        raise PrepareFailed(f"{plugin.resource_name} cannot grant {ids}: {type(err).__name__}: {err}") from err


def _lock_file(path: Path) -> IO[bytes]:
    path.parent.mkdir(exist_ok=True)  # our directory, inside the kubelet's plugins/: never create that
    handle = path.open("ab")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


@contextlib.contextmanager
def _flocked(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with _lock_file(path):
        yield
