"""The simulator's fidelity: the same scenarios on ``kubedevice.kubelet.KubeletSimulator`` and on
the real kubelet must end the same way (capacity, admitted or the same rejection reason and text)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from kubedevice.api import VERSION, pb, pb_grpc
from kubedevice.kubelet.model import AdmissionError, Container, Pod
from kubedevice.kubelet.simulator import KubeletSimulator
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.scenarios import Daemon, delete_pods, device_pod, unique, wait_for, wait_outcome

pytestmark = pytest.mark.e2e

RESOURCE = "example.com/e2e-fidelity"
Outcome = tuple[str, str]
"""("admitted", "") or (reason, message) as the pod status shows them."""


def _config(path: Path, broken: Path) -> Path:
    path.write_text(f"""resources:
  - name: {RESOURCE}
    static: {{count: 3, paths: [/dev/null]}}
    health:
      checks: [{{type: exec, argv: [/usr/bin/test, "!", -e, "{broken}/{{id}}"]}}]
      interval_seconds: 0.2
      failure_threshold: 1
""")
    (broken / "e2e-fidelity-0").touch()  # one of three devices unhealthy from the start
    return path


async def _register(plugin_dir: Path, version: str, resource: str) -> str:
    """Register with the kubelet at ``plugin_dir``: "" when accepted, else the error it answered."""
    async with grpc.aio.insecure_channel(f"unix://{plugin_dir}/kubelet.sock") as channel:
        try:
            await pb_grpc.RegistrationStub(channel).Register(
                pb.RegisterRequest(version=version, endpoint="fidelity.sock", resource_name=resource), timeout=15
            )
        except grpc.aio.AioRpcError as err:
            return f"{err.code().name}: {err.details()}"
    return ""


BAD_REGISTRATIONS = [("v1alpha1", "example.com/fine"), (VERSION, "no-domain"), (VERSION, "kubernetes.io/taken")]


@contextlib.contextmanager
def paused(daemon: Daemon) -> Iterator[None]:
    """The daemon stopped (SIGSTOP) for the block, so that a pod created right after a kubelet
    restart is admitted before the plugin registers again, on both sides. Left running, the
    daemon is back within milliseconds of the new ``kubelet.sock``, and which comes first then
    depends on the machine's load: a CI run under load saw the real kubelet admit the pod after
    the plugin was back, while the simulator had refused it."""
    daemon.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        daemon.signal(signal.SIGCONT)


def _simulated(directory: Path, config: Path) -> dict[str, object]:
    async def main() -> dict[str, object]:
        sim = KubeletSimulator(directory)
        await sim.start()
        daemon = Daemon(directory, config, directory.parent / "sim-serve.log")
        seen: dict[str, object] = {}
        try:
            await sim.wait_until(lambda: sim.capacity().get(RESOURCE) == 3 and sim.allocatable()[RESOURCE] == 2, 10)
            seen["capacity"] = (sim.capacity()[RESOURCE], sim.allocatable()[RESOURCE])
            seen["too_many"] = await _admit(sim, {RESOURCE: 5})
            seen["fits"] = await _admit(sim, {RESOURCE: 1})
            seen["unknown"] = await _admit(sim, {"example.com/e2e-never-registered": 1})
            with paused(daemon):
                await sim.restart()
                seen["right_after_restart"] = await _admit(sim, {RESOURCE: 1})
            await sim.wait_until(lambda: sim.resources[RESOURCE].connected and sim.allocatable()[RESOURCE] == 2, 10)
            seen["capacity_after_restart"] = (sim.capacity()[RESOURCE], sim.allocatable()[RESOURCE])
            seen["bad_registrations"] = [await _register(directory, *bad) for bad in BAD_REGISTRATIONS]
            daemon.signal(signal.SIGTERM)
            await asyncio.to_thread(daemon.process.wait, 15)
            await sim.wait_until(lambda: sim.allocatable()[RESOURCE] == 0, 10)
            seen["plugin_gone"] = await _admit(sim, {RESOURCE: 1})
        finally:
            daemon.stop()
            await sim.stop()
        return seen

    return asyncio.run(main())


async def _admit(sim: KubeletSimulator, requests: dict[str, int]) -> Outcome:
    pod = Pod(unique("uid"), unique("pod"), [Container("main", requests)])
    try:
        await sim.admit(pod)
    except AdmissionError as err:
        return err.reason, err.message
    sim.remove_pod(pod.uid)
    return "admitted", ""


def _real(cluster: Cluster, config: Path, log: Path) -> dict[str, object]:
    api = cluster.api()
    daemon = Daemon(cluster, config, log)
    seen: dict[str, object] = {}
    try:
        wait_for("3 devices, 2 healthy", lambda: api.resource(cluster.node_name, RESOURCE) == (3, 2), 10.0)
        seen["capacity"] = api.resource(cluster.node_name, RESOURCE)
        seen["too_many"] = _run_pod(cluster, {RESOURCE: 5})
        seen["fits"] = _run_pod(cluster, {RESOURCE: 1})
        seen["unknown"] = _run_pod(cluster, {"example.com/e2e-never-registered": 1})
        with paused(daemon):
            cluster.restart_kubelet()  # returns once the kubelet answers healthz
            seen["right_after_restart"] = _run_pod(cluster, {RESOURCE: 1})
        wait_for(
            "devices after the restart",
            lambda: api.node_ready(cluster.node_name) and api.resource(cluster.node_name, RESOURCE) == (3, 2),
            30.0,
        )
        seen["capacity_after_restart"] = api.resource(cluster.node_name, RESOURCE)
        seen["bad_registrations"] = [asyncio.run(_register(cluster.plugin_dir, *bad)) for bad in BAD_REGISTRATIONS]
        daemon.signal(signal.SIGTERM)
        daemon.process.wait(15)
        wait_for("allocatable 0", lambda: api.resource(cluster.node_name, RESOURCE)[1] == 0, 10.0)
        seen["plugin_gone"] = _run_pod(cluster, {RESOURCE: 1})
    finally:
        daemon.stop()
    return seen


def _run_pod(cluster: Cluster, requests: dict[str, int]) -> Outcome:
    api = cluster.api()
    name = unique("fidelity")
    api.create_pod(device_pod(name, requests, cluster.node_name))
    phase, reason, message = wait_outcome(api, name)
    delete_pods(api, [name])
    return ("admitted", "") if phase == "Running" else (reason, message.removeprefix("Pod was rejected: "))


def test_simulator_and_real_kubelet_agree(cluster: Cluster, short_tmp: Path) -> None:
    (short_tmp / "sim").mkdir()
    config = _config(short_tmp / "config.yaml", short_tmp)
    simulated = _simulated(short_tmp / "sim", config)
    real = _real(cluster, config, short_tmp / "real-serve.log")
    assert real["too_many"][0] == "UnexpectedAdmissionError", real  # type: ignore[index]
    assert real["right_after_restart"][0] == "UnexpectedAdmissionError", real  # type: ignore[index]
    differences = {key: (simulated[key], real[key]) for key in real if simulated[key] != real[key]}
    assert not differences, f"simulator vs real kubelet: {differences}"
