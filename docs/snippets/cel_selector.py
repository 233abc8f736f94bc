from kubedevice.dra.cel import DeviceInput, compile_selector

selector = compile_selector('device.attributes["gpu.example.com"].model == "a100" && '
                            'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0')
device = DeviceInput("gpu.example.com", {"model": {"string": "a100"}}, {"memory": "80Gi"})
print(selector.matches(device))   # True; raises EvalError where Kubernetes' DeviceMatches fails
