"""Each source over fake kernel layouts: what is found, what is ignored, what is refused."""

from __future__ import annotations

import logging

import pytest

from kubedevice.device import MAX_ID_LENGTH
from kubedevice.sources.base import stable_key
from kubedevice.sources.discovery import advertised, dra_attributes, find
from kubedevice.sources.hostroot import HostRoot, HostRootError
from kubedevice.testing import FakeHost

from .conftest import populate, resource

NULL = "name: example.com/null\nstatic: {count: 4, paths: [/dev/null]}"
SERIAL = 'name: example.com/serial\nglob: {paths: ["/dev/ttyUSB*"]}'
CORAL = 'name: example.com/coral\nusb: {vendor: "1a6e", product: "089a"}'
FPGA = 'name: example.com/fpga\npci: {vendor: "10ee", class: "1200", vfio: true}'


def paths(host: FakeHost, text: str) -> dict[str, tuple[str, ...]]:
    return {f.key: f.host_paths for f in find(resource(text), HostRoot(host.root))}


def test_static_gives_count_devices_granting_the_same_paths(host: FakeHost) -> None:
    populate(host)
    devices = advertised(resource(NULL), find(resource(NULL), HostRoot(host.root)))
    assert [d.id for d in devices] == ["null-0", "null-1", "null-2", "null-3"]
    assert {tuple((s.host_path, s.permissions) for s in d.grant.devices) for d in devices} == {(("/dev/null", "rw"),)}


def test_glob_each_match_is_a_device_and_decoys_are_ignored(host: FakeHost) -> None:
    populate(host)
    assert paths(host, SERIAL) == {"ttyUSB0": ("/dev/ttyUSB0",), "ttyUSB1": ("/dev/ttyUSB1",)}


def test_glob_groups(host: FakeHost) -> None:
    for name in ("controlC0", "pcmC0D0p", "controlC1", "pcmC1D0c", "timer"):
        host.device_node(f"/dev/snd/{name}")
    grouped = paths(host, r"name: a.com/snd" + "\n" + r'glob: {paths: ["/dev/snd/*C[0-9]*"], group_by: "C(\\d+)"}')
    assert grouped == {
        "0": ("/dev/snd/controlC0", "/dev/snd/pcmC0D0p"),
        "1": ("/dev/snd/controlC1", "/dev/snd/pcmC1D0c"),
    }
    whole = paths(host, 'name: a.com/snd\nglob: {paths: ["/dev/snd/*"], group: true}')
    assert list(whole) == ["snd"] and len(whole["snd"]) == 5


