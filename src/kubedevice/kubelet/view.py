"""What ``kubedevice kubelet`` shows on a terminal: resources, devices with health, who holds them.

Plain data in, a rich renderable out; the command line redraws it after every simulator event.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..device import Device
from ..errors import counted
from .simulator import KubeletSimulator

MAX_DEVICE_ROWS = 40  # beyond this the table would scroll the events away; the rest is counted


def unknown(verb: str, args: list[str], usage: str) -> str:
    """The answer to a stdin line that is no command: what was wrong with it, then the usage."""
    known = {part.split()[0] for part in usage.removeprefix("commands: ").split(" | ")}
    if verb in known:
        return f"wrong arguments for {verb!r}: {' '.join(args) or '(none)'}; {usage}"
    return f"unknown command {verb!r}; {usage}"


def holders(sim: KubeletSimulator) -> dict[tuple[str, str], str]:
    """``(resource, device ID) -> "pod/container"`` for every device assigned to a pod."""
    held: dict[tuple[str, str], str] = {}
    for pod, containers in sim.assignments().items():
        for container, resources in containers.items():
            for resource, ids in resources.items():
                for device_id in ids:
                    held[(resource, device_id)] = f"{pod}/{container}"
    return held


def _options(sim: KubeletSimulator, name: str) -> str:
    options = sim.resources[name].options
    if options is None:
        return ""
    named = [("preferred", options.get_preferred_allocation_available), ("prestart", options.pre_start_required)]
    return ", ".join(label for label, on in named if on)


def resources_table(sim: KubeletSimulator) -> Table:
    table = Table(title="resources", title_justify="left", expand=False)
    for column in ("resource", "plugin", "capacity", "allocatable", "options"):
        table.add_column(column)
    for name in sorted(sim.resources):
        resource = sim.resources[name]
        state = Text("connected", "green") if resource.connected else Text("stopped", "red")
        plugin = Text.assemble(resource.endpoint or "-", " ", state)
        table.add_row(name, plugin, str(resource.capacity), str(resource.allocatable), _options(sim, name))
    return table


def devices_table(sim: KubeletSimulator) -> Table:
    table = Table(title="devices", title_justify="left", expand=False)
    for column in ("resource", "device", "health", "numa", "held by"):
        table.add_column(column)
    held = holders(sim)
    rows = [(name, device) for name in sorted(sim.resources) for device in _sorted_devices(sim, name)]
    for name, device in rows[:MAX_DEVICE_ROWS]:
        health = Text(device.health.value, "green" if device.healthy else "red")
        numa = ",".join(str(n) for n in device.numa_nodes) or "-"
        table.add_row(name, device.id, health, numa, held.get((name, device.id), ""))
    if len(rows) > MAX_DEVICE_ROWS:
        table.caption = f"{counted(len(rows) - MAX_DEVICE_ROWS, 'more device')} not shown"
    return table


def _sorted_devices(sim: KubeletSimulator, name: str) -> list[Device]:
    devices = sim.resources[name].devices
    return [devices[i] for i in sorted(devices)]


def state_view(sim: KubeletSimulator, help_line: str) -> RenderableType:
    if not sim.resources:
        return Group(Text("no plugin registered yet", "dim"), Text(help_line, "dim"))
    return Group(resources_table(sim), devices_table(sim), Text(help_line, "dim"))
