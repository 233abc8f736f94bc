"""``pci.nodes``: a PCI function on its host driver grants its own nodes (DRM card and render, accel,
another driver's class device, NVIDIA's minor), ``shared_paths`` once per container. Proven on fake
hosts laid out as the kernel lays real machines out (``kubedevice.testing.hosts``), through discovery,
the kubelet simulator admitting pods over real gRPC, hotplug through inotify, and ``kubedevice discover``."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.plugin.manager import Manager
from kubedevice.sources.cli import discover
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.discovery import find
from kubedevice.sources.hostroot import HostRoot
from kubedevice.sources.registry import SOURCES
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost, hosts

from .conftest import resource
from .test_container_path import refusal

TIMEOUT = 10.0
AMD = 'name: amd.com/gpu\npci: {vendor: "1002", class: "03", nodes: [card, render]}\nshared_paths: [/dev/kfd]'
NVIDIA = (
    'name: nvidia.com/gpu\npci: {vendor: "10de", nodes: [nvidia]}\n'
    "shared_paths: [/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]"
)
#: Each machine with the config that selects its functions.
MACHINES: dict[str, tuple[Callable[[FakeHost], hosts.Machine], str]] = {
    "amd-instinct": (hosts.amd_instinct_node, AMD),
    "amd-radeon": (hosts.amd_radeon_workstation, 'name: amd.com/gpu\npci: {vendor: "1002", nodes: [card, render]}'),
    "intel-i915": (hosts.intel_flex_node, 'name: intel.com/gpu\npci: {vendor: "8086", nodes: [card, render]}'),
    "intel-npu": (hosts.intel_npu_laptop, 'name: intel.com/npu\npci: {vendor: "8086", class: "12", nodes: [accel]}'),
    "amd-npu": (hosts.amd_npu_laptop, 'name: amd.com/npu\npci: {vendor: "1022", nodes: [accel]}'),
    "nvidia": (hosts.nvidia_node, NVIDIA),
    "coral": (hosts.coral_pcie, 'name: coral.ai/tpu\npci: {vendor: "1ac1", nodes: [all]}'),
}


def build(host: FakeHost, machine: str) -> tuple[hosts.Machine, ResourceConfig]:
    builder, text = MACHINES[machine]
    return builder(host), resource(text)


def found_nodes(host: FakeHost, config: ResourceConfig) -> dict[str, tuple[tuple[str, ...], tuple[int, ...]]]:
    return {f.key: (f.host_paths, f.numa_nodes) for f in find(config, HostRoot(host.root))}


@pytest.mark.parametrize("machine", MACHINES)
def test_each_function_is_found_with_exactly_its_own_nodes(host: FakeHost, machine: str) -> None:
    built, config = build(host, machine)
    expected = {f.address: (f.nodes, (f.numa_node,) if f.numa_node >= 0 else ()) for f in built.functions}
    assert found_nodes(host, config) == expected
    assert not set(built.decoys) & set(expected)


def test_card_numbers_follow_probe_order_and_each_gpu_keeps_its_own(host: FakeHost) -> None:
    """card0 is the BMC's; the GPUs' numbers do not follow their addresses, so only the walk below
    each function can pair them, and a walk below a switch port finds nothing of its own."""
    hosts.amd_instinct_node(host)
    found = found_nodes(host, resource('name: a.com/gpu\npci: {vendor: "1002", nodes: [card, render]}'))
    assert found == {
        "0000:05:00.0": (("/dev/dri/card2", "/dev/dri/renderD129"), (0,)),
        "0000:0a:00.0": (("/dev/dri/card4", "/dev/dri/renderD131"), (0,)),
        "0000:85:00.0": (("/dev/dri/card1", "/dev/dri/renderD128"), (1,)),
        "0000:8a:00.0": (("/dev/dri/card3", "/dev/dri/renderD130"), (1,)),
    }  # no class filter: the switch ports (same vendor) are passed over, not granted the GPUs' nodes


def test_switch_ports_are_passed_over_without_a_warning(host: FakeHost, caplog: pytest.LogCaptureFixture) -> None:
    built = hosts.amd_instinct_node(host)
    with caplog.at_level(logging.WARNING):
        find(resource('name: a.com/gpu\npci: {vendor: "1002", nodes: [render]}'), HostRoot(host.root))
    assert built.decoys and not any(port in caplog.text for port in built.decoys)


def test_kinds_select_nodes_and_all_takes_every_class_device_of_the_function(host: FakeHost) -> None:
    hosts.amd_radeon_workstation(host)
    render = found_nodes(host, resource('name: a.com/gpu\npci: {vendor: "1002", class: "03", nodes: [render]}'))
    assert render == {"0000:05:00.0": (("/dev/dri/renderD128",), (0,))}
    every = found_nodes(host, resource('name: a.com/gpu\npci: {vendor: "1002", nodes: [all]}'))
    assert every == {
        "0000:05:00.0": (("/dev/dri/card0", "/dev/dri/renderD128"), (0,)),
        "0000:05:00.1": (("/dev/snd/controlC0", "/dev/snd/pcmC0D3p"), (0,)),  # the audio function's own
    }


def test_a_function_on_no_driver_or_without_its_nodes_is_skipped_in_one_warning(
    host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    built = hosts.amd_instinct_node(host)
    first, second, *_ = built.functions
    host.bind_pci(first.address, None)
    host.remove(second.nodes[1])  # the render node not created yet
    with caplog.at_level(logging.WARNING):
        found = found_nodes(host, resource(AMD))
    assert set(found) == {f.address for f in built.functions[2:]}
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning == (
        "gpu: 2 PCI function(s) 1002:* present but not usable on their host driver: "
        f"{first.address} is bound to no driver; "
        f"{second.address} lacks {second.nodes[1]} (driver: amdgpu; not created yet?)"
    )
    assert not host.path(first.nodes[0]).exists()  # unbinding took the DRM minors with it


def test_shared_paths_missing_advertise_nothing(host: FakeHost, caplog: pytest.LogCaptureFixture) -> None:
    hosts.amd_instinct_node(host)
    host.remove("/dev/kfd")
    with caplog.at_level(logging.WARNING):
        assert find(resource(AMD), HostRoot(host.root)) == []
    assert "gpu: shared_paths missing under host root: /dev/kfd; nothing to advertise" in caplog.text


# -- the kubelet simulator -----------------------------------------------------------------------
@asynccontextmanager
async def node(plugin: ConfiguredPlugin) -> AsyncIterator[KubeletSimulator]:
    """The simulator serving ``kubelet.sock``, the plugin registered with it and following hotplug
    (in a short directory: a unix socket's path ends at 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="kd-", dir="/tmp") as short:
        async with _node(plugin, Path(short) / "device-plugins") as sim:
            yield sim


@asynccontextmanager
async def _node(plugin: ConfiguredPlugin, plugin_dir: Path) -> AsyncIterator[KubeletSimulator]:
    sim = KubeletSimulator(plugin_dir, admission_delay=0)
    await sim.start()
    manager = Manager([plugin], plugin_dir)
    await manager.start()
    try:
        await sim.wait_until(lambda: sim.allocatable().get(plugin.resource_name) == len(plugin.found), TIMEOUT)
        yield sim
    finally:
        await manager.stop()
        await sim.stop()


def nodes_of(machine: hosts.Machine, address: str) -> tuple[str, ...]:
    return next(f.nodes for f in machine.functions if f.address == address)


@pytest.mark.parametrize(("machine", "count"), [("amd-instinct", 2), ("nvidia", 3), ("intel-npu", 1), ("coral", 1)])
def test_a_pod_gets_its_functions_nodes_the_shared_nodes_once_and_the_env(
    host: FakeHost, tmp_path: Path, machine: str, count: int
) -> None:
    built, config = build(host, machine)
    env = {"ADDRESSES": "{pci_addresses}", "NUMA": "{numa_nodes}", "FIRST_NODES": "{container_paths}"}
    plugin = ConfiguredPlugin(resource(MACHINES[machine][1], env=env), host.root)

    async def main() -> None:
        async with node(plugin) as sim:
            admitted = await sim.admit(Pod("uid-1", "p", [Container("c", {config.name: count})]))
            ids = admitted["c"].device_ids[config.name]
            granted = admitted["c"].allocation
            own = [n for address in sorted(ids) for n in nodes_of(built, address)]
            paths = [d.host_path for d in granted.devices]
            assert [p for p in paths if p not in built.shared] == own  # each device's own nodes, in order
            assert [p for p in paths if p in built.shared] == list(built.shared)  # once, however many devices
            assert all(d.container_path == d.host_path and d.permissions == "rw" for d in granted.devices)
            numa = {f.address: f.numa_node for f in built.functions}
            assert dict(granted.envs) == {
                "ADDRESSES": ",".join(ids),
                "NUMA": ",".join(str(numa[a]) if numa[a] >= 0 else "" for a in ids),
                "FIRST_NODES": ",".join(nodes_of(built, a)[0] for a in ids),
            }

    asyncio.run(main())


def test_unbinding_or_removing_a_node_makes_the_device_unhealthy_and_rebinding_heals_it(
    host: FakeHost, tmp_path: Path
) -> None:
    """Through inotify on /dev only (health checks hourly): the kernel's unbind removes the minors."""
    built = hosts.amd_instinct_node(host)
    first, second, third, _ = built.functions
    plugin = ConfiguredPlugin(resource(AMD, health={"interval_seconds": 3600}), host.root)

    async def main() -> None:
        async with node(plugin) as sim:

            def healthy() -> dict[str, bool]:
                return {i: d.healthy for i, d in sim.resources["amd.com/gpu"].devices.items()}

            host.bind_pci(first.address, None)
            await sim.wait_until(lambda: sim.allocatable()["amd.com/gpu"] == 3, TIMEOUT)
            host.remove(second.nodes[1])  # a render node removed under the driver
            await sim.wait_until(lambda: sim.allocatable()["amd.com/gpu"] == 2, TIMEOUT)
            assert healthy() == {f.address: f not in (first, second) for f in built.functions}
            assert sim.capacity()["amd.com/gpu"] == 4  # still on the bus: listed, Unhealthy
            host.bind_pci(first.address, "amdgpu")  # amdgpu probes again and makes its minors
            for path in first.nodes:
                host.drm_node(first.address, Path(path).name)
            await sim.wait_until(lambda: sim.allocatable()["amd.com/gpu"] == 3, TIMEOUT)
            host.remove(f"/sys/bus/pci/devices/{third.address}")  # hot-unplugged: gone from the bus
            host.remove(third.nodes[1])  # the event: its minors go with it
            await sim.wait_until(lambda: sim.capacity()["amd.com/gpu"] == 3, TIMEOUT)
            assert third.address not in healthy()

    asyncio.run(main())


# -- CDI, ownership, container_path ------------------------------------------------------------------
def test_cdi_specs_carry_each_gpus_nodes_and_the_shared_node_with_the_ownership(host: FakeHost, tmp_path: Path) -> None:
    built = hosts.amd_instinct_node(host)
    extra = {"cdi": {"kind": "amd.com/gpu"}, "device_ownership": {"gid": 44, "mode": "0660"}}
    plugin = ConfiguredPlugin(resource(AMD, **extra), host.root, tmp_path / "cdi")
    specs = [json.loads(p.read_text()) for p in sorted((tmp_path / "cdi").iterdir())]
    by_name = {d["name"]: d["containerEdits"]["deviceNodes"] for spec in specs for d in spec["devices"]}
    assert set(by_name) == {d.id for d in plugin.devices()}
    for function in built.functions:
        assert [(n["path"], n.get("gid"), n.get("fileMode")) for n in by_name[function.address]] == [
            (p, 44, 0o660) for p in [*function.nodes, "/dev/kfd"]
        ]


def test_container_path_renames_a_single_render_node(host: FakeHost) -> None:
    hosts.amd_instinct_node(host)
    config = resource(
        'name: a.com/gpu\npci: {vendor: "1002", class: "03", nodes: [render]}', container_path="/dev/dri/renderD{index}"
    )
    plugin = ConfiguredPlugin(config, host.root)
    granted = plugin.allocate([d for d in plugin.devices() if d.id in ("0000:85:00.0", "0000:05:00.0")])
    assert [(d.host_path, d.container_path) for d in granted.devices] == [
        ("/dev/dri/renderD129", "/dev/dri/renderD0"),
        ("/dev/dri/renderD128", "/dev/dri/renderD1"),
    ]


@pytest.mark.parametrize(
    ("pci", "extra", "fragment"),
    [
        (
            "nodes: [card, render]",
            "container_path: /dev/x{index}",
            "resources[0].container_path: container_path "
            "applies to devices of one node; pci nodes [card, render] give each device several",
        ),
        ("nodes: [all]", "container_path: /dev/x{index}", "pci nodes [all] give each device several"),
        (
            "nodes: [render]",
            "container_path: /dev/dri/renderD0",
            "resources[0].container_path: container_path "
            "'/dev/dri/renderD0' has no per-device field ({path}, {name} or {index}) but pci can match several",
        ),
        ("nodes: [render, render]", "", "config.yaml:4:43: resources[0].pci.nodes[1]: lists render more than once"),
        ("nodes: []", "", "resources[0].pci.nodes: List should have at least 1 item"),
        ("nodes: [gpu]", "", "resources[0].pci.nodes[0]: Input should be 'card', 'render', 'accel', 'nvidia' or 'all'"),
        (
            "nodes: [render], vfio: true",
            "",
            "resources[0].pci.nodes: grants a function's nodes on its host driver, "
            "vfio its IOMMU group on vfio-pci: set one of them",
        ),
        ("nodes: [render]", "shared_paths: [dev/kfd]", "resources[0].shared_paths[0]: path 'dev/kfd' must be absolute"),
        ("nodes: [render]", "shared_paths: [/dev/kfd, /dev/kfd]", "resources[0].shared_paths[1]: lists /dev/kfd more"),
    ],
)
def test_bad_nodes_are_one_line_naming_the_field(pci: str, extra: str, fragment: str, tmp_path: Path) -> None:
    line = refusal(f'  - name: a.com/x\n    pci: {{vendor: "1002", {pci}}}\n    {extra}\n', tmp_path)
    assert fragment in line, line


# -- kubedevice discover -------------------------------------------------------------------------------
app = typer.Typer()
app.command()(discover)


@pytest.mark.parametrize("machine", MACHINES)
def test_discover_shows_each_function_with_its_nodes(host: FakeHost, tmp_path: Path, machine: str) -> None:
    built, config = build(host, machine)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"resources": [config.model_dump(by_alias=True, exclude_defaults=True)]}))
    args = ["--config", str(path), "--host-root", str(host.root)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    [shown] = json.loads(result.stdout)["resources"]
    assert {d["id"]: (d["hostPaths"], d["containerPaths"]) for d in shown["devices"]} == {
        f.address: (list(f.nodes), [*f.nodes, *built.shared]) for f in built.functions
    }
    table = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert all(f.nodes[0] in table.stdout for f in built.functions)


def test_discover_lists_a_function_without_its_nodes_as_refused(host: FakeHost, tmp_path: Path) -> None:
    built = hosts.intel_npu_laptop(host)
    host.bind_pci(built.functions[0].address, None)
    path = tmp_path / "config.yaml"
    path.write_text('resources:\n  - name: intel.com/npu\n    pci: {vendor: "8086", nodes: [accel]}\n')
    result = CliRunner().invoke(app, ["--config", str(path), "--host-root", str(host.root), "--json"])
    assert result.exit_code == 0, result.output
    [shown] = json.loads(result.stdout)["resources"]
    assert shown["devices"] == []
    assert shown["refused"] == [
        {"pciAddress": "0000:00:02.0", "reason": "has no accel node (driver: i915)"},
        {"pciAddress": "0000:00:0b.0", "reason": "is bound to no driver"},
    ]


def test_an_nvidia_gpu_unbound_is_seen_unhealthy_at_the_next_health_round(host: FakeHost) -> None:
    """/dev/nvidiaN is nvidia-modprobe's, not devtmpfs's: unbinding leaves /dev as it was and
    procfs sends no event, so the source is rescanned every health round (here 0.2 s; the AMD
    test above, whose minors go with the unbind, runs with hourly rounds)."""
    built = hosts.nvidia_node(host)
    first = built.functions[0].address
    plugin = ConfiguredPlugin(resource(NVIDIA, health={"interval_seconds": 0.2}), host.root)
    assert SOURCES["pci"].polled(plugin.config.source[1])
    assert not SOURCES["pci"].polled(resource(AMD).source[1])  # its minors' removal is the event

    async def main() -> None:
        async with node(plugin) as sim:
            host.bind_pci(first, None)
            assert host.path("/dev/nvidia0").exists()
            await sim.wait_until(lambda: sim.allocatable()["nvidia.com/gpu"] == 3, TIMEOUT)
            health = {i: d.healthy for i, d in sim.resources["nvidia.com/gpu"].devices.items()}
            assert health == {f.address: f.address != first for f in built.functions}
            host.bind_pci(first, "nvidia")
            await sim.wait_until(lambda: sim.allocatable()["nvidia.com/gpu"] == 4, TIMEOUT)

    asyncio.run(main())


DOCS_MACHINES = {
    "amd.com/gpu": hosts.amd_instinct_node,
    "gpu.intel.com/i915": hosts.intel_flex_node,
    "nvidia.com/gpu": hosts.nvidia_node,
    "intel.com/npu": hosts.intel_npu_laptop,
    "amd.com/npu": hosts.amd_npu_laptop,
    "coral.ai/tpu": hosts.coral_pcie,
}


def test_the_docs_configs_find_their_machines_functions(tmp_path: Path) -> None:
    """Each config docs/sources.md offers, on the fake machine it is written for."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "sources.md").read_text()
    body = text.split("## PCI devices on their host driver", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", body, re.DOTALL)
    configs = [ResourceConfig.model_validate(r) for r in yaml.safe_load(block)["resources"]]
    assert [c.name for c in configs] == list(DOCS_MACHINES)
    for config in configs:
        host = FakeHost(tmp_path / config.name.replace("/", "_"))
        built = DOCS_MACHINES[config.name](host)
        assert {f.key: f.host_paths for f in find(config, HostRoot(host.root))} == {
            f.address: f.nodes for f in built.functions
        }, config.name
        assert list(config.shared_paths) == list(built.shared), config.name
