"""The committed protobuf code matches api.proto, and the proto matches upstream's wire format."""

from __future__ import annotations

import pytest

from kubedevice.api import pb, regenerate


def test_generated_code_is_fresh() -> None:
    stale = regenerate.stale_files()
    assert not stale, f"regenerate with `python -m kubedevice.api.regenerate`: {stale} are stale"


@pytest.mark.parametrize(
    ("message", "fields"),
    [
        ("RegisterRequest", {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4}),
        ("DevicePluginOptions", {"pre_start_required": 1, "get_preferred_allocation_available": 2}),
        ("Device", {"ID": 1, "health": 2, "topology": 3}),
        ("NUMANode", {"ID": 1}),
        (
            "ContainerPreferredAllocationRequest",
            {"available_deviceIDs": 1, "must_include_deviceIDs": 2, "allocation_size": 3},
        ),
        ("ContainerAllocateResponse", {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4, "cdi_devices": 5}),
        ("Mount", {"container_path": 1, "host_path": 2, "read_only": 3}),
        ("DeviceSpec", {"container_path": 1, "host_path": 2, "permissions": 3}),
        ("PreStartContainerRequest", {"devices_ids": 1}),
    ],
)
def test_wire_names_and_numbers_match_upstream(message: str, fields: dict[str, int]) -> None:
    descriptor = pb.DESCRIPTOR.message_types_by_name[message]
    assert {f.name: f.number for f in descriptor.fields} == fields


def test_services_and_package() -> None:
    assert pb.DESCRIPTOR.package == "v1beta1"
    methods = [m.name for m in pb.DESCRIPTOR.services_by_name["DevicePlugin"].methods]
    assert methods == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    assert [m.name for m in pb.DESCRIPTOR.services_by_name["Registration"].methods] == ["Register"]
