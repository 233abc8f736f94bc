"""The path a container sees: a symlink keeps its name, ``container_path`` templates, their
validation at start-up, mounts that follow a device, per-device env fields, and CDI agreeing
with the device-plugin answer. Allocate goes over real gRPC on a unix socket."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest
import typer
import yaml
from grpc import aio
from pydantic import ValidationError
from typer.testing import CliRunner

from kubedevice.api import pb
from kubedevice.plugin.server import RpcFailure
from kubedevice.sources.cli import discover
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

from .conftest import populate, resource
from .test_configured import served

app = typer.Typer()
app.command()(discover)
runner = CliRunner()

BY_ID = "/dev/serial/by-id"
FTDI = f"{BY_ID}/usb-FTDI_FT232R_A10K1ABC-if00-port0"
CP2102 = f"{BY_ID}/usb-Silicon_Labs_CP2102_0001-if00-port0"


def two_sticks(host: FakeHost) -> None:
    """Two USB serial adapters as udev names them: ttys plus absolute by-id symlinks."""
    host.device_node("/dev/ttyUSB0")
    host.device_node("/dev/ttyUSB1")
    host.symlink(FTDI, "/dev/ttyUSB1")
    host.symlink(CP2102, "../../ttyUSB0")


async def allocate(plugin: ConfiguredPlugin, tmp_path: Path, *ids: str) -> pb.ContainerAllocateResponse:
    async with served(plugin, tmp_path / "plugins") as stub:
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=list(ids))])
        return (await stub.Allocate(request)).container_responses[0]


def nodes(response: pb.ContainerAllocateResponse) -> list[tuple[str, str]]:
    return [(d.container_path, d.host_path) for d in response.devices]


def test_a_by_id_match_keeps_its_name_inside_and_grants_the_resolved_tty(host: FakeHost, tmp_path: Path) -> None:
    two_sticks(host)
    plugin = ConfiguredPlugin(resource(f'name: example.com/serial\nglob: {{paths: ["{BY_ID}/*"]}}'), host.root)
    assert [d.id for d in plugin.devices()] == ["ttyUSB0", "ttyUSB1"]  # IDs still name the node
    response = asyncio.run(allocate(plugin, tmp_path, "ttyUSB1", "ttyUSB0"))
    assert nodes(response) == [(CP2102, "/dev/ttyUSB0"), (FTDI, "/dev/ttyUSB1")]  # merged in ID order


def test_one_node_matched_twice_is_one_device_named_by_the_first_pattern(host: FakeHost) -> None:
    two_sticks(host)
    config = resource(f'name: example.com/serial\nglob: {{paths: ["{BY_ID}/*", "/dev/ttyUSB*"]}}')
    plugin = ConfiguredPlugin(config, host.root)
    assert [(d.id, [(n.container_path, n.host_path) for n in d.grant.devices]) for d in plugin.devices()] == [
        ("ttyUSB0", [(CP2102, "/dev/ttyUSB0")]),
        ("ttyUSB1", [(FTDI, "/dev/ttyUSB1")]),
    ]
    swapped = ConfiguredPlugin(
        resource(f'name: example.com/serial\nglob: {{paths: ["/dev/ttyUSB*", "{BY_ID}/*"]}}'), host.root
    )
    assert [n.container_path for d in swapped.devices() for n in d.grant.devices] == ["/dev/ttyUSB0", "/dev/ttyUSB1"]


def test_a_static_path_that_is_a_symlink_keeps_its_name(host: FakeHost) -> None:
    host.device_node("/dev/ttyACM0")
    host.symlink("/dev/zigbee-stick", "ttyACM0")
    plugin = ConfiguredPlugin(
        resource("name: example.com/zigbee\nstatic: {count: 1, paths: [/dev/zigbee-stick]}"), host.root
    )
    (device,) = plugin.devices()
    assert [(n.container_path, n.host_path) for n in device.grant.devices] == [("/dev/zigbee-stick", "/dev/ttyACM0")]


def test_index_counts_the_devices_of_one_container_in_request_order(host: FakeHost, tmp_path: Path) -> None:
    two_sticks(host)
    config = resource(
        f'name: example.com/serial\nglob: {{paths: ["{BY_ID}/*"]}}',
        container_path="/dev/serial{index}",
        env={"SERIAL_IDS": "{ids}", "SERIAL_PATHS": "{container_paths}"},
    )
    plugin = ConfiguredPlugin(config, host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "ttyUSB1", "ttyUSB0"))
    assert nodes(response) == [("/dev/serial0", "/dev/ttyUSB1"), ("/dev/serial1", "/dev/ttyUSB0")]
    assert dict(response.envs) == {"SERIAL_IDS": "ttyUSB1,ttyUSB0", "SERIAL_PATHS": "/dev/serial0,/dev/serial1"}
    alone = asyncio.run(allocate(plugin, tmp_path, "ttyUSB0"))
    assert nodes(alone) == [("/dev/serial0", "/dev/ttyUSB0")]  # each container counts from 0


def test_name_and_path_fields_and_mounts_that_follow_the_device(host: FakeHost, tmp_path: Path) -> None:
    two_sticks(host)
    host.write("/opt/calibration/data.bin")
    config = resource(
        f'name: example.com/serial\nglob: {{paths: ["{BY_ID}/*"]}}',
        container_path="/dev/sticks/{name}",
        mounts=[
            {"host_path": "/opt/calibration", "container_path": "/etc/calibration/{name}", "read_only": True},
            {"host_path": "/opt/calibration", "container_path": "/srv{path}"},
        ],
    )
    plugin = ConfiguredPlugin(config, host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "ttyUSB0", "ttyUSB1"))
    ftdi, cp2102 = Path(FTDI).name, Path(CP2102).name
    assert nodes(response) == [(f"/dev/sticks/{cp2102}", "/dev/ttyUSB0"), (f"/dev/sticks/{ftdi}", "/dev/ttyUSB1")]
    assert [(m.container_path, m.host_path, m.read_only) for m in response.mounts] == [
        (f"/etc/calibration/{cp2102}", "/opt/calibration", True),
        (f"/srv{CP2102}", "/opt/calibration", False),
        (f"/etc/calibration/{ftdi}", "/opt/calibration", True),
        (f"/srv{FTDI}", "/opt/calibration", False),
    ]


def test_two_nodes_at_one_container_path_fail_the_allocation_not_hide_a_device(host: FakeHost, tmp_path: Path) -> None:
    host.device_node("/dev/left/sensor")
    host.device_node("/dev/right/sensor")
    config = resource('name: example.com/sensor\nglob: {paths: ["/dev/*/sensor"]}', container_path="/dev/{name}")
    plugin = ConfiguredPlugin(config, host.root)
    ids = [d.id for d in plugin.devices()]
    assert ids == ["left_sensor", "right_sensor"]
    with pytest.raises(aio.AioRpcError) as info:
        asyncio.run(allocate(plugin, tmp_path, *ids))
    assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.details() == "container_path /dev/sensor would hold both /dev/left/sensor and /dev/right/sensor"
    assert nodes(asyncio.run(allocate(plugin, tmp_path, "right_sensor"))) == [("/dev/sensor", "/dev/right/sensor")]


def test_a_vfio_device_keeps_each_node_path(host: FakeHost) -> None:
    populate(host)
    plugin = ConfiguredPlugin(resource('name: example.com/fpga\npci: {vendor: "10ee", vfio: true}'), host.root)
    grant = plugin.allocate(plugin.devices()[:1])
    assert [(d.container_path, d.host_path) for d in grant.devices] == [
        ("/dev/vfio/41", "/dev/vfio/41"),
        ("/dev/vfio/vfio", "/dev/vfio/vfio"),
    ]


def test_a_group_of_several_nodes_ignores_container_path(host: FakeHost) -> None:
    host.device_node("/dev/card0")
    host.device_node("/dev/renderD128")
    config = resource(
        'name: example.com/gpu\nglob: {paths: ["/dev/card0", "/dev/renderD128"], group: true}',
        container_path="/dev/gpu{index}",
    )
    plugin = ConfiguredPlugin(config, host.root)
    grant = plugin.allocate(plugin.devices())
    assert [(d.container_path, d.host_path) for d in grant.devices] == [
        ("/dev/card0", "/dev/card0"),
        ("/dev/renderD128", "/dev/renderD128"),
    ]


# -- per-device env fields --------------------------------------------------------------------
PER_DEVICE_ENV = {
    "IDS": "{ids}",
    "SERIALS": "{serials}",
    "VENDORS": "{vendors}",
    "PRODUCTS": "{products}",
    "PCI": "{pci_addresses}",
    "NUMA": "{numa_nodes}",
    "INSIDE": "{container_paths}",
}


def test_env_fields_of_pci_devices_and_the_sriov_and_kubevirt_conventions(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    host.pci_device("0000:d8:00.0", "10ee", "903f", "120000", numa_node=-1, iommu_group=44, driver="vfio-pci")
    env = {
        **PER_DEVICE_ENV,
        "PCIDEVICE_EXAMPLE_COM_FPGA": "{pci_addresses}",
        "PCI_RESOURCE_EXAMPLE_COM_FPGA": "{pci_addresses}",
    }
    config = resource('name: example.com/fpga\npci: {vendor: "10ee", vfio: true}', replicas=2, env=env)
    plugin = ConfiguredPlugin(config, host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "0000:d8:00.0::1", "0000:3b:00.0::0", "0000:d8:00.0::0"))
    addresses = "0000:d8:00.0,0000:3b:00.0,0000:d8:00.0"  # one entry per ID, repeats kept
    assert dict(response.envs) == {
        "IDS": "0000:d8:00.0::1,0000:3b:00.0::0,0000:d8:00.0::0",
        "SERIALS": ",,",
        "VENDORS": "10ee,10ee,10ee",
        "PRODUCTS": "903f,903f,903f",
        "PCI": addresses,
        "NUMA": ",1,",  # 0000:d8:00.0 has no NUMA node
        "INSIDE": "/dev/vfio/44,/dev/vfio/41,/dev/vfio/44",
        "PCIDEVICE_EXAMPLE_COM_FPGA": addresses,
        "PCI_RESOURCE_EXAMPLE_COM_FPGA": addresses,
    }


def test_env_fields_of_usb_devices(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    host.usb_device(2, 3, "1a6e", "089a", port="2-1")  # no serial
    config = resource('name: example.com/coral\nusb: {vendor: "1a6e"}', env=PER_DEVICE_ENV)
    plugin = ConfiguredPlugin(config, host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "usb-2-1", "usb-1-2"))
    assert dict(response.envs) == {
        "IDS": "usb-2-1,usb-1-2",
        "SERIALS": ",coral-a",
        "VENDORS": "1a6e,1a6e",
        "PRODUCTS": "089a,089a",
        "PCI": ",",
        "NUMA": ",",
        "INSIDE": "/dev/bus/usb/002/003,/dev/bus/usb/001/004",
    }


def test_unknown_env_fields_are_still_refused() -> None:
    with pytest.raises(ValidationError, match=r"unknown field\(s\) devlink; known: container_paths, count"):
        resource("name: a.com/x\nstatic: {count: 1}", env={"X": "{devlink}"})


# -- validation at start-up -------------------------------------------------------------------
def refusal(text: str, tmp_path: Path) -> str:
    """``kubedevice discover`` on a config: one line on stderr, exit code 2."""
    (tmp_path / "root").mkdir(exist_ok=True)
    config = tmp_path / "config.yaml"
    config.write_text(f"host_root: {tmp_path / 'root'}\nresources:\n" + text)
    result = runner.invoke(app, ["--config", str(config)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def test_a_fixed_container_path_for_a_glob_of_several_devices_is_one_line_exit_2(tmp_path: Path) -> None:
    line = refusal(
        '  - name: example.com/zigbee\n    glob: {paths: ["/dev/ttyACM*"]}\n    container_path: /dev/zigbee\n',
        tmp_path,
    )
    assert line == (
        f"kubedevice: {tmp_path / 'config.yaml'}:5:21: resources[0].container_path: container_path '/dev/zigbee' "
        "has no per-device field ({path}, {name} or {index}) but the glob can match several devices (only a glob "
        "of one literal path yields one): two devices in one container would need the same path"
    )


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ('static: {count: 2, paths: ["/dev/ttyACM0"]}', "static has count 2"),
        ('static: {count: 1, paths: ["/dev/a", "/dev/b"]}', "this static device grants 2 paths"),
        ('usb: {vendor: "10c4", product: "ea60"}', "usb without a serial can match several devices"),
        ('pci: {vendor: "10ee", vfio: true}', "pci devices have none, or with vfio two"),
        ('glob: {paths: ["/dev/ttyACM0", "/dev/ttyACM1"]}', "the glob can match several devices"),
    ],
)
def test_a_fixed_container_path_is_refused_where_several_devices_may_come(
    source: str, fragment: str, tmp_path: Path
) -> None:
    line = refusal(f"  - name: example.com/zigbee\n    {source}\n    container_path: /dev/zigbee\n", tmp_path)
    assert "container_path" in line and fragment in line


@pytest.mark.parametrize(
    "source",
    [
        'glob: {paths: ["/dev/serial/by-id/usb-ITead_Sonoff_Zigbee_3.0-if00-port0"]}',
        'static: {count: 1, paths: ["/dev/ttyACM0"]}',
        'usb: {vendor: "10c4", product: "ea60", serial: "c0ffee"}',
    ],
)
def test_a_fixed_container_path_is_accepted_where_one_device_comes(source: str, tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"host_root: {tmp_path / 'root'}\nresources:\n  - name: example.com/zigbee\n    {source}\n"
        "    container_path: /dev/zigbee\n"
    )
    result = runner.invoke(app, ["--config", str(config), "--json"])
    assert result.exit_code == 0, result.output


def test_a_fixed_container_path_reaches_the_container(host: FakeHost, tmp_path: Path) -> None:
    host.device_node("/dev/ttyACM0")
    host.symlink("/dev/serial/by-id/usb-ITead_Sonoff-if00", "../../ttyACM0")
    config = resource(
        'name: example.com/zigbee\nglob: {paths: ["/dev/serial/by-id/usb-ITead_Sonoff-if00"]}',
        container_path="/dev/zigbee",
    )
    response = asyncio.run(allocate(ConfiguredPlugin(config, host.root), tmp_path, "ttyACM0"))
    assert nodes(response) == [("/dev/zigbee", "/dev/ttyACM0")]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("container_path: dev/serial{index}", "must be absolute"),
        ("container_path: '{name}'", "must be absolute"),
        ("container_path: /dev/{serial}", "unknown field(s) serial; known: devlink, index, name, path"),
        ("container_path: /dev/{devlink}", "uses {devlink}, which only udev devices have"),
        ("container_path: '/dev/x{path:d}'", "template '/dev/x{path:d}'"),
        ("container_path: /dev/../x{index}", "must not contain '..'"),
        ("mounts: [{host_path: /opt/fw, container_path: '/fw/{serial}'}]", "unknown field(s) serial"),
        ("mounts: [{host_path: /opt/fw, container_path: '/fw/{index}'}]\n    cdi: {}", "cdi cannot express"),
        ("container_path: /dev/serial{index}\n    cdi: {}", "container_path '/dev/serial{index}' uses {index}"),
    ],
)
def test_bad_templates_are_refused_naming_the_field(extra: str, fragment: str, tmp_path: Path) -> None:
    line = refusal(f'  - name: example.com/serial\n    glob: {{paths: ["/dev/ttyUSB*"]}}\n    {extra}\n', tmp_path)
    assert "container_path" in line and fragment in line


def test_pci_mounts_may_count_but_not_name_devices() -> None:
    fpga = 'name: a.com/fpga\npci: {vendor: "10ee", vfio: true}'
    resource(fpga, mounts=[{"host_path": "/opt/fw", "container_path": "/fw/{index}"}])
    with pytest.raises(ValidationError, match="pci devices have no matched path"):
        resource(fpga, mounts=[{"host_path": "/opt/fw", "container_path": "/fw/{name}"}])


# -- discover and CDI ---------------------------------------------------------------------------
def test_discover_shows_the_container_paths(host: FakeHost, tmp_path: Path) -> None:
    two_sticks(host)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"resources:\n  - name: example.com/serial\n    glob: {{paths: ['{BY_ID}/*']}}\n"
        "  - name: example.com/named\n    glob: {paths: ['/dev/ttyUSB*']}\n    container_path: /dev/named/{name}\n"
    )
    result = runner.invoke(app, ["--config", str(config), "--host-root", str(host.root), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r["devices"] for r in json.loads(result.stdout)["resources"]}
    assert [(d["hostPaths"], d["containerPaths"]) for d in rows["example.com/serial"]] == [
        (["/dev/ttyUSB0"], [CP2102]),
        (["/dev/ttyUSB1"], [FTDI]),
    ]
    assert [d["containerPaths"] for d in rows["example.com/named"]] == [["/dev/named/ttyUSB0"], ["/dev/named/ttyUSB1"]]
    table = runner.invoke(app, ["--config", str(config), "--host-root", str(host.root)], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and CP2102 in table.stdout and "/dev/named/ttyUSB1" in table.stdout


@pytest.mark.parametrize("container_path", [None, "/dev/sticks/{name}"])
def test_cdi_specs_place_nodes_where_the_device_plugin_answer_does(
    host: FakeHost, tmp_path: Path, container_path: str | None
) -> None:
    two_sticks(host)
    host.write("/opt/calibration/data.bin")
    text = f"""
