"""The plugin contract: a device list plus optional hooks.

Modelled on Intel's ``pkg/deviceplugin``: a plugin is a small object that knows its
devices and how to grant them; the optional capabilities are separate protocols, and the
options sent to the kubelet follow from which of them a plugin implements. No gRPC here.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from ..device import ContainerAllocation, Device, Health, check_unique
from ..names import extended_resource_name_error

Listener = Callable[[], None]


class Plugin:
    """One extended resource and its devices.

    Subclass it and set ``resource_name``; publish devices with :meth:`publish` (from any
    thread) and, if they change on their own, do so from :meth:`run`. Override
    :meth:`allocate` to build what a container gets; implement :class:`PreferredAllocator`
    or :class:`PreStarter` to offer the optional RPCs.
    """

    resource_name: str = ""

    def __init__(self, resource_name: str | None = None, devices: Iterable[Device] = ()) -> None:
        if resource_name is not None:
            self.resource_name = resource_name
        if not self.resource_name:
            raise ValueError(f"{type(self).__name__} has no resource_name")
        error = extended_resource_name_error(self.resource_name)
        if error:  # fail here, where the user wrote the name, not later inside serve()
            raise ValueError(error)
        self._lock = threading.Lock()
        self._devices: dict[str, Device] = check_unique(devices)
        self._listeners: list[Listener] = []

    # -- device state -------------------------------------------------------------
    def devices(self) -> list[Device]:
        """A snapshot of the current devices, in publication order."""
        with self._lock:
            return list(self._devices.values())

    def lookup(self, device_ids: Iterable[str]) -> list[Device | None]:
        """The devices for ``device_ids`` (``None`` where unknown), from one consistent snapshot."""
        return list(map(self._devices.get, device_ids))  # publish() swaps the dict, never mutates it

    def publish(self, devices: Iterable[Device]) -> None:
        """Replace the whole device list; every open ListAndWatch stream gets it."""
        index = check_unique(devices)
        with self._lock:
            if index == self._devices:
                return
            self._devices = index
        self._notify()

    def set_health(self, device_id: str, health: Health) -> None:
        """Change one device's health (a no-op if unchanged or unknown)."""
        with self._lock:
            device = self._devices.get(device_id)
            if device is None or device.health == health:
                return
            self._devices = {k: (replace(v, health=health) if k == device_id else v) for k, v in self._devices.items()}
        self._notify()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` after every change; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    # -- hooks ----------------------------------------------------------------------
    async def run(self) -> None:
        """Watch the hardware while the plugin is served; the default has nothing to watch."""

    def allocate(self, devices: Sequence[Device]) -> ContainerAllocation | Awaitable[ContainerAllocation]:
        """What one container gets for ``devices``: by default their grants, merged in ID order."""
        return merge_grants(devices)


@runtime_checkable
class PreferredAllocator(Protocol):
    """Offers GetPreferredAllocation: choose ``size`` IDs from ``available``.

    The runtime has already checked the request is consistent, and checks the answer
    (distinct, includes ``must_include``, exactly ``size``, all from ``available``).
    """

    def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]: ...


@runtime_checkable
class PreStarter(Protocol):
    """Requires PreStartContainer before every container start (30 s kubelet deadline)."""

    def pre_start_container(self, devices: Sequence[Device]) -> Awaitable[None] | None: ...


_by_id = operator.attrgetter("id")  # no Python frame per device, unlike a lambda: Allocate's path


def merge_grants(devices: Iterable[Device]) -> ContainerAllocation:
    """The devices' grants merged in ID order.

    The kubelet sends IDs in Go map order; merging in ID order means that where two devices
    grant the same env, path or annotation, the same one wins every time.
    """
    ordered = sorted(devices, key=_by_id)
    return ordered[0].grant if len(ordered) == 1 else ContainerAllocation.merge(d.grant for d in ordered)


def options_of(plugin: Plugin) -> tuple[bool, bool]:
    """``(pre_start_required, get_preferred_allocation_available)`` from the hooks present."""
    return isinstance(plugin, PreStarter), isinstance(plugin, PreferredAllocator)
