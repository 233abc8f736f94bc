"""Device metadata in the container (KEP-5304) through the real gRPC prepare and unprepare: the
files, their CDI specs and IDs, restarts, failures. Byte-for-byte agreement with the Go helper is
``tests/interop/test_dra_metadata_go.py``."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from kubedevice.allocation.cdi import CdiError
from kubedevice.config import ConfigError, load_config, parse_config
from kubedevice.dra.devicemetadata import CONTAINER_DIR, read_stream
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver.checkpoint import load
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.dra.driver.metadata import MetadataFiles
from kubedevice.dra.nodeclaims import ClaimRef
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, kubelet, null_plugin, running

KIND = f"{DRIVER}/metadata"
REPO = Path(__file__).resolve().parents[3]


def driver(device_metadata: bool = True) -> DraDriver:
    return DraDriver(DRIVER, [null_plugin()], device_metadata=device_metadata)


def plugin_dir(node: Node) -> Path:
    return node.kubelet_dir / "plugins" / DRIVER


def metadata_file(node: Node, claim: str, request: str, namespace: str = "default") -> Path:
    return plugin_dir(node) / "dra-device-metadata" / f"{namespace}_{claim}" / request / "metadata.json"


def spec_path(node: Node, uid: str, request: str) -> Path:
    return node.cdi_dir / f"{DRIVER}_metadata_{uid}_{request}.json"


def stream(path: Path) -> list[Any]:
    """The JSON objects of a metadata file, in order: Go's indented objects, each ending its line."""
    text = path.read_text()
    objects = read_stream(text)
    assert text.count("}\n{\n") == len(objects) - 1 and text.endswith("}\n")
    return objects


def with_annotation(obj: dict[str, Any], pod_claim_name: str) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": pod_claim_name}
    return obj


async def test_off_by_default_nothing_is_written(node: Node) -> None:
    ref = node.add_claim(claim_object("plain", ["null0"]))
    async with running(node, driver(device_metadata=False)) as service, kubelet(service) as client:
        [device] = (await client.prepare([ref])).claims[ref[2]].devices
        assert [i for i in device.cdi_device_ids if i.startswith(KIND)] == []
    assert not (plugin_dir(node) / "dra-device-metadata").exists()
    assert not spec_path(node, ref[2], "req").exists()


