"""Fuzzed DRA calls against a real DRA driver over its real unix sockets.

NodePrepareResources / NodeUnprepareResources (v1 and v1beta1, mixed) get random, duplicate,
unknown, huge and unicode claim references, empty and 10k-claim lists, oversize messages and
raw garbage; every socket (DRA and registration) also gets random bytes. The contract: a
request with a claim lacking namespace, name or UID is refused whole with INVALID_ARGUMENT,
an oversize one with RESOURCE_EXHAUSTED, any other gets exactly one answer per claim UID;
the driver keeps serving, a good claim still prepares afterwards, and nothing is written
outside the CDI directory and the driver's own plugin directory.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubedevice.api import dra_v1_pb2 as v1
from kubedevice.api import dra_v1_pb2_grpc as v1_grpc
from kubedevice.api import dra_v1beta1_pb2 as v1beta1
from kubedevice.api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from kubedevice.api import pluginregistration_v1_pb2 as regpb
from kubedevice.api import pluginregistration_v1_pb2_grpc as regpb_grpc
from kubedevice.kubelet.dra.plugin import CALL_TIMEOUT
from kubedevice.testing.dradriver import DRIVER, DriverThread, Node, claim_object, null_plugin

OK, INVALID = grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Ref = tuple[str, str, str]
GOOD: Ref = ("default", "good", "uid-good")  # the claim the driver can prepare; a fixed UID: reproducible draws


class Driver(DriverThread):
    """The driver with blocking v1 and v1beta1 stubs, and the files under its root before it started."""

    def __init__(self, node: Node) -> None:
        self.good = node.add_claim(claim_object(GOOD[1], ["null0"], namespace=GOOD[0], uid=GOOD[2]))
        node.options()  # writes the boot ID file
        self.before = _files(node.root)
        super().__init__(node, null_plugin())
        self.channel = grpc.insecure_channel(f"unix://{self.service.sockets.dra}")
        self.stubs: dict[str, Any] = {
            "v1": v1_grpc.DRAPluginStub(self.channel),
            "v1beta1": v1beta1_grpc.DRAPluginStub(self.channel),
        }

    def call(self, version: str, method: str, refs: Sequence[Ref]) -> tuple[grpc.StatusCode, str, Any]:
        api: Any = v1 if version == "v1" else v1beta1
        kind = "NodePrepareResourcesRequest" if method == "NodePrepareResources" else "NodeUnprepareResourcesRequest"
        request = getattr(api, kind)(claims=[api.Claim(namespace=n, name=m, uid=u) for n, m, u in refs])
        try:
            # The kubelet's own deadline per DRA call: an answer later than that is a failure.
            return OK, "", getattr(self.stubs[version], method)(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as err:
            return err.code(), err.details() or "", None

    def serves(self) -> bool:
        """Both sockets still answer: GetInfo on the registration socket, an empty unprepare on DRA."""
        with grpc.insecure_channel(f"unix://{self.service.sockets.registration}") as reg:
            info = regpb_grpc.RegistrationStub(reg).GetInfo(regpb.InfoRequest(), timeout=5)
        return info.name == DRIVER and self.call("v1", "NodeUnprepareResources", [])[0] == OK

    def close(self) -> None:
        self.channel.close()
        super().close()


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if not p.is_dir()}


@pytest.fixture(scope="module")
def driver() -> Iterator[Driver]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    d = Driver(Node(root))
    try:
        yield d
    finally:
        d.close()
        shutil.rmtree(root)


def texts(good: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(good),
        st.just(good),
        st.just(""),
        st.text(max_size=30),
        st.sampled_from(["../../../etc/passwd", "/abs", "a/b", ".", "..", "x\x00y", "ü-ñ-😀"]),
        st.builds(
            lambda c, n: c * n, st.characters(codec="utf-8", exclude_categories=["Cs"]), st.integers(300, 20_000)
        ),
    )


@st.composite
def claim_refs(draw: st.DrawFn, good: Ref) -> list[Ref]:
    one = st.tuples(texts(good[0]), texts(good[1]), texts(good[2]))
    refs = draw(st.lists(st.one_of(st.just(good), one), max_size=8))
    if refs and draw(st.booleans()):
        refs.append(draw(st.sampled_from(refs)))  # a duplicate
    return refs


def check_answer(refs: Sequence[Ref], code: grpc.StatusCode, details: str, reply: Any) -> None:
    if any(not part for ref in refs for part in ref):
        assert code == INVALID, (code, details[:300])
        assert "claims without namespace, name or UID" in details and len(details) < 4096
        return
    assert code == OK, (code, details[:300])
    assert set(reply.claims) == {uid for _, _, uid in refs}


@given(
    refs=claim_refs(GOOD),
    version=st.sampled_from(["v1", "v1beta1"]),
    method=st.sampled_from(["NodePrepareResources", "NodeUnprepareResources"]),
)
# c7a8eff: the good UID again under a wrong name made the wrong name's error replace the good claim's answer
@example(refs=[GOOD, (GOOD[0], "wrong", GOOD[2])], version="v1", method="NodePrepareResources")
# 4deabcb: a claim without UID but with a 3 KB name overflowed the kubelet's 8 KiB trailer cap
@example(refs=[("default", "n" * 3000, "")], version="v1beta1", method="NodePrepareResources")
@FUZZ
def test_every_claim_gets_its_own_answer(driver: Driver, refs: list[Ref], version: str, method: str) -> None:
    code, details, reply = driver.call(version, method, refs)
    check_answer(refs, code, details, reply)
    if code == OK and method == "NodePrepareResources":
        for ns, name, uid in refs:
            answer = reply.claims[uid]
            if uid != driver.good[2]:
                assert answer.error and not answer.devices, (uid[:40], answer)
            elif (ns, name) == driver.good[:2] or driver.good[2] in driver.service.state.prepared():
                assert [d.device_name for d in answer.devices] == ["null0"], answer


def test_10k_unknown_claims_each_get_their_own_answer(driver: Driver) -> None:
    refs = [("default", f"ghost-{n}", f"uid-{n}") for n in range(10_000)]
    code, details, reply = driver.call("v1", "NodePrepareResources", refs)
    assert code == OK, details
    assert len(reply.claims) == 10_000 and all("not found" in a.error for a in reply.claims.values())
    code, details, reply = driver.call("v1beta1", "NodeUnprepareResources", refs)
    assert code == OK and len(reply.claims) == 10_000 and not any(a.error for a in reply.claims.values()), details


@pytest.mark.parametrize(
    "refs",
    [[("default", "n" * 20_000, "")], [("default", f"c{n}", "") for n in range(10_000)]],
    ids=["one-huge-name", "10k-claims"],
)
def test_a_refusal_names_the_claims_in_a_short_message(driver: Driver, refs: list[Ref]) -> None:
    """The message travels in a trailer the kubelet caps at 8 KiB: past it, the kubelet would see
    RESOURCE_EXHAUSTED and no reason."""
    code, details, _ = driver.call("v1beta1", "NodeUnprepareResources", refs)
    assert code == INVALID, (code, details[:300])
    assert len(details) < 4096 and f"'default/{refs[0][1][:20]}" in details


def test_oversize_request_is_resource_exhausted(driver: Driver) -> None:
    refs = [("default", "x" * 1024, f"uid-{n}") for n in range(4 * 1024 + 8)]
    code, details, _ = driver.call("v1", "NodePrepareResources", refs)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details


def test_undecodable_request_bytes_are_refused(driver: Driver) -> None:
    """Invalid UTF-8 in a string field, truncated varints: INVALID_ARGUMENT, not grpcio's UNKNOWN."""
    sockets, dra = driver.service.sockets, "/k8s.io.kubelet.pkg.apis.dra"
    calls = [
        (sockets.dra, f"{dra}.v1.DRAPlugin/NodePrepareResources", b"\x0a\x05\x1a\x01\xff\x0a\x00"),
        (sockets.dra, f"{dra}.v1beta1.DRAPlugin/NodeUnprepareResources", b"\x0a\x05\x1a\x01\xff"),
        (sockets.dra, f"{dra}.v1.DRAPlugin/NodeUnprepareResources", b"\x0a\xff\xff\xff\xff\x0f"),
        (sockets.registration, "/pluginregistration.Registration/NotifyRegistrationStatus", b"\x12\x01\xff"),
        (sockets.registration, "/pluginregistration.Registration/GetInfo", b"\x08"),
    ]
    for path, method, raw in calls:
        with grpc.insecure_channel(f"unix://{path}") as channel, pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(method)(raw, timeout=5)
        assert caught.value.code() == INVALID, (method, raw, caught.value.details())
        assert "malformed request" in (caught.value.details() or "")
    assert driver.serves()


