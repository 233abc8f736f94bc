"""A DRA driver: a name and the :class:`~kubedevice.plugin.base.Plugin` objects whose devices it offers.

The same plugins serve the device-plugin API or DRA, never both: a DRA driver takes them
over whole (devices, hotplug in ``run()``, health, and ``allocate()``, whose answer for the
devices of one request becomes the CDI edits of the prepared claim). Device names in the
slices, and the attributes, are those of :func:`kubedevice.dra.slices.slices_for`, which
``kubedevice dra slices`` prints, so what the driver publishes can be previewed offline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ...device import Device
from ...names import dra_driver_name_error
from ...plugin.base import Plugin
from ...sources.configured import ConfiguredPlugin
from ..configuredattributes import ConfiguredAttributes, ResourceAttributes
from ..deviceattribute import NumaForm
from ..devicemetadata import kind_error
from ..models import ResourceSlice
from ..slices import DEFAULT_TAINT_EFFECT, ResourceInput, Sharing, device_name, published, slices_for
from .health import DeviceHealth
from .state import Offered

Attributes = Mapping[str, Mapping[str, Mapping[str, Any]]]


@runtime_checkable
class AttributeProvider(Protocol):
    """A plugin that describes its devices for DeviceClass selectors.

    Per device ID, attribute name → one-key value as in the API (``{"string": "10de"}``,
    ``{"int": 3}``) or ``{"quantity": "16Gi"}`` for a capacity; an attribute and a capacity of
    one name (the API allows it) as one of each (``{"int": 64, "quantity": "64Gi"}``).
    """

    def dra_attributes(self) -> Attributes: ...


class DraDriver:
    """The devices of some plugins, offered on one node as the pool of one DRA driver."""

    def __init__(
        self,
        name: str,
        plugins: Sequence[Plugin],
        taint_effect: str | None = DEFAULT_TAINT_EFFECT,
        sharing: Sharing = "replicas",
        *,
        device_metadata: bool = False,
        configured: Mapping[str, ResourceAttributes] | None = None,
        numa_form: NumaForm = "scalar",
    ) -> None:
        """``taint_effect``: of the taint an unhealthy device carries in the slices; None leaves it out.
        ``sharing``: how replicas are published (:func:`kubedevice.dra.slices.published`).
        ``device_metadata``: give each prepared claim's containers a file describing their devices
        (KEP-5304, :mod:`kubedevice.dra.driver.metadata`). ``configured``: per resource name, the
        attributes and capacity of ``dra.resources``; ``numa_form``: of ``resource.kubernetes.io/numaNode``."""
        error = dra_driver_name_error(name)
        if error:
            raise ValueError(error)
        if not plugins:
            raise ValueError(f"DRA driver {name} has no resources")
        if device_metadata and (error := kind_error(name)):
            raise ValueError(error)
        self.name = name
        self.plugins = list(plugins)
        self.taint_effect = taint_effect
        self.sharing: Sharing = sharing
        self.device_metadata = device_metadata
        configured = configured or {}
        self._attributes = {
            id(p): ConfiguredAttributes(p.host, p.config, configured.get(p.resource_name), numa_form)
            for p in self.plugins
            if isinstance(p, ConfiguredPlugin)
        }

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after any device or health change of any plugin."""
        for plugin in self.plugins:
            plugin.subscribe(listener)

    def resources(self) -> list[ResourceInput]:
        return [self._resource(p) for p in self.plugins]

    def _resource(self, plugin: Plugin) -> ResourceInput:
        """A configured resource's devices with the attributes of discovery, config and Kubernetes'
        standard ones; another plugin's as it describes them."""
        built = self._attributes.get(id(plugin))
        if built is not None and isinstance(plugin, ConfiguredPlugin):
            devices, attributes = built.published(plugin.devices(), plugin.found)
            return plugin.resource_name, devices, attributes
        described = plugin.dra_attributes() if isinstance(plugin, AttributeProvider) else {}
        return plugin.resource_name, plugin.devices(), described

    def _devices(self, plugin: Plugin) -> list[Device]:
        """The plugin's devices, unhealthy where a configured value cannot be read."""
        built = self._attributes.get(id(plugin))
        if built is not None and isinstance(plugin, ConfiguredPlugin):
            return built.devices(plugin.devices(), plugin.found)
        return plugin.devices()

    def slices(self, node: str) -> list[ResourceSlice]:
        """The ResourceSlices of this node's pool (generation and owner are the publisher's)."""
        return slices_for(self.name, node, self.resources(), self.taint_effect, self.sharing)

    def device_attributes(self, node: str) -> dict[str, Attributes]:
        """Every device's attributes by its name, as its slice entry lists them (an unhealthy
        device's too, though taints ``off`` leaves it out of the slices: it may still be prepared)."""
        every = slices_for(self.name, node, self.resources(), DEFAULT_TAINT_EFFECT, self.sharing)
        return {
            device.name: {name: value.as_value() for name, value in device.attributes.items()}
            for entry in every
            for device in entry.spec.devices
        }

    def offered(self) -> dict[str, Offered]:
        """Every device by its name in the slices (unhealthy ones too: they may still be prepared),
        with the plugin's device that grants it."""
        prefixed = len(self.plugins) > 1
        index: dict[str, Offered] = {}
        for plugin in self.plugins:
            prefix = plugin.resource_name.rpartition("/")[2] if prefixed else ""
            for shown in published(self._devices(plugin), self.sharing):
                index[device_name(shown.device.id, prefix)] = Offered(plugin, shown.granted)
        return index

    def health(self, node: str) -> list[DeviceHealth]:
        return [
            DeviceHealth(node, name, offered.device.healthy, "" if offered.device.healthy else "reported unhealthy")
            for name, offered in sorted(self.offered().items())
        ]
