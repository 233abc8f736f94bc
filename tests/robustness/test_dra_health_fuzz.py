"""Fuzzed health streams and registration calls against a real DRA driver over its real sockets.

``NodeWatchResources`` (``v1`` and ``v1alpha1``) gets requests with random unknown fields and
raw bytes; hundreds of streams are opened and dropped; the registration server gets
``GetInfo`` with unknown fields and ``NotifyRegistrationStatus`` with empty, unicode and
megabyte error strings. The contract: a decodable request gets the full device list at once,
an undecodable one INVALID_ARGUMENT, an oversize one RESOURCE_EXHAUSTED; the driver never
dies, keeps no dropped stream's file descriptors, logs a bounded line, follows the last
registration status, and afterwards still streams health changes and prepares claims.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubedevice.api import dra_health_v1_pb2 as h1
from kubedevice.api import dra_health_v1alpha1_pb2 as h1alpha1
from kubedevice.api import dra_v1_pb2 as v1
from kubedevice.api import dra_v1_pb2_grpc as v1_grpc
from kubedevice.api import pluginregistration_v1_pb2 as regpb
from kubedevice.device import Health
from kubedevice.plugin.base import Plugin
from kubedevice.testing.dradriver import DRIVER, NODE, DriverThread, Node, claim_object, null_plugin
from kubedevice.testing.waiting import wait_for

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                HealthCheck.function_scoped_fixture])  # fmt: skip
WATCH = {
    "v1": ("/v1.DRAResourceHealth/NodeWatchResources", h1),
    "v1alpha1": ("/v1alpha1.DRAResourceHealth/NodeWatchResources", h1alpha1),
}
GET_INFO = "/pluginregistration.Registration/GetInfo"
NOTIFY = "/pluginregistration.Registration/NotifyRegistrationStatus"
ALL_HEALTHY = {"null0": "HEALTHY", "null1": "HEALTHY"}


class Driver(DriverThread):
    """The driver with blocking channels to its DRA and registration sockets."""

    def __init__(self, node: Node) -> None:
        self.plugin: Plugin = null_plugin(2)
        self.good = node.add_claim(claim_object("good", ["null0"]))
        super().__init__(node, self.plugin)
        self.dra = grpc.insecure_channel(f"unix://{self.service.sockets.dra}")
        self.reg = grpc.insecure_channel(f"unix://{self.service.sockets.registration}")

    def watch(self, version: str, raw: bytes = b"") -> Any:
        """A NodeWatchResources stream with ``raw`` as the request bytes (responses as bytes)."""
        method, _ = WATCH[version]
        return self.dra.unary_stream(method)(raw, timeout=30)

    def first(self, version: str, raw: bytes = b"") -> dict[str, str]:
        stream = self.watch(version, raw)
        try:
            return health(version, next(stream))
        finally:
            stream.cancel()

    def close(self) -> None:
        self.dra.close()
        self.reg.close()
        super().close()


def health(version: str, raw: bytes) -> dict[str, str]:
    api: Any = WATCH[version][1]
    message = api.NodeWatchResourcesResponse.FromString(raw)
    assert {d.device.pool_name for d in message.devices} <= {NODE}
    return {d.device.device_name: api.HealthStatus.Name(d.health) for d in message.devices}


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    d = Driver(Node(root))
    try:
        yield d
    finally:
        d.close()
        shutil.rmtree(root)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@st.composite
def unknown_fields(draw: st.DrawFn) -> bytes:
    """A well-formed message made only of fields NodeWatchResourcesRequest does not have."""
    out = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        number = draw(st.integers(1, 2**29 - 1))
        wire = draw(st.sampled_from([0, 1, 2, 5]))
        out += _varint(number << 3 | wire)
        if wire == 0:
            out += _varint(draw(st.integers(0, 2**64 - 1)))
        elif wire == 1:
            out += draw(st.binary(min_size=8, max_size=8))
        elif wire == 5:
            out += draw(st.binary(min_size=4, max_size=4))
        else:
            payload = draw(st.one_of(st.binary(max_size=64), st.builds(lambda n: b"x" * n, st.integers(0, 200_000))))
            out += _varint(len(payload)) + payload
    return bytes(out)


@given(raw=unknown_fields(), version=st.sampled_from(list(WATCH)))
@FUZZ
def test_unknown_fields_still_get_the_full_list(driver: Driver, raw: bytes, version: str) -> None:
    assert driver.first(version, raw) == ALL_HEALTHY


@given(raw=st.binary(max_size=512), version=st.sampled_from(list(WATCH)))
@FUZZ
def test_raw_request_bytes_get_the_list_or_invalid_argument(driver: Driver, raw: bytes, version: str) -> None:
    try:
        assert driver.first(version, raw) == ALL_HEALTHY
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (raw, err.details())
        assert "malformed request" in (err.details() or "")


def test_an_oversize_watch_request_is_resource_exhausted(driver: Driver) -> None:
    raw = _varint(99 << 3 | 2) + _varint(5 * 1024 * 1024) + b"x" * (5 * 1024 * 1024)
    with pytest.raises(grpc.RpcError) as caught:
        driver.first("v1", raw)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert driver.first("v1", b"") == ALL_HEALTHY


def test_hundreds_of_dropped_streams_leak_nothing_and_a_kept_one_still_hears(driver: Driver) -> None:
    kept = {version: driver.watch(version) for version in WATCH}
    for version, stream in kept.items():
        assert health(version, next(stream)) == ALL_HEALTHY
    driver.first("v1")  # the channel's own descriptors exist before counting
    before = open_fds()
    for round_ in range(300):
        stream = driver.watch("v1" if round_ % 2 else "v1alpha1")
        if round_ % 3:
            next(stream)  # some are dropped after the first message, others before it
        stream.cancel()
    driver.plugin.set_health("null1", Health.UNHEALTHY)
    start = time.monotonic()
    for version, stream in kept.items():
        assert health(version, next(stream)) == {"null0": "HEALTHY", "null1": "UNHEALTHY"}
    assert time.monotonic() - start < 5.0  # pushed, not polled; a loaded machine decides the rest
    driver.plugin.set_health("null1", Health.HEALTHY)
    for version, stream in kept.items():
        assert health(version, next(stream)) == ALL_HEALTHY
        stream.cancel()
    wait_for(f"at most {before} + 4 descriptors open", lambda: open_fds() <= before + 4, 30, 0.1, seen=open_fds)


def errors() -> st.SearchStrategy[str]:
    char = st.characters(codec="utf-8", exclude_categories=["Cs"])
    return st.one_of(
        st.just(""),
        st.text(char, max_size=40),
        st.sampled_from(["ü-ñ-😀", "\x00", "line\nbreak\r\n", "%s %d {}", "\u202e reversed"]),
        st.builds(lambda c, n: c * n, char, st.integers(10_000, 1_000_000)),
    )


@given(registered=st.booleans(), error=errors(), info=unknown_fields())
@example(registered=False, error="x" * 1_000_000, info=b"")  # 9f09019: a rejection's reason was logged whole
@FUZZ
def test_registration_calls_never_hurt_the_driver(
    driver: Driver, registered: bool, error: str, info: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kubedevice.dra.registration"):
        got = regpb.PluginInfo.FromString(driver.reg.unary_unary(GET_INFO)(info, timeout=10))
        assert (got.type, got.name) == ("DRAPlugin", DRIVER)
        status = regpb.RegistrationStatus(plugin_registered=registered, error=error).SerializeToString()
        answer = driver.reg.unary_unary(NOTIFY)(status, timeout=10)
    assert answer == b""  # an empty RegistrationStatusResponse
    assert driver.service.registered is registered
    assert all(len(r.getMessage()) < 2048 for r in caplog.records), max(len(r.getMessage()) for r in caplog.records)
    if not registered:
        assert any("rejected" in r.getMessage() for r in caplog.records)


def test_zz_afterwards_the_driver_registers_streams_and_prepares(driver: Driver) -> None:
    """Runs last (file order)."""
    status = regpb.RegistrationStatus(plugin_registered=True).SerializeToString()
    driver.reg.unary_unary(NOTIFY)(status, timeout=10)
    assert driver.service.registered and driver.service.options.ready.is_set()
    assert driver.first("v1") == driver.first("v1alpha1") == ALL_HEALTHY
    ns, name, uid = driver.good
    request = v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace=ns, name=name, uid=uid)])
    reply = v1_grpc.DRAPluginStub(driver.dra).NodePrepareResources(request, timeout=30)
    assert reply.claims[uid].error == "" and [d.device_name for d in reply.claims[uid].devices] == ["null0"]
