"""Differential test: our device metadata (KEP-5304) against ``kubeletplugin``'s ``EnableDeviceMetadata``.

``drametadata/`` (k8s.io/dynamic-resource-allocation v0.37.2) runs the Go helper with
``EnableDeviceMetadata(true, [v1beta1, v1alpha1])`` behind a stub driver that prepares as ours
does (the same devices, requests, attributes and per-claim CDI IDs). Our kubelet client drives
both over real sockets, in the same node directories one after the other, with the same claims.
Compared: the prepare answers (where each metadata CDI ID goes), every file the two write (names,
bytes, modes; the CDI specs too) and what unprepare leaves. Then Go's
``devicemetadata.DecodeMetadataFromStream`` reads our files: it must pick v1beta1, find them
valid, decode each version to what we wrote, and re-encoding the decoded object with the
helper's serializer must give our bytes.

Claims are drawn per example: requests with and without a subrequest, several devices per
request, a device in two requests (``adminAccess``), another driver's results, claims made from a
template (the pod's name for the claim set or empty) and not, UIDs starting with a digit or a
letter (the spec's ``cdiVersion`` follows), attributes of every type with names in and out of a
domain and strings holding what Go's JSON escapes. The ``@example`` holds every construct at once.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubedevice.conformance import Status
from kubedevice.conformance.dra.runner import DraCheckOptions, run_dra_checks
from kubedevice.device import ContainerAllocation, Device, DeviceSpec
from kubedevice.dra.devicemetadata import read_stream
from kubedevice.dra.driver import DraDriver
from kubedevice.kubelet.dra.plugin import DraClient, register
from kubedevice.plugin.base import Plugin
from kubedevice.testing import gobuild
from kubedevice.testing.dradriver import NODE, Node, kubelet, running

pytestmark = pytest.mark.interop
HERE = Path(__file__).resolve().parent
DRIVER = "gpu.example.com"
OTHER = "other.example.com"
DEVICES = ("gpu0", "gpu1", "gpu2", "gpu3")
VERSIONS = ["v1beta1", "v1alpha1"]

Case = tuple[Mapping[str, Mapping[str, Mapping[str, Any]]], Sequence[Mapping[str, Any]]]
"""(attributes the plugin gives, by device; the ResourceClaims)."""


class AttributedPlugin(Plugin):
    """Devices with the attributes a test gives (``AttributeProvider``)."""

    resource_name = "example.com/gpu"

    def __init__(self, attributes: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")])
        super().__init__(devices=[Device(name, grant=grant) for name in DEVICES])
        self._attributes = attributes

    def dra_attributes(self) -> Mapping[str, Mapping[str, Mapping[str, Any]]]:
        return self._attributes


@pytest.fixture(scope="module")
def program() -> Path:
    binary = gobuild.build(HERE / "drametadata", ".", "drametadata")
    if binary is None:
        pytest.skip("Go toolchain not installed: cannot build k8s.io/dynamic-resource-allocation v0.37.2")
    return binary


# -- the cases --------------------------------------------------------------------------------
LABEL = st.from_regex(r"[a-z]([a-z0-9-]{0,5}[a-z0-9])?", fullmatch=True)
GO_ESCAPED = '<>&\u2028\u2029"\\\x00\x01\x08\t\n\x0c\r\x1f\x7f'
TEXT = st.text(st.sampled_from(f"aZ09 -_./:é漢\U0001f600{GO_ESCAPED}"), max_size=10)
INT64 = st.integers(-(2**63), 2**63 - 1)
VERSION = st.sampled_from(["1.0.0", "0.1.2-rc.1+build.5", "10.20.30"])
VALUE = st.one_of(
    INT64.map(lambda v: {"int": v}),
    st.booleans().map(lambda v: {"bool": v}),
    TEXT.map(lambda v: {"string": v}),
    VERSION.map(lambda v: {"version": v}),
    st.lists(INT64, min_size=1, max_size=3).map(lambda v: {"ints": v}),
    st.lists(st.booleans(), min_size=1, max_size=3).map(lambda v: {"bools": v}),
    st.lists(TEXT, min_size=1, max_size=3).map(lambda v: {"strings": v}),
    st.lists(VERSION, min_size=1, max_size=3).map(lambda v: {"versions": v}),
)
ATTRIBUTE_NAME = st.one_of(
    st.from_regex(r"[a-z][a-zA-Z0-9_]{0,8}", fullmatch=True),
    st.from_regex(r"(example\.com|resource\.kubernetes\.io)/[a-z][a-zA-Z0-9_]{0,8}", fullmatch=True),
)
ATTRIBUTES = st.fixed_dictionaries({d: st.dictionaries(ATTRIBUTE_NAME, VALUE, max_size=4) for d in DEVICES})


def claim(
    name: str, uid: str, results: Sequence[tuple[str, str, str, bool]], pod_claim_name: str | None = None
) -> dict[str, Any]:
    """A ResourceClaim allocated on NODE; a result is (request, driver, device, adminAccess)."""
    meta: dict[str, Any] = {"namespace": "default", "name": name, "uid": uid}
    if pod_claim_name is not None:
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": pod_claim_name}
    allocated = [
        {"request": r, "driver": d, "pool": NODE, "device": n, **({"adminAccess": True} if a else {})}
        for r, d, n, a in results
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": allocated}}},
    }


@st.composite
def claims(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(LABEL, min_size=1, max_size=3, unique=True))
    drawn = []
    for name in names:
        uid = str(draw(st.uuids()))
        results: list[tuple[str, str, str, bool]] = []
        for request in draw(st.lists(LABEL, min_size=1, max_size=3, unique=True)):
            sub = draw(st.none() | LABEL)
            ref = f"{request}/{sub}" if sub else request
            for device in draw(st.lists(st.sampled_from(DEVICES), min_size=1, max_size=3, unique=True)):
                results.append((ref, DRIVER, device, draw(st.booleans())))
            if draw(st.booleans()):
                results.append((ref, OTHER, "other0", False))
        drawn.append(claim(name, uid, draw(st.permutations(results)), draw(st.none() | st.just("") | LABEL)))
    return drawn


EVERY_CONSTRUCT: Case = (
    {
        "gpu0": {
            "model": {"string": 'a<b>&c\u2028\u2029"\\ \x00\x01\x08\t\n\x0c\r\x1f\x7f é漢\U0001f600'},
            "cores": {"int": -(2**63)},
            "ecc": {"bool": True},
            "driverVersion": {"version": "1.2.3-rc.1+b5"},
            "example.com/lanes": {"ints": [1, 2**63 - 1]},
        },
        "gpu1": {
            "flags": {"bools": [True, False]},
            "names": {"strings": ["<x>", ""]},
            "resource.kubernetes.io/firmware": {"versions": ["1.0.0", "2.0.0"]},
        },
        "gpu2": {},
        "gpu3": {"id": {"string": "overridden"}},
    },
    [
        claim(
            "pod-gpu-x7k2p",
            "0a1b2c3d-0000-4000-8000-000000000001",  # a digit first: cdiVersion 0.5.0
            [
                ("gpu/large", DRIVER, "gpu0", False),
                ("gpu/large", DRIVER, "gpu1", False),
                ("nic", OTHER, "other0", False),
                ("nic", DRIVER, "gpu2", False),
                ("watch", DRIVER, "gpu0", True),
            ],
            pod_claim_name="gpu",
        ),
        claim("empty-name", "c0ffee00-0000-4000-8000-000000000002", [("req", DRIVER, "gpu3", False)], ""),
        claim("plain", "f00d0000-0000-4000-8000-000000000003", [("a", DRIVER, "gpu1", False)]),
        claim("elsewhere", "e0000000-0000-4000-8000-000000000004", [("a", OTHER, "other0", False)]),
    ],
)


DEVICE_ORDER: Case = (
    {device: {} for device in DEVICES},
    [
        claim(
            "order",
            "f728b4fa-4248-5e3a-0a5d-2f346baa9455",
            [
                ("n", DRIVER, "gpu0", False),
                ("n", DRIVER, "gpu1", False),
                ("a", DRIVER, "gpu0", False),
                ("a", DRIVER, "gpu3", False),
                ("a", DRIVER, "gpu1", False),
            ],
        )
    ],
)
"""Found by this test: a request's devices are listed in the answer's order of devices (gpu0, gpu1,
gpu3), not in its own order of results (gpu0, gpu3, gpu1)."""


# -- running both -----------------------------------------------------------------------------
Files = dict[str, tuple[bytes | None, int]]
"""By path below the node: (bytes, mode) of a file, (None, mode) of a directory."""
Run = tuple[dict[str, Any], Files, Files]
"""(prepare answers, files after prepare, files after unprepare)."""


def refs(objects: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    return [(o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["uid"]) for o in objects]


def written(node: Node) -> Files:
    """Every metadata file, its directories and the metadata CDI specs, by path below the node."""
    paths = [*(node.kubelet_dir / "plugins" / DRIVER / "dra-device-metadata").rglob("*")]
    paths += node.cdi_dir.glob(f"{DRIVER}_metadata_*") if node.cdi_dir.is_dir() else []
    return {
        str(p.relative_to(node.root)): (p.read_bytes() if p.is_file() else None, stat.S_IMODE(p.stat().st_mode))
        for p in paths
    }


@asynccontextmanager
async def go_helper(program: Path, node: Node, case: Case, attributes: Mapping[str, Any]) -> AsyncIterator[None]:
    """The Go helper serving the case's claims on the node until the block ends."""
    config = {
        "driver": DRIVER,
        "pluginDir": str(node.kubelet_dir / "plugins" / DRIVER),
        "registrarDir": str(node.kubelet_dir / "plugins_registry"),
        "cdiDir": str(node.cdi_dir),
        "versions": VERSIONS,
        "claims": case[1],
        "attributes": attributes,
    }
    path = node.root / "go.json"
    path.write_text(json.dumps(config))
    process = await asyncio.create_subprocess_exec(
        str(program), "serve", str(path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stderr is not None and process.stdin is not None
        if await asyncio.wait_for(process.stdout.readline(), 60) != b"serving\n":
            raise AssertionError((await process.stderr.read()).decode())
        yield
    finally:
        if process.stdin is not None:
            process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


async def run_go(program: Path, node: Node, case: Case, attributes: Mapping[str, Any]) -> Run:
    async with go_helper(program, node, case, attributes):
        registered = await register(node.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock")
        async with DraClient(registered) as client:
            return await both_calls(client, node, case)


async def run_ours(program: Path, node: Node, case: Case) -> tuple[Run, list[dict[str, Any]]]:
    for obj in case[1]:
        node.add_claim(obj)
    driver = DraDriver(DRIVER, [AttributedPlugin(case[0])], device_metadata=True)
    async with running(node, driver) as service, kubelet(service) as client:
        prepared = MessageToDict(await client.prepare(refs(case[1])))
        files = written(node)
        decoded = await decode(program, [node.root / p for p in files if p.endswith("/metadata.json")])
        await client.unprepare(refs(case[1]))
        return (prepared, files, written(node)), decoded


async def both_calls(client: DraClient, node: Node, case: Case) -> Run:
    prepared = MessageToDict(await client.prepare(refs(case[1])))
    files = written(node)
    await client.unprepare(refs(case[1]))
    return prepared, files, written(node)


async def decode(program: Path, paths: Sequence[Path]) -> list[dict[str, Any]]:
    if not paths:
        return []
    process = await asyncio.create_subprocess_exec(
        str(program), "decode", *map(str, paths), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()]


def compare(program: Path, case: Case) -> None:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    try:
        node = Node(root)
        node.options()  # the kubelet's directories and a boot ID
        attributes = DraDriver(DRIVER, [AttributedPlugin(case[0])]).device_attributes(NODE)
        go = asyncio.run(asyncio.wait_for(run_go(program, node, case, attributes), 120))
        ours, decoded = asyncio.run(asyncio.wait_for(run_ours(program, node, case), 120))
    finally:
        shutil.rmtree(root)
    assert ours[0] == go[0], "prepare answers differ"
    assert sorted(ours[1]) == sorted(go[1]), "file names differ"
    for path, content in go[1].items():
        assert ours[1][path] == content, f"{path} differs"
    assert [p for p, (data, _) in ours[2].items() if data is not None] == [], "unprepare left files"
    assert [p for p, (data, _) in go[2].items() if data is not None] == [], "unprepare left files"
    files = {p: data for p, (data, _) in ours[1].items() if data is not None and p.endswith("/metadata.json")}
    assert len(decoded) == len(files)
    for result in decoded:
        data = files[str(Path(result["file"]).relative_to(root))]
        beta, alpha = read_stream(data.decode())
        assert result.get("error", "") == "", result
        # an empty pod-claim-name annotation (the controller never sets one) is written as the helper writes it
        # and is the one thing the decoder's validation refuses
        invalid = "podClaimName: Invalid value" if beta.get("podClaimName") == "" else ""
        assert result.get("validation", "")[: len(invalid)] == invalid and bool(result.get("validation")) == bool(
            invalid
        )
        assert result["from"] == "metadata.resource.k8s.io/v1beta1"
        assert (result["v1beta1"], result["v1alpha1"]) == (beta, alpha)
        assert result["versions"] == ["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"]
        assert result["reencoded"].encode() == data, "Go's serializer encodes the decoded object otherwise"


@settings(max_examples=12, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=st.tuples(ATTRIBUTES, claims()))
@example(case=EVERY_CONSTRUCT)
@example(case=DEVICE_ORDER)
def test_our_metadata_files_are_the_go_helpers(program: Path, case: Case) -> None:
    compare(program, case)


def test_the_example_holds_every_construct() -> None:
    """What the generator may miss on a given seed, the example covers."""
    attributes, objects = EVERY_CONSTRUCT
    results = [r for o in objects for r in o["status"]["allocation"]["devices"]["results"]]
    assert any("/" in r["request"] for r in results) and any("/" not in r["request"] for r in results)
    assert any(r.get("adminAccess") for r in results) and any(r["driver"] == OTHER for r in results)
    annotations = [o["metadata"].get("annotations", {}).get("resource.kubernetes.io/pod-claim-name") for o in objects]
    assert {None, "", "gpu"} <= set(annotations)
    assert {o["metadata"]["uid"][0].isdigit() for o in objects} == {True, False}
    kinds = {next(iter(v)) for device in attributes.values() for v in device.values()}
    assert kinds == {"int", "bool", "string", "version", "ints", "bools", "strings", "versions"}
    strings = [s for device in attributes.values() for v in device.values() for s in [*v.get("strings", [])]]
    strings += [v["string"] for device in attributes.values() for v in device.values() if "string" in v]
    assert all(any(c in s for s in strings) for c in GO_ESCAPED)


def test_check_dra_passes_on_the_go_helper_with_device_metadata(program: Path) -> None:
    """``check --dra``'s metadata checks accept what the reference implementation writes."""
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    try:
        node = Node(root)
        node.options()
        for obj in EVERY_CONSTRUCT[1]:
            node.add_claim(obj)
        attributes = DraDriver(DRIVER, [AttributedPlugin(EVERY_CONSTRUCT[0])]).device_attributes(NODE)

        async def check() -> Any:
            async with go_helper(program, node, EVERY_CONSTRUCT, attributes):
                return await run_dra_checks(DraCheckOptions(node.kubelet_dir, DRIVER, node.claims_dir, node.cdi_dir))

        report = asyncio.run(asyncio.wait_for(check(), 120))
    finally:
        shutil.rmtree(root)
    statuses = {r.check.id: r.status for r in report.results}
    assert [i for i, s in statuses.items() if s is Status.FAIL] == [], report.to_json()
    assert statuses["dra.prepare.metadata"] is statuses["dra.unprepare.metadata_removed"] is Status.PASS