@given(raw=st.binary(max_size=2048), preface=st.booleans(), registration=st.booleans())
@settings(max_examples=40, deadline=None)
def test_raw_garbage_on_both_sockets(driver: Driver, raw: bytes, preface: bool, registration: bool) -> None:
    path = driver.service.sockets.registration if registration else driver.service.sockets.dra
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.settimeout(2)
        peer.connect(str(path))
        peer.sendall((b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" if preface else b"") + raw)


def test_zz_after_the_fuzz_a_good_claim_prepares_and_nothing_escaped(driver: Driver) -> None:
    """Runs last (file order): the driver serves, a good prepare works, files stay in their dirs."""
    assert driver.serves()
    good = driver.good
    assert driver.call("v1", "NodeUnprepareResources", [good])[0] == OK
    code, details, reply = driver.call("v1", "NodePrepareResources", [good])
    assert code == OK, details
    assert reply.claims[good[2]].error == ""
    assert [d.device_name for d in reply.claims[good[2]].devices] == ["null0"]
    node, sockets = driver.node, driver.service.sockets
    new = _files(node.root) - driver.before
    allowed = (node.cdi_dir, sockets.plugin_dir, sockets.registration.parent)
    assert all(any(p.is_relative_to(d) for d in allowed) for p in new), sorted(map(str, new))
    assert {p.parent for p in new if p.is_relative_to(node.cdi_dir)} <= {node.cdi_dir}
    assert [p.name for p in node.cdi_dir.iterdir()] == [f"kubedevice-dra-{DRIVER}-{good[2]}.json"]
    assert not [p for p in (node.root.parent, node.cdi_dir.parent) if list(p.glob("kubedevice-dra-*"))]  # no ../
