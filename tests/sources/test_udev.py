"""``udev:``: device nodes by udev's database under the host root (subsystem from sysfs, properties
as shell patterns), ``{devlink}`` preferring by-id over by-path, and inotify on ``/run/udev/data``
as udev writes it (temp file renamed into place, deleted on remove). Allocate goes over real gRPC."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from kubedevice.api import pb
from kubedevice.sources.cli import discover
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.udev import parse_entry
from kubedevice.testing import FakeHost

from .conftest import resource
from .test_configured import listed, served, until
from .test_container_path import allocate, nodes, refusal

app = typer.Typer()
app.command()(discover)
runner = CliRunner()

FTDI = 'name: example.com/ftdi\nudev: {subsystem: tty, match: {ID_VENDOR_ID: "0403", ID_SERIAL_SHORT: "A10K1*"}}'
BY_ID = "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_{}-if00-port0"
BY_PATH = "/dev/serial/by-path/pci-0000:00:14.0-usb-0:{}:1.0-port0"


def ftdi(host: FakeHost, port: str, serial: str, tty: str, *, link_order: str = "path-first") -> str:
    """An FTDI adapter with its tty and udev's entry as udev 25x writes it (by-path listed first)."""
    name = host.usb_device(1, int(port.split("-")[1]) + 10, "0403", "6001", port=port, serial=serial)
    node = host.usb_class_node(name, tty)
    links = [BY_PATH.format(port.split("-")[1]), BY_ID.format(serial)]
    host.udev_entry(
        node,
        links=links if link_order == "path-first" else links[::-1],
        properties={
            "ID_VENDOR_ID": "0403",
            "ID_MODEL_ID": "6001",
            "ID_SERIAL_SHORT": serial,
            "ID_PATH": f"pci-0000:00:14.0-usb-0:{port.split('-')[1]}:1.0",
            "ID_USB_DRIVER": "ftdi_sio",
        },
    )
    return node


def node_set(host: FakeHost) -> None:
    ftdi(host, "1-1", "A10K1ABC", "ttyUSB0")
    ftdi(host, "1-2", "A10K1XYZ", "ttyUSB1", link_order="id-first")
    ftdi(host, "1-3", "B2000001", "ttyUSB2")  # same vendor, serial outside the pattern
    pad = host.usb_device(1, 30, "0403", "6001", port="1-9")  # an FTDI-based HID gadget: not a tty
    hidraw = host.usb_class_node(pad, "hidraw0")
    host.udev_entry(hidraw, properties={"ID_VENDOR_ID": "0403", "ID_SERIAL_SHORT": "A10K1P"})


def test_entry_format_as_systemd_writes_and_reads_it() -> None:
    text = (
        "S:serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0\nS:serial/by-id/usb-FTDI_A10K1-if00-port0\n"
        "W:3\nL:0\nI:4180211\nE:ID_VENDOR_ID=0403\nE:ID_MODEL_FROM_DATABASE=FT232 Serial (UART) IC\n"
        "E:ID_X=a=b\nE:=nameless\nG:systemd\nQ:systemd\nV:1\nX\n:no key\nSS:bad key\nS:../../etc/passwd\nN:ttyUSB0"
    )
    links, properties, legacy = parse_entry(text)
    assert links == [
        "/dev/serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0",
        "/dev/serial/by-id/usb-FTDI_A10K1-if00-port0",
    ]
    assert properties == {
        "ID_VENDOR_ID": "0403",
        "ID_MODEL_FROM_DATABASE": "FT232 Serial (UART) IC",
        "ID_X": "a=b",
    }
    assert legacy == "ttyUSB0"


def test_fake_host_writes_the_entry_udev_would(host: FakeHost) -> None:
    node = ftdi(host, "1-1", "A10K1ABC", "ttyUSB0")
    assert host.path("/run/udev/data/c188:0").read_text() == (
        "S:serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0\n"
        "S:serial/by-id/usb-FTDI_FT232R_USB_UART_A10K1ABC-if00-port0\n"
        "I:4180211\nE:ID_VENDOR_ID=0403\nE:ID_MODEL_ID=6001\nE:ID_SERIAL_SHORT=A10K1ABC\n"
        "E:ID_PATH=pci-0000:00:14.0-usb-0:1:1.0\nE:ID_USB_DRIVER=ftdi_sio\nG:systemd\nQ:systemd\nV:1\n"
    )
    link = host.path(BY_ID.format("A10K1ABC"))
    assert str(link.readlink()) == "../../ttyUSB0" and link.resolve() == host.path(node).resolve()
    assert (host.path("/sys/dev/char/188:0").resolve() / "subsystem").resolve().name == "tty"


