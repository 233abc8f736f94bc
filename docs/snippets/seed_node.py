from pathlib import Path

from kubedevice.testing import FakeHost

# An AMD-like node with four GPUs on amdgpu: (address, device ID, mem_info_vram_total in bytes).
# The model names are this example's, in the host's PCI ID database (pciutils' pci.ids format).
host = FakeHost(Path("seed-node"))
for card, (address, device, vram) in enumerate(
    [
        ("0000:03:00.0", "74a1", 68_702_699_520),  # H64: 64 GiB, every selector holds
        ("0000:43:00.0", "74a1", 68_702_699_520),  # H64
        ("0000:83:00.0", "74b5", 68_702_699_520),  # M64: 64 GiB, but its model starts with "M"
        ("0000:c3:00.0", "74a5", 34_359_738_368),  # H32: its model starts with "H", but 32 GiB < 40Gi
    ]
):
    host.pci_device(address, "1002", device, "038000", driver="amdgpu")
    host.write(f"/sys/bus/pci/devices/{address}/mem_info_vram_total", f"{vram}\n")
    host.drm_node(address, f"card{card}")
    host.drm_node(address, f"renderD{128 + card}")
host.write(
    "/usr/share/hwdata/pci.ids",
    "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\t74a1  H64\n\t74a5  H32\n\t74b5  M64\n",
)
