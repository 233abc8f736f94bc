"""Pure verdicts on what a plugin sent, as lists of problems (empty means conforming).

They look at the protobuf messages exactly as received, and reuse the rules kubedevice itself
enforces (``device.py``, ``names.py``, the CDI parser rules) instead of restating them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ..allocation.cdi import device_name_error
from ..api import pb
from ..device import PERMISSIONS, ContainerAllocation, Device, DeviceError, DeviceSpec, Health, Mount
from ..names import extended_resource_name_error
from ..sources.schema import cdi_kind_error

CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"  # annotation-mode CDI: values are comma-separated qualified names
_HEALTH_VALUES = frozenset(h.value for h in Health)


def resource_name_problems(name: str) -> list[str]:
    error = extended_resource_name_error(name)
    return [error] if error else []


def endpoint_problems(endpoint: str) -> list[str]:
    """The kubelet joins the endpoint to its own directory, so an absolute path or '..' goes astray."""
    if not endpoint:
        return ["endpoint is empty"]
    if endpoint.startswith("/"):
        return [f"endpoint {endpoint!r} is absolute; the kubelet dials it inside its plugin directory"]
    if ".." in endpoint.split("/"):
        return [f"endpoint {endpoint!r} leaves the plugin directory"]
    return []


def id_problems(devices: Sequence[pb.Device]) -> list[str]:
    problems = []
    for message in devices:
        try:
            Device(message.ID)
        except DeviceError as err:
            problems.append(str(err))
    dupes = sorted(i for i, n in Counter(m.ID for m in devices).items() if n > 1)
    if dupes:
        problems.append(f"duplicate device IDs: {', '.join(dupes)}")
    return problems


def health_problems(devices: Sequence[pb.Device]) -> list[str]:
    """The kubelet treats any health but ``Healthy`` as unhealthy, so a typo silently loses a device."""
    return [
        f"device {m.ID!r} has health {m.health!r}, not one of {', '.join(sorted(_HEALTH_VALUES))}"
        for m in devices
        if m.health not in _HEALTH_VALUES
    ]


def topology_problems(devices: Sequence[pb.Device]) -> list[str]:
    problems = []
    for m in devices:
        nodes = [n.ID for n in m.topology.nodes]
        if any(n < 0 for n in nodes):
            problems.append(f"device {m.ID!r} has a negative NUMA node in {nodes}")
        if len(set(nodes)) != len(nodes):
            problems.append(f"device {m.ID!r} repeats a NUMA node in {nodes}")
        if m.HasField("topology") and not nodes:
            problems.append(f"device {m.ID!r} has a topology with no NUMA nodes")
    return problems


def response_count_problems(requested: int, answered: int, what: str) -> list[str]:
    """The kubelet reads ``container_responses[i]`` for request ``i``; a missing one fails the pod."""
    if requested == answered:
        return []
    return [f"{what}: {answered} container responses for {requested} container requests"]


def path_problems(responses: Iterable[pb.ContainerAllocateResponse]) -> list[str]:
    problems = []
    for r in responses:
        for d in r.devices:
            problems += _errors(DeviceSpec, d.host_path, d.container_path, "")  # "": judge the paths alone
        for m in r.mounts:
            problems += _errors(Mount, m.host_path, m.container_path)
    return problems


def permission_problems(responses: Iterable[pb.ContainerAllocateResponse]) -> list[str]:
    return [
        f"device {d.host_path!r} has permissions {d.permissions!r}, not letters from 'rwm'"
        for r in responses
        for d in r.devices
        if not set(d.permissions) <= PERMISSIONS
    ]


def env_problems(responses: Iterable[pb.ContainerAllocateResponse]) -> list[str]:
    problems = []
    for r in responses:
        problems += _errors(ContainerAllocation, dict(r.envs))
    return problems


def cdi_problems(responses: Iterable[pb.ContainerAllocateResponse]) -> list[str]:
    """CDI names from ``cdi_devices`` and from ``cdi.k8s.io/`` annotations must be ``vendor/class=name``."""
    problems = []
    for r in responses:
        names = [c.name for c in r.cdi_devices]
        for key, value in r.annotations.items():
            if key.startswith(CDI_ANNOTATION_PREFIX):
                names += value.split(",")
        problems += [p for name in names for p in qualified_cdi_name_problems(name)]
    return problems


def qualified_cdi_name_problems(name: str) -> list[str]:
    kind, sep, device = name.partition("=")
    if not sep:
        return [f"CDI name {name!r} is not fully qualified (vendor.com/class=name)"]
    problems = _errors(cdi_kind_error, kind)
    error = device_name_error(device)
    return [*problems, *([error] if error else [])]


def preferred_problems(request: pb.ContainerPreferredAllocationRequest, answer: Sequence[str]) -> dict[str, list[str]]:
    """The ``GetPreferredAllocation`` contract, split by clause so each can be reported alone.

    ``size`` problems of a short answer are returned under ``short``: the kubelet tops a short
    answer up, so it is a warning, while a longer one is a failure.
    """
    available = set(request.available_deviceIDs)
    unknown = sorted(set(answer) - available)
    dupes = sorted(i for i, n in Counter(answer).items() if n > 1)
    missing = sorted(set(request.must_include_deviceIDs) - set(answer))
    size, got = request.allocation_size, len(set(answer))
    count = f"{got} IDs for allocation_size {size}"
    return {
        "available": _when(bool(unknown), f"IDs not offered as available: {', '.join(unknown)}")
        + _when(bool(dupes), f"repeated IDs: {', '.join(dupes)}"),
        "must_include": _when(bool(missing), f"must_include IDs left out: {', '.join(missing)}"),
        "size": _when(got > size, count),
        "short": _when(got < size, count),
    }


def _when(condition: bool, problem: str) -> list[str]:
    return [problem] if condition else []


def _errors(build: Callable[..., object], *args: object) -> list[str]:
    """Call a validating constructor, turning its ``ValueError`` (``DeviceError`` too) into a problem line."""
    try:
        build(*args)
    except ValueError as err:
        return [str(err)]
    return []
