"""Which devices each pod's containers were given: the device manager's ``podDevices``.

Kept apart from the manager (:mod:`.simulator`) as upstream keeps
``pkg/kubelet/cm/devicemanager/pod_devices.go`` apart from ``manager.go``: pod UID → container →
resource → the device IDs per NUMA node and the plugin's Allocate answer for them
(``deviceAllocateInfo``). It is what the checkpoint's ``PodDeviceEntries`` hold, what the
manager counts as in use, and what a container's start is checked against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from ..api import pb
from . import checkpoint


@dataclass(slots=True)
class DeviceAllocateInfo:
    """``deviceAllocateInfo``: device IDs per NUMA node and the cached Allocate answer."""

    device_ids: dict[int, list[str]]
    response: pb.ContainerAllocateResponse

    def ids(self) -> set[str]:
        return {d for devs in self.device_ids.values() for d in devs}


class PodDevices:
    """``podDevices``: pod UID → container name → resource name → :class:`DeviceAllocateInfo`."""

    def __init__(self) -> None:
        self._devs: dict[str, dict[str, dict[str, DeviceAllocateInfo]]] = {}

    def pods(self) -> list[str]:
        """``pods``: the UIDs of the pods that hold devices, in the order they were recorded."""
        return list(self._devs)

    def insert(
        self,
        pod_uid: str,
        container: str,
        resource: str,
        device_ids: dict[int, list[str]],
        response: pb.ContainerAllocateResponse,
    ) -> None:
        """``insert``: what ``container`` of ``pod_uid`` got of ``resource`` (replacing an earlier answer)."""
        self._devs.setdefault(pod_uid, {}).setdefault(container, {})[resource] = DeviceAllocateInfo(
            device_ids, response
        )

    def delete(self, pod_uids: Iterable[str]) -> None:
        """``delete``: forget these pods and every device they held."""
        for uid in pod_uids:
            self._devs.pop(uid, None)

    def clear(self) -> None:
        self._devs.clear()

    def container(self, pod_uid: str, container: str) -> dict[str, DeviceAllocateInfo] | None:
        """What one container got, by resource; None for a container with no record."""
        return self._devs.get(pod_uid, {}).get(container)

    def container_devices(self, pod_uid: str, container: str, resource: str) -> set[str] | None:
        """``containerDevices``: the IDs of ``resource`` the container holds; None when it has none recorded."""
        info = (self.container(pod_uid, container) or {}).get(resource)
        return info.ids() if info is not None else None

    def devices(self) -> dict[str, set[str]]:
        """``devices``: every device in use, by resource (what the manager calls allocated)."""
        result: dict[str, set[str]] = {}
        for containers in self._devs.values():
            for resources in containers.values():
                for name, info in resources.items():
                    result.setdefault(name, set()).update(info.ids())
        return result

    def assignments(self) -> dict[str, dict[str, dict[str, list[str]]]]:
        """Device IDs per pod UID, container and resource, sorted: a plain copy to read."""
        return {
            uid: {c: {r: sorted(info.ids()) for r, info in res.items()} for c, res in containers.items()}
            for uid, containers in self._devs.items()
        }

    def to_checkpoint(self) -> list[checkpoint.Entry]:
        """``toCheckpointData``: one entry per pod, container and resource, the answer serialized."""
        return [
            checkpoint.Entry(uid, name, resource, info.device_ids, info.response.SerializeToString())
            for uid, containers in self._devs.items()
            for name, resources in containers.items()
            for resource, info in resources.items()
        ]

    def from_checkpoint(self, entries: Iterable[checkpoint.Entry], event: Callable[[str], None]) -> None:
        """``fromCheckpointData``: an entry whose answer does not decode is skipped, with the
        kubelet's message as an ``event``."""
        for entry in entries:
            try:
                response = pb.ContainerAllocateResponse.FromString(entry.alloc_resp)
            except DecodeError:
                event(f"Can't unmarshal allocResp for pod {entry.pod_uid} container {entry.container}")
                continue
            self.insert(entry.pod_uid, entry.container, entry.resource, entry.device_ids, response)
