from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin
from kubedevice.plugin.manager import serve

grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")])
plugin = Plugin("example.com/null", [Device(f"null-{i}", grant=grant) for i in range(4)])
raise SystemExit(serve(plugin))