def test_patterns_on_properties_and_subsystem_select_the_nodes(host: FakeHost, tmp_path: Path) -> None:
    node_set(host)
    plugin = ConfiguredPlugin(resource(FTDI), host.root)
    assert [d.id for d in plugin.devices()] == ["ttyUSB0", "ttyUSB1"]
    response = asyncio.run(allocate(plugin, tmp_path, "ttyUSB1"))
    assert nodes(response) == [("/dev/ttyUSB1", "/dev/ttyUSB1")]  # the node, unless container_path says
    every_ftdi = ConfiguredPlugin(resource('name: a.com/f\nudev: {match: {ID_VENDOR_ID: "04?3"}}'), host.root)
    assert [d.id for d in every_ftdi.devices()] == ["hidraw0", "ttyUSB0", "ttyUSB1", "ttyUSB2"]
    hid = "name: a.com/f\nudev: {subsystem: 'hid*', match: {DEVNAME: hidraw0}}"
    by_uevent = ConfiguredPlugin(resource(hid), host.root)
    assert [d.id for d in by_uevent.devices()] == ["hidraw0"]  # the uevent's keys and SUBSYSTEM match too
    exact = ConfiguredPlugin(resource('name: a.com/f\nudev: {match: {ID_SERIAL_SHORT: "a10k1abc"}}'), host.root)
    assert exact.devices() == []  # patterns are case-sensitive, as udev's values are


def test_devlink_prefers_by_id_whatever_the_file_order(host: FakeHost, tmp_path: Path) -> None:
    node_set(host)
    config = resource(FTDI, container_path="{devlink}", env={"LINKS": "{devlinks}", "IDS": "{ids}"})
    response = asyncio.run(allocate(ConfiguredPlugin(config, host.root), tmp_path, "ttyUSB1", "ttyUSB0"))
    assert nodes(response) == [
        (BY_ID.format("A10K1XYZ"), "/dev/ttyUSB1"),
        (BY_ID.format("A10K1ABC"), "/dev/ttyUSB0"),
    ]
    assert dict(response.envs) == {
        "LINKS": f"{BY_ID.format('A10K1XYZ')},{BY_ID.format('A10K1ABC')}",
        "IDS": "ttyUSB1,ttyUSB0",
    }


def test_without_by_id_the_first_by_path_then_any_link_then_the_node(host: FakeHost, tmp_path: Path) -> None:
    for index, links in enumerate([["/dev/gps", BY_PATH.format(7)], ["/dev/gps2", "/dev/other"], []]):
        name = host.usb_device(2, 4 + index, "1546", "01a8", port=f"2-{index + 1}")
        node = host.usb_class_node(name, f"ttyACM{index}")
        host.udev_entry(node, links=links, properties={"ID_VENDOR_ID": "1546"})
    config = resource('name: a.com/gps\nudev: {match: {ID_VENDOR_ID: "1546"}}', container_path="/gps{devlink}")
    plugin = ConfiguredPlugin(config, host.root)
    assert [(d.id, d.grant.devices[0].container_path) for d in plugin.devices()] == [
        ("ttyACM0", f"/gps{BY_PATH.format(7)}"),
        ("ttyACM1", "/gps/dev/gps2"),
        ("ttyACM2", "/gps/dev/ttyACM2"),
    ]


def test_a_stale_entry_or_a_missing_node_is_skipped(host: FakeHost) -> None:
    node = ftdi(host, "1-1", "A10K1ABC", "ttyUSB0")
    host.remove(node)
    assert ConfiguredPlugin(resource(FTDI), host.root).devices() == []
    host.device_node(node)
    host.remove("/sys/dev/char/188:0")  # the kernel removed the device, udev has not yet
    assert ConfiguredPlugin(resource(FTDI), host.root).devices() == []