async def test_prepare_writes_a_stream_per_request_and_a_spec_that_mounts_it(node: Node) -> None:
    obj = claim_object("two", [("gpu/large", "null0"), ("gpu/large", "null1"), ("nic", "null2")])
    namespace, name, uid = node.add_claim(obj)
    async with running(node, driver()) as service, kubelet(service) as client:
        answer = (await client.prepare([(namespace, name, uid)])).claims[uid]
        assert answer.error == ""
        ids = {d.device_name: list(d.cdi_device_ids) for d in answer.devices}
        assert ids == {  # the request's first device carries its metadata ID, after its own
            "null0": [f"k8s.{DRIVER}/device={uid}-null0", f"{KIND}={uid}_gpu"],
            "null1": [f"k8s.{DRIVER}/device={uid}-null1"],
            "null2": [f"k8s.{DRIVER}/device={uid}-null2", f"{KIND}={uid}_nic"],
        }
        attributes = service.driver.device_attributes(NODE)
    gpu = metadata_file(node, name, "gpu")
    beta, alpha = stream(gpu)
    assert [beta["apiVersion"], alpha["apiVersion"]] == [
        "metadata.resource.k8s.io/v1beta1",
        "metadata.resource.k8s.io/v1alpha1",
    ]
    assert {**alpha, "apiVersion": beta["apiVersion"]} == beta
    assert beta["kind"] == "DeviceMetadata" and "podClaimName" not in beta
    assert beta["metadata"] == {"name": name, "namespace": namespace, "uid": uid, "generation": 1}
    assert beta["requests"] == [
        {
            "name": "gpu/large",  # the subrequest is named in the file, the directory is the request's
            "devices": [
                {"driver": DRIVER, "pool": NODE, "name": device, "attributes": attributes[device]}
                for device in ("null0", "null1")
            ],
        }
    ]
    assert beta["requests"][0]["devices"][0]["attributes"]["id"] == {"string": "null0"}  # as the slice has it
    assert [d["name"] for d in stream(metadata_file(node, name, "nic"))[0]["requests"][0]["devices"]] == ["null2"]
    spec = json.loads(spec_path(node, uid, "gpu").read_text())
    mount = {
        "hostPath": str(gpu),
        "containerPath": f"{CONTAINER_DIR}/resourceclaims/{name}/gpu/{DRIVER}-metadata.json",
        "options": ["ro", "bind"],
    }
    assert spec == {
        "cdiVersion": "0.5.0" if uid[0].isdigit() else "0.3.0",
        "kind": KIND,
        "devices": [{"name": f"{uid}_gpu", "containerEdits": {"mounts": [mount]}}],
        "containerEdits": {},
    }
    for path in (gpu, spec_path(node, uid, "gpu")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    for directory in (gpu.parent, gpu.parent.parent, gpu.parent.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) & 0o755 == 0o755


async def test_a_claim_from_a_template_is_mounted_under_the_pods_name_for_it(node: Node) -> None:
    ref = node.add_claim(with_annotation(claim_object("pod-gpu-x7k2p", ["null0"]), "gpu"))
    async with running(node, driver()) as service, kubelet(service) as client:
        assert (await client.prepare([ref])).claims[ref[2]].error == ""
    [beta, _] = stream(metadata_file(node, ref[1], "req"))
    assert beta["podClaimName"] == "gpu"
    [device] = json.loads(spec_path(node, ref[2], "req").read_text())["devices"]
    container_path = device["containerEdits"]["mounts"][0]["containerPath"]
    assert container_path == f"{CONTAINER_DIR}/resourceclaimtemplates/gpu/req/{DRIVER}-metadata.json"


async def test_only_this_drivers_devices_are_described(node: Node) -> None:
    obj = claim_object("mixed", [("req", "null0")])
    other = {"request": "req", "driver": "other.example.com", "pool": NODE, "device": "gpu0"}
    admin = {"request": "watch", "driver": DRIVER, "pool": NODE, "device": "null0", "adminAccess": True}
    obj["status"]["allocation"]["devices"]["results"] += [other, admin]
    ref = node.add_claim(obj)
    async with running(node, driver()) as service, kubelet(service) as client:
        answer = (await client.prepare([ref])).claims[ref[2]]
        [device] = answer.devices  # one device in two requests: both metadata IDs on it
        assert list(device.request_names) == ["req", "watch"]
        assert list(device.cdi_device_ids)[1:] == [f"{KIND}={ref[2]}_req", f"{KIND}={ref[2]}_watch"]
    assert [d["name"] for d in stream(metadata_file(node, "mixed", "req"))[0]["requests"][0]["devices"]] == ["null0"]
    assert stream(metadata_file(node, "mixed", "watch"))[0]["requests"][0]["devices"][0]["name"] == "null0"


async def test_unprepare_removes_the_files_and_a_stop_leaves_nothing(node: Node) -> None:
    ref = node.add_claim(claim_object("brief", [("a", "null0"), ("b", "null1")]))
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([ref])
        assert metadata_file(node, "brief", "b").exists() and spec_path(node, ref[2], "a").exists()
        (metadata_file(node, "brief", "b").parent / "stray").write_text("not ours, in our directory")
        assert (await client.unprepare([ref])).claims[ref[2]].error == ""  # gone too, as os.RemoveAll does
        assert not metadata_file(node, "brief", "a").parent.parent.exists()
        assert node.cdi_specs() == {}
    assert not plugin_dir(node).exists()


async def test_files_outlive_a_restart_come_back_if_removed_and_orphans_go(node: Node) -> None:
    kept = node.add_claim(claim_object("kept", ["null1"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([kept])
    stored = load(plugin_dir(node) / "checkpoint.json", "boot-1")[0].claims[kept[2]]
    assert stored.metadata is not None and stored.metadata["requests"][0]["name"] == "req"
    written = metadata_file(node, "kept", "req").read_bytes()
    metadata_file(node, "kept", "req").unlink()
    spec_path(node, kept[2], "req").unlink()
    orphan_dir = metadata_file(node, "gone", "req").parent.parent  # a crash before the checkpoint
    (orphan_dir / "req").mkdir(parents=True)
    (orphan_dir / "req" / "metadata.json").write_text("{}")
    stale_request = metadata_file(node, "kept", "old").parent
    stale_request.mkdir()
    orphan_spec = spec_path(node, "uid-gone", "req")
    orphan_spec.write_text(json.dumps({"cdiVersion": "0.3.0", "kind": KIND, "devices": []}))
    stranger = spec_path(node, "uid-x", "req")  # our name, another kind: not ours to remove
    stranger.write_text(json.dumps({"cdiVersion": "0.3.0", "kind": "other.example.com/metadata", "devices": []}))
    async with running(node, driver(device_metadata=False)) as service, kubelet(service) as client:
        # off now, but the kubelet still holds the claim's metadata ID: its files stay until unprepared
        assert metadata_file(node, "kept", "req").read_bytes() == written
        assert spec_path(node, kept[2], "req").exists()
        assert not orphan_dir.exists() and not stale_request.exists() and not orphan_spec.exists()
        assert stranger.exists()
        assert (await client.unprepare([kept])).claims[kept[2]].error == ""
        assert not metadata_file(node, "kept", "req").parent.exists()
        assert [p.name for p in node.cdi_dir.iterdir()] == [stranger.name]


async def test_a_repeated_prepare_restores_a_removed_file(node: Node) -> None:
    ref = node.add_claim(claim_object("again", ["null0"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        first = await client.prepare([ref])
        written = metadata_file(node, "again", "req").read_bytes()
        metadata_file(node, "again", "req").unlink()
        spec_path(node, ref[2], "req").unlink()
        assert await client.prepare([ref]) == first
        assert metadata_file(node, "again", "req").read_bytes() == written
        assert spec_path(node, ref[2], "req").exists()


async def test_a_file_that_cannot_be_written_fails_only_its_claim_and_leaves_nothing(node: Node) -> None:
    bad = node.add_claim(claim_object("bad", ["null0"]))
    async with running(node, driver()) as service, kubelet(service) as client:
        good = node.add_claim(claim_object("good", ["null1"]))
        await client.prepare([good])
        blocker = metadata_file(node, "bad", "req").parent.parent
        blocker.write_text("a file where the claim's directory goes")
        answer = (await client.prepare([bad])).claims[bad[2]]
        assert answer.error.startswith(f"cannot write the device metadata of claim default/bad ({bad[2]}): ")
        assert not blocker.exists() and not spec_path(node, bad[2], "req").exists()
        assert not any(bad[2] in name for name in node.cdi_specs())  # nor the claim's own spec
        assert set(service.state.prepared()) == {good[2]}
        assert (await client.prepare([bad])).claims[bad[2]].error == ""  # the obstacle gone, it prepares


async def test_a_claim_of_a_reused_name_keeps_its_files_when_the_old_one_is_unprepared(node: Node) -> None:
    old = node.add_claim(claim_object("reused", ["null0"], uid="uid-old"))
    async with running(node, driver()) as service, kubelet(service) as client:
        await client.prepare([old])
        new = node.add_claim(claim_object("reused", ["null1"], uid="uid-new"))  # deleted and made again
        await client.prepare([new])
        assert (await client.unprepare([old])).claims["uid-old"].error == ""
        [beta, _] = stream(metadata_file(node, "reused", "req"))
        assert (beta["metadata"]["uid"], beta["requests"][0]["devices"][0]["name"]) == ("uid-new", "null1")
        assert spec_path(node, "uid-new", "req").exists() and not spec_path(node, "uid-old", "req").exists()


def test_a_driver_name_that_cannot_be_a_cdi_vendor_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"device metadata needs a driver name that starts with a letter: '3d\.example\.com'"
    ):
        DraDriver("3d.example.com", [null_plugin()], device_metadata=True)
    DraDriver("3d.example.com", [null_plugin()])  # without metadata the name is fine
    null = "resources: [{name: example.com/null, static: {count: 1, paths: [/dev/null]}}]\n"
    with pytest.raises(ConfigError, match=r"dra\.device_metadata: .*starts with a letter: '3d\.example\.com'"):
        parse_config(null + "dra: {driver: 3d.example.com, device_metadata: true}")
    assert parse_config(null + "dra: {driver: gpu.example.com, device_metadata: true}").dra.device_metadata  # type: ignore[union-attr]


def test_names_that_would_leave_the_directories_are_refused(tmp_path: Path) -> None:
    files = MetadataFiles(DRIVER, tmp_path / "plugin", tmp_path / "cdi")
    document = {"requests": [{"name": "req", "devices": []}]}
    for ref in (ClaimRef("default", "..", "uid"), ClaimRef("a/b", "c", "uid"), ClaimRef("default", "c", "u/v")):
        with pytest.raises(CdiError, match="cannot name a file"):
            files.write(ref, document)
    assert not (tmp_path / "plugin").exists() and not (tmp_path / "cdi").exists()


async def test_the_docs_example_is_what_the_example_driver_writes(node: Node) -> None:
    docs = (REPO / "docs" / "dra-driver.md").read_text()
    section = docs[docs.index("## Device metadata in the container") :]
    block = section[section.index("```text\n") + len("```text\n") :]
    shown, _ = json.JSONDecoder().raw_decode(block)
    example = build_driver(load_config(REPO / "examples" / "dra-null.yaml"), Path("/"))
    driver = DraDriver(example.name, example.plugins, device_metadata=True)
    obj = claim_object("pod-gpu-x7k2p", [("gpu/large", "null-0")], driver=example.name, uid=shown["metadata"]["uid"])
    ref = node.add_claim(with_annotation(obj, "gpu"))
    async with running(node, driver) as service, kubelet(service) as client:
        await client.prepare([ref])
        path = (
            node.kubelet_dir / "plugins" / example.name / "dra-device-metadata" / f"default_{ref[1]}/gpu/metadata.json"
        )
        assert stream(path)[0] == shown
        [spec] = [p for p in node.cdi_dir.iterdir() if p.name.startswith(f"{example.name}_metadata_")]
        container_path = json.loads(spec.read_text())["devices"][0]["containerEdits"]["mounts"][0]["containerPath"]
        assert f"`{container_path}`" in section
