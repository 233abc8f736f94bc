"""``kubedevice kubelet --dra``: the kubelet's DRA side against our real driver over real sockets.

In process: the plugin watcher (inotify and start-up replay), the kubelet's refusal messages,
prepare/unprepare through the command interface with the CDI specs the driver writes, health,
unregistration. As processes: ``kubedevice serve --claims-dir`` driven by ``kubedevice kubelet --dra``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from grpc import aio
from rich.console import Console

from kubedevice.api import dra_v1_pb2 as v1
from kubedevice.api import dra_v1_pb2_grpc as v1_grpc
from kubedevice.api import pluginregistration_v1_pb2 as regpb
from kubedevice.api import pluginregistration_v1_pb2_grpc as regpb_grpc
from kubedevice.dra.driver import DraDriver
from kubedevice.kubelet import KubeletSimulator, KubeletSocketInUse
from kubedevice.kubelet.dra.cli import DraSession
from kubedevice.kubelet.dra.simulator import DraKubelet
from kubedevice.kubelet.dra.view import dra_view
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, null_plugin, running

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    node = Node(root)
    node.claims_dir.mkdir()
    yield node
    shutil.rmtree(root)


def _has(kubelet: DraKubelet, text: str) -> bool:
    return any(text in event for event in kubelet.events)


async def _event(kubelet: DraKubelet, text: str, timeout: float = 10) -> None:
    await kubelet.wait_until(lambda: _has(kubelet, text), timeout)


def test_a_driver_started_after_the_kubelet_registers_and_prepares_from_files(node: Node) -> None:
    _, _, uid = node.add_claim(claim_object("one", [("gpu", "null1"), ("gpu", "null2")]))

    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        session = DraSession(kubelet, Console(file=open(os.devnull, "w")))  # noqa: SIM115
        try:
            async with running(node, DraDriver(DRIVER, [null_plugin()])) as service:
                await _event(kubelet, f"registered DRA driver {DRIVER}")
                assert service.registered  # NotifyRegistrationStatus(true) reached the driver
                driver = kubelet.drivers[DRIVER]
                assert driver.registered.service == "v1.DRAPlugin"
                await kubelet.wait_until(lambda: len(driver.health) == 4, 10)
                assert set(driver.health.values()) == {"HEALTHY"}

                await session.command("prepare default/one")
                prepared = kubelet.prepared["default/one"]
                assert prepared.uid == uid
                assert [(d.requests, d.pool, d.device) for d in prepared.devices] == [
                    (("gpu",), NODE, "null1"),
                    (("gpu",), NODE, "null2"),
                ]
                assert [d.cdi_ids for d in prepared.devices] == [
                    (f"k8s.{DRIVER}/device={uid}-null1",),
                    (f"k8s.{DRIVER}/device={uid}-null2",),
                ]
                assert len(node.cdi_specs()) == 1
                rendered = _render(kubelet)
                assert "default/one" in rendered and f"k8s.{DRIVER}/device={uid}-null1" in rendered

                await session.command("unprepare one")  # NAME alone means namespace default
                assert "default/one" not in kubelet.prepared
                assert node.cdi_specs() == {}
                assert _has(kubelet, f"unprepared default/one ({uid})")
            await _event(kubelet, f"DRA driver {DRIVER} unregistered")  # its sockets went with it
            assert DRIVER not in kubelet.drivers
        finally:
            await kubelet.stop()

    run(scenario())


def _render(kubelet: DraKubelet) -> str:
    console = Console(width=300, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(dra_view(kubelet, "help"))
    return console.export_text()


def test_sockets_already_there_at_start_are_registered(node: Node) -> None:
    async def scenario() -> None:
        async with running(node, DraDriver(DRIVER, [null_plugin()])):
            kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
            await kubelet.start()
            try:
                await _event(kubelet, f"registered DRA driver {DRIVER}")
            finally:
                await kubelet.stop()

    run(scenario())


def test_prepare_errors_name_the_problem_like_the_kubelet(node: Node) -> None:
    node.add_claim(claim_object("elsewhere", ["gpu0"], driver="gpu.example.com"))
    node.add_claim(claim_object("pending", [], allocated=False))
    node.add_claim(claim_object("missing", ["null9"]))  # a device the driver does not have

    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        try:
            async with running(node, DraDriver(DRIVER, [null_plugin()])):
                await _event(kubelet, f"registered DRA driver {DRIVER}")
                assert await kubelet.prepare("default/elsewhere") is None
                assert _has(kubelet, "prepare default/elsewhere: DRA driver gpu.example.com is not registered")
                assert await kubelet.prepare("default/pending") is None
                assert _has(kubelet, "default/pending: ResourceClaim is not allocated")
                assert await kubelet.prepare("default/nothere") is None
                assert _has(kubelet, "no ResourceClaim default/nothere in the claims directory")
                assert await kubelet.prepare("default/missing") is None
                assert _has(kubelet, "prepare default/missing: NodePrepareResources failed for ResourceClaim missing:")
                assert kubelet.prepared == {}
        finally:
            await kubelet.stop()

    run(scenario())


class _BadRegistration(regpb_grpc.RegistrationServicer):  # type: ignore[misc]
    """A plugin the kubelet must refuse: it offers no DRA service the kubelet speaks."""

    def __init__(self, info: regpb.PluginInfo) -> None:
        self.info = info
        self.status: asyncio.Queue[regpb.RegistrationStatus] = asyncio.Queue()

    async def GetInfo(self, request: regpb.InfoRequest, context: Any) -> regpb.PluginInfo:
        return self.info

    async def NotifyRegistrationStatus(self, request: regpb.RegistrationStatus, context: Any) -> Any:
        self.status.put_nowait(request)
        return regpb.RegistrationStatusResponse()


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (
            regpb.PluginInfo(type="DRAPlugin", name="bad.example.com", endpoint="/x/dra.sock",
                             supported_versions=["v1alpha4.Node"]),
            'RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA '
            'driver plugin bad.example.com at endpoint /x/dra.sock: none of services supported by the plugin '
            '(["v1alpha4.Node"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])',
        ),
        (
            regpb.PluginInfo(type="DRAPlugin", name="bad.example.com", endpoint="/x/dra.sock"),
            "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA "
            "driver plugin bad.example.com at endpoint /x/dra.sock: empty list of supported gRPC services "
            "(aka supported versions)",
        ),
        (
            regpb.PluginInfo(type="CSIPlugin", name="bad.example.com", supported_versions=["1.0.0"]),
            "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket {socket}",
        ),
    ],
)  # fmt: skip
def test_a_bad_plugin_is_refused_with_the_kubelets_message(node: Node, info: regpb.PluginInfo, message: str) -> None:
    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        servicer = _BadRegistration(info)
        server = aio.server()
        regpb_grpc.add_RegistrationServicer_to_server(servicer, server)
        socket = kubelet.registry / "bad-reg.sock"
        server.add_insecure_port(f"unix://{socket}")
        await server.start()
        try:
            status = await asyncio.wait_for(servicer.status.get(), 10)
            expected = message.format(socket=socket)
            assert not status.plugin_registered
            assert status.error == expected
            await _event(kubelet, f"refused bad-reg.sock: {expected}")
            assert kubelet.drivers == {}
        finally:
            await server.stop(0)
            await kubelet.stop()

    run(scenario())


class _SlowFirstAnswer(_BadRegistration):
    """A plugin whose first ``GetInfo`` misses the kubelet's 1 s deadline (a loaded node)."""

    def __init__(self, info: regpb.PluginInfo) -> None:
        super().__init__(info)
        self.calls = 0

    async def GetInfo(self, request: regpb.InfoRequest, context: Any) -> regpb.PluginInfo:
        self.calls += 1
        if self.calls == 1:
            await asyncio.sleep(1.5)
        return self.info