def test_glob_matching_nothing_is_an_empty_list_with_a_warning(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    host.device_node("/dev/null")
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert paths(host, SERIAL) == {}
    assert "no host path matches /dev/ttyUSB*" in caplog.text


def test_usb_matches_vendor_product_and_grants_the_bus_node(host: FakeHost) -> None:
    populate(host)
    found = find(resource(CORAL), HostRoot(host.root))
    assert [(f.key, f.host_paths, f.sysfs) for f in found] == [
        ("usb-1-2", ("/dev/bus/usb/001/004",), "/sys/bus/usb/devices/1-2")
    ]
    assert found[0].attributes["serial"] == {"string": "coral-a"}


def test_usb_serial_filter_and_vendor_only(host: FakeHost) -> None:
    populate(host)
    host.usb_device(2, 9, "1a6e", "089a", port="2-1", serial="coral-b")
    assert list(paths(host, 'name: a.com/c\nusb: {vendor: "1a6e", serial: "coral-b"}')) == ["usb-2-1"]
    assert list(paths(host, 'name: a.com/c\nusb: {vendor: "1A6E"}')) == ["usb-1-2", "usb-2-1"]


def test_usb_device_without_its_node_yet_is_not_advertised(host: FakeHost) -> None:
    host.usb_device(3, 2, "1a6e", "089a", create_node=False)
    assert paths(host, CORAL) == {}


def test_absent_usb_bus_is_an_empty_list_with_a_warning(host: FakeHost, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert paths(host, CORAL) == {}
    assert "no USB device 1a6e:089a" in caplog.text


def test_pci_matches_vendor_and_class_prefix_with_numa_and_vfio_nodes(host: FakeHost) -> None:
    populate(host)
    found = find(resource(FPGA), HostRoot(host.root))
    assert [(f.key, f.host_paths, f.numa_nodes) for f in found] == [
        ("0000:3b:00.0", ("/dev/vfio/41", "/dev/vfio/vfio"), (1,))
    ]
    attrs = dra_attributes(resource(FPGA), found)["0000:3b:00.0"]
    assert attrs["numaNode"] == {"int": 1} and attrs["iommuGroup"] == {"int": 41}
    assert attrs["driver"] == {"string": "vfio-pci"} and attrs["class"] == {"string": "120000"}


def test_pci_numa_minus_one_means_no_topology(host: FakeHost) -> None:
    host.pci_device("0000:01:00.0", "10ee", "903f", "120000", numa_node=-1)
    found = find(resource('name: a.com/f\npci: {vendor: "10ee"}'), HostRoot(host.root))
    assert [(f.key, f.numa_nodes, f.host_paths) for f in found] == [("0000:01:00.0", (), ())]


def test_pci_vfio_without_iommu_group_is_skipped_with_a_warning(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    host.pci_device("0000:01:00.0", "10ee", "903f", "120000")
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert paths(host, FPGA) == {}
    assert "no IOMMU group" in caplog.text


def test_pci_skips_are_one_coherent_warning_not_absence(host: FakeHost, caplog: pytest.LogCaptureFixture) -> None:
    """The function is present: the warning must say why it is unusable, never that it is absent."""
    host.pci_device("0000:01:00.0", "10ee", "903f", "120000")  # no IOMMU group
    host.pci_device("0000:02:00.0", "10ee", "903f", "120000", iommu_group=7, driver="ixgbe")  # no /dev/vfio/7
    with caplog.at_level(logging.INFO, "kubedevice.sources"):
        assert paths(host, FPGA) == {}
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "fpga: 2 PCI function(s) 10ee:* present but not usable for VFIO: 0000:01:00.0 has no IOMMU group "
        "(IOMMU off?); 0000:02:00.0 lacks /dev/vfio/7, /dev/vfio/vfio (not bound to vfio-pci?); nothing to advertise"
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, "kubedevice.sources"):
        assert paths(host, 'name: a.com/f\npci: {vendor: "8086", vfio: true}') == {}
    assert [r.getMessage() for r in caplog.records] == ["f: no PCI function 8086:* present"]


def test_pci_without_vfio_warns_that_containers_get_no_device_node(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    host.pci_device("0000:01:00.0", "10ee", "903f", "120000", iommu_group=7)
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert paths(host, 'name: a.com/f\npci: {vendor: "10ee"}') == {"0000:01:00.0": ()}
    assert "advertised without device nodes (vfio is off)" in caplog.text and "vfio: true" in caplog.text


def test_unreadable_sysfs_attribute_skips_that_device_only(host: FakeHost, caplog: pytest.LogCaptureFixture) -> None:
    populate(host)
    host.pci_device("0000:d8:00.0", "10ee", "903f", "120000", numa_node=0, iommu_group=44, driver="vfio-pci")
    host.remove("/sys/devices/pci0000:00/0000:d8:00.0/vendor")
    host.path("/sys/devices/pci0000:00/0000:d8:00.0/vendor").mkdir()  # reading it fails with EISDIR
    with caplog.at_level(logging.WARNING, "kubedevice.sources"):
        assert list(paths(host, FPGA)) == ["0000:3b:00.0"]
    assert "cannot read /sys/bus/pci/devices/0000:d8:00.0/vendor" in caplog.text


def test_unlistable_sysfs_directory_is_a_clear_error(host: FakeHost) -> None:
    host.write("/sys/bus/pci/devices", "not a directory")
    with pytest.raises(HostRootError, match="cannot read /sys/bus/pci/devices"):
        find(resource(FPGA), HostRoot(host.root))


def test_replicas_are_stable_ids_sharing_health_and_grant(host: FakeHost) -> None:
    populate(host)
    config = resource(FPGA, replicas=3)
    devices = advertised(config, find(config, HostRoot(host.root)))
    assert [(d.id, d.group) for d in devices] == [(f"0000:3b:00.0::{i}", "0000:3b:00.0") for i in range(3)]
    assert len({d.grant for d in devices}) == 1
    again = advertised(config, find(config, HostRoot(host.root)))
    assert [d.id for d in again] == [d.id for d in devices]


def test_long_names_become_ids_within_the_limit_even_with_replicas(host: FakeHost) -> None:
    long_name = "usb-" + "Very_Long_Vendor_Name_" * 5 + "if00"
    host.device_node(f"/dev/serial/by-id/{long_name}")
    config = resource('name: a.com/s\nglob: {paths: ["/dev/serial/by-id/*"]}', replicas=1000)
    devices = advertised(config, find(config, HostRoot(host.root)))
    assert len(devices) == 1000 and max(len(d.id) for d in devices) <= MAX_ID_LENGTH
    assert stable_key(long_name) == stable_key(long_name) != stable_key(long_name + "x")
