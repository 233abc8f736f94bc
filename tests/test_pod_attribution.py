"""`kubedevice serve` labels its per-device metric with the pod holding each device, asked of
the (simulated) kubelet's PodResources API on every scrape; without the API, one log line and
no pod labels. Real processes, real sockets, real HTTP scrapes."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.kubelet.podresources import PodResourcesServer, PodResourcesView
from kubedevice.podresources.attribution import attributed
from kubedevice.podresources.model import Holder
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object
from kubedevice.testing.scenarios import Daemon

ROOT = Path(__file__).resolve().parents[1]
NULL = "example.com/null"
UNKNOWN = "which pod holds which device is unknown"
Series = dict[tuple[tuple[str, str], ...], float]


def run(coro: Coroutine[object, object, None], timeout: float) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield path
    shutil.rmtree(path)


def scrape(port: int, name: str) -> Series:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def series(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def device(
    resource: str, device_id: str, pod: str = "", namespace: str = "", container: str = ""
) -> tuple[tuple[str, str], ...]:
    return series(resource=resource, device=device_id, pod=pod, namespace=namespace, container=container)


async def poll(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not await asyncio.to_thread(check):
            await asyncio.sleep(0.1)


def test_serve_names_the_pod_holding_each_device_and_carries_on_without_the_api(root: Path) -> None:
    config = root / "config.yaml"
    config.write_text(f"resources:\n  - name: {NULL}\n    static: {{count: 3, paths: [/dev/null]}}\n")
    port = free_port()

    async def scenario() -> None:
        sim = KubeletSimulator(root / "device-plugins")
        await sim.start()
        assert sim.pod_resources is not None
        daemon = Daemon(sim.plugin_dir, config, root / "serve.log", "--metrics-address", f"127.0.0.1:{port}")
        try:
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 3, 20)
            [granted] = (await sim.admit(Pod("uid-1", "trainer", [Container("main", {NULL: 2})], "ml"))).values()
            held = granted.device_ids[NULL]
            [free] = {"null-0", "null-1", "null-2"} - set(held)  # the static source's IDs
            metric = await asyncio.to_thread(scrape, port, "kubedevice_device_healthy")
            assert metric == {
                **{device(NULL, d, "trainer", "ml", "main"): 1.0 for d in held},
                device(NULL, free): 1.0,
            }
            assert await asyncio.to_thread(scrape, port, "kubedevice_pod_resources_up") == {(): 1.0}

            sim.remove_pod("uid-1")
            assert set(await asyncio.to_thread(scrape, port, "kubedevice_device_healthy")) == {
                device(NULL, d) for d in ("null-0", "null-1", "null-2")
            }

            await sim.pod_resources.stop()  # a kubelet without the API: the metric goes on, unlabelled
            for _ in range(3):
                assert await asyncio.to_thread(scrape, port, "kubedevice_pod_resources_up") == {(): 0.0}
            assert len(await asyncio.to_thread(scrape, port, "kubedevice_device_healthy")) == 3
            await sim.pod_resources.start()
            await sim.admit(Pod("uid-2", "again", [Container("c", {NULL: 1})]))
            metric = await asyncio.to_thread(scrape, port, "kubedevice_device_healthy")
            assert sorted(dict(k)["pod"] for k in metric) == ["", "", "again"]
        finally:
            daemon.signal(signal.SIGTERM)
            code = await asyncio.to_thread(daemon.process.wait, 15)
            await sim.stop()
        log = (root / "serve.log").read_text()
        assert code == 0, log
        assert log.count(UNKNOWN) == 1, log  # three failed scrapes, one line
        assert f"{UNKNOWN}, metrics go without pod labels: {sim.pod_resources.socket}: no such file" in log
        assert log.count("the kubelet's PodResources API answers again") == 1, log

    run(scenario(), 90)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_the_dra_driver_names_claim_and_pod_of_each_device(root: Path) -> None:
    node = Node(root)
    _, _, uid = node.add_claim(claim_object("web", ["null-1"], namespace="ml"))
    port = free_port()

    async def scenario() -> None:
        serve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubedevice", "serve", "--config", str(ROOT / "examples" / "dra-null.yaml"),
            "--node", NODE, "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir),
            "--claims-dir", str(node.claims_dir), "--metrics-address", f"127.0.0.1:{port}",
            stdout=asyncio.subprocess.DEVNULL, stderr=(root / "serve.log").open("wb"), env=_env(),
        )  # fmt: skip
        kubelet = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubedevice", "kubelet", "--dra", "--plain", "--claims", str(node.claims_dir),
            "--kubelet-dir", str(node.kubelet_dir),
            stdin=asyncio.subprocess.PIPE, stdout=(root / "kubelet.log").open("wb"), stderr=asyncio.subprocess.STDOUT,
            env=_env(),
        )  # fmt: skip
        kubelet_log = root / "kubelet.log"
        try:
            await poll(lambda: f"registered DRA driver {DRIVER}" in kubelet_log.read_text())
            assert kubelet.stdin is not None
            kubelet.stdin.write(b"admit ml/job web\n")
            await poll(lambda: f"prepared ml/web ({uid})" in kubelet_log.read_text())
            metric = await asyncio.to_thread(scrape, port, "kubedevice_dra_device_healthy")
            where = {"driver": DRIVER, "pool": NODE}
            held = series(**where, device="null-1", claim="web", pod="job", namespace="ml", container="main")
            assert metric[held] == 1.0
            free = [
                series(**where, device=f"null-{i}", claim="", pod="", namespace="", container="") for i in (0, 2, 3)
            ]
            assert metric == {held: 1.0, **dict.fromkeys(free, 1.0)}

            kubelet.stdin.write(b"remove ml/job\n")
            await poll(lambda: f"unprepared ml/web ({uid})" in kubelet_log.read_text())
            metric = await asyncio.to_thread(scrape, port, "kubedevice_dra_device_healthy")
            assert {dict(k)["pod"] for k in metric} == {""}
        finally:
            for proc in (kubelet, serve):
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
                    await asyncio.wait_for(proc.wait(), 15)

    run(scenario(), 120)


def test_a_device_held_but_no_longer_ours_shows_at_zero_and_a_shared_one_once_per_holder() -> None:
    first = Holder("ns", "p", "a", "dev-0", resource=NULL)
    second = Holder("ns", "p", "b", "dev-0", resource=NULL)
    unplugged = Holder("ns", "q", "c", "dev-9", resource=NULL)
    ours = [((NULL, "dev-0"), False), ((NULL, "dev-1"), True)]
    held = [((NULL, h.device), h) for h in (first, second, unplugged)]
    assert list(attributed(ours, held)) == [
        ((NULL, "dev-0"), first, 0.0),
        ((NULL, "dev-0"), second, 0.0),
        ((NULL, "dev-1"), None, 1.0),
        ((NULL, "dev-9"), unplugged, 0.0),
    ]


def test_the_configured_socket_is_read_wherever_the_plugin_directory_is(root: Path) -> None:
    """``pod_resources_socket`` for a kubelet whose root is not the plugin directory's parent; here
    the simulator's state served by hand on a socket of the test's choosing."""
    socket_path = root / "elsewhere" / "kubelet.sock"
    config = root / "config.yaml"
    config.write_text(
        f"pod_resources_socket: {socket_path}\n"
        f"resources:\n  - name: {NULL}\n    static: {{count: 1, paths: [/dev/null]}}\n"
    )
    port = free_port()

    async def scenario() -> None:
        sim = KubeletSimulator(root / "plugins")
        assert sim.pod_resources is None  # not a kubelet's layout: the simulator serves nothing itself
        events: list[str] = []
        server = PodResourcesServer(socket_path, PodResourcesView(sim.known_pods.values, devices=sim), events.append)
        await sim.start()
        await server.start()
        assert events == [f"serving PodResources at {socket_path}"]
        daemon = Daemon(sim.plugin_dir, config, root / "serve.log", "--metrics-address", f"127.0.0.1:{port}")
        try:
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 1, 20)
            await sim.admit(Pod("u1", "solo", [Container("main", {NULL: 1})], "ml"))
            metric = await asyncio.to_thread(scrape, port, "kubedevice_device_healthy")
            assert metric == {device(NULL, "null-0", "solo", "ml", "main"): 1.0}
        finally:
            daemon.signal(signal.SIGTERM)
            await asyncio.to_thread(daemon.process.wait, 15)
            await server.stop()
            await sim.stop()

    run(scenario(), 90)
    relative = root / "relative.yaml"
    relative.write_text(config.read_text().replace(str(socket_path), "pod-resources/kubelet.sock"))
    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "--config", str(relative)],
        check=False, capture_output=True, text=True, env=_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "pod_resources_socket" in done.stderr and "must be an absolute path" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
