"""``kubedevice serve``: the config-driven daemon, from config file to registered resources."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .. import eventloop
from ..config import Config, resource_problem
from ..logs import setup_logging
from ..metrics import Metrics, Readiness, start_http_server
from ..plugin.base import Plugin
from ..plugin.manager import Manager, ManagerHooks, run
from ..plugin_dir import daemon_plugin_dir
from ..podresources.attribution import Attribution
from ..podresources.client import beside_plugin_dir
from ..sources import limits
from ..sources.configured import ConfiguredPlugin
from ..sources.limits import LimitError
from .affinity import pin_to_one_cpu
from .features import FeaturesFile
from .labels import Labels, NodeLabels, connect, describe_change, selection, selector_keys
from .memory import trimming
from .owner import OwnerRef, OwnerWatch, clean_up_if_uninstalled, uninstalled
from .reload import Reloader
from .systemd import notify_ready

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DaemonOptions:
    """Command-line settings; each one overrides its config-file counterpart."""

    config_path: Path
    plugin_dir: Path | None = None
    host_root: Path | None = None
    cdi_dir: Path | None = None
    metrics_address: str | None = None
    log_level: str = "info"
    log_format: Literal["text", "json"] = "text"
    owner: OwnerRef | None = None
    """The DaemonSet running us: its deletion before our SIGTERM means uninstall (see :mod:`.owner`)."""
    kubeconfig: Path | None = None
    features_file: Path | None = None
    """Where to keep an NFD feature file of the served resources (see :mod:`.features`)."""
    node: str | None = None
    """This node's name: resources with a ``node_selector`` are served by its labels (see :mod:`.labels`)."""
    all_cpus: bool = False
    """Leave the threads on every allowed CPU instead of one (see :mod:`.affinity`)."""


def build_plugins(config: Config, host_root: Path | None = None, cdi_dir: Path | None = None) -> list[Plugin]:
    """One plugin per configured resource, all looking at the host through ``host_root``.

    Served as device plugins, each is held to what the kubelet takes (:mod:`kubedevice.sources.limits`:
    a :class:`~kubedevice.sources.limits.LimitError` naming the resource and entry).
    """
    root = host_root or config.host_root
    if not root.is_dir():
        raise ValueError(f"host root {root} does not exist or is not a directory")
    plugins = [ConfiguredPlugin(resource, root, cdi_dir or config.cdi_dir) for resource in config.resources]
    if config.dra is None:
        for plugin in plugins:
            limits.check(plugin)
    return list(plugins)


def observe(metrics: Metrics, readiness: Readiness) -> ManagerHooks:
    """Runtime events to metrics and readiness."""
    results = {"Allocate": metrics.allocation, "GetPreferredAllocation": metrics.preferred_allocation}

    def on_rpc(resource: str, method: str, seconds: float, result: str) -> None:
        metrics.observe_rpc(resource, method, seconds)
        count = results.get(method)
        if count is not None:
            count(resource, result)

    return ManagerHooks(
        on_rpc=on_rpc,
        on_registration=metrics.registration,
        on_ready=readiness.set_registered,
        on_kubelet_restart=metrics.kubelet_restart,
    )


def count_devices(plugin: Plugin, metrics: Metrics) -> None:
    """Keep the per-health device gauge of ``plugin`` current; count devices coming and going and failed checks."""
    if isinstance(plugin, ConfiguredPlugin):
        plugin.on_check_failure = lambda check: metrics.health_check_failure(plugin.resource_name, check)
    known = {d.id for d in plugin.devices()}

    def update() -> None:
        nonlocal known
        devices = plugin.devices()
        healthy = sum(d.healthy for d in devices)
        metrics.set_devices(plugin.resource_name, healthy, len(devices) - healthy)
        ids = {d.id for d in devices}
        for action, delta in (("added", ids - known), ("removed", known - ids)):
            for _ in delta:
                metrics.hotplug(plugin.resource_name, action)
        known = ids

    update()
    plugin.subscribe(update)


def _relabel(reloader: Reloader) -> Callable[[Labels | None, Labels], None]:
    """A label change that a selector reads is applied like a config reload; others are nobody's business."""

    def changed(old: Labels | None, new: Labels) -> None:
        why = describe_change(old, new, selector_keys(reloader.config))
        if why is not None:
            reloader.trigger_reselect(why)

    return changed