def test_udev_changes_reach_the_stream_through_inotify_only(host: FakeHost, tmp_path: Path) -> None:
    """Health checks every hour: only inotify on the database can bring these changes in time."""
    ftdi(host, "1-1", "A10K1ABC", "ttyUSB0")
    plugin = ConfiguredPlugin(resource(FTDI, health={"interval_seconds": 3600}), host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            stream = stub.ListAndWatch(pb.Empty())
            assert await listed(stream) == {"ttyUSB0": "Healthy"}
            node = ftdi(host, "1-2", "A10K1XYZ", "ttyUSB1")  # a new entry renamed into place
            await until(stream, {"ttyUSB0": "Healthy", "ttyUSB1": "Healthy"})
            host.udev_entry(node, properties={"ID_VENDOR_ID": "0403", "ID_SERIAL_SHORT": "Q0000000"})  # changed
            await until(stream, {"ttyUSB0": "Healthy"})
            host.remove_udev_entry("c188:0")  # udev's remove deletes the entry
            await until(stream, {})

    asyncio.run(main())


def test_a_database_directory_created_later_is_watched(host: FakeHost, tmp_path: Path) -> None:
    plugin = ConfiguredPlugin(resource(FTDI, health={"interval_seconds": 3600}), host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            stream = stub.ListAndWatch(pb.Empty())
            assert await listed(stream) == {}
            ftdi(host, "1-1", "A10K1ABC", "ttyUSB0")  # /run/udev/data did not exist (udev started late)
            await until(stream, {"ttyUSB0": "Healthy"})

    asyncio.run(main())


# -- config ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("udev: {}", "resources[0].udev: set subsystem or match (or both)"),
        ("udev: {match: {ID_VENDOR_ID: 0403}}", "resources[0].udev.match.ID_VENDOR_ID: 259 must be a quoted string"),
        ("udev: {match: {'ID-X': a}}", "invalid udev property names: 'ID-X'"),
        ("udev: {subsystem: ''}", "resources[0].udev.subsystem: String should have at least 1 character"),
        ("udev: {subsystem: tty, vendor: x}", "resources[0].udev: unknown key 'vendor' (valid keys: subsystem, match)"),
    ],
)
def test_bad_udev_config_is_one_line_naming_the_field(source: str, fragment: str, tmp_path: Path) -> None:
    line = refusal(f"  - name: a.com/x\n    {source}\n", tmp_path)
    assert fragment in line, line


def test_a_fixed_container_path_for_udev_and_devlink_elsewhere_are_refused(tmp_path: Path) -> None:
    line = refusal("  - name: a.com/x\n    udev: {subsystem: tty}\n    container_path: /dev/zigbee\n", tmp_path)
    assert "has no per-device field ({path}, {name}, {index} or {devlink}) but udev can match several" in line
    line = refusal("  - name: a.com/x\n    glob: {paths: [/dev/ttyUSB*]}\n    container_path: '{devlink}'\n", tmp_path)
    assert "container_path '{devlink}' uses {devlink}, which only udev devices have" in line
    with pytest.raises(ValidationError, match="only udev devices have"):
        resource("name: a.com/x\nglob: {paths: [/dev/x]}", mounts=[{"host_path": "/x", "container_path": "{devlink}"}])


def test_devlinks_of_other_sources_are_empty_entries(host: FakeHost, tmp_path: Path) -> None:
    host.device_node("/dev/ttyUSB0")
    host.device_node("/dev/ttyUSB1")
    config = resource("name: a.com/s\nglob: {paths: [/dev/ttyUSB*]}", env={"LINKS": "{devlinks}"})
    response = asyncio.run(allocate(ConfiguredPlugin(config, host.root), tmp_path, "ttyUSB0", "ttyUSB1"))
    assert dict(response.envs) == {"LINKS": ","}


def test_discover_shows_devlinks_and_properties(host: FakeHost, tmp_path: Path) -> None:
    node_set(host)
    config = tmp_path / "config.yaml"
    config.write_text(f"resources:\n  - {FTDI.replace(chr(10), chr(10) + '    ')}\n    container_path: '{{devlink}}'\n")
    result = runner.invoke(app, ["--config", str(config), "--host-root", str(host.root), "--json"])
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)["resources"][0]["devices"][0]
    assert first["id"] == "ttyUSB0" and first["subsystem"] == "tty"
    assert first["devlinks"] == [BY_ID.format("A10K1ABC"), BY_PATH.format(1)]
    assert first["containerPaths"] == [BY_ID.format("A10K1ABC")]
    properties = first["properties"]
    assert properties["DEVNAME"] == "ttyUSB0" and properties["SUBSYSTEM"] == "tty"
    assert properties["ID_SERIAL_SHORT"] == "A10K1ABC" and properties["MAJOR"] == "188"
    assert properties["DEVPATH"].endswith("/1-1:1.0/ttyUSB0/tty/ttyUSB0")
    table = runner.invoke(app, ["--config", str(config), "--host-root", str(host.root)], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert BY_PATH.format(1) in table.stdout and "ID_SERIAL_SHORT=A10K1XYZ" in table.stdout
