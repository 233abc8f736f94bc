"""The ``dra:`` section of the daemon's config: serve the configured resources through DRA.

With it, ``kubedevice serve`` runs one DRA driver whose devices are the devices of every
configured resource; without it, the resources go through the device-plugin API. A config
cannot ask for both, so no device is ever advertised through the two APIs at once.

Plain data beside the offline tools rather than in :mod:`kubedevice.dra.driver`: the config
loader, ``kubedevice dra slices`` and the checkers read it without loading the driver.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from ..names import dra_driver_name_error
from ..sources.schema import SCHEMA_CONFIG
from .configuredattributes import ResourceAttributes
from .devicemetadata import kind_error


class DraConfig(BaseModel):
    model_config = SCHEMA_CONFIG

    driver: str = Field(description="DRA driver name (DeviceClass selectors match device.driver)")
    publish: bool = Field(True, description="publish ResourceSlices for this node (off: an external publisher does)")
    rolling_update: bool = Field(
        False, description="name sockets after $POD_UID and lock changes, so two driver pods can overlap in an update"
    )
    device_status: bool = Field(
        False,
        description=(
            "after prepare, write the claim's status.devices (a Ready condition, the CDI device IDs as data; "
            "needs patch on resourceclaims/status and the DRAResourceClaimDeviceStatus feature, on by default)"
        ),
    )
    device_metadata: bool = Field(
        False,
        description=(
            "give each prepared claim's containers a file describing their devices of this driver "
            "(/var/run/kubernetes.io/dra-device-attributes/..., KEP-5304, beta in Kubernetes 1.37), mounted through CDI"
        ),
    )

    sharing: Literal["replicas", "capacity", "counters"] = Field(
        "replicas",
        description=(
            "how a resource with replicas: N is published: replicas = N devices; capacity = one device per "
            "physical device with allowMultipleAllocations and a consumable capacity 'replicas' of N "
            "(Kubernetes 1.36+, DRAConsumableCapacity); counters = the whole device and its N replicas "
            "drawing on one shared counter set of N (Kubernetes 1.36+, DRAPartitionableDevices)"
        ),
    )

    unhealthy_taint: Literal["NoSchedule", "NoExecute", "None", "off"] = Field(
        "NoSchedule",
        description=(
            "effect of the <driver>/unhealthy taint an unhealthy device carries in the slices "
            "(NoSchedule, NoExecute, None = informational); off: unhealthy devices are left out"
        ),
    )

    resources: dict[str, ResourceAttributes] = Field(
        default_factory=dict,
        description=(
            "per resource name, attributes and capacity its devices publish: constants, templates over the "
            "device's facts, or files of its sysfs directory (docs/dra-driver.md)"
        ),
    )
    numa_node_attribute: Literal["scalar", "list"] = Field(
        "scalar",
        description=(
            "form of resource.kubernetes.io/numaNode on PCI devices: scalar (an int), or list (the node and "
            "the same socket's nearest nodes; needs DRAListTypeAttributes on the API server and scheduler)"
        ),
    )

    @property
    def taint_effect(self) -> str | None:
        """The effect for :func:`kubedevice.dra.slices.slices_for` (None: taints off)."""
        return None if self.unhealthy_taint == "off" else self.unhealthy_taint

    @field_validator("unhealthy_taint", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare ``off`` as false."""
        return "off" if value is False else value

    @field_validator("driver")
    @classmethod
    def _driver_name(cls, value: str) -> str:
        error = dra_driver_name_error(value)
        if error:
            raise ValueError(error)
        return value

    @field_validator("device_metadata")
    @classmethod
    def _metadata_kind(cls, value: bool, info: ValidationInfo) -> bool:
        driver = info.data.get("driver")
        if value and isinstance(driver, str) and (error := kind_error(driver)):
            raise ValueError(error)
        return value
