"""``dra.resources.<resource>.attributes``/``capacity`` and ``resource.kubernetes.io/numaNode`` on a
fake sysfs tree: what ``dra slices`` prints (and ``dra validate`` accepts for 1.37), what the running
driver publishes and offers, the one log line of a value that cannot be read, and config errors."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubedevice.config import ConfigError, parse_config
from kubedevice.dra.cli import app
from kubedevice.dra.deviceattribute import NUMA_NODE, numa_node
from kubedevice.dra.driver.daemon import build_driver
from kubedevice.dra.models import ResourceSlice, load_text
from kubedevice.sources.hostroot import HostRoot
from kubedevice.testing import FakeHost

DRIVER = "gpu.amd.example.com"
#: A few lines in the format of pciutils' pci.ids (names as the database spells them).
PCI_IDS = """\
# pci.ids excerpt for the tests
0001  SafeNet (wrong ID)
1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t740f  Aldebaran/MI200 [Instinct MI210]
\t74a1  Aqua Vanjaram [Instinct MI300X]
\t\t1002 74a1  Instinct MI300X
10de  NVIDIA Corporation
\t20b0  GA100 [A100 SXM4 40GB]
C 00  Unclassified device
"""
VRAM = 206_158_430_208  # 192 GiB, as mem_info_vram_total prints it: bytes
CONFIG = """\
resources:
  - name: amd.com/gpu
    pci: {vendor: "1002", class: "03"}
dra:
  driver: gpu.amd.example.com
  resources:
    amd.com/gpu:
      attributes:
        productName: "{model}"
        vendorName: "{vendor_name}"
        driverVersion: {template: "{driver_version}", type: semver}
        vbios: {file: vbios_version}
        family: instinct
        computeUnits: 304
        ecc: true
      capacity:
        memory: {file: mem_info_vram_total}
