"""VFIO by IOMMU group: the functions of one group are one device, refused while a host driver holds
a member; proven on fake hosts through discovery, `kubedevice discover` and a real gRPC Allocate."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from kubedevice.api import pb
from kubedevice.sources import HostRoot, discover_resources
from kubedevice.sources.cli import discover
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.discovery import find
from kubedevice.testing import FakeHost

from .conftest import resource
from .test_configured import served

GPU = 'name: example.com/gpu\npci: {vendor: "10de", vfio: true}'
GPU_ONLY = 'name: example.com/gpu\npci: {vendor: "10de", class: "03", vfio: true}'
KUBEVIRT_ENV = {"PCI_RESOURCE_EXAMPLE_COM_GPU": "{pci_addresses}", "GPU_IDS": "{ids}"}


def gpu_with_audio(host: FakeHost, bus: str, group: int, *, audio_driver: str = "vfio-pci", numa: int = 0) -> None:
    """A GPU and its HDMI audio function: two functions the hardware puts in one IOMMU group."""
    host.pci_device(f"0000:{bus}:00.0", "10de", "2236", "030200", numa_node=numa, iommu_group=group, driver="vfio-pci")
    host.pci_device(
        f"0000:{bus}:00.1", "10de", "1aef", "040300", numa_node=numa, iommu_group=group, driver=audio_driver
    )


def found_of(host: FakeHost, text: str) -> dict[str, tuple[tuple[str, ...], list[str]]]:
    return {f.key: (f.host_paths, list(f.details["pciAddresses"])) for f in find(resource(text), HostRoot(host.root))}


def test_functions_of_one_group_are_one_device_with_every_address(host: FakeHost) -> None:
    gpu_with_audio(host, "01", 7)
    gpu_with_audio(host, "02", 8, numa=1)
    assert found_of(host, GPU) == {
        "0000:01:00.0": (("/dev/vfio/7", "/dev/vfio/vfio"), ["0000:01:00.0", "0000:01:00.1"]),
        "0000:02:00.0": (("/dev/vfio/8", "/dev/vfio/vfio"), ["0000:02:00.0", "0000:02:00.1"]),
    }
    # selecting the GPU alone still passes the group; the audio function is passed, not listed
    assert found_of(host, GPU_ONLY)["0000:01:00.0"] == (("/dev/vfio/7", "/dev/vfio/vfio"), ["0000:01:00.0"])


def test_a_group_with_a_host_bound_member_is_refused_naming_function_and_driver(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    gpu_with_audio(host, "01", 7, audio_driver="snd_hda_intel")
    gpu_with_audio(host, "02", 8)
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert list(found_of(host, GPU_ONLY)) == ["0000:02:00.0"]
    assert caplog.records[0].getMessage() == (
        "gpu: 1 PCI function(s) 10de:* present but not usable for VFIO: 0000:01:00.0 is in IOMMU group 7, which "
        "a pod cannot own: 0000:01:00.1 is bound to host driver snd_hda_intel"
    )


def test_the_selected_function_on_a_host_driver_is_named_too(host: FakeHost, caplog: pytest.LogCaptureFixture) -> None:
    host.pci_device("0000:01:00.0", "10de", "2236", "030200", iommu_group=7, driver="nvidia")
    host.pci_device("0000:01:00.1", "10de", "1aef", "040300", iommu_group=7, driver="vfio-pci")  # makes /dev/vfio/7
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert found_of(host, GPU) == {}
    assert "0000:01:00.0 is bound to host driver nvidia" in caplog.text and "nothing to advertise" in caplog.text


def test_bridges_parked_and_driverless_members_keep_the_group_viable(host: FakeHost) -> None:
    """The kernel's rule: driver-less, pci-stub, pcieport, and any bridge (non-normal header) are allowed."""
    host.pci_device("0000:00:01.0", "8086", "1901", "060400", iommu_group=1, driver="pcieport")
    host.pci_device("0000:00:01.1", "8086", "1905", "060400", iommu_group=1, driver="shpchp")  # a bridge: any driver
    host.pci_device("0000:00:01.2", "8086", "1234", "0c0330", iommu_group=1, driver="pci-stub")
    host.pci_device("0000:00:01.3", "8086", "5678", "088000", iommu_group=1)  # no driver
    host.pci_device("0000:01:00.0", "10de", "2236", "030200", iommu_group=1, driver="vfio-pci")
    host.pci_device("0000:01:00.1", "10de", "1aef", "040300", iommu_group=1, driver="mlx5_vfio_pci")  # a variant
    assert found_of(host, GPU) == {
        "0000:01:00.0": (("/dev/vfio/1", "/dev/vfio/vfio"), ["0000:01:00.0", "0000:01:00.1"]),
    }
    host.pci_device("0000:00:01.4", "8086", "9abc", "0c0330", iommu_group=1, driver="xhci_hcd")  # not a bridge
    assert found_of(host, GPU) == {}


