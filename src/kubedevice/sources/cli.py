"""``kubedevice discover``: print what the daemon would advertise, without serving anything."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from ..device import Device
from ..errors import fail
from .base import Found


def discover(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config file", dir_okay=False)],
    host_root: Annotated[
        Path | None, typer.Option("--host-root", help="where the host's / is mounted (default: from the config)")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Dry run: per resource, each device's ID, health, NUMA nodes and host paths."""
    from ..config import ConfigError, load_config  # noqa: PLC0415 - the lead's module, loaded on use
    from . import survey  # noqa: PLC0415

    try:
        cfg = load_config(config)
        resources = survey(cfg, host_root or cfg.host_root)
    except (ConfigError, ValueError) as err:
        fail(str(err))
    document = {
        "resources": [
            {"name": resource.name, "devices": [_row(d, {f.key: f for f in found}) for d in devices]}
            for resource, found, devices in resources
        ]
    }
    if json_output:
        typer.echo(json.dumps(document, indent=2))
    else:
        _print_table(document["resources"])


def _row(device: Device, physical: Mapping[str, Found]) -> dict[str, Any]:
    return {
        "id": device.id,
        "health": device.health.value,
        "numaNodes": list(device.numa_nodes),
        "hostPaths": list(physical[device.group or device.id].host_paths),
    }


def _print_table(resources: Sequence[dict[str, Any]]) -> None:
    from rich.console import Console  # noqa: PLC0415 - rich is only needed for the human view
    from rich.table import Table  # noqa: PLC0415

    table = Table("resource", "device", "health", "NUMA", "host paths")
    for resource in resources:
        if not resource["devices"]:
            table.add_row(resource["name"], "(none found)", "", "", "")
        for device in resource["devices"]:
            table.add_row(
                resource["name"],
                device["id"],
                device["health"],
                ",".join(map(str, device["numaNodes"])) or "-",
                " ".join(device["hostPaths"]),
            )
    Console().print(table)
