import tempfile
from pathlib import Path

from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.sources.schema import ResourceConfig
from kubedevice.testing import FakeHost

root = Path(tempfile.mkdtemp()) / "host"
host = FakeHost(root)
host.pci_device("0000:3b:00.0", "10ee", "903f", "120000", numa_node=1, iommu_group=41, driver="vfio-pci")
host.usb_device(1, 4, "1a6e", "089a", port="1-2")

fpga = ResourceConfig.model_validate(
    {"name": "example.com/fpga", "pci": {"vendor": "10ee", "class": "1200", "vfio": True}, "replicas": 2}
)
plugin = ConfiguredPlugin(fpga, root)
assert [d.id for d in plugin.devices()] == ["0000:3b:00.0::0", "0000:3b:00.0::1"]
grant = plugin.allocate(plugin.devices()[:1])
assert [d.host_path for d in grant.devices] == ["/dev/vfio/41", "/dev/vfio/vfio"]

host.device_node("/dev/ttyUSB0")
host.symlink("/dev/serial/by-id/usb-FTDI_A10K1-if00-port0", "../../ttyUSB0")
serial = ResourceConfig.model_validate(
    {"name": "example.com/serial", "glob": {"paths": ["/dev/serial/by-id/*"]}, "container_path": "/dev/serial{index}"}
)
serial_plugin = ConfiguredPlugin(serial, root)
grant = serial_plugin.allocate(serial_plugin.devices())
assert [(d.container_path, d.host_path) for d in grant.devices] == [("/dev/serial0", "/dev/ttyUSB0")]
