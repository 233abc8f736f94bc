"""``usb.nodes``: a USB device by vendor:product grants its class nodes (ttys, video, hidraw, input
events, sound), found below its interfaces in a fake sysfs laid out as the kernel does; a tty that
appears after its device reaches the grant and the ListAndWatch stream. Allocate goes over real gRPC."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path

import pytest
import typer
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from kubedevice.api import pb
from kubedevice.sources.cli import discover
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.discovery import find
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

from .conftest import resource
from .test_configured import listed, served, until
from .test_container_path import allocate, nodes, refusal

app = typer.Typer()
app.command()(discover)
runner = CliRunner()

CP2102 = 'name: example.com/cp2102\nusb: {vendor: "10c4", product: "ea60", nodes: [tty]}'
MODEM = 'name: example.com/modem\nusb: {vendor: "2c7c", product: "0125", nodes: [tty]}'


def cp2102(host: FakeHost, port: str = "1-3", tty: str = "ttyUSB0", device: int = 5) -> str:
    name = host.usb_device(1, device, "10c4", "ea60", port=port, serial=f"cp-{port}")
    host.usb_class_node(name, tty)
    return name


def modem(host: FakeHost) -> str:
    """A Quectel LTE modem: three usb-serial ttys on interfaces 0-2 (as the option driver makes them)."""
    name = host.usb_device(2, 3, "2c7c", "0125", port="2-1")
    for interface in range(3):
        host.usb_class_node(name, f"ttyUSB{interface + 1}", interface=interface)
    return name


def test_a_cp2102_by_vendor_product_grants_its_tty(host: FakeHost, tmp_path: Path) -> None:
    cp2102(host)
    host.usb_device(1, 6, "10c4", "ea61", port="1-4")  # same vendor, other product: ignored
    plugin = ConfiguredPlugin(resource(CP2102), host.root)
    assert [d.id for d in plugin.devices()] == ["usb-1-3"]
    response = asyncio.run(allocate(plugin, tmp_path, "usb-1-3"))
    assert nodes(response) == [("/dev/ttyUSB0", "/dev/ttyUSB0")]  # no /dev/bus/usb node: not asked for


def test_a_cdc_acm_tty_sits_directly_below_its_interface(host: FakeHost) -> None:
    name = host.usb_device(1, 9, "1cf1", "0030", port="1-5")  # a Zigbee stick with cdc_acm
    host.usb_class_node(name, "ttyACM0")
    assert host.path(f"/sys/bus/usb/devices/{name}:1.0/tty/ttyACM0/uevent").read_text().endswith("DEVNAME=ttyACM0\n")
    plugin = ConfiguredPlugin(resource('name: a.com/zigbee\nusb: {vendor: "1cf1", nodes: [tty]}'), host.root)
    assert [n.host_path for n in plugin.devices()[0].grant.devices] == ["/dev/ttyACM0"]


def test_a_modem_with_three_ttys_grants_all_three_and_no_other_device_s(host: FakeHost, tmp_path: Path) -> None:
    modem(host)
    cp2102(host)  # another device's tty must not be taken
    plugin = ConfiguredPlugin(resource(MODEM), host.root)
    response = asyncio.run(allocate(plugin, tmp_path, "usb-2-1"))
    assert nodes(response) == [(f"/dev/ttyUSB{i}", f"/dev/ttyUSB{i}") for i in (1, 2, 3)]


def test_bus_and_tty_grant_both_in_the_order_asked(host: FakeHost, tmp_path: Path) -> None:
    cp2102(host)
    for kinds, expected in [
        ("[bus, tty]", ["/dev/bus/usb/001/005", "/dev/ttyUSB0"]),
        ("[tty, bus]", ["/dev/ttyUSB0", "/dev/bus/usb/001/005"]),
        ("[bus]", ["/dev/bus/usb/001/005"]),
    ]:
        config = resource(f'name: a.com/cp\nusb: {{vendor: "10c4", nodes: {kinds}}}')
        response = asyncio.run(allocate(ConfiguredPlugin(config, host.root), tmp_path, "usb-1-3"))
        assert [host_path for _, host_path in nodes(response)] == expected, kinds
    default = resource('name: a.com/cp\nusb: {vendor: "10c4"}')
    assert default.usb is not None and default.usb.nodes == ["bus"]


def test_video_hidraw_input_events_and_sound_each_by_kind(host: FakeHost) -> None:
    cam = host.usb_device(3, 2, "046d", "0825", port="3-1")  # a webcam with a microphone and a button
    host.usb_class_node(cam, "video0")
    host.usb_class_node(cam, "video1")
    host.usb_class_node(cam, "input/event7")
    host.usb_class_node(cam, "snd/controlC1", interface=2)
    host.usb_class_node(cam, "snd/pcmC1D0c", interface=2)
    keyboard = host.usb_device(3, 3, "046d", "c31c", port="3-2")
    host.usb_class_node(keyboard, "hidraw0")
    event = host.usb_class_node(keyboard, "input/event3")
    # the same input device's legacy mouse node is not an event node: input grants events only
    input_dir = host.path("/sys/dev/char/13:67").resolve().parent.relative_to(host.root.resolve())
    host.class_device(f"/{input_dir.as_posix()}/mouse0", "input/mouse0", 13, 32, "input")
    granted = {}
    for kinds in ("[video]", "[input]", "[sound]", "[hidraw]", "[video, sound]"):
        plugin = ConfiguredPlugin(resource(f'name: a.com/x\nusb: {{vendor: "046d", nodes: {kinds}}}'), host.root)
        granted[kinds] = {d.id: [n.host_path for n in d.grant.devices] for d in plugin.devices()}
    assert event == "/dev/input/event3"
    assert granted == {
        "[video]": {"usb-3-1": ["/dev/video0", "/dev/video1"]},
        "[input]": {"usb-3-1": ["/dev/input/event7"], "usb-3-2": ["/dev/input/event3"]},
        "[sound]": {"usb-3-1": ["/dev/snd/controlC1", "/dev/snd/pcmC1D0c"]},
        "[hidraw]": {"usb-3-2": ["/dev/hidraw0"]},
        "[video, sound]": {"usb-3-1": ["/dev/video0", "/dev/video1", "/dev/snd/controlC1", "/dev/snd/pcmC1D0c"]},
    }


def test_a_hub_s_child_device_is_not_part_of_the_hub(host: FakeHost) -> None:
    hub = host.usb_device(1, 2, "05e3", "0608", port="1-1")
    host.usb_class_node(hub, "ttyUSB0")
    child_dir = host.path(f"/sys/bus/usb/devices/{hub}").resolve() / "1-1.2"  # the kernel nests it there
    child_dir.mkdir()
    (child_dir / "1-1.2:1.0" / "tty" / "ttyACM5").mkdir(parents=True)
    (child_dir / "1-1.2:1.0" / "tty" / "ttyACM5" / "uevent").write_text("DEVNAME=ttyACM5\n")
    host.device_node("/dev/ttyACM5")
    plugin = ConfiguredPlugin(resource('name: a.com/hub\nusb: {vendor: "05e3", nodes: [tty]}'), host.root)
    assert [n.host_path for n in plugin.devices()[0].grant.devices] == ["/dev/ttyUSB0"]


def test_a_tty_only_device_waits_for_its_tty_and_a_class_node_without_dev_entry_is_skipped(host: FakeHost) -> None:
    name = host.usb_device(1, 5, "10c4", "ea60", port="1-3")
    plugin = ConfiguredPlugin(resource(CP2102), host.root)
    assert plugin.devices() == []  # nothing to grant yet
    host.usb_class_node(name, "ttyUSB0", create_node=False)  # sysfs first; devtmpfs not yet
    plugin.rescan()
    assert plugin.devices() == []
    host.device_node("/dev/ttyUSB0")
    plugin.rescan()
    assert [d.id for d in plugin.devices()] == ["usb-1-3"]


def test_a_tty_bound_after_its_device_reaches_the_grant_and_the_stream(host: FakeHost, tmp_path: Path) -> None:
    """Hotplug through inotify only: health checks every hour, so no rescan loop could help."""
    name = host.usb_device(1, 5, "10c4", "ea60", port="1-3")
    health = {"interval_seconds": 3600}
    both = ConfiguredPlugin(
        resource('name: a.com/both\nusb: {vendor: "10c4", nodes: [bus, tty]}', health=health), host.root
    )
    tty_only = ConfiguredPlugin(resource(CP2102, health=health), host.root)

    async def main() -> None:
        async with served(both, tmp_path / "a") as stub, served(tty_only, tmp_path / "b") as stub_tty:
            stream = stub.ListAndWatch(pb.Empty())
            stream_tty = stub_tty.ListAndWatch(pb.Empty())
            assert await listed(stream) == {"usb-1-3": "Healthy"}
            assert await listed(stream_tty) == {}
            request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["usb-1-3"])])
            before = (await stub.Allocate(request)).container_responses[0]
            assert [d.host_path for d in before.devices] == ["/dev/bus/usb/001/005"]
            host.usb_class_node(name, "ttyUSB0")  # the cp210x driver binds
            assert await listed(stream) == {"usb-1-3": "Healthy"}  # same ID, new grant: sent again
            await until(stream_tty, {"usb-1-3": "Healthy"})
            after = (await stub.Allocate(request)).container_responses[0]
            assert [d.host_path for d in after.devices] == ["/dev/bus/usb/001/005", "/dev/ttyUSB0"]
            host.unplug_usb(name)
            await until(stream, {})
            await until(stream_tty, {})
            assert not host.path("/dev/ttyUSB0").exists()

    asyncio.run(main())


# -- config ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("nodes_yaml", "fragment"),
    [
        ("[serial]", "resources[0].usb.nodes[0]: Input should be 'bus', 'tty', 'video', 'hidraw', 'input' or 'sound'"),
        ("[tty, tty]", "config.yaml:4:40: resources[0].usb.nodes[1]: lists tty more than once"),
        ("[]", "resources[0].usb.nodes: List should have at least 1 item"),
    ],
)
def test_bad_nodes_are_one_line_naming_the_field(nodes_yaml: str, fragment: str, tmp_path: Path) -> None:
    line = refusal(f'  - name: a.com/x\n    usb: {{vendor: "10c4", nodes: {nodes_yaml}}}\n', tmp_path)
    assert fragment in line, line


@pytest.mark.parametrize("kinds", ["[bus, tty]", "[sound]", "[tty, video]"])
def test_container_path_is_refused_where_a_device_has_several_node_kinds(kinds: str, tmp_path: Path) -> None:
    usb = f'usb: {{vendor: "10c4", serial: "x", nodes: {kinds}}}'
    line = refusal(f"  - name: a.com/x\n    {usb}\n    container_path: /dev/x{{index}}\n", tmp_path)
    assert f"container_path applies to devices of one node; usb nodes {kinds} give each device several" in line


def test_container_path_renames_a_single_tty_and_leaves_a_modem_s_ttys_alone(host: FakeHost, tmp_path: Path) -> None:
    cp2102(host)
    modem(host)
    one = resource('name: a.com/cp\nusb: {vendor: "10c4", serial: "cp-1-3", nodes: [tty]}', container_path="/dev/radio")
    assert nodes(asyncio.run(allocate(ConfiguredPlugin(one, host.root), tmp_path, "usb-1-3"))) == [
        ("/dev/radio", "/dev/ttyUSB0")
    ]
    three = resource(MODEM, container_path="/dev/modem{index}")
    response = asyncio.run(allocate(ConfiguredPlugin(three, host.root), tmp_path, "usb-2-1"))
    assert nodes(response) == [(f"/dev/ttyUSB{i}", f"/dev/ttyUSB{i}") for i in (1, 2, 3)]


def test_unknown_node_kind_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        resource('name: a.com/x\nusb: {vendor: "10c4", nodes: [disk]}')


def test_discover_shows_each_node_with_its_kind(host: FakeHost, tmp_path: Path) -> None:
    modem(host)
    config = tmp_path / "config.yaml"
    config.write_text('resources:\n  - name: example.com/modem\n    usb: {vendor: "2c7c", nodes: [bus, tty]}\n')
    result = runner.invoke(app, ["--config", str(config), "--host-root", str(host.root), "--json"])
    assert result.exit_code == 0, result.output
    (device,) = json.loads(result.stdout)["resources"][0]["devices"]
    assert device["nodes"] == [
        {"kind": "bus", "path": "/dev/bus/usb/002/003"},
        {"kind": "tty", "path": "/dev/ttyUSB1"},
        {"kind": "tty", "path": "/dev/ttyUSB2"},
        {"kind": "tty", "path": "/dev/ttyUSB3"},
    ]
    assert device["hostPaths"] == device["containerPaths"] == [n["path"] for n in device["nodes"]]
    table = runner.invoke(app, ["--config", str(config), "--host-root", str(host.root)], env={"COLUMNS": "300"})
    assert table.exit_code == 0 and "tty:/dev/ttyUSB3" in table.stdout and "bus:/dev/bus/usb/002/003" in table.stdout


def test_discovery_while_class_nodes_come_and_go(host: FakeHost) -> None:
    """A thread plugs and unplugs adapters with ttys as the kernel does while discovery walks their
    interfaces: nothing escapes, the device that stays keeps exactly its own nodes."""
    cp2102(host, port="1-9", tty="ttyUSB9", device=9)
    config = resource('name: a.com/cp\nusb: {vendor: "10c4", nodes: [bus, tty]}')
    hostroot = HostRoot(host.root)
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            port = 2 + n % 4
            name = cp2102(host, port=f"1-{port}", tty=f"ttyUSB{port}", device=port)
            host.unplug_usb(name)
            n += 1

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        for _ in range(150):
            by_key = {f.key: f.host_paths for f in find(config, hostroot)}
            assert by_key["usb-1-9"] == ("/dev/bus/usb/001/009", "/dev/ttyUSB9")
            assert all(paths[1:] in ((), (f"/dev/ttyUSB{k[-1]}",)) for k, paths in by_key.items()), by_key
    finally:
        stop.set()
        worker.join(10)
    assert {f.key for f in find(config, hostroot)} == {"usb-1-9"}


@pytest.mark.parametrize("section", ["## USB by what users know", "## udev properties"])
def test_the_docs_configs_of_the_section_load(section: str) -> None:
    """The configs docs/sources.md offers to copy are valid as written."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "sources.md").read_text()
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", body, re.DOTALL)
    loaded = [ResourceConfig.model_validate(r) for r in yaml.safe_load(block)["resources"]]
    assert {r.source_kind for r in loaded} == {"usb" if section.startswith("## USB") else "udev"}