def test_a_failed_get_info_is_retried_with_back_off_as_the_plugin_manager_does(node: Node) -> None:
    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        # refused after GetInfo (no DRA service), which is enough to see the second try arrive
        servicer = _SlowFirstAnswer(regpb.PluginInfo(type="CSIPlugin", name="slow.example.com"))
        server = aio.server()
        regpb_grpc.add_RegistrationServicer_to_server(servicer, server)
        socket = kubelet.registry / "slow.sock"
        server.add_insecure_port(f"unix://{socket}")
        await server.start()
        try:
            await _event(kubelet, f"failed to get plugin info using RPC GetInfo at socket {socket}")
            status = await asyncio.wait_for(servicer.status.get(), 10)
            assert servicer.calls == 2
            assert status.error.endswith(f"no handler registered for plugin type: CSIPlugin at socket {socket}")
        finally:
            await server.stop(0)
            await kubelet.stop()

    run(scenario())


def test_a_live_kubelet_directory_is_refused(node: Node) -> None:
    async def scenario() -> None:
        sim = KubeletSimulator(node.kubelet_dir / "device-plugins")
        await sim.start()
        try:
            with pytest.raises(KubeletSocketInUse, match="served by a running kubelet or simulator"):
                await DraKubelet(node.kubelet_dir, node.claims_dir).start()
        finally:
            await sim.stop()
        assert not (node.kubelet_dir / "plugins_registry").exists()  # refused before touching anything

    run(scenario())


