"""A DRA driver in Python: four null devices of ``null.example.com``, with attributes.

Run ``NODE_NAME=mynode python dra_null_driver.py`` on a node (kubelet in /var/lib/kubelet,
API access from the in-cluster config or $KUBECONFIG); allocate with examples/dra-null-class.yaml.
"""

from __future__ import annotations

import os

from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin, eventloop
from kubedevice.dra.driver import DraDriver, ServiceOptions, serve


class Nulls(Plugin):
    """Devices and their grants as for a device plugin; ``dra_attributes`` feeds CEL selectors."""

    resource_name = "example.com/null"

    def dra_attributes(self) -> dict[str, dict[str, dict[str, object]]]:
        return {d.id: {"index": {"int": int(d.id[-1])}, "model": {"string": "null"}} for d in self.devices()}


def null(i: int) -> Device:
    grant = ContainerAllocation(envs={"NULL_DEVICE": f"null{i}"}, devices=[DeviceSpec("/dev/null")])
    return Device(f"null{i}", grant=grant)


def driver() -> DraDriver:
    return DraDriver("null.example.com", [Nulls(devices=[null(i) for i in range(4)])])


if __name__ == "__main__":
    # asyncio.run, then a moment for grpc's own tasks, so stopping prints no grpc traceback
    eventloop.run(serve(driver(), ServiceOptions(node=os.environ["NODE_NAME"])))
