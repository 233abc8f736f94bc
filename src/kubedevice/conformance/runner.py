"""Run the whole suite against a plugin: via a simulated kubelet (``plugin_dir``) or a bare socket.

With a plugin directory the checker *is* the kubelet: it serves ``kubelet.sock`` with the
simulator, waits for the plugin to register, probes every registered socket directly, and then
restarts the simulated kubelet to time re-registration. With a bare socket only the probes run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..api import VERSION, pb
from ..kubelet import KubeletSimulator, Registration
from ..kubelet.endpoint import endpoint_path
from . import checks, rules
from .checks import SocketProbe, skipped, verdict
from .client import PluginClient
from .model import (
    FIRST_LIST_FAIL_S,
    REREGISTER_PASS_S,
    RPC_TIMEOUT_S,
    Check,
    Phase,
    Report,
    Result,
    Status,
)

SETTLE_S = 1.0  # after a registration, how long to wait for the plugin's other resources
_REGISTRATION_CHECKS = [c for c in checks.CATALOGUE if c.phase is Phase.REGISTRATION]
_RESTART_CHECKS = [c for c in checks.CATALOGUE if c.phase is Phase.RESTART]


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """Exactly one of ``plugin_dir`` and ``socket``; ``timeout`` bounds the wait for registration.

    ``reregister_pass`` is the re-registration verdict's bound, the real kubelet's admission window
    (model.REREGISTER_PASS_S) unless a caller judges something else: the project's own tests of
    the checker's other verdicts widen it, so that a loaded machine cannot fail them by chance.
    """

    plugin_dir: Path | None = None
    socket: Path | None = None
    restart: bool = True
    timeout: float = 30.0
    restart_timeout: float = 15.0
    rpc_timeout: float = RPC_TIMEOUT_S
    reregister_pass: float = REREGISTER_PASS_S


async def run_checks(options: CheckOptions) -> Report:
    if (options.plugin_dir is None) == (options.socket is None):
        raise ValueError("give exactly one of --plugin-dir and --socket")
    if options.socket is not None:
        report = await _check_socket(options.socket, options)
    else:
        assert options.plugin_dir is not None
        report = await _check_plugin_dir(options.plugin_dir, options)
    phases = list(Phase)
    report.results.sort(key=lambda r: phases.index(r.check.phase))  # stable: resources keep their order
    return report


async def _check_socket(socket: Path, options: CheckOptions) -> Report:
    report = Report({"socket": str(socket)})
    report.results += skipped(_REGISTRATION_CHECKS, "needs --plugin-dir (the plugin must register)")
    async with PluginClient(socket, options.rpc_timeout) as client:
        report.results += await SocketProbe(client, None, FIRST_LIST_FAIL_S).run(None)
    report.results += skipped(_RESTART_CHECKS, "needs --plugin-dir (the checker must restart the kubelet)")
    return report


async def _check_plugin_dir(plugin_dir: Path, options: CheckOptions) -> Report:
    report = Report({"plugin_dir": str(plugin_dir)})
    sim = KubeletSimulator(plugin_dir, dial_timeout=options.rpc_timeout)  # the kubelet's is 10 s
    await sim.start()
    try:
        first = await _registrations(sim, options.timeout)
        if not first:
            report.results.append(Result(checks.REGISTER, Status.FAIL, f"no Register call in {options.timeout:g} s"))
            report.results += skipped([c for c in checks.CATALOGUE if c is not checks.REGISTER], "never registered")
            return report
        for registration in first.values():
            report.results += await _check_resource(sim, registration, options.rpc_timeout)
        report.results += (
            await _check_restart(sim, list(first), options)
            if options.restart
            else skipped(_RESTART_CHECKS, "--no-restart")
        )
    finally:
        await sim.stop()
    return report


async def _registrations(sim: KubeletSimulator, timeout: float) -> dict[str, Registration]:
    """The first Register call of each resource; waits for the first, then briefly for the others."""
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        wait = timeout if seen == 0 else SETTLE_S
        try:
            await sim.wait_until(partial(_more_than, sim, seen), min(wait, deadline - time.monotonic()))
        except TimeoutError:
            break
        seen = len(sim.registrations)
    first: dict[str, Registration] = {}
    for registration in sim.registrations:
        first.setdefault(registration.resource_name, registration)
    return first


def _more_than(sim: KubeletSimulator, count: int) -> bool:
    return len(sim.registrations) > count


async def _check_resource(sim: KubeletSimulator, registration: Registration, rpc_timeout: float) -> list[Result]:
    name = registration.resource_name
    waited = max(0.0, registration.received_at - sim.kubelet_sock_created_at)
    accepted = [r for r in sim.registrations if r.resource_name == name and r.error is None]
    results = [
        Result(checks.REGISTER, Status.PASS, f"at {registration.endpoint} after {waited:.3f} s", name, waited, "s"),
        verdict(checks.VERSION, _version_problems(registration.version), name, registration.version),
        verdict(checks.RESOURCE_NAME, rules.resource_name_problems(name), name, "valid"),
        verdict(checks.ENDPOINT, rules.endpoint_problems(registration.endpoint), name, registration.endpoint),
        verdict(checks.ACCEPTED, [] if accepted else [str(registration.error)], name, "accepted"),
    ]
    registered = pb.DevicePluginOptions(
        pre_start_required=registration.options.pre_start_required,
        get_preferred_allocation_available=registration.options.get_preferred_allocation_available,
    )
    async with PluginClient(endpoint_path(sim.plugin_dir, registration.endpoint), rpc_timeout) as client:
        results += await SocketProbe(client, name, FIRST_LIST_FAIL_S).run(registered)
    return results


def _version_problems(version: str) -> list[str]:
    return [] if version == VERSION else [f"version {version!r} is not {VERSION!r}"]


async def _check_restart(sim: KubeletSimulator, names: list[str], options: CheckOptions) -> list[Result]:
    """Restart the simulated kubelet, then time each resource's Register and its devices coming back."""
    live = [n for n in names if (r := sim.resources.get(n)) is not None and r.connected]
    results = [r for n in names if n not in live for r in skipped(_RESTART_CHECKS, "not connected before it", n)]
    before = {n: sim.allocatable().get(n, 0) for n in live}
    await sim.restart()
    restarted = sim.kubelet_sock_created_at
    deadline = restarted + options.restart_timeout
    timings = await asyncio.gather(*(_comeback(sim, n, before[n], deadline) for n in live))
    for name, (registered, restored) in zip(live, timings, strict=True):
        results.append(_latency(checks.REREGISTER, name, registered, restarted, options))
        if registered is None:
            results += skipped([checks.RESTORED], "did not re-register", name)
        else:
            results.append(_latency(checks.RESTORED, name, restored, restarted, options))
    return results