# --- the commands as processes ---------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "300"}


async def _process(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubedevice", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=_env(),
    )  # fmt: skip


async def _expect(proc: asyncio.subprocess.Process, text: str, seen: list[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(timeout):
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                raise AssertionError(f"exited before {text!r}; output: {seen}")
            line = raw.decode().rstrip()
            seen.append(line)
            if text in line:
                return line


def test_kubelet_dra_drives_serve_with_claims_dir(node: Node) -> None:
    _, _, uid = node.add_claim(claim_object("web", ["null-0"]))
    config = ROOT / "examples" / "dra-null.yaml"

    async def scenario() -> None:
        serve = await _process(
            "serve", "--config", str(config), "--node", NODE, "--kubelet-dir", str(node.kubelet_dir),
            "--cdi-dir", str(node.cdi_dir), "--claims-dir", str(node.claims_dir),
        )  # fmt: skip
        kubelet = await _process("kubelet", "--dra", "--claims", str(node.claims_dir),
                                 "--kubelet-dir", str(node.kubelet_dir))  # fmt: skip
        served: list[str] = []
        seen: list[str] = []
        try:
            await _expect(serve, "TESTING ONLY: claims of DRA driver null.example.com are read from files", served)
            await _expect(kubelet, f"registered DRA driver {DRIVER}", seen)
            assert kubelet.stdin is not None
            kubelet.stdin.write(b"claims\nprepare default/web\n")
            await _expect(kubelet, f"claim default/web ({uid}): {DRIVER}; not prepared", seen)
            line = await _expect(kubelet, "prepared default/web", seen)
            assert line == f"prepared default/web ({uid}): {NODE}/null-0"
            [spec] = node.cdi_specs().values()
            assert spec["devices"][0]["containerEdits"]["env"] == ["NULL_DEVICE=null-0"]
            kubelet.stdin.write(b"unprepare default/web\nstatus\n")
            await _expect(kubelet, f"unprepared default/web ({uid})", seen)
            await _expect(kubelet, f"drivers: {DRIVER}; prepared claims: none", seen)
            assert node.cdi_specs() == {}
            kubelet.stdin.write(b"quit\n")
            await _expect(kubelet, "bye", seen)
            assert await asyncio.wait_for(kubelet.wait(), 10) == 0
            serve.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(serve.wait(), 10) == 0
        finally:
            for proc in (kubelet, serve):
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    run(scenario(), 120)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dra"], "kubedevice: --dra needs --claims DIR (ResourceClaim files)"),
        (["--dra", "--claims", "/nonexistent-claims"], "kubedevice: --claims /nonexistent-claims is not a directory"),
        (["--claims", "/tmp"], "kubedevice: --claims and --kubelet-dir need --dra"),
        (["--dra", "--claims", "/tmp", "--admit", "a/b=1"],
         "kubedevice: --dra takes none of --plugin-dir, --admit and --restart-after"),
    ],
)  # fmt: skip
def test_kubelet_dra_usage_errors(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "kubelet", *args],
        check=False, capture_output=True, text=True, env=_env(), timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (2, message)


