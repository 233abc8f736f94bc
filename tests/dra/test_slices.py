"""ResourceSlices from discovered devices: valid, complete, split at the API limit."""

from __future__ import annotations

import pytest

from kubedevice.device import Device, Health
from kubedevice.dra import features
from kubedevice.dra.models import ResourceSlice, dump, load_text
from kubedevice.dra.slices import SliceError, attribute_name, device_name, slices_for
from kubedevice.dra.validation import dns1123_label_messages, validate


def test_device_names_are_dns_labels_and_distinct() -> None:
    for raw in ("0000:3b:00.0", "0000-3b-00-0", "/dev/ttyUSB0", "GPU_0", "x" * 80, "serial::1", "-"):
        assert dns1123_label_messages(device_name(raw)) == [], raw
    assert device_name("gpu-0") == "gpu-0"
    assert device_name("0000:3b:00.0") != device_name("0000-3b-00-0")
    assert device_name("0", "nvidia.com/gpu".rpartition("/")[2]) == "gpu-0"


def test_attribute_names_become_c_identifiers() -> None:
    assert attribute_name("vendor-id") == "vendor_id"
    assert attribute_name("pci.example.com/class") == "pci.example.com/class"
    assert attribute_name("0abc") == "_0abc"
    assert len(attribute_name("a" * 40)) == 32


def test_slice_describes_healthy_devices_with_attributes() -> None:
    devices = [
        Device("0000:3b:00.0", numa_nodes=(1,)),
        Device("0000:af:00.0", numa_nodes=(0, 1)),
        Device("0000:d8:00.0", health=Health.UNHEALTHY),
    ]
    extra = {
        "0000:3b:00.0": {"vendor": {"string": "10de"}, "device-id": {"string": "20b0"}, "memory": {"quantity": "40Gi"}}
    }
    [slice_] = slices_for("gpu.example.com", "node-1", [("example.com/gpu", devices, extra)], taint_effect=None)
    assert validate(slice_) == []
    assert slice_.spec.node_name == "node-1" and slice_.spec.pool.name == "node-1"
    assert slice_.spec.pool.resource_slice_count == 1
    first, second = slice_.spec.devices
    assert {k: v.as_value() for k, v in first.attributes.items()} == {
        "id": {"string": "0000:3b:00.0"},
        "resource": {"string": "example.com/gpu"},
        "numaNode": {"int": 1},
        "vendor": {"string": "10de"},
        "device_id": {"string": "20b0"},
    }
    assert first.capacity["memory"].value == "40Gi"
    assert "numaNode" not in second.attributes  # spans two NUMA nodes


def test_many_devices_are_split_into_one_pool_of_several_slices() -> None:
    devices = [Device(f"d{i}") for i in range(300)]
    slices = slices_for("dev.example.com", "node-1", [("example.com/dev", devices, {})])
    assert [len(s.spec.devices) for s in slices] == [128, 128, 44]
    assert {s.spec.pool.resource_slice_count for s in slices} == {3}
    assert len({s.metadata.name for s in slices}) == 3
    assert all(validate(s) == [] for s in slices)
    again = load_text(dump(list(slices)))
    assert [o.model_dump() for o in again] == [s.model_dump() for s in slices]
    assert all(isinstance(o, ResourceSlice) for o in again)


def test_same_ids_in_two_resources_do_not_collide() -> None:
    [slice_] = slices_for(
        "x.example.com", "n", [("example.com/a", [Device("0")], {}), ("example.com/b", [Device("0")], {})]
    )
    assert [d.name for d in slice_.spec.devices] == ["a-0", "b-0"]


@pytest.mark.parametrize(
    "value", [{"string": "a", "int": 1}, {}, {"float": 1.5}, {"int": 1, "string": "a", "quantity": "1"}]
)
def test_bad_extra_attributes_are_refused(value: dict[str, object]) -> None:
    with pytest.raises(SliceError, match="must have one key"):
        slices_for("x.example.com", "n", [("example.com/a", [Device("0")], {"0": {"v": value}})])


def test_an_attribute_and_a_capacity_of_one_name_are_both_published() -> None:
    """The API keeps the two maps apart, so a name may be in both (one of each key here)."""
    extra = {"0": {"memory": {"int": 64, "quantity": "64Gi"}}}
    [slice_] = slices_for("x.example.com", "n", [("example.com/a", [Device("0")], extra)])
    [device] = slice_.spec.devices
    assert device.attributes["memory"].as_value() == {"int": 64}
    assert device.capacity["memory"].value == "64Gi"
    assert validate(slice_) == []


def test_long_discovered_strings_are_cut_to_the_api_limit() -> None:
    """A glob source's ``path`` under a deep directory must not make the whole slice invalid."""
    path = "/tmp/" + "d" * 80 + "/acc0"
    extra = {"acc0": {"path": {"string": path}, "aliases": {"strings": [path, "short"]}}}
    [made] = slices_for("x.example.com", "n", [("example.com/a", [Device("acc0")], extra)])
    attributes = made.spec.devices[0].attributes
    assert attributes["path"].string == path[:64]
    assert attributes["aliases"].strings == [path[:64], "short"]
    assert validate(made, features.from_flags(features.NEWEST, "DRAListTypeAttributes=true")) == []
