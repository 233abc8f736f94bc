"""CDI: spec files valid against the CDI schema, written atomically, gone with their device."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubedevice.allocation.cdi import CdiSpecDir, container_edits, spec_document, with_ownership, write_atomically
from kubedevice.config import ConfigError, parse_config
from kubedevice.device import Mount
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost
from kubedevice.testing.waiting import eventually

from .cdi_schema import qualified, validate_spec

FPGA = """
name: example.com/fpga
pci: {vendor: "10ee", class: "1200", vfio: true}
cdi: {}
mounts: [{host_path: /opt/xilinx, read_only: true}]
"""


def fpga_host(root: Path) -> FakeHost:
    host = FakeHost(root)
    host.pci_device("0000:3b:00.0", "10ee", "903f", "120000", numa_node=1, iommu_group=41, driver="vfio-pci")
    host.pci_device("0000:5e:00.0", "10ee", "903f", "120000", numa_node=0, iommu_group=42, driver="vfio-pci")
    return host


def config(text: str = FPGA) -> ResourceConfig:
    return ResourceConfig.model_validate(yaml.safe_load(text))


def specs(cdi_dir: Path) -> dict[str, dict[str, object]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(cdi_dir.glob("*.json"))}


def test_spec_files_are_valid_0644_one_per_device(tmp_path: Path) -> None:
    host = fpga_host(tmp_path / "root")
    cdi_dir = tmp_path / "cdi"
    plugin = ConfiguredPlugin(config(), host.root, cdi_dir)
    files = specs(cdi_dir)
    assert sorted(files) == [
        "kubedevice-example.com-fpga-0000_3b_00.0.json",
        "kubedevice-example.com-fpga-0000_5e_00.0.json",
    ]
    for name, document in files.items():
        validate_spec(document)  # type: ignore[arg-type]
        assert stat.S_IMODE((cdi_dir / name).stat().st_mode) == 0o644
    edits = files["kubedevice-example.com-fpga-0000_3b_00.0.json"]["devices"][0]["containerEdits"]  # type: ignore[index]
    assert edits == {
        "deviceNodes": [
            {"path": "/dev/vfio/41", "hostPath": "/dev/vfio/41", "permissions": "rw"},
            {"path": "/dev/vfio/vfio", "hostPath": "/dev/vfio/vfio", "permissions": "rw"},
        ],
        "mounts": [{"hostPath": "/opt/xilinx", "containerPath": "/opt/xilinx", "options": ["ro", "bind"]}],
    }
    grant = plugin.allocate(plugin.devices()[:1])
    assert grant.cdi_devices == ("example.com/fpga=0000:3b:00.0",) and all(map(qualified, grant.cdi_devices))
    assert grant.devices == () and grant.mounts == ()  # CDI carries them: no double injection


def test_annotation_mode_uses_cdi_annotations_instead_of_the_cri_field(tmp_path: Path) -> None:
    host = fpga_host(tmp_path / "root")
    plugin = ConfiguredPlugin(
        config(FPGA.replace("cdi: {}", "cdi: {mode: annotations, kind: xilinx.com/fpga}")), host.root, tmp_path / "cdi"
    )
    grant = plugin.allocate(plugin.devices())
    assert grant.cdi_devices == ()
    assert dict(grant.annotations) == {
        "cdi.k8s.io/kubedevice_0000_3b_00.0": "xilinx.com/fpga=0000:3b:00.0",
        "cdi.k8s.io/kubedevice_0000_5e_00.0": "xilinx.com/fpga=0000:5e:00.0",
    }
    assert all(d["kind"] == "xilinx.com/fpga" for d in specs(tmp_path / "cdi").values())


def test_file_of_a_vanished_device_is_removed_and_foreign_files_stay(tmp_path: Path) -> None:
    host = fpga_host(tmp_path / "root")
    cdi_dir = tmp_path / "cdi"
    cdi_dir.mkdir()
    foreign = cdi_dir / "nvidia.yaml"
    foreign.write_text("cdiVersion: 0.5.0\n")
    stale = cdi_dir / "kubedevice-example.com-fpga-0000_99_00.0.json"  # ours, from an earlier run
    stale.write_text(json.dumps({"cdiVersion": "0.6.0", "kind": "example.com/fpga", "devices": []}))
    plugin = ConfiguredPlugin(config(), host.root, cdi_dir)
    assert not stale.exists() and foreign.read_text() == "cdiVersion: 0.5.0\n"

    async def main() -> None:
        task = asyncio.create_task(plugin.run())
        try:
            host.remove("/dev/vfio/42")  # unbound from vfio-pci: no longer passable
            gone = cdi_dir / "kubedevice-example.com-fpga-0000_5e_00.0.json"
            await eventually(f"{gone.name} removed", lambda: not gone.exists(), 10, 0.01)
            assert [d.id for d in plugin.devices()] == ["0000:3b:00.0"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert sorted(p.name for p in cdi_dir.iterdir()) == ["kubedevice-example.com-fpga-0000_3b_00.0.json", "nvidia.yaml"]


def test_atomic_write_replaces_by_rename_and_skips_unchanged_content(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    first = spec_document("a.com/b", "x", container_edits(["/dev/x"], "rw", [Mount("/opt", read_only=False)]))
    assert write_atomically(path, first)
    inode = path.stat().st_ino
    assert not write_atomically(path, first) and path.stat().st_ino == inode
    second = spec_document("a.com/b", "x", container_edits(["/dev/y"], "r", []))
    assert write_atomically(path, second)
    assert path.stat().st_ino != inode  # a new file renamed over the old one, never rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]  # no temp file left
    validate_spec(json.loads(path.read_text()))


def test_invalid_device_names_are_refused() -> None:
    with pytest.raises(ValueError, match="CDI device name"):
        spec_document("a.com/b", "-bad", {})


def test_sync_writes_only_under_our_prefix(tmp_path: Path) -> None:
    specs_dir = CdiSpecDir(tmp_path, "example.com/null")
    specs_dir.sync({"null-0": container_edits(["/dev/null"], "rw", [])})
    other = CdiSpecDir(tmp_path, "example.com/other")
    other.sync({})
    assert [p.name for p in tmp_path.iterdir()] == ["kubedevice-example.com-null-null-0.json"]


def test_unwritable_cdi_dir_is_a_one_line_start_up_error(tmp_path: Path) -> None:
    host = fpga_host(tmp_path / "root")
    blocker = tmp_path / "cdi"
    blocker.write_text("a file where the directory should be")
    with pytest.raises(ValueError, match=r"^cannot write CDI spec files in .*cdi: ") as info:
        ConfiguredPlugin(config(), host.root, blocker)
    assert "\n" not in str(info.value)


OWNED = FPGA + 'device_ownership: {uid: 1000, gid: 1000, mode: "0660"}\n'


def test_device_ownership_goes_into_every_device_node_of_the_spec(tmp_path: Path) -> None:
    host = fpga_host(tmp_path / "root")
    cdi_dir = tmp_path / "cdi"
    ConfiguredPlugin(config(OWNED), host.root, cdi_dir)
    files = specs(cdi_dir)
    assert len(files) == 2
    for document in files.values():
        validate_spec(document)  # type: ignore[arg-type]
        nodes = document["devices"][0]["containerEdits"]["deviceNodes"]  # type: ignore[index]
        assert [(n["uid"], n["gid"], n["fileMode"]) for n in nodes] == [(1000, 1000, 0o660)] * 2
        for node in nodes:  # CDI's uint32 and os.FileMode: JSON numbers, never strings
            assert all(type(node[k]) is int for k in ("uid", "gid", "fileMode"))
    # What is unset stays the runtime's choice: the field is left out, not written as 0.
    ConfiguredPlugin(config(FPGA + "device_ownership: {gid: 20}\n"), host.root, cdi_dir)
    for document in specs(cdi_dir).values():
        for node in document["devices"][0]["containerEdits"]["deviceNodes"]:  # type: ignore[index]
            assert node["gid"] == 20 and "uid" not in node and "fileMode" not in node


def test_with_ownership_leaves_the_edits_it_was_given_alone() -> None:
    edits = container_edits(["/dev/x"], "rw", [Mount("/opt", read_only=True)])
    owned = with_ownership(edits, uid=0, file_mode=0o600)
    node = {"path": "/dev/x", "hostPath": "/dev/x", "permissions": "rw"}
    assert owned["deviceNodes"] == [{**node, "uid": 0, "fileMode": 384}]
    assert owned["mounts"] == edits["mounts"] and "uid" not in edits["deviceNodes"][0]
    assert with_ownership(edits) == edits


@pytest.mark.parametrize(
    ("ownership", "field", "reason"),
    [
        ('{mode: "660"}', "device_ownership.mode", 'quoted octal file mode like "0660"'),
        ('{mode: "0990"}', "device_ownership.mode", "octal file mode"),
        ("{mode: 0660}", "device_ownership.mode", "must be a quoted"),  # YAML's octal number 432
        ("{uid: -1}", "device_ownership.uid", "greater than or equal to 0"),
        ('{gid: "1000"}', "device_ownership.gid", "valid integer"),
        ("{uid: 4294967295}", "device_ownership.uid", "less than or equal to 4294967294"),
        ("{}", "device_ownership", "set at least one of uid, gid and mode"),
        ("{uid: 1, owner: 2}", "device_ownership", "unknown key 'owner'"),
    ],
)
def test_bad_device_ownership_is_one_line_naming_the_field(ownership: str, field: str, reason: str) -> None:
    lines = [*FPGA.strip().splitlines(), f"device_ownership: {ownership}"]
    with pytest.raises(ConfigError) as info:
        parse_config("resources:\n  - " + "\n    ".join(lines) + "\n")
    message = str(info.value)
    assert "\n" not in message and f"resources[0].{field}" in message and reason in message, message


def test_device_ownership_without_cdi_is_refused_at_start_up(tmp_path: Path) -> None:
    """The device-plugin answer (DeviceSpec) has no owner or mode: silently ignoring the setting
    would leave a non-root pod with a device it cannot open, so `serve` refuses it (exit 2)."""
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        "resources:\n  - name: example.com/tty\n    glob: {paths: [/dev/ttyS*]}\n"
        '    device_ownership: {gid: 20, mode: "0660"}\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "serve", "-c", str(config_file), "--plugin-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    # the entry at fault, not the file's first line (issue #27)
    assert f"kubedevice: {config_file}:4:23: resources[0].device_ownership: needs 'cdi:'" in result.stderr
    assert "device_ownership_from_security_context" in result.stderr
