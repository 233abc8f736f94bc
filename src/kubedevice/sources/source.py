"""What a device source is: the contract every ``sources/<kind>.py`` module exports as ``SOURCE``.

A source is a config model (the value of its key in a resource, ``pci: {...}``), how to find its
devices under a host root, which host paths to watch for hotplug, and the facts the resource schema
needs to judge a config before any host is seen: whether its devices have one node (so that
``container_path`` may rename it), whether it can find several devices (so that a fixed
``container_path`` would clash), which template fields its devices can fill. The resource schema
and discovery loop over :data:`kubedevice.sources.registry.SOURCES` and never name a kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from .base import Found
from .hostroot import HostRoot

C = TypeVar("C", bound=BaseModel)

#: A device the source saw but cannot advertise: what names it (a PCI address) and why.
Refusal = tuple[str, str]


def _none(config: object) -> str | None:
    return None


def _no_refusals(config: object, host: HostRoot) -> list[Refusal]:
    return []


def _no_check(config: object, name: str, replicas: int) -> None:
    return None


def _always(config: object) -> bool:
    return True


def _never(config: object) -> bool:
    return False


@dataclass(frozen=True)
class Source(Generic[C]):
    """One kind of device source; each rule is a function of the source's own config.

    ``discover(config, host, stem)``: the physical devices present now (``stem`` names the
    resource in warnings and static IDs). ``watched(config)``: host path globs whose directories
    change when a device comes or goes. ``not_one_node(config)``: why ``container_path`` cannot
    apply (the whole message), or ``None`` when each device has one node. ``several(config)``: why
    the source may find more than one device, or ``None``. ``check(config, name, replicas)``:
    a rule across the resource (raises :class:`~kubedevice.errors.FieldProblem`). ``refused(config,
    host)``: devices seen but not advertised, for ``kubedevice discover``.
    """

    kind: str
    config: type[C]
    discover: Callable[[C, HostRoot, str], list[Found]]
    watched: Callable[[C], list[str]]
    not_one_node: Callable[[C], str | None] = _none
    several: Callable[[C], str | None] = _none
    check: Callable[[C, str, int], None] = _no_check
    refused: Callable[[C, HostRoot], list[Refusal]] = _no_refusals
    #: Its devices have the path they were found by (``{path}``, ``{name}`` in templates).
    matched_paths: Callable[[C], bool] = _always
    #: Its devices have udev's symlinks (``{devlink}``).
    devlinks: bool = False
    #: Its devices have a sysfs directory (a ``sysfs`` health check may name a relative attribute).
    sysfs: bool = False
    #: The attribute ``{products}`` reads (a PCI function's "product" is its device ID).
    product_attribute: str = "product"
    #: A device advertised before that the source still sees but refuses now (its ``refused`` names
    #: it: a PCI function unbound from its driver, a node removed) stays listed, Unhealthy, so that a
    #: pod holding it is told rather than the device silently leaving; one gone from the host leaves.
    unusable_stays: Callable[[C], bool] = _never
    #: Its devices can change in a way no inotify event reports (an NVIDIA GPU unbound: nvidia's
    #: ``/dev/nvidiaN`` stays, and procfs sends no event), so it is rescanned every health round.
    polled: Callable[[C], bool] = _never