async def _follow(labels: NodeLabels, manager: Manager, reloader: Reloader) -> None:
    """Read the labels once the manager serves: a plugin added before that (the plugin directory
    still missing, the kubelet not yet looked for) would be served nowhere, or never registered."""
    await manager.started.wait()
    await labels.run(_relabel(reloader))


async def _ready_for_systemd(manager: Manager) -> None:
    await manager.started.wait()
    notify_ready()


def run_daemon(config: Config, options: DaemonOptions, early_signal: Callable[[], int | None] = lambda: None) -> int:
    """Serve until SIGTERM/SIGINT; the process exit code.

    ``early_signal`` reports a stop signal the command line caught before the loop ran.
    """
    setup_logging(options.log_level, options.log_format)
    if not options.all_cpus:
        pin_to_one_cpu()
    labels = connect(config, options.node, options.kubeconfig)  # refuses selectors it cannot evaluate
    features = FeaturesFile(options.features_file) if options.features_file else None
    try:
        plugins = build_plugins(selection(labels)(config), options.host_root, options.cdi_dir)
    except LimitError as problem:  # found by discovery, reported as the config's own errors are
        raise ValueError(resource_problem(options.config_path, config, problem, problem.resource)) from None
    return eventloop.run(_serve(config, options, plugins, early_signal, features, labels=labels))


async def _serve(
    config: Config,
    options: DaemonOptions,
    plugins: list[Plugin],
    early_signal: Callable[[], int | None],
    features: FeaturesFile | None = None,
    *,
    labels: NodeLabels | None = None,
) -> int:
    metrics = Metrics() if options.metrics_address else Metrics.disabled()
    readiness = Readiness(p.resource_name for p in plugins)
    # The port first: taken, it fails the start (ListenError) before anything serves or registers.
    http = await start_http_server(options.metrics_address, metrics, readiness) if options.metrics_address else None
    if http is not None:
        log.info("serving metrics and probes", extra={"port": http.port})
    for plugin in plugins:
        count_devices(plugin, metrics)
    if features is not None:
        features.follow(plugins)
    directory, source = daemon_plugin_dir(options.plugin_dir, config.plugin_dir, options.config_path)
    manager = Manager(plugins, directory, observe(metrics, readiness), plugin_dir_source=source)
    attribution = Attribution(config.pod_resources_socket or beside_plugin_dir(directory))
    metrics.attribute_devices(attribution, lambda: {p.resource_name: p.devices() for p in manager.plugins})

    def applied(new: Config, added: list[Plugin]) -> None:
        names = {r.name for r in new.resources}
        for gone in set(readiness.detail()) - names:
            metrics.forget(gone)
        readiness.configure(names)
        for plugin in added:
            count_devices(plugin, metrics)
        if features is not None:
            features.follow(added, served=names)

    reloader = Reloader(
        options.config_path,
        config,
        manager,
        lambda c: build_plugins(c, options.host_root, options.cdi_dir),
        applied,
        select=selection(labels),
    )
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reloader.trigger)
    reloader.start()
    # Start-up's ~43,000 objects (modules, schemas) live for good: frozen, no full collection
    # walks them again (a 30 ms pause on this machine under load). benchmarks/contention.py
    gc.freeze()
    watcher = OwnerWatch(options.owner, options.kubeconfig) if options.owner else None
    watching = asyncio.create_task(watcher.run()) if watcher else None
    following = asyncio.create_task(_follow(labels, manager, reloader)) if labels else None
    ready = asyncio.create_task(_ready_for_systemd(manager))
    try:
        async with trimming():
            code = await run(manager, early_signal)
        if watcher is not None:
            await clean_up_if_uninstalled(watcher, reloader.config, options.cdi_dir or reloader.config.cdi_dir)
            if features is not None and uninstalled(watcher.history):
                features.remove()  # kept on a restart or update: labels must not flap
        return code
    finally:
        for task in (watching, following, ready):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if watcher is not None:
            await watcher.close()
        if labels is not None:
            await labels.close()
        reloader.stop()
        if http is not None:
            await http.close()
        await attribution.close()
