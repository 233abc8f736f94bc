"""What the kubelet bounds, measured on the devices discovery finds, before anything is served.

The kubelet reads a device plugin's messages with grpc's default 4 MiB receive limit
(:data:`~kubedevice.device.MAX_MESSAGE_BYTES`). Two messages grow with a resource's devices: the
ListAndWatch list of every device, and the Allocate answer for a container, which carries the env
(templates such as ``{ids}`` grow with the devices), annotations, mounts, device nodes and CDI names
of every device the container gets. Past the limit nothing fails here: the kubelet fails every
Allocate with ``ResourceExhausted``, and the pod never starts. So both are measured on the real
messages, for the worst case the config allows (every device in one container), when ``serve`` and
``discover`` read the config; the error names the entry that takes the room. A rendered env string
is held to execve's MAX_ARG_STRLEN the same way. The plugin server checks every Allocate answer too
(:mod:`kubedevice.plugin.server`), for devices hotplug brings later.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..api import api_pb2 as pb
from ..api.convert import allocation_to_pb, list_response
from ..device import MAX_MESSAGE_BYTES, ContainerAllocation, Device
from ..errors import FieldProblem
from ..plugin.server import RpcFailure
from .configured import ConfiguredPlugin
from .schema import exec_string_problem

#: How the limit reads in every message.
LIMIT = f"the {MAX_MESSAGE_BYTES:,} bytes (4 MiB) the kubelet accepts from a device plugin"


class LimitError(FieldProblem):
    """A resource whose devices break a bound; ``loc`` is relative to the resource's entry, and
    ``str()`` names the resource for a reader without the file (a reload's log line)."""

    def __init__(self, resource: str, loc: tuple[int | str, ...], message: str) -> None:
        super().__init__(loc, message)
        self.resource = resource
        self.message = message

    def __str__(self) -> str:
        return f"resource {self.resource}: {self.message}"


def check(plugin: ConfiguredPlugin) -> None:
    """Raise :class:`LimitError` when ``plugin``'s devices cannot reach the kubelet as configured."""
    devices = plugin.devices()
    listing = list_response(devices).ByteSize()
    if listing > MAX_MESSAGE_BYTES:
        raise LimitError(
            plugin.resource_name,
            (plugin.config.source_kind,),
            f"its {len(devices):,} devices make a ListAndWatch answer of {listing:,} bytes, over {LIMIT}",
        )
    chosen = _one_container(plugin, devices)
    if not chosen:
        return
    try:
        worst = plugin.allocate(chosen)
    except RpcFailure:  # devices that cannot share a container: no answer holds them all
        return
    size = pb.AllocateResponse(container_responses=[allocation_to_pb(worst)]).ByteSize()
    if size > MAX_MESSAGE_BYTES:
        raise LimitError(
            plugin.resource_name,
            _largest(plugin, worst),
            f"the Allocate answer for a container given {_all(chosen)} would be {size:,} bytes, over {LIMIT}",
        )
    for name, value in worst.envs.items():
        problem = exec_string_problem(f"{name}={value}")
        if problem and name in plugin.config.env:
            raise LimitError(plugin.resource_name, ("env", name), f"rendered for {_all(chosen)}, '{name}=…' {problem}")


def _all(devices: list[Device]) -> str:
    return "its one device" if len(devices) == 1 else f"all {len(devices):,} devices"


def _one_container(plugin: ConfiguredPlugin, devices: list[Device]) -> list[Device]:
    """The most one container can get: every device, or one replica per physical device."""
    if not plugin.config.one_replica_per_device:
        return devices
    return list({(d.group or d.id): d for d in devices}.values())


def _largest(plugin: ConfiguredPlugin, answer: ContainerAllocation) -> tuple[int | str, ...]:
    """The config entry behind the largest part of ``answer``: an env or annotation entry, the mounts,
    the CDI section or the source (its device nodes)."""
    config = plugin.config
    cdi_annotations = {k: v for k, v in answer.annotations.items() if k not in config.annotations}  # annotations mode
    parts: dict[tuple[int | str, ...], int] = {
        (config.source_kind,): sum(len(d.host_path) + len(d.container_path) + 8 for d in answer.devices),
        ("mounts",): sum(len(m.host_path) + len(m.container_path) + 8 for m in answer.mounts),
        ("cdi",): sum(len(n) + 4 for n in answer.cdi_devices) + _size(cdi_annotations),
    }
    parts.update({("env", k): _size({k: v}) for k, v in answer.envs.items() if k in config.env})
    parts.update({("annotations", k): _size({k: v}) for k, v in answer.annotations.items() if k in config.annotations})
    return max(parts, key=lambda loc: parts[loc])


def _size(entries: Mapping[str, str]) -> int:
    """About what a map's entries take in the message (tags and lengths: a few bytes each)."""
    return sum(len(k) + len(v) + 6 for k, v in entries.items())
