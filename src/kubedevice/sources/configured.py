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

from ..allocation.cdi import CdiError, CdiSpecDir, container_edits, with_ownership
from ..allocation.sharing import Layout, SharingPolicy, check_one_replica_per_device, physical
from ..device import ContainerAllocation, Device, DeviceError, Health
from ..health.checks import HealthChecker
from ..health.tracker import HealthTracker
from ..plugin.base import Plugin, merge_grants
from ..plugin.server import RpcFailure
from .base import Found, stable_key
from .discovery import advertised, find, node_grant, refused, watched_patterns
from .facts import ENV_FACTS, env_facts
from .facts import attribute_text as _text
from .hostroot import HostRoot
from .schema import PATH_FIELDS, ResourceConfig, template_fields
from .sysfs import numa_distances
from .watch import HotplugWatcher

log = logging.getLogger("kubedevice.sources")


class ConfiguredPlugin(Plugin):
    """One configured resource (static, glob, usb, pci or udev source) as a served plugin."""

    #: Called with the check type ("present", "exec", ...) for every failed check (metrics).
    on_check_failure: Callable[[str], None] | None = None

    def __init__(
        self, resource: ResourceConfig, host_root: Path, cdi_dir: Path | None = None, found: list[Found] | None = None
    ) -> None:
        """``found``: the devices, when discovery already ran (``discover`` measures their limits)."""
        self.config = resource
        self.host = HostRoot(host_root)
        self._tracker = HealthTracker(resource.health.failure_threshold, resource.health.recovery_threshold)
        self._checker: HealthChecker | None = None
        self._cdi = CdiSpecDir(cdi_dir, resource.cdi_kind) if cdi_dir and resource.cdi else None
        self._cdi_behind = False  # the last write failed (a full disk): retry until it works
        self._policy = SharingPolicy(resource.policy, resource.one_replica_per_device, numa_distances(self.host))
        self._found: list[Found] = find(resource, self.host) if found is None else found
        self._unusable: set[str] = set()  # advertised, seen still, but refused now: listed Unhealthy
        self._by_key = {f.key: f for f in self._found}
        self._per_container = resource.cdi is None and _names_devices(resource)
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
        kept = self._still_seen(found)
        self._unusable = {f.key for f in kept}
        found = found + kept
        changed = found != self._found
        self._found = found
        self._by_key = {f.key: f for f in found}
        self._tracker.retain(f.key for f in found)
        self._republish()
        if changed or self._cdi_behind:
            self._sync_cdi_logged()

    def _still_seen(self, found: list[Found]) -> list[Found]:
        """The devices that left ``found`` but that the source refuses rather than misses (see
        :attr:`~kubedevice.sources.source.Source.unusable_stays`)."""
        source, config = self.config.source
        present = {f.key for f in found}
        gone = [f for f in self._found if f.key not in present]
        if not gone or not source.unusable_stays(config):
            return []
        refusals = {stable_key(name) for name, _ in refused(self.config, self.host)}
        return [f for f in gone if f.key in refusals]

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
        health = {
            f.key: Health.UNHEALTHY if f.key in self._unusable else self._tracker.health(f.key) for f in self._found
        }
        devices = advertised(self.config, self._found, health)
        if devices != self.devices():
            self.publish(devices)
            self._layout = Layout.of(devices)

    def _sync_cdi(self) -> None:
        if self._cdi is None:
            return
        owner = self.config.device_ownership
        ids = (owner.uid, owner.gid, owner.file_mode) if owner else (None, None, None)
        self._cdi.sync({f.key: with_ownership(self._cdi_edits(f), *ids) for f in self._found})

    def _cdi_edits(self, found: Found) -> dict[str, object]:
        """The spec of a device alone: exact for every container, since cdi refuses ``{index}``."""
        own = node_grant(self.config, found, 0)
        host_paths = [d.host_path for d in own.devices]
        inside = [d.container_path for d in own.devices]
        return container_edits(host_paths, self.config.permissions, own.mounts, inside)

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
        """Health rounds; a source whose changes no event reports is rescanned before each."""
        source, config = self.config.source
        while True:
            await self.check_health()
            await asyncio.sleep(self.config.health.interval_seconds)
            if source.polled(config):
                await self.rescan_async()

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
        """Merge the grants; place templated nodes and mounts per container; render the env templates.

        ``{index}`` in a ``container_path`` counts the physical devices of this one container in the
        order of the request's IDs, so device ``i`` of ``{ids}`` is entry ``i`` of ``{container_paths}``.
        """
        if self.config.one_replica_per_device:
            try:
                check_one_replica_per_device(devices)
            except DeviceError as err:
                raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, str(err)) from err
        merged = merge_grants(devices)
        if not self._per_container and not self.config.env:
            return merged
        granted = self._granted(devices)
        envs, nodes = merged.envs, merged
        if self._per_container:
            nodes = _without_clashes(granted)
        if self.config.env:
            envs = {**merged.envs, **self._render_env(devices, granted)}
        return ContainerAllocation(envs, nodes.mounts, nodes.devices, merged.annotations, merged.cdi_devices)

    def _granted(self, devices: Sequence[Device]) -> dict[str, ContainerAllocation]:
        """Per physical device of the request (first-seen order), its nodes and mounts as the i-th."""
        keys = list(dict.fromkeys(physical(d) for d in devices))
        gone = [k for k in keys if k not in self._by_key]
        if gone:
            raise RpcFailure(grpc.StatusCode.FAILED_PRECONDITION, f"devices no longer present: {', '.join(gone)}")
        return {key: node_grant(self.config, self._by_key[key], i) for i, key in enumerate(keys)}

    def _render_env(self, devices: Sequence[Device], granted: dict[str, ContainerAllocation]) -> dict[str, str]:
        """Set-wide fields, and per-device ones with one entry per ID (replicas repeat their device's)."""
        each = [self._by_key[physical(d)] for d in devices]
        product = self.config.source[0].product_attribute
        fields = {
            "ids": ",".join(d.id for d in devices),
            "devices": ",".join(granted),
            "paths": ",".join(dict.fromkeys(p for key in granted for p in self._by_key[key].host_paths)),
            "count": str(len(devices)),
            "resource": self.resource_name,
            "serials": ",".join(_text(f, "serial") for f in each),
            "vendors": ",".join(_text(f, "vendor") for f in each),
            "products": ",".join(_text(f, product) for f in each),
            "pci_addresses": ",".join(_pci_addresses(f) for f in each),
            "numa_nodes": ",".join(str(f.numa_nodes[0]) if f.numa_nodes else "" for f in each),
            "devlinks": ",".join(_text(f, "devlink") for f in each),
            "container_paths": ",".join(_first_node(granted[f.key]) for f in each),
        }
        if any(template_fields(t) & ENV_FACTS.keys() for t in self.config.env.values()):  # read only when named
            fields.update(env_facts(self.host, self.config.source_kind, each))
        return {name: template.format_map(fields) for name, template in self.config.env.items()}

    def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        return self._policy.choose(available, must_include, size, self._layout)


