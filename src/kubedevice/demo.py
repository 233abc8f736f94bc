"""``kubedevice demo``: the whole device plugin lifecycle in a temp dir, no cluster, no root.

It runs the real pieces, not a recording: the kubelet simulator serves ``kubelet.sock``,
the daemon's plugins register over gRPC, a pod is admitted through GetPreferredAllocation
and Allocate, and a kubelet restart wipes the sockets to show re-registration.
"""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import eventloop
from .config import Config, ConfigError, load_config
from .device import ContainerAllocation
from .errors import UsageError
from .kubelet import Container, KubeletSimulator, Pod
from .node.daemon import build_plugins
from .plugin.base import Plugin
from .plugin.manager import Manager
from .terminal import heading, table_console

TIMEOUT = 10.0


def bundled_example() -> Path:
    return Path(str(resources.files("kubedevice") / "examples" / "null.yaml"))


def run_demo(config_path: Path | None = None) -> int:
    """Run the demo; :class:`UsageError` (one line) for a config it cannot use."""
    path = config_path or bundled_example()
    try:
        config = load_config(path)
    except ConfigError as err:
        raise UsageError(str(err)) from None
    return eventloop.run(_demo(path, config, table_console()))


def _check_devices(config_path: Path, config: Config, plugins: list[Plugin]) -> None:
    """A resource that finds nothing would leave the demo waiting: say so before starting."""
    empty = [p.resource_name for p in plugins if not p.devices()]
    if empty:
        raise UsageError(
            f"{config_path}: no devices found for {', '.join(empty)} under host root {config.host_root}; "
            "nothing to demo (try 'kubedevice discover --config ...')"
        )


async def _demo(config_path: Path, config: Config, console: Console) -> int:
    with tempfile.TemporaryDirectory(prefix="kubedevice-demo-") as tmp:
        plugin_dir = Path(tmp)
        plugins = build_plugins(config, cdi_dir=plugin_dir / "cdi")
        _check_devices(config_path, config, plugins)
        heading(console, "[bold]kubedevice demo")
        console.print(f"config [cyan]{config_path}[/], plugin directory [cyan]{plugin_dir}[/]")
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        manager = Manager(plugins, plugin_dir)
        started = time.perf_counter()
        await manager.start()
        try:
            names = [r.name for r in config.resources]
            await sim.wait_until(lambda: all(n in sim.resources and sim.resources[n].devices for n in names), TIMEOUT)
            console.print(
                f"1. plugins registered and listed devices in {1000 * (time.perf_counter() - started):.1f} ms"
            )
            _show_registrations(console, sim)
            _show_capacity(console, sim)
            await _admit(console, sim, names[0], min(2, len(plugins[0].devices())))
            await _restart(console, sim, names)
            _show_capacity(console, sim)
        finally:
            await manager.stop()
            await sim.stop()
        console.print("5. SIGTERM-equivalent stop: final Unhealthy list sent, our sockets removed")
        heading(console, "[bold green]demo finished")
    return 0


def _show_registrations(console: Console, sim: KubeletSimulator) -> None:
    table = Table("resource", "endpoint", "version", "pre-start", "preferred allocation", title="Register calls")
    for reg in sim.registrations:
        table.add_row(
            reg.resource_name,
            reg.endpoint,
            reg.version,
            str(reg.options.pre_start_required),
            str(reg.options.get_preferred_allocation_available),
        )
    console.print(table)


def _show_capacity(console: Console, sim: KubeletSimulator) -> None:
    table = Table("resource", "capacity", "allocatable", title="Node status")
    capacity, allocatable = sim.capacity(), sim.allocatable()
    for name in sorted(capacity):
        table.add_row(name, str(capacity[name]), str(allocatable.get(name, 0)))
    console.print(table)


async def _admit(console: Console, sim: KubeletSimulator, resource: str, count: int) -> None:
    pod = Pod(uid="demo-pod-uid", name="demo", containers=[Container(name="app", requests={resource: count})])
    admitted = await sim.admit(pod)
    app = admitted["app"]
    console.print(f"2. admitted pod [bold]demo[/]: container app gets {', '.join(app.device_ids[resource])}")
    if app.preferred:
        console.print(f"   (the plugin preferred {', '.join(app.preferred.get(resource, []))})")
    _show_allocation(console, app.allocation)


def _show_allocation(console: Console, allocation: ContainerAllocation) -> None:
    table = Table("kind", "container", "host / value", "options", title="What the container gets")
    for spec in allocation.devices:
        table.add_row("device", spec.container_path, spec.host_path, spec.permissions)
    for mount in allocation.mounts:
        table.add_row("mount", mount.container_path, mount.host_path, "ro" if mount.read_only else "rw")
    for key, value in allocation.envs.items():
        table.add_row("env", key, value, "")
    for key, value in allocation.annotations.items():
        table.add_row("annotation", key, value, "")
    for name in allocation.cdi_devices:
        table.add_row("cdi", name, "", "")
    console.print(table)


async def _restart(console: Console, sim: KubeletSimulator, names: list[str]) -> None:
    before = len(sim.registrations)
    await sim.restart()
    console.print("3. kubelet restarted: every socket but the checkpoint deleted, new kubelet.sock served")
    await sim.wait_until(lambda: len(sim.registrations) >= before + len(names), TIMEOUT)
    for reg in sim.registrations[before:]:
        latency = 1000 * (reg.received_at - sim.kubelet_sock_created_at)
        console.print(f"4. [bold]{reg.resource_name}[/] re-registered {latency:.1f} ms after the new kubelet.sock")
    await sim.wait_until(lambda: all(sim.allocatable().get(n, 0) > 0 for n in names), TIMEOUT)