async def _comeback(sim: KubeletSimulator, name: str, allocatable: int, deadline: float) -> tuple[float | None, ...]:
    """When ``name`` was registered again and when its allocatable count was back (``None``: not in time)."""
    since = sim.kubelet_sock_created_at

    def accepted() -> Registration | None:
        return next(
            (r for r in sim.registrations if r.resource_name == name and r.error is None and r.received_at >= since),
            None,
        )

    if not await _wait(sim, lambda: accepted() is not None, deadline):
        return None, None
    registered = accepted()
    assert registered is not None
    if not await _wait(sim, lambda: sim.allocatable().get(name, 0) >= allocatable, deadline):
        return registered.received_at, None
    return registered.received_at, time.monotonic()


async def _wait(sim: KubeletSimulator, predicate: Callable[[], bool], deadline: float) -> bool:
    try:
        await sim.wait_until(predicate, max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return False
    return True


def _latency(check: Check, name: str, at: float | None, since: float, options: CheckOptions) -> Result:
    """Pass within the real kubelet's admission window, fail beyond: no warning, since every pod
    admitted meanwhile is lost (model.REREGISTER_PASS_S); fail too when nothing happened within ``limit``."""
    if at is None:
        return Result(check, Status.FAIL, f"not within --restart-timeout {options.restart_timeout:g} s", name)
    took = at - since
    status = Status.PASS if took <= options.reregister_pass else Status.FAIL
    detail = (
        f"{took:.3f} s after the kubelet restarted (pass <= {options.reregister_pass:g} s: the kubelet can admit "
        "pods 0.3 s after a restart and rejects those needing a plugin not back yet)"
    )
    return Result(check, status, detail, name, took, "s")