def _names_devices(resource: ResourceConfig) -> bool:
    """Whether container paths depend on the device (and so are placed per container, checked for clashes)."""
    mounts = [m.container_path for m in resource.mounts if m.container_path]
    return resource.container_path is not None or any(template_fields(t) & PATH_FIELDS for t in mounts)


def _without_clashes(granted: dict[str, ContainerAllocation]) -> ContainerAllocation:
    """The merged nodes and mounts; two host nodes at one container path would hide one of them."""
    holder: dict[str, str] = {}
    for grant in granted.values():
        for node in grant.devices:
            first = holder.setdefault(node.container_path, node.host_path)
            if first != node.host_path:
                raise RpcFailure(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"container_path {node.container_path} would hold both {first} and {node.host_path}",
                )
    return ContainerAllocation.merge(granted.values())


def _pci_addresses(found: Found) -> str:
    """A PCI device's functions, comma-separated: a VFIO group of several lists each, as KubeVirt's
    ``PCI_RESOURCE_<RESOURCE>`` and the SR-IOV plugin's ``PCIDEVICE_<RESOURCE>`` expect one flat list;
    empty for a device of another source."""
    return ",".join(found.details.get("pciAddresses", ()))


def _first_node(grant: ContainerAllocation) -> str:
    """A device's node in the container (a VFIO group's own node comes first); empty without one."""
    return grant.devices[0].container_path if grant.devices else ""
