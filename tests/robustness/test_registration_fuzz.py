"""Fuzzed Register calls against the kubelet simulator's registration server, over its real socket.

Our simulator stands in for the kubelet in every test and in ``kubedevice check``, so a plugin
under test must not be able to crash or wedge it: every answer is OK or the kubelet's UNKNOWN
with a message, and afterwards a well-behaved plugin still registers and serves its devices.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubedevice.api import pb, pb_grpc
from kubedevice.kubelet import KubeletSimulator
from kubedevice.plugin.manager import Manager
from tests.plugin.conftest import NullPlugin, null_devices


class Kubelet:
    """The simulator on its own event loop thread; the test drives it with a blocking client."""

    def __init__(self, plugin_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.sim = KubeletSimulator(plugin_dir, dial_timeout=0.2)
        self.call(self.sim.start())
        self.channel = grpc.insecure_channel(f"unix://{plugin_dir / 'kubelet.sock'}")
        self.stub: Any = pb_grpc.RegistrationStub(self.channel)

    def call(self, coro: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.channel.close()
        self.call(self.sim.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def kubelet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubelet]:
    k = Kubelet(tmp_path_factory.mktemp("reg") / "dp")
    try:
        yield k
    finally:
        k.close()


names = st.one_of(st.text(max_size=40), st.just("example.com/fuzz"), st.text(min_size=300, max_size=2000))
endpoints = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["../../../../tmp/x.sock", "/abs/path.sock", "kubelet.sock", ""]),
    st.text(min_size=200, max_size=500),
)


@given(
    version=st.one_of(st.just("v1beta1"), st.text(max_size=20)),
    name=names,
    endpoint=endpoints,
    pre_start=st.booleans(),
    preferred=st.booleans(),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_register_answers_ok_or_unknown(
    kubelet: Kubelet, version: str, name: str, endpoint: str, pre_start: bool, preferred: bool
) -> None:
    request = pb.RegisterRequest(
        version=version,
        endpoint=endpoint,
        resource_name=name,
        options=pb.DevicePluginOptions(pre_start_required=pre_start, get_preferred_allocation_available=preferred),
    )
    try:
        kubelet.stub.Register(request, timeout=10)
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.UNKNOWN and err.details(), (err.code(), err.details())


def test_zz_a_good_plugin_still_registers_after_the_fuzz(kubelet: Kubelet) -> None:
    async def serve() -> Manager:
        manager = Manager([NullPlugin(devices=null_devices())], kubelet.sim.plugin_dir)
        await manager.start()
        return manager

    manager = kubelet.call(serve())
    try:
        kubelet.call(kubelet.sim.wait_until(lambda: kubelet.sim.allocatable().get("example.com/null") == 4, 15))
    finally:
        kubelet.call(manager.stop())