def test_a_selected_function_not_on_vfio_is_left_out_of_its_group_device(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    gpu_with_audio(host, "01", 7, audio_driver="pci-stub")
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert found_of(host, GPU) == {"0000:01:00.0": (("/dev/vfio/7", "/dev/vfio/vfio"), ["0000:01:00.0"])}
    assert "0000:01:00.1 is not bound to vfio-pci (driver: pci-stub)" in caplog.text


def test_allocate_over_grpc_grants_each_group_once_and_lists_every_function(host: FakeHost, tmp_path: Path) -> None:
    gpu_with_audio(host, "01", 7)
    gpu_with_audio(host, "02", 8)
    plugin = ConfiguredPlugin(resource(GPU, env=KUBEVIRT_ENV), host.root)
    assert [d.id for d in plugin.devices()] == ["0000:01:00.0", "0000:02:00.0"]

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            ids = ["0000:02:00.0", "0000:01:00.0"]
            request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
            response = (await stub.Allocate(request)).container_responses[0]
            assert [(d.host_path, d.container_path) for d in response.devices] == [
                ("/dev/vfio/7", "/dev/vfio/7"),
                ("/dev/vfio/vfio", "/dev/vfio/vfio"),
                ("/dev/vfio/8", "/dev/vfio/8"),
            ]  # the container node once, however many groups
            assert dict(response.envs) == {
                "PCI_RESOURCE_EXAMPLE_COM_GPU": "0000:02:00.0,0000:02:00.1,0000:01:00.0,0000:01:00.1",
                "GPU_IDS": "0000:02:00.0,0000:01:00.0",
            }

    asyncio.run(main())


def test_a_member_rebound_to_a_host_driver_takes_the_group_away_until_it_returns(host: FakeHost) -> None:
    gpu_with_audio(host, "01", 7)
    plugin = ConfiguredPlugin(resource(GPU_ONLY), host.root)
    assert [d.id for d in plugin.devices()] == ["0000:01:00.0"]
    host.bind_pci("0000:01:00.1", "snd_hda_intel")
    assert host.path("/dev/vfio/7").exists()  # the GPU keeps the group node: only a rescan can tell
    plugin.rescan()
    assert plugin.devices() == []
    host.bind_pci("0000:01:00.1", "vfio-pci")
    plugin.rescan()
    assert [d.id for d in plugin.devices()] == ["0000:01:00.0"]
    host.bind_pci("0000:01:00.0", None)
    host.bind_pci("0000:01:00.1", None)
    assert not host.path("/dev/vfio/7").exists()  # the last member left vfio-pci: the kernel drops the node


app = typer.Typer()
app.command()(discover)


def test_discover_shows_the_group_and_the_refusals(host: FakeHost, tmp_path: Path) -> None:
    gpu_with_audio(host, "01", 7)
    gpu_with_audio(host, "02", 8, audio_driver="snd_hda_intel")
    config = tmp_path / "config.yaml"
    config.write_text(f"resources:\n  - {GPU.replace(chr(10), chr(10) + '    ')}\n")
    args = ["--config", str(config), "--host-root", str(host.root)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    [gpu] = json.loads(result.stdout)["resources"]
    assert [(d["id"], d["iommuGroup"], d["pciAddresses"]) for d in gpu["devices"]] == [
        ("0000:01:00.0", 7, ["0000:01:00.0", "0000:01:00.1"])
    ]
    reason = "is in IOMMU group 8, which a pod cannot own: 0000:02:00.1 is bound to host driver snd_hda_intel"
    assert gpu["refused"] == [
        {"pciAddress": "0000:02:00.0", "reason": reason},
        {"pciAddress": "0000:02:00.1", "reason": reason},
    ]
    table = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert "group 7: 0000:01:00.0 0000:01:00.1" in table.stdout
    assert "refused" in table.stdout and "snd_hda_intel" in table.stdout


def test_dra_attributes_of_a_group_are_its_first_functions(host: FakeHost) -> None:
    gpu_with_audio(host, "01", 7, numa=1)

    [(_, devices, attributes)] = discover_resources(SimpleNamespace(resources=[resource(GPU)]), host.root)
    assert [d.id for d in devices] == ["0000:01:00.0"] and devices[0].numa_nodes == (1,)
    assert attributes["0000:01:00.0"]["pciAddress"] == {"string": "0000:01:00.0"}
    assert attributes["0000:01:00.0"]["iommuGroup"] == {"int": 7}
