"""``kubedevice serve`` with a ``dra:`` section: the configured resources as one DRA driver.

The resources are the same :class:`~kubedevice.sources.configured.ConfiguredPlugin` objects
the device-plugin daemon serves (discovery, hotplug, health checks, grants and env
templates); only the API towards the kubelet differs. Readiness (``/readyz`` with
``--metrics-address``) means registered with the kubelet and slices published.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from ... import eventloop
from ...allocation.cdi import CdiError
from ...config import Config
from ...errors import DependencyError, UsageError, fail, os_reason
from ...logs import setup_logging
from ...metrics import Metrics, Readiness, start_http_server
from ...node.affinity import pin_to_one_cpu
from ...node.daemon import build_plugins
from ...node.memory import trimming
from ...podresources.attribution import Attribution
from ...podresources.client import socket_in
from .checkpoint import CheckpointError
from .driver import DraDriver
from .metrics import DraMetrics, held_devices
from .service import DEFAULT_KUBELET_DIR, ServiceOptions, serve

log = logging.getLogger("kubedevice.dra.daemon")
POD_UID_ENV = "POD_UID"


@dataclass(frozen=True)
class DraOptions:
    """Command-line settings of the DRA daemon."""

    node: str
    kubelet_dir: Path | None = None
    cdi_dir: Path | None = None
    kubeconfig: Path | None = None
    host_root: Path | None = None
    metrics_address: str | None = None
    log_level: str = "info"
    log_format: str = "text"
    claims_dir: Path | None = None
    """Testing without a cluster: claims read from files here, no API server, no ResourceSlices;
    ``status.devices`` patches written to its ``status/`` directory."""
    all_cpus: bool = False
    """Leave the threads on every allowed CPU instead of one (see :mod:`kubedevice.node.affinity`)."""


def build_driver(config: Config, host_root: Path | None = None) -> DraDriver:
    """The driver of a config with a ``dra:`` section (devices discovered now, through ``host_root``)."""
    if config.dra is None:
        raise ValueError("the config has no 'dra' section")
    # The plugins write no device-plugin CDI specs: the driver writes one per prepared claim.
    plugins = build_plugins(config, host_root, None)
    dra = config.dra
    return DraDriver(
        dra.driver,
        plugins,
        dra.taint_effect,
        dra.sharing,
        device_metadata=dra.device_metadata,
        configured=dra.resources,
        numa_form=dra.numa_node_attribute,
    )


def run_dra_daemon(config: Config, options: DraOptions, early_signal: Callable[[], int | None] = lambda: None) -> int:
    """Serve until SIGTERM/SIGINT; the process exit code. A start-up failure is a ``UsageError`` (the
    config, a flag, the node's files) or a ``DependencyError`` (a port, a permission, a live socket).

    ``early_signal`` reports a stop signal the command line caught before the loop ran.
    """
    setup_logging(options.log_level, "json" if options.log_format == "json" else "text")
    if options.log_level != "debug":  # the HTTP client logs every request (watch, resync) at INFO
        for name in ("httpx2", "httpcore2"):
            logging.getLogger(name).setLevel(logging.WARNING)
    if not options.all_cpus:
        pin_to_one_cpu()
    if config.dra is not None and config.dra.rolling_update and not os.environ.get(POD_UID_ENV):
        raise UsageError(f"dra.rolling_update needs ${POD_UID_ENV} (the downward API's metadata.uid)")
    try:
        driver = build_driver(config, options.host_root)
        return eventloop.run(_serve(config, driver, options, early_signal))
    except (CheckpointError, CdiError, ValueError) as err:  # what the node's files or the config hold
        raise UsageError(str(err)) from None
    except OSError as err:  # the node refused something at run time: a permission, a full disk
        raise DependencyError(f"{getattr(err, 'filename', None) or 'DRA driver'}: {os_reason(err)}") from None


async def _serve(config: Config, driver: DraDriver, options: DraOptions, early_signal: Callable[[], int | None]) -> int:
    assert config.dra is not None
    readiness = Readiness([driver.name])
    metrics = Metrics() if options.metrics_address else Metrics.disabled()
    dra_metrics = DraMetrics(metrics.registry) if metrics.enabled else None
    kubelet_dir = options.kubelet_dir or DEFAULT_KUBELET_DIR
    attribution = Attribution(config.pod_resources_socket or socket_in(kubelet_dir))
    metrics.attribute(held_devices(attribution, driver, options.node))  # the pool is named after the node
    service_options = ServiceOptions(
        options.node,
        kubelet_dir,
        options.cdi_dir or config.cdi_dir,
        rolling_update_uid=os.environ.get(POD_UID_ENV, "") if config.dra.rolling_update else "",
        observe=dra_metrics.observe_rpc if dra_metrics else None,
        on_publish=dra_metrics.observe_publish if dra_metrics else None,
        on_ready=lambda ready: _ready(readiness, driver.name, ready),
        device_status=config.dra.device_status,
    )
    # The port first: taken, it fails the start before the driver serves anything (whose gRPC
    # server, left behind, would complain at exit that it was never shut down).
    http = await start_http_server(options.metrics_address, metrics, readiness) if options.metrics_address else None
    task = asyncio.create_task(_serve_driver(driver, service_options, options, config.dra.publish))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    if early_signal() is not None:  # caught while we started: stop as if it came now
        task.cancel()
    try:
        async with trimming():
            await task
    except asyncio.CancelledError:
        log.info("stopped DRA driver %s", driver.name)
    finally:
        if not task.done():  # a failure around it: the driver stops (its gRPC server shut down) first
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if http is not None:
            await http.close()
        await attribution.close()
    return 0


def _ready(readiness: Readiness, name: str, ready: bool) -> None:
    """Readiness follows registration and publishing; the first time it holds, the start-up heap
    (lightkube's models, pydantic's schemas, grpc: ~10^5 objects) is frozen, as ``serve``'s
    device-plugin daemon does after its start. Unfrozen, each full collection walked it again: 21-40 ms
    pauses in the middle of NodePrepare/UnprepareResources calls (``benchmarks/dra_prepare.py``,
    a gc.callbacks probe), the cause of the 32-claim unprepare's p99."""
    readiness.set_registered(name, ready)
    if ready and gc.get_freeze_count() == 0:
        gc.freeze()


def _serve_driver(
    driver: DraDriver, service_options: ServiceOptions, options: DraOptions, publish: bool
) -> Coroutine[None, None, None]:
    """The service: claims from the API server, or (for testing) from files with nothing published."""
    if options.claims_dir is None:
        return serve(driver, service_options, kubeconfig=options.kubeconfig, publish=publish)
    from .claims import FileClaims  # noqa: PLC0415
    from .devicestatus import FileStatus  # noqa: PLC0415

    log.warning(
        "TESTING ONLY: claims of DRA driver %s are read from files in %s; no API server is used, no "
        "ResourceSlices are published, and status.devices (dra.device_status) goes to %s/status/",
        driver.name,
        options.claims_dir,
        options.claims_dir,
    )
    status = FileStatus(options.claims_dir / "status")
    return serve(driver, service_options, FileClaims(options.claims_dir), publish=False, status=status)


def serve_command(
    config: Config, options: DraOptions, early_signal: Callable[[], int | None] = lambda: None
) -> NoReturn:
    """``kubedevice serve`` for a config with ``dra:``: exits with the daemon's code; bad input and failed
    dependencies raise :class:`UsageError` / :class:`DependencyError` for the command line's one line."""
    if not options.node:
        fail("serve: a config with 'dra' needs --node (or $NODE_NAME)")
    if options.claims_dir is not None and not options.claims_dir.is_dir():
        fail(f"serve: --claims-dir {options.claims_dir} is not a directory")
    raise SystemExit(run_dra_daemon(config, options, early_signal))  # UsageError, DependencyError: one line
