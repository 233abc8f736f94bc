"""``kubedevice check --dra``: be the kubelet for one DRA driver, with claims from files.

The checker watches ``<kubelet-dir>/plugins_registry`` as the kubelet's plugin watcher does,
takes the first socket whose ``GetInfo`` names the driver, checks the registration, answers
``NotifyRegistrationStatus`` and then prepares and unprepares every claim in the claims
directory allocated to that driver. The driver must read the same claims: ours with
``serve --claims-dir`` on that directory, a Go driver from an API server holding them (the
files must then carry the server's UIDs, e.g. ``kubectl get resourceclaim NAME -o yaml``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from ...api import pluginregistration_v1_pb2 as regpb
from ...dra.nodeclaims import Claim
from ...kubelet.dra.claims import load_claims
from ...kubelet.dra.plugin import (
    KUBELET_SERVICES,
    DraClient,
    Registered,
    get_info,
    kubelet_refusal,
    notify,
    registered_as,
)
from ...kubelet.dra.simulator import REGISTRY, refuse_live_kubelet
from ...kubelet.endpoint import go_error
from ...plugin.watcher import DirectoryWatcher
from ...unixsocket import is_live, is_socket
from ..checks import skipped, verdict
from ..model import Phase, Report, Result, Status
from . import checks as c

DRA_RPC_TIMEOUT_S = 10.0
"""Per call: the kubelet allows 45 s, but a checker must not hang on a stuck driver."""


RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class DraCheckOptions:
    kubelet_dir: Path
    driver: str
    claims_dir: Path
    cdi_dir: Path | None = None
    timeout: float = 30.0
    rpc_timeout: float = DRA_RPC_TIMEOUT_S


def driver_claims(options: DraCheckOptions) -> list[Claim]:
    """The claims of the directory allocated (at least in part) to the driver; ``ValueError`` if none."""
    claims = [
        claim
        for claim in load_claims(options.claims_dir)
        if claim.allocated and any(r.driver == options.driver for r in claim.results)
    ]
    if not claims:
        raise ValueError(f"{options.claims_dir}: no ResourceClaim is allocated to driver {options.driver}")
    return claims


async def run_dra_checks(options: DraCheckOptions) -> Report:
    claims = driver_claims(options)
    refuse_live_kubelet(options.kubelet_dir, "not checking its plugins")
    report = Report({"kubelet_dir": str(options.kubelet_dir), "driver": options.driver})
    found = await find_registration(options.kubelet_dir / REGISTRY, options.driver, options.timeout)
    if found is None:
        detail = f"no socket in {options.kubelet_dir / REGISTRY} named driver {options.driver} in {options.timeout:g} s"
        report.results.append(Result(c.SOCKET, Status.FAIL, detail))
        report.results += skipped(c.CATALOGUE[1:], "no registration socket")
        return report
    path, info, waited = found
    report.results.append(Result(c.SOCKET, Status.PASS, f"{path.name} after {waited:.3f} s", None, waited, "s"))
    registration, usable = await _registration(path, info)
    report.results += registration
    if usable is None:
        report.results += skipped(c.CATALOGUE[c.CATALOGUE.index(c.WRONG_UID) :], "the kubelet would not use it")
        return report
    other = _other_service(info, usable, options.rpc_timeout)
    async with DraClient(usable, options.rpc_timeout) as client:
        try:
            probe = c.DraProbe(client, options.driver, claims, options.cdi_dir, other)
            report.results += await probe.run()
        finally:
            if other is not None:
                await other.__aexit__(None, None, None)
    phases = list(Phase)
    report.results.sort(key=lambda r: phases.index(r.check.phase))  # stable: the order they ran within a phase
    return report


async def _registration(path: Path, info: regpb.PluginInfo) -> tuple[list[Result], Registered | None]:
    """The registration checks, and what the kubelet would call (``None``: it would refuse)."""
    refusal = kubelet_refusal(info, path)
    results = [verdict(c.TYPE, [] if info.type == "DRAPlugin" else [refusal], None, "DRAPlugin")]
    services = [s for s in info.supported_versions if s in KUBELET_SERVICES]
    results.append(
        verdict(c.SERVICES, [refusal] if info.type == "DRAPlugin" and refusal else [], None, ", ".join(services))
    )
    endpoint = info.endpoint or str(path)
    results.append(verdict(c.ENDPOINT, _endpoint_problems(endpoint), None, endpoint))
    try:
        await notify(path, not refusal, refusal)
        results.append(Result(c.NOTIFY, Status.PASS, "registered" if not refusal else "told it was refused"))
    except grpc.RpcError as err:
        message = go_error(err) if isinstance(err, grpc.aio.AioRpcError) else str(err)
        results.append(Result(c.NOTIFY, Status.FAIL, message))
    if refusal or any(r.status is Status.FAIL for r in results):
        return results, None
    return results, registered_as(info, path)


def _endpoint_problems(endpoint: str) -> list[str]:
    if not Path(endpoint).is_absolute():
        return [f"endpoint {endpoint!r} is not an absolute path (the kubelet dials it from its own working directory)"]
    try:
        if not stat.S_ISSOCK(Path(endpoint).stat().st_mode):
            return [f"endpoint {endpoint} is not a socket"]
    except OSError:
        return [f"endpoint {endpoint} does not exist"]
    if not is_live(Path(endpoint)):
        return [f"endpoint {endpoint} refuses connections"]
    return []


def _other_service(info: regpb.PluginInfo, used: Registered, timeout: float) -> DraClient | None:
    others = [s for s in info.supported_versions if s in KUBELET_SERVICES and s != used.service]
    if not others:
        return None
    return DraClient(dataclasses.replace(used, service=others[0]), timeout)


async def find_registration(registry: Path, driver: str, timeout: float) -> tuple[Path, regpb.PluginInfo, float] | None:
    """The first socket in ``registry`` whose GetInfo names ``driver`` (those there, then new ones)."""
    start = time.monotonic()
    queue: asyncio.Queue[str] = asyncio.Queue()
    existing = _existing(registry)
    watcher = DirectoryWatcher(registry, lambda name, created: queue.put_nowait(name) if created else None)
    watcher.start()
    try:
        for name in existing:
            queue.put_nowait(name)
        async with asyncio.timeout(timeout):
            while True:
                path = registry / await queue.get()
                info = await _info(path)
                if info is not None and info.name == driver:
                    return path, info, time.monotonic() - start
                if info is None and _is_socket(path):  # the kubelet's reconciler retries every second
                    asyncio.get_running_loop().call_later(RETRY_S, queue.put_nowait, path.name)
    except TimeoutError:
        return None
    finally:
        watcher.stop()


def _existing(registry: Path) -> list[str]:
    """What the registry holds now (it and ``plugins/`` are created if missing, as the kubelet does)."""
    registry.mkdir(parents=True, exist_ok=True)
    (registry.parent / "plugins").mkdir(exist_ok=True)  # drivers wait for both before serving
    return sorted(p.name for p in registry.iterdir())


def _is_socket(path: Path) -> bool:
    """The plugin watcher skips dot files and anything that is not a socket."""
    return not path.name.startswith(".") and is_socket(path)


async def _info(path: Path) -> regpb.PluginInfo | None:
    if not _is_socket(path):
        return None
    try:
        return await get_info(path)
    except grpc.RpcError:
        return None
