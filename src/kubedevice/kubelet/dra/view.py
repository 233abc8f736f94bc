"""What ``kubedevice kubelet --dra`` shows on a terminal: drivers, prepared claims, device health.

Plain data in, a rich renderable out; the command line redraws it after every event.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ...errors import counted
from .simulator import DraKubelet

MAX_ROWS = 40  # beyond this the tables would scroll the events away; the rest is counted


def drivers_table(kubelet: DraKubelet) -> Table:
    table = Table(title="DRA drivers", title_justify="left", expand=False)
    for column in ("driver", "endpoint", "service", "health stream"):
        table.add_column(column)
    for name in sorted(kubelet.drivers):
        registered = kubelet.drivers[name].registered
        stream = "open" if registered.health else "not offered"
        table.add_row(name, registered.endpoint, registered.service, stream)
    return table


def claims_table(kubelet: DraKubelet) -> Table:
    table = Table(title="prepared claims", title_justify="left", expand=False)
    for column in ("claim", "driver", "request", "device", "CDI IDs", "health"):
        table.add_column(column, overflow="fold")
    rows = [(claim, device) for _, claim in sorted(kubelet.prepared.items()) for device in claim.devices]
    for claim, device in rows[:MAX_ROWS]:
        driver = kubelet.drivers.get(device.driver)
        health = driver.health.get((device.pool, device.device), "") if driver is not None else "driver gone"
        style = "green" if health == "HEALTHY" else "red" if health else ""
        table.add_row(
            claim.ref,
            device.driver,
            ",".join(device.requests),
            f"{device.pool}/{device.device}",
            "\n".join(device.cdi_ids),
            Text(health or "-", style),
        )
    empty = [claim.ref for claim in kubelet.prepared.values() if not claim.devices]
    notes = [f"{counted(len(rows) - MAX_ROWS, 'more device')} not shown"] if len(rows) > MAX_ROWS else []
    notes += [f"prepared without devices: {', '.join(sorted(empty))}"] if empty else []
    table.caption = "; ".join(notes) or None
    return table


def health_table(kubelet: DraKubelet) -> Table:
    table = Table(title="device health (from the health streams)", title_justify="left", expand=False)
    for column in ("driver", "pool", "device", "health"):
        table.add_column(column)
    rows = [
        (name, pool, device, health)
        for name in sorted(kubelet.drivers)
        for (pool, device), health in sorted(kubelet.drivers[name].health.items())
    ]
    for name, pool, device, health in rows[:MAX_ROWS]:
        table.add_row(name, pool, device, Text(health, "green" if health == "HEALTHY" else "red"))
    if len(rows) > MAX_ROWS:
        table.caption = f"{counted(len(rows) - MAX_ROWS, 'more device')} not shown"
    return table


def dra_view(kubelet: DraKubelet, help_line: str) -> RenderableType:
    if not kubelet.drivers and not kubelet.prepared:
        return Group(Text(f"no DRA driver registered yet in {kubelet.registry}", "dim"), Text(help_line, "dim"))
    return Group(drivers_table(kubelet), claims_table(kubelet), health_table(kubelet), Text(help_line, "dim"))
