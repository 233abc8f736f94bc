"""``ConfiguredPlugin``: a resource described by config, served without writing code.

It discovers its devices through the host root, follows hotplug with inotify, runs the
configured health checks (on an interval and on every change), keeps CDI spec files in step
with the devices, builds Allocate artefacts (env templates over the allocated set) and answers
GetPreferredAllocation with the configured sharing/NUMA policy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from ..allocation.cdi import CdiError, CdiSpecDir, container_edits
from ..allocation.sharing import Layout, SharingPolicy, check_one_replica_per_device, physical
from ..device import ContainerAllocation, Device, DeviceError, Mount
from ..health.checks import HealthChecker
from ..health.tracker import HealthTracker
from ..plugin.base import Plugin, merge_grants
from ..plugin.server import RpcFailure
from .base import Found
from .discovery import advertised, find, watched_patterns
from .hostroot import HostRoot
from .schema import ResourceConfig
from .sysfs import numa_distances
from .watch import HotplugWatcher

log = logging.getLogger("kubedevice.sources")


class ConfiguredPlugin(Plugin):
    """One configured resource (static, glob, usb or pci source) as a served plugin."""

    #: Called with the check type ("present", "exec", ...) for every failed check (metrics).
    on_check_failure: Callable[[str], None] | None = None

    def __init__(self, resource: ResourceConfig, host_root: Path, cdi_dir: Path | None = None) -> None:
        self.config = resource
        self.host = HostRoot(host_root)
        self._tracker = HealthTracker(resource.health.failure_threshold, resource.health.recovery_threshold)
        self._checker: HealthChecker | None = None
        self._cdi = CdiSpecDir(cdi_dir, resource.cdi_kind) if cdi_dir and resource.cdi else None
        self._cdi_behind = False  # the last write failed (a full disk): retry until it works
        self._policy = SharingPolicy(resource.policy, resource.one_replica_per_device, numa_distances(self.host))
        self._found: list[Found] = find(resource, self.host)
        super().__init__(resource.name, advertised(resource, self._found))
        self._layout = Layout.of(self.devices())
        self._sync_cdi()

    @property
    def found(self) -> list[Found]:
        """The physical devices as last discovered."""
        return list(self._found)

    # -- discovery and hotplug -----------------------------------------------------------
    def rescan(self) -> None:
        """Re-discover and publish; new devices start Healthy, vanished ones leave the list."""
        self._apply(find(self.config, self.host))

    async def rescan_async(self) -> None:
        """:meth:`rescan` with the sysfs reads in a worker thread (thousands of files on big nodes)."""
        self._apply(await asyncio.to_thread(find, self.config, self.host))

    def _apply(self, found: list[Found]) -> None:
        changed = found != self._found
        self._found = found
        self._tracker.retain(f.key for f in found)
        self._republish()
        if changed or self._cdi_behind:
            self._sync_cdi_logged()

    def _sync_cdi_logged(self) -> None:
        """Keep serving when the CDI directory cannot be written; a later change or health round retries."""
        try:
            self._sync_cdi()
        except CdiError as err:
            self._cdi_behind = True
            log.error("%s: %s", self.resource_name, err)
            return
        if self._cdi_behind:
            log.info("%s: CDI spec files written again", self.resource_name)
        self._cdi_behind = False

    def _republish(self) -> None:
        """Publish the current devices; the allocation layout follows every change (IDs or health)."""
        health = {f.key: self._tracker.health(f.key) for f in self._found}
        devices = advertised(self.config, self._found, health)
        if devices != self.devices():
            self.publish(devices)
            self._layout = Layout.of(devices)

    def _sync_cdi(self) -> None:
        if self._cdi is None:
            return
        mounts = [Mount(m.host_path, m.container_path or "", m.read_only) for m in self.config.mounts]
        self._cdi.sync({f.key: container_edits(f.host_paths, self.config.permissions, mounts) for f in self._found})

    async def run(self) -> None:
        """Follow hotplug events and run health checks until cancelled.

        CDI spec files outlive a restart on purpose: a container created meanwhile still
        finds its device; the next start's sync removes what vanished in between.
        """
        changed = asyncio.Event()
        self._checker = HealthChecker(self.config.health.checks, self.host)
        with HotplugWatcher(self.host, watched_patterns(self.config), changed.set):
            await self.rescan_async()
            await asyncio.gather(self._follow_hotplug(changed), self._check_periodically())

    async def _follow_hotplug(self, changed: asyncio.Event) -> None:
        while True:
            await changed.wait()
            changed.clear()
            await self.rescan_async()

    async def _check_periodically(self) -> None:
        while True:
            await self.check_health()
            await asyncio.sleep(self.config.health.interval_seconds)

    async def check_health(self) -> None:
        """One round of checks over the current devices; changes are streamed at once."""
        if self._checker is None:
            self._checker = HealthChecker(self.config.health.checks, self.host)
        found = list(self._found)
        results = await self._checker.run(found)
        current = {f.key for f in self._found}
        for key, reason in results.items():
            if key not in current:
                continue
            if reason is not None and self.on_check_failure is not None:
                self.on_check_failure(reason.check)
            before = self._tracker.health(key)
            after = self._tracker.observe(key, reason is None)
            if after != before:
                log.warning("%s device %s is %s%s", self.resource_name, key, after, f": {reason}" if reason else "")
        self._republish()
        if self._cdi_behind:
            self._sync_cdi_logged()

    # -- allocation -------------------------------------------------------------------------
    def allocate(self, devices: Sequence[Device]) -> ContainerAllocation:
        """Merge the grants and add the env templates rendered over the allocated set."""
        if self.config.one_replica_per_device:
            try:
                check_one_replica_per_device(devices)
            except DeviceError as err:
                raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, str(err)) from err
        merged = merge_grants(devices)
        if not self.config.env:
            return merged
        envs = dict(merged.envs)
        envs.update(self._render_env(devices))
        return ContainerAllocation(envs, merged.mounts, merged.devices, merged.annotations, merged.cdi_devices)

    def _render_env(self, devices: Sequence[Device]) -> dict[str, str]:
        by_key = {f.key: f for f in self._found}
        groups = list(dict.fromkeys(physical(d) for d in devices))
        paths = [p for g in groups if g in by_key for p in by_key[g].host_paths]
        fields = {
            "ids": ",".join(d.id for d in devices),
            "devices": ",".join(groups),
            "paths": ",".join(dict.fromkeys(paths)),
            "count": str(len(devices)),
            "resource": self.resource_name,
        }
        return {name: template.format_map(fields) for name, template in self.config.env.items()}

    def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return self._policy.choose(available, must_include, size, self._layout)
