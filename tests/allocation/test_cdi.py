"""CDI: spec files valid against the CDI schema, written atomically, gone with their device."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest
import yaml

from kubedevice.allocation.cdi import CdiSpecDir, container_edits, spec_document, write_atomically
from kubedevice.device import Mount
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

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
            for _ in range(200):
                if not gone.exists():
                    break
                await asyncio.sleep(0.01)
            assert not gone.exists()
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
