"""`kubedevice check`, calibrated on the real kubelet: what it passes keeps every pod across a kubelet
restart, what it fails (re-registration after the kubelet's admission window) loses them; and a
registration the real kubelet refuses, `check` fails for the same reason."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from kubedevice.api import pb, pb_grpc
from kubedevice.conformance import CheckOptions, Status, run_checks
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.scenarios import (
    Daemon,
    delete_pods,
    device_pod,
    kubelet_restart_round,
    unique,
    wait_for,
    wait_outcome,
)
from tests.conformance.scripted import ScriptedPlugin

pytestmark = pytest.mark.e2e


def _plain(plugin: ScriptedPlugin, delay: float) -> ScriptedPlugin:
    """Env-only grants (no CDI names: containerd 2 would refuse unknown ones at container start)."""
    plugin.grant = lambda ids: pb.ContainerAllocateResponse(envs={"SCRIPTED_DEVICES": ",".join(ids)})
    plugin.reregister_delay = delay
    return plugin


@contextmanager
def _running(plugin: ScriptedPlugin) -> Iterator[None]:
    loop = asyncio.new_event_loop()
    task = loop.create_task(plugin.run())

    def serve() -> None:  # the cancel below ends it: not an error of the thread
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(10)
        loop.close()


def _check_on_simulator(directory: Path, name: str, delay: float, **tweaks: str) -> dict[str, tuple[Status, str]]:
    plugin = _plain(ScriptedPlugin(directory, name), delay)
    for key, value in tweaks.items():
        setattr(plugin, key, value)

    async def main() -> dict[str, tuple[Status, str]]:
        task = asyncio.create_task(plugin.run())
        try:
            report = await run_checks(CheckOptions(plugin_dir=directory, restart=True, restart_timeout=5))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return {r.check.id: (r.status, r.detail) for r in report.results}

    return asyncio.run(main())


def test_check_passes_kubedevice_serve_which_loses_no_pod(short_tmp: Path) -> None:
    """kubedevice serve loses no pod over 5 real kubelet restarts (test_restart_race.py); check passes it."""
    config = short_tmp / "config.yaml"
    config.write_text("resources:\n  - name: example.com/e2e-check\n    static: {count: 2, paths: [/dev/null]}\n")
    daemon = Daemon(short_tmp, config, short_tmp / "serve.log")
    try:
        report = asyncio.run(run_checks(CheckOptions(plugin_dir=short_tmp, restart=True, restart_timeout=5)))
    finally:
        daemon.stop()
    results = [r for r in report.results if r.check.id.startswith("restart.")]
    restart = {r.check.id: r.status for r in results}
    details = [f"{r.check.id}: {r.status.value} {r.detail}" for r in results]
    assert restart == {"restart.reregister": Status.PASS, "restart.devices": Status.PASS}, (details, daemon.tail)


def test_check_fails_a_plugin_that_loses_pods_on_the_real_kubelet(cluster: Cluster, short_tmp: Path) -> None:
    """Re-registering 1 s after a restart: every pod created once the kubelet answers healthz is lost
    on the real kubelet, and check fails it (it used to only warn below 10 s)."""
    delay, resource = 1.0, "example.com/e2e-slow"
    statuses = _check_on_simulator(short_tmp, resource, delay)
    assert statuses["restart.reregister"][0] is Status.FAIL, statuses

    api = cluster.api()
    with _running(_plain(ScriptedPlugin(cluster.plugin_dir, resource), delay)):
        wait_for("4 devices", lambda: api.resource(cluster.node_name, resource) == (4, 4), 20.0)
        keeper = unique("keeper")
        api.create_pod(device_pod(keeper, {resource: 1}, cluster.node_name))
        assert wait_outcome(api, keeper)[0] == "Running"
        rounds = []
        for _ in range(4):  # the race needs pods created before the plugin is back: a kubelet slower
            rounds.append(kubelet_restart_round(cluster, resource, pods=2))  # to healthz than the delay
            if rounds[-1].healthy_after_s < delay:  # lets it re-register first, so that round proves nothing
                break
        delete_pods(api, [keeper])
    result = rounds[-1]
    assert result.healthy_after_s < delay, f"the kubelet answered healthz after the plugin was back: {rounds}"
    assert result.admission_errors == len(result.outcomes) == 2, result


async def _real_refusal(plugin_dir: Path, version: str, resource: str) -> str:
    async with grpc.aio.insecure_channel(f"unix://{plugin_dir}/kubelet.sock") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await pb_grpc.RegistrationStub(channel).Register(
                pb.RegisterRequest(version=version, endpoint="scripted.sock", resource_name=resource), timeout=15
            )
    return str(refused.value.details())


@pytest.mark.parametrize(
    ("tweak", "check_id"),
    [({"version": "v1alpha1"}, "registration.version"), ({"resource": "no-domain"}, "registration.resource_name")],
)
def test_registration_the_real_kubelet_refuses_fails_check_for_the_same_reason(
    cluster: Cluster, short_tmp: Path, tweak: dict[str, str], check_id: str
) -> None:
    request = {"version": "v1beta1", "resource": "example.com/e2e-refused", **tweak}
    real = asyncio.run(_real_refusal(cluster.plugin_dir, request["version"], request["resource"]))
    statuses = _check_on_simulator(short_tmp, "example.com/e2e-refused", 0.0, **tweak)
    assert statuses[check_id][0] is Status.FAIL, statuses
    status, detail = statuses["registration.accepted"]
    assert status is Status.FAIL
    assert real in detail, f"real kubelet: {real!r}; check: {detail!r}"