"""


def amd_gpu(host: FakeHost, address: str, numa: int, vram: int | None) -> None:
    """An AMD GPU bound to amdgpu, with the files the amdgpu driver gives its sysfs directory."""
    host.pci_device(address, "1002", "74a1", "038000", numa_node=numa, driver="amdgpu")
    sys_dir = f"/sys/bus/pci/devices/{address}"
    host.write(f"{sys_dir}/vbios_version", "113-M3000100-103\n")
    if vram is not None:
        host.write(f"{sys_dir}/mem_info_vram_total", f"{vram}\n")


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    fake = FakeHost(tmp_path / "root")
    amd_gpu(fake, "0000:03:00.0", 0, VRAM)
    amd_gpu(fake, "0000:83:00.0", 1, VRAM)
    fake.numa_distances([[10, 32], [32, 10]])
    fake.write("/usr/share/hwdata/pci.ids", PCI_IDS)
    fake.write("/sys/module/amdgpu/version", "v6.8\n")  # short and with a "v": normalised as semver() does
    modules = "/sys/bus/pci/drivers/amdgpu/module"
    fake.symlink(modules, os.path.relpath("/sys/module/amdgpu", os.path.dirname(modules)))
    return fake


def slices(tmp_path: Path, host: FakeHost, config: str, *flags: str) -> tuple[int, str]:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    args = ["slices", "--config", str(path), "--host-root", str(host.root), "--node", "node-1", *flags]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def by_name(output: str) -> dict[str, dict[str, object]]:
    [slice_] = load_text(output)
    assert isinstance(slice_, ResourceSlice)
    return {
        d.name: {
            **{k: next(v for v in a.as_value().values() if v is not None) for k, a in d.attributes.items()},
            **{f"capacity:{k}": c.value for k, c in d.capacity.items()},
            **({"taints": [t["key"] for t in d.taints]} if d.taints else {}),
        }
        for d in slice_.spec.devices
    }


def test_dra_slices_publishes_the_configured_values_and_validates_for_1_37(tmp_path: Path, host: FakeHost) -> None:
    code, output = slices(tmp_path, host, CONFIG)
    assert code == 0, output
    devices = by_name(output)
    first = next(iter(devices.values()))
    expected = {
        "productName": "Aqua Vanjaram [Instinct MI300X]",
        "vendorName": "Advanced Micro Devices, Inc. [AMD/ATI]",
        "driverVersion": "6.8.0",
        "vbios": "113-M3000100-103",
        "family": "instinct",
        "computeUnits": 304,
        "ecc": True,
        "capacity:memory": str(VRAM),  # bytes, as the file says: the API server's canonical form
        NUMA_NODE: 0,
    }
    assert {k: first[k] for k in expected} == expected
    assert [d[NUMA_NODE] for d in devices.values()] == [0, 1]
    assert not any("taints" in d for d in devices.values())
    stored = tmp_path / "slices.yaml"
    stored.write_text(output)
    result = CliRunner().invoke(app, ["validate", "--kubernetes-version", "1.37", str(stored)])
    assert result.exit_code == 0, result.output


def test_the_running_driver_publishes_the_same(tmp_path: Path, host: FakeHost) -> None:
    _, output = slices(tmp_path, host, CONFIG)
    driver = build_driver(parse_config(CONFIG), host.root)
    [published] = driver.slices("node-1")
    assert published.spec.model_dump() == load_text(output)[0].spec.model_dump()


def test_an_attribute_and_a_capacity_may_share_a_name_as_in_the_api(tmp_path: Path, host: FakeHost) -> None:
    """``memory`` under both, as the seed's class reads ``device.attributes[...].memory`` and
    ``device.capacity[...].memory``: both published, valid for 1.37, and a class that reads both
    selects by them; a configured capacity ``vendor`` leaves the discovered attribute."""
    config = CONFIG.replace(
        "      capacity:\n", "        memory: {template: '192', type: int}\n      capacity:\n        vendor: 1\n"
    )
    code, output = slices(tmp_path, host, config)
    assert code == 0, output
    first = next(iter(by_name(output).values()))
    assert (first["memory"], first["capacity:memory"]) == (192, str(VRAM))
    assert (first["vendor"], first["capacity:vendor"]) == ("1002", "1")
    stored = tmp_path / "slices.yaml"
    stored.write_text(output)
    assert CliRunner().invoke(app, ["validate", "--kubernetes-version", "1.37", str(stored)]).exit_code == 0
    selector = (
        f'device.attributes["{DRIVER}"].memory >= 192 && '
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("192Gi")) >= 0'
    )
    objects = tmp_path / "class.yaml"
    objects.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\n"
        f"spec: {{selectors: [{{cel: {{expression: '{selector}'}}}}]}}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c, namespace: default}\n"
        "spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu, count: 2}}]}}\n"
    )
    result = CliRunner().invoke(app, ["allocate", "--node", "node-1", str(objects), str(stored)])
    assert result.exit_code == 0 and result.output.count(f"driver: {DRIVER}") == 2, result.output
    objects.write_text(objects.read_text().replace(">= 192 &&", ">= 193 &&"))
    assert CliRunner().invoke(app, ["allocate", "--node", "node-1", str(objects), str(stored)]).exit_code != 0


def test_an_unreadable_file_makes_the_device_unhealthy_with_one_log_line(
    tmp_path: Path, host: FakeHost, caplog: pytest.LogCaptureFixture
) -> None:
    host.remove("/sys/bus/pci/devices/0000:83:00.0/mem_info_vram_total")
    driver = build_driver(parse_config(CONFIG), host.root)
    with caplog.at_level(logging.WARNING, logger="kubedevice.dra.attributes"):
        for _ in range(3):  # every publish and health report reads it again; the line is written once
            [published] = driver.slices("node-1")
            health = {h.device: h.healthy for h in driver.health("node-1")}
    lines = [r.getMessage() for r in caplog.records if r.name == "kubedevice.dra.attributes"]
    assert lines == [
        "amd.com/gpu device 0000:83:00.0 is unhealthy: memory: cannot read "
        "/sys/bus/pci/devices/0000:83:00.0/mem_info_vram_total: No such file or directory"
    ]
    tainted = {d.name: [t["key"] for t in d.taints or []] for d in published.spec.devices}
    assert sorted(tainted.values()) == [[], [f"{DRIVER}/unhealthy"]]
    assert sorted(health.values()) == [False, True]
    host.write("/sys/bus/pci/devices/0000:83:00.0/mem_info_vram_total", f"{VRAM}\n")
    [published] = driver.slices("node-1")
    assert all(not d.taints for d in published.spec.devices)
    assert all(d.capacity["memory"].value == str(VRAM) for d in published.spec.devices)


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda h: h.remove("/usr/share/hwdata/pci.ids"), "productName: cannot read /usr/share/misc/pci.ids: no PCI"),
        (lambda h: h.write("/usr/share/hwdata/pci.ids", "1002  AMD\n"), "has no device 1002:74a1"),
        (lambda h: h.remove("/sys/module/amdgpu/version"), "cannot read /sys/module/amdgpu/version: No such file"),
        (lambda h: h.write("/sys/module/amdgpu/version", "6.8.5-k.01\n"), "is not a semantic version"),
    ],
)  # fmt: skip
def test_facts_that_cannot_be_read_name_their_file(
    tmp_path: Path, host: FakeHost, caplog: pytest.LogCaptureFixture, break_it: object, message: str
) -> None:
    assert callable(break_it)
    break_it(host)
    with caplog.at_level(logging.WARNING, logger="kubedevice.dra.attributes"):
        code, output = slices(tmp_path, host, CONFIG)
    assert code == 0, output
    assert all(d.get("taints") == [f"{DRIVER}/unhealthy"] for d in by_name(output).values())
    lines = [r.getMessage() for r in caplog.records if r.name == "kubedevice.dra.attributes"]
    assert len(lines) == 2 and all(message in line for line in lines), lines


def test_the_list_form_of_numa_node_follows_upstream(tmp_path: Path, host: FakeHost) -> None:
    """Four nodes on two sockets: the nearest node of the same socket joins the list; with the
    distances unreadable the list is the node alone; -1 publishes nothing."""
    for node, cpus in enumerate(("0-3", "4-7", "8-11", "12-15")):
        host.write(f"/sys/devices/system/node/node{node}/cpulist", cpus + "\n")
        for cpu in range(int(cpus.split("-")[0]), int(cpus.split("-")[1]) + 1):
            host.write(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", f"{node // 2}\n")
    host.numa_distances([[10, 12, 12, 32], [12, 10, 32, 12], [12, 32, 10, 12], [32, 12, 12, 10]])
    root = HostRoot(host.root)
    assert numa_node(root, "0000:03:00.0") == {"int": 0}
    assert numa_node(root, "0000:03:00.0", "list") == {"ints": [0, 1]}  # node 2 is as near, on socket 1
    assert numa_node(root, "0000:83:00.0", "list") == {"ints": [1, 0]}
    host.write("/sys/devices/system/node/node0/distance", "10 x\n")
    assert numa_node(root, "0000:03:00.0", "list") == {"ints": [0]}
    host.write("/sys/bus/pci/devices/0000:03:00.0/numa_node", "-1\n")
    assert numa_node(root, "0000:03:00.0", "list") is None
    config = CONFIG.replace(
        "  resources:\n    amd.com/gpu:", "  numa_node_attribute: list\n  resources:\n    amd.com/gpu:"
    )
    code, output = slices(tmp_path, host, config, "--feature-gates", "DRAListTypeAttributes=true")
    assert code == 0, output
    assert [d.get(NUMA_NODE) for d in by_name(output).values()] == [None, [1, 0]]
    code, output = slices(tmp_path, host, config)  # the gate off: the API server drops the list, then refuses
    assert code == 1 and "generated slice is invalid" in output and "exactly one value must be specified" in output


@pytest.mark.parametrize(
    ("dra", "message"),
    [
        ("resources: {amd.com/gpux: {}}", "6:15: dra.resources.amd.com/gpux: 'amd.com/gpux' is not a configured "
         "resource \\(did you mean 'amd.com/gpu'\\?\\)"),
        ("resources: {amd.com/gpu: {attributes: {model: '{modle}'}}}",
         "6:49: dra.resources.amd.com/gpu.attributes.model.template: template '{modle}' uses unknown field"),
        ("resources: {amd.com/gpu: {attributes: {id: x}}}",
         "6:42: dra.resources.amd.com/gpu.attributes.id: 'id' is given by the driver itself"),
        ("resources: {amd.com/gpu: {capacity: {replicas: 2}}}",
         "6:40: dra.resources.amd.com/gpu.capacity.replicas: 'replicas' is given by the driver itself"),
        ("resources: {amd.com/gpu: {attributes: {bad-name: x}}}",
         "6:42: dra.resources.amd.com/gpu.attributes.bad-name: 'bad-name' must be a C identifier"),
        ("resources: {amd.com/gpu: {attributes: {v: {template: '1.x', type: semver}}}}",
         "6:56: dra.resources.amd.com/gpu.attributes.v.template: '1.x' is not a semantic version"),
        ("resources: {amd.com/gpu: {attributes: {m: {file: mem, type: quantity}}}}",
         "6:63: dra.resources.amd.com/gpu.attributes.m.type: a quantity is a capacity"),
        ("resources: {amd.com/gpu: {capacity: {m: {file: mem, type: int}}}}",
         "6:61: dra.resources.amd.com/gpu.capacity.m.type: a capacity is a quantity, not int"),
        ("resources: {amd.com/gpu: {attributes: {m: {file: ../../etc/passwd}}}}",
         "6:52: dra.resources.amd.com/gpu.attributes.m.file: .*must be a path relative"),
        ("resources: {amd.com/gpu: {attributes: {n: {template: '{model}', type: float}}}}",
         "6:73: dra.resources.amd.com/gpu.attributes.n.type: Input should be"),
        ("resources: {amd.com/gpu: {attributes: {n: '{numa_node:d}'}}}",
         "6:45: dra.resources.amd.com/gpu.attributes.n.template: template '{numa_node:d}': Unknown format code 'd'"),
        ("numa_node_attribute: lists", "6:24: dra.numa_node_attribute: Input should be 'scalar' or 'list'"),
    ],
)  # fmt: skip
def test_config_errors_name_their_field(dra: str, message: str) -> None:
    text = CONFIG.split("dra:", maxsplit=1)[0] + f"dra:\n  driver: {DRIVER}\n  {dra}\n"
    with pytest.raises(ConfigError, match=f"^<config>:{message}"):
        parse_config(text)


def test_a_source_without_sysfs_cannot_read_files_or_pci_facts() -> None:
    null = (
        "resources:\n  - {name: example.com/null, static: {count: 1, paths: [/dev/null]}}\n"
        "dra:\n  driver: n.example.com\n"
    )
    with pytest.raises(ConfigError, match=r"5:57: dra.resources.example.com/null.attributes.a.file: a static device"):
        parse_config(null + "  resources: {example.com/null: {attributes: {a: {file: x}}}}\n")
    where = r"5:50: dra.resources.example.com/null.attributes.a.template"
    with pytest.raises(ConfigError, match=where + ": model: only pci devices have these"):
        parse_config(null + "  resources: {example.com/null: {attributes: {a: '{model}'}}}\n")
    assert parse_config(null + "  resources: {example.com/null: {attributes: {a: 'null {id}'}}}\n").dra is not None


def test_the_docs_example_is_this_config(tmp_path: Path, host: FakeHost) -> None:
    """docs/dra-driver.md's example publishes what the tests above check."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "dra-driver.md").read_text()
    section = docs.split("## Attributes and capacity from config", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert by_name(slices(tmp_path, host, example)[1]) == by_name(slices(tmp_path, host, CONFIG)[1])


def test_a_configured_name_replaces_a_discovered_one(tmp_path: Path, host: FakeHost) -> None:
    config = CONFIG.replace("        family: instinct\n", "        family: instinct\n        vendor: AMD\n")
    code, output = slices(tmp_path, host, config)
    assert code == 0, output
    assert {d["vendor"] for d in by_name(output).values()} == {"AMD"}


def test_values_read_are_kept_until_the_device_changes(host: FakeHost) -> None:
    """A file read once is not read again while discovery finds the same device (and it stays healthy)."""
    driver = build_driver(parse_config(CONFIG), host.root)
    [before] = driver.slices("node-1")
    host.write("/sys/bus/pci/devices/0000:03:00.0/mem_info_vram_total", "1\n")
    [after] = driver.slices("node-1")
    assert [d.capacity["memory"].value for d in after.spec.devices] == [str(VRAM)] * 2
    assert after.spec.model_dump() == before.spec.model_dump()
