"""Whole machines on a :class:`~kubedevice.testing.fakehost.FakeHost`, laid out as the kernel lays
real ones out, for the ``pci.nodes`` tests and docs.

What makes them real, and what a naive walk gets wrong:

- DRM minors are numbered in probe order (``drm_minor_alloc`` in ``drivers/gpu/drm/drm_drv.c``), not
  in PCI order: a BMC's display adapter (ASPEED, ``ast``) probes before a GPU whose driver loads its
  firmware first and takes ``card0``; ``ast`` has no render node, so the GPUs' render nodes still start
  at ``renderD128`` (``DRM_MINOR_RENDER`` minors are 128 + index), and the GPUs' order is their
  probe order, which here differs from their addresses.
- A GPU sits below its board's own PCIe switch, whose ports share the GPU's vendor ID and are bound
  to ``pcieport``; the GPU's directory is nested in the switch's (``drivers/pci/probe.c``), so a walk
  below a port passes over the GPU's nodes, which are not the port's.
- A display GPU's HDMI audio is function 1 beside it, same vendor, on ``snd_hda_intel``.
- ``/dev/kfd`` (``drivers/gpu/drm/amd/amdkfd/kfd_chardev.c``: ``device_create(kfd_class, NULL, ...,
  "kfd")``) and NVIDIA's control nodes belong to no function: they are ``shared_paths``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fakehost import FakeHost

_PORT = "060400"  # PCI-to-PCI bridge (a switch's upstream or downstream port)


@dataclass(frozen=True)
class Function:
    """A function a config selects: its address, NUMA node and its own nodes (in kind order)."""

    address: str
    numa_node: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Machine:
    """What a builder made: the functions to grant, the shared nodes, and the functions of the same
    vendor that must never be granted (switch ports, audio)."""

    functions: tuple[Function, ...]
    shared: tuple[str, ...] = ()
    decoys: tuple[str, ...] = ()


def bmc_display(host: FakeHost, *, bridge: str = "0000:01:00.0", address: str = "0000:02:00.0") -> str:
    """An ASPEED AST2600 BMC display (``ast``, ``drivers/gpu/drm/ast``): probed first, it is ``card0``."""
    host.pci_device(bridge, "1a03", "1150", _PORT, driver="pcieport")
    host.pci_device(address, "1a03", "2000", "030000", driver="ast", parent=bridge)
    return host.drm_node(address, "card0")


def _switch(host: FakeHost, ids: tuple[str, str, str], ports: tuple[str, str], root_bus: str, numa: int) -> None:
    """A board's PCIe switch (vendor, upstream and downstream device IDs): the upstream port on the
    root bus, the downstream port below it."""
    vendor, up_id, down_id = ids
    up, down = ports
    host.pci_device(up, vendor, up_id, _PORT, numa_node=numa, driver="pcieport", root_bus=root_bus)
    host.pci_device(down, vendor, down_id, _PORT, numa_node=numa, driver="pcieport", parent=up)


def amd_instinct_node(host: FakeHost) -> Machine:
    """Four AMD Instinct GPUs (``amdgpu``) on two NUMA nodes, two models (MI210 ``740f`` on node 0,
    MI250X ``740c`` on node 1), each below its own switch ports (``1002:14a0``/``14a1``), with
    ``mem_info_vram_total`` (``amdgpu_vram_mgr.c``), a BMC as ``card0`` and ``/dev/kfd``."""
    bmc_display(host)
    # (switch upstream, downstream, GPU, root bus, NUMA node, device ID, probe index)
    layout = [
        ("0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "pci0000:00", 0, "740f", 2),
        ("0000:08:00.0", "0000:09:00.0", "0000:0a:00.0", "pci0000:00", 0, "740f", 4),
        ("0000:83:00.0", "0000:84:00.0", "0000:85:00.0", "pci0000:80", 1, "740c", 1),
        ("0000:88:00.0", "0000:89:00.0", "0000:8a:00.0", "pci0000:80", 1, "740c", 3),
    ]
    functions, decoys = [], []
    for up, down, gpu, root_bus, numa, device, probe in layout:
        _switch(host, ("1002", "14a0", "14a1"), (up, down), root_bus, numa)
        host.pci_device(gpu, "1002", device, "038000", numa_node=numa, driver="amdgpu", parent=down)
        host.write(f"/sys/bus/pci/devices/{gpu}/mem_info_vram_total", "68702699520\n")
        nodes = (host.drm_node(gpu, f"card{probe}"), host.drm_node(gpu, f"renderD{127 + probe}"))
        functions.append(Function(gpu, numa, nodes))
        decoys += [up, down]
    kfd = host.class_device("/sys/devices/virtual/kfd/kfd", "kfd", 235, 0, "kfd")
    return Machine(tuple(functions), (kfd,), tuple(decoys))


def amd_radeon_workstation(host: FakeHost) -> Machine:
    """A Radeon PRO W7900 (``1002:7448``) below its switch (``1002:1478``/``1479``), its HDMI audio
    (``1002:ab30``, ``snd_hda_intel``, ALSA card 0) beside it as function 1."""
    _switch(host, ("1002", "1478", "1479"), ("0000:03:00.0", "0000:04:00.0"), "pci0000:00", 0)
    gpu, audio = "0000:05:00.0", "0000:05:00.1"
    host.pci_device(gpu, "1002", "7448", "030000", numa_node=0, driver="amdgpu", parent="0000:04:00.0")
    host.pci_device(audio, "1002", "ab30", "040300", numa_node=0, driver="snd_hda_intel", parent="0000:04:00.0")
    nodes = (host.drm_node(gpu, "card0"), host.drm_node(gpu, "renderD128"))
    sound = f"{host.pci_dir(audio)}/sound/card0"
    host.class_device(f"{sound}/controlC0", "snd/controlC0", 116, 2, "sound")
    host.class_device(f"{sound}/pcmC0D3p", "snd/pcmC0D3p", 116, 3, "sound")
    return Machine((Function(gpu, 0, nodes),), (), ("0000:03:00.0", "0000:04:00.0", audio))


def intel_flex_node(host: FakeHost, *, driver: str = "i915") -> Machine:
    """Two Intel Data Center GPU Flex 170 (``8086:56c0``, ``i915`` or ``xe``) below Intel's switch
    ports (``8086:4fa1``/``4fa4``), a BMC as ``card0``."""
    bmc_display(host)
    functions, decoys = [], []
    for i, (up, down, gpu, numa) in enumerate(
        [("0000:4a:00.0", "0000:4b:01.0", "0000:4c:00.0", 0), ("0000:ca:00.0", "0000:cb:01.0", "0000:cc:00.0", 1)]
    ):
        _switch(host, ("8086", "4fa1", "4fa4"), (up, down), "pci0000:00" if numa == 0 else "pci0000:80", numa)
        host.pci_device(gpu, "8086", "56c0", "038000", numa_node=numa, driver=driver, parent=down)
        nodes = (host.drm_node(gpu, f"card{i + 1}"), host.drm_node(gpu, f"renderD{128 + i}"))
        functions.append(Function(gpu, numa, nodes))
        decoys += [up, down]
    return Machine(tuple(functions), (), tuple(decoys))


def intel_npu_laptop(host: FakeHost) -> Machine:
    """A Meteor Lake laptop: its NPU (``8086:7d1d``, ``intel_vpu``, ``drivers/accel/ivpu``) is
    ``accel0``; the integrated GPU (``8086:7d55``, ``i915``) is ``card0``/``renderD128``."""
    host.pci_device("0000:00:02.0", "8086", "7d55", "030000", driver="i915")
    host.drm_node("0000:00:02.0", "card0")
    host.drm_node("0000:00:02.0", "renderD128")
    npu = host.pci_device("0000:00:0b.0", "8086", "7d1d", "120000", driver="intel_vpu")
    return Machine((Function(npu, -1, (host.accel_node(npu, 0),)),), (), ("0000:00:02.0",))


def amd_npu_laptop(host: FakeHost) -> Machine:
    """A Ryzen 7040 (Phoenix) laptop: the NPU (``1022:1502``, ``amdxdna``, ``drivers/accel/amdxdna``)
    is function 1 beside a placeholder function (``1022:14ec``) and is ``accel0``; the iGPU
    (``1002:15bf``, ``amdgpu``) is ``card0``/``renderD128``."""
    host.pci_device("0000:c4:00.0", "1002", "15bf", "030000", driver="amdgpu")
    host.drm_node("0000:c4:00.0", "card0")
    host.drm_node("0000:c4:00.0", "renderD128")
    host.pci_device("0000:c5:00.0", "1022", "14ec", "130000")
    npu = host.pci_device("0000:c5:00.1", "1022", "1502", "118000", driver="amdxdna")
    return Machine((Function(npu, -1, (host.accel_node(npu, 0),)),), (), ("0000:c5:00.0",))


def nvidia_node(host: FakeHost) -> Machine:
    """Four NVIDIA A100 (``10de:20b0``, ``nvidia``) below Broadcom switch ports, on two NUMA nodes;
    ``/dev/nvidia<minor>`` from procfs, the control nodes ``nvidiactl`` (195:255), ``nvidia-uvm`` and
    ``nvidia-uvm-tools``; a BMC as ``card0`` (``nvidia-drm`` without ``modeset=1`` makes no DRM node)."""
    bmc_display(host)
    functions = []
    ports = [("0000:06:00.0", "0000:07:00.0", 0), ("0000:0e:00.0", "0000:0f:00.0", 0)]
    ports += [("0000:46:00.0", "0000:47:00.0", 1), ("0000:4d:00.0", "0000:4e:00.0", 1)]
    for minor, (down, gpu, numa) in enumerate(ports):
        host.pci_device(down, "10b5", "c010", _PORT, numa_node=numa, driver="pcieport")
        host.pci_device(gpu, "10de", "20b0", "030200", numa_node=numa, driver="nvidia", parent=down)
        functions.append(Function(gpu, numa, (host.nvidia_gpu_info(gpu, minor, "NVIDIA A100-SXM4-40GB"),)))
    shared = tuple(host.device_node(p) for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"))
    return Machine(tuple(functions), shared)


def coral_pcie(host: FakeHost) -> Machine:
    """A Coral Edge TPU on PCIe (``1ac1:089a``, ``apex``): gasket's class ``apex``, node ``/dev/apex_0``
    (google/gasket-driver ``gasket_core.c``: ``device_create(..., "%s_%u", name, index)``)."""
    tpu = host.pci_device("0000:03:00.0", "1ac1", "089a", "088000", driver="apex")
    return Machine((Function(tpu, -1, (host.pci_class_node(tpu, "apex", "apex_0", 120, 0),)),))