@pytest.mark.skipif(Path("/var/lib/kubelet").exists(), reason="a kubelet directory exists on this machine")
def test_kubelet_dra_will_not_create_the_real_kubelet_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "kubelet", "--dra", "--claims", str(tmp_path)],
        check=False, capture_output=True, text=True, env=_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "kubedevice: /var/lib/kubelet does not exist (no kubelet on this machine); to simulate one, "
        "give --kubelet-dir DIR (a missing DIR is created)"
    )
    assert not Path("/var/lib/kubelet").exists()


def test_a_socket_reported_twice_gets_one_handshake(node: Node) -> None:
    """A socket created while the watch starts is both replayed and reported by inotify."""
    info = regpb.PluginInfo(type="DRAPlugin", name="twice.example.com", endpoint="/x/dra.sock",
                            supported_versions=["v1.DRAPlugin"])  # fmt: skip

    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        servicer = _BadRegistration(info)
        server = aio.server()
        regpb_grpc.add_RegistrationServicer_to_server(servicer, server)
        server.add_insecure_port(f"unix://{kubelet.registry / 'twice-reg.sock'}")
        await server.start()
        try:
            await _event(kubelet, "registered DRA driver twice.example.com")
            kubelet._on_entry("twice-reg.sock", True)  # as the start-up listing would
            await asyncio.sleep(0.5)
            assert servicer.status.qsize() == 1
        finally:
            await server.stop(0)
            await kubelet.stop()

    run(scenario())


class _Forgetful(v1_grpc.DRAPluginServicer):  # type: ignore[misc]
    """Answers no claim, or (``stranger``) a claim the kubelet did not ask for."""

    def __init__(self, stranger: bool) -> None:
        self.stranger = stranger

    async def NodePrepareResources(self, request: Any, context: Any) -> v1.NodePrepareResourcesResponse:
        response = v1.NodePrepareResourcesResponse()
        if self.stranger:
            response.claims["not-asked-for"].error = ""
        return response


@pytest.mark.parametrize(
    ("stranger", "message"),
    [
        (False, "prepare default/one: NodePrepareResources skipped 1 ResourceClaims"),
        (True, "prepare default/one: NodePrepareResources returned result for unknown claim UID not-asked-for"),
    ],
)
def test_an_answer_without_the_claim_fails_like_the_kubelet(node: Node, stranger: bool, message: str) -> None:
    node.add_claim(claim_object("one", ["d0"], driver="forgetful.example.com"))
    endpoint = node.root / "forgetful.sock"
    info = regpb.PluginInfo(type="DRAPlugin", name="forgetful.example.com", endpoint=str(endpoint),
                            supported_versions=["v1.DRAPlugin"])  # fmt: skip

    async def scenario() -> None:
        kubelet = DraKubelet(node.kubelet_dir, node.claims_dir)
        await kubelet.start()
        server = aio.server()
        regpb_grpc.add_RegistrationServicer_to_server(_BadRegistration(info), server)
        v1_grpc.add_DRAPluginServicer_to_server(_Forgetful(stranger), server)
        server.add_insecure_port(f"unix://{endpoint}")
        server.add_insecure_port(f"unix://{kubelet.registry / 'forgetful-reg.sock'}")
        await server.start()
        try:
            await _event(kubelet, "registered DRA driver forgetful.example.com")
            assert await kubelet.prepare("default/one") is None
            assert _has(kubelet, message)
            assert kubelet.prepared == {}
        finally:
            await server.stop(0)
            await kubelet.stop()

    run(scenario())
