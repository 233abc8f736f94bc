"""``kubedevice discover``: print what the daemon would advertise, without serving anything."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..cliparams import existing_socket
from ..device import Device
from ..errors import fail
from .base import Found

if TYPE_CHECKING:
    from ..config import Config
    from ..podresources.model import Holder
    from .schema import ResourceConfig


def discover(
    config: Annotated[Path, typer.Option("--config", "-c", metavar="FILE", help="YAML config file", dir_okay=False)],
    host_root: Annotated[
        Path | None,
        typer.Option("--host-root", metavar="DIR", help="where the host's / is mounted (default: from the config)"),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    pods: Annotated[
        bool,
        typer.Option(
            "--pods",
            help="also show which container holds each device, asked of the kubelet's PodResources API "
            "(the config's pod_resources_socket, else <plugin dir>/../pod-resources/kubelet.sock)",
        ),
    ] = False,
    pod_resources: Annotated[
        Path | None,
        typer.Option(
            "--pod-resources",
            metavar="PATH",
            callback=existing_socket,
            help="the kubelet's PodResources socket (implies --pods)",
        ),
    ] = None,
) -> None:
    """Dry run: per resource, each device's ID, health, NUMA nodes, host and container paths, and what its
    source knows of it (a USB device's nodes by kind, a udev device's symlinks and properties); with
    --pods, the containers holding it."""
    from ..config import ConfigError, load_config, resource_problem  # noqa: PLC0415 - the lead's module, loaded on use
    from . import survey  # noqa: PLC0415
    from .limits import LimitError  # noqa: PLC0415

    try:
        cfg = load_config(config)
        resources = survey(cfg, host_root or cfg.host_root)
        if cfg.dra is None:
            _check_limits(resources, host_root or cfg.host_root)
        refused = {r.name: _refused(r, host_root or cfg.host_root) for r, _, _ in resources}
    except LimitError as problem:
        fail(resource_problem(config, cfg, problem, problem.resource))
    except (ConfigError, ValueError) as err:
        fail(str(err))
    held = _holders(cfg, pod_resources) if pods or pod_resources else None
    document = {
        "resources": [
            {
                "name": resource.name,
                "devices": [
                    _row(resource, d, {f.key: f for f in found}) | _held_by(held, resource.name, d.id) for d in devices
                ],
                **refused[resource.name],
                # node_selector: served only on nodes with these labels (the daemon reads its Node's)
                **({"nodeSelector": dict(resource.node_selector)} if resource.node_selector else {}),
            }
            for resource, found, devices in resources
        ]
    }
    if json_output:
        typer.echo(json.dumps(document, indent=2))
    else:
        _print_table(document["resources"], held is not None)


def _holders(cfg: Config, socket: Path | None) -> list[Holder]:
    """Who holds which device now; a kubelet that cannot be asked is a runtime failure (exit 1)."""
    from ..podresources.client import PodResourcesUnavailable, beside_plugin_dir, read_holders_sync  # noqa: PLC0415

    where = socket or cfg.pod_resources_socket or beside_plugin_dir(cfg.resolved_plugin_dir())
    try:
        return read_holders_sync(where)
    except PodResourcesUnavailable as err:
        fail(f"{'--pod-resources' if socket else '--pods'}: {err}", code=1)


def _held_by(held: list[Holder] | None, resource: str, device_id: str) -> dict[str, Any]:
    """``heldBy``: the containers holding the device (an empty list: free), when pods were asked for."""
    if held is None:
        return {}
    mine = [h for h in held if h.resource == resource and h.device == device_id]
    return {"heldBy": [{"namespace": h.namespace, "pod": h.pod, "container": h.container} for h in mine]}


def _check_limits(resources: Sequence[tuple[ResourceConfig, list[Found], list[Device]]], host_root: Path) -> None:
    """What ``serve`` would refuse for the kubelet's limits, refused here too (on the devices found)."""
    from . import limits  # noqa: PLC0415 - with the sources, loaded on use
    from .configured import ConfiguredPlugin  # noqa: PLC0415

    for resource, found, _ in resources:
        limits.check(ConfiguredPlugin(resource, host_root, None, found))


def _row(resource: ResourceConfig, device: Device, physical: Mapping[str, Found]) -> dict[str, Any]:
    """One device; its container paths are those of a container given this device alone."""
    from .discovery import node_grant  # noqa: PLC0415 - with the sources, loaded on use

    found = physical[device.group or device.id]
    return {
        "id": device.id,
        "health": device.health.value,
        "numaNodes": list(device.numa_nodes),
        "hostPaths": list(found.host_paths),
        "containerPaths": [d.container_path for d in node_grant(resource, found, 0).devices],
        **found.details,
    }


def _refused(resource: ResourceConfig, host_root: Path) -> dict[str, Any]:
    """A VFIO resource's selected functions that cannot be advertised, and why (a host driver in the group)."""
    if resource.pci is None or not resource.pci.vfio:
        return {}
    from . import HostRoot, pci  # noqa: PLC0415 - with the sources, loaded on use

    _, refused = pci.scan(resource.pci, HostRoot(host_root))
    return {"refused": [{"pciAddress": address, "reason": why} for address, why in refused]}


def _details(device: dict[str, Any]) -> str:
    """The source's own facts in one cell: ``tty:/dev/ttyUSB0``, udev's symlinks, ``KEY=VALUE`` properties,
    a PCI device's IOMMU group and functions (``group 7: 0000:01:00.0 0000:01:00.1``)."""
    group = device.get("iommuGroup")
    parts = [f"group {group}:"] if group is not None else []
    parts += device.get("pciAddresses", [])
    parts += [f"{n['kind']}:{n['path']}" for n in device.get("nodes", [])]
    parts += device.get("devlinks", [])
    parts += [f"{k}={v}" for k, v in device.get("properties", {}).items()]
    return " ".join(parts)


def _print_table(resources: Sequence[dict[str, Any]], pods: bool) -> None:
    from rich.table import Table  # noqa: PLC0415 - rich is only needed for the human view

    from ..terminal import table_console  # noqa: PLC0415

    table = Table()
    headings = ["resource", "device", "health", "NUMA", "host paths", "container paths", "details"]
    for heading in headings + (["held by"] if pods else []):
        table.add_column(heading, overflow="fold")  # a narrow terminal wraps a path, never cuts it
    held_by_nobody = ("",) if pods else ()
    for resource in resources:
        if not resource["devices"]:
            table.add_row(resource["name"], "(none found)", "", "", "", "", "", *held_by_nobody)
        if "nodeSelector" in resource:
            labels = ",".join(f"{k}={v}" for k, v in resource["nodeSelector"].items())
            where = f"only on nodes labelled {labels}"
            table.add_row(resource["name"], "(node-dependent)", "", "", "", "", where, *held_by_nobody)
        for device in resource["devices"]:
            holders = [f"{h['namespace']}/{h['pod']}/{h['container']}" for h in device.get("heldBy", [])]
            table.add_row(
                resource["name"],
                device["id"],
                device["health"],
                ",".join(map(str, device["numaNodes"])) or "-",
                " ".join(device["hostPaths"]),
                " ".join(device["containerPaths"]),
                _details(device),
                *((" ".join(holders) or "-",) if pods else ()),
            )
        for refusal in resource.get("refused", []):
            row = (resource["name"], refusal["pciAddress"], "refused", "", "", "", refusal["reason"])
            table.add_row(*row, *held_by_nobody)
    table_console().print(table)