name: example.com/serial
glob: {{paths: ["{BY_ID}/*"]}}
permissions: rw
mounts: [{{host_path: /opt/calibration, container_path: "/etc/calibration/{{name}}", read_only: true}}]
"""
    data = yaml.safe_load(text) | ({"container_path": container_path} if container_path else {})
    plain = ConfiguredPlugin(ResourceConfig.model_validate(data), host.root)
    with_cdi = ConfiguredPlugin(ResourceConfig.model_validate(data | {"cdi": {}}), host.root, tmp_path / "cdi")
    for device in plain.devices():
        answer = plain.allocate([device])
        spec = json.loads((tmp_path / "cdi" / f"kubedevice-example.com-serial-{device.id}.json").read_text())
        edits = spec["devices"][0]["containerEdits"]
        assert edits["deviceNodes"] == [
            {"path": d.container_path, "hostPath": d.host_path, "permissions": d.permissions} for d in answer.devices
        ]
        assert [(m["containerPath"], m["hostPath"]) for m in edits["mounts"]] == [
            (m.container_path, m.host_path) for m in answer.mounts
        ]
        assert edits["deviceNodes"][0]["hostPath"].startswith("/dev/ttyUSB")
        assert edits["deviceNodes"][0]["path"] != edits["deviceNodes"][0]["hostPath"]
    assert [d.grant.cdi_devices for d in with_cdi.devices()] == [
        ("example.com/serial=ttyUSB0",),
        ("example.com/serial=ttyUSB1",),
    ]


def test_a_device_gone_since_it_was_listed_fails_the_allocation(host: FakeHost) -> None:
    two_sticks(host)
    config = resource(f'name: example.com/serial\nglob: {{paths: ["{BY_ID}/*"]}}', container_path="/dev/serial{index}")
    plugin = ConfiguredPlugin(config, host.root)
    listed = plugin.devices()
    host.remove(FTDI)
    plugin.rescan()
    with pytest.raises(RpcFailure) as info:
        plugin.allocate(listed)  # a caller holding the old list (a DRA claim prepared late)
    assert (info.value.code, str(info.value)) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "devices no longer present: ttyUSB1",
    )
