"""Opaque device configuration from the DeviceClass and the claim, read as upstream reads it.

The scheduler copies the class's and the claim's ``config`` into the claim's
``status.allocation.devices.config``, each entry marked ``FromClass`` or ``FromClaim``.
Which entries apply to one allocated device is upstream's ``ConfigForResult``
(``k8s.io/dynamic-resource-allocation/resourceclaim/resourceclaim.go``: opaque entries whose
``requests`` is empty, names the result's request, or names its main request, which covers
every subrequest). Their order is that of the example driver's ``GetOpaqueDeviceConfigs``
(``kubernetes-sigs/dra-example-driver``, ``cmd/dra-example-kubeletplugin/state.go``): class
entries first, then the claim's, each in list order, so a later entry overrides an earlier
one. Entries for another driver are skipped, not refused: one request may be satisfiable by
several drivers and carry configuration for each.

A plugin that implements :class:`ConfigHandler` gets the list and returns the container edits
it wants for that device; any other plugin gets :func:`default_edits`, the configured
daemon's small documented format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ...apimachinery.validation import C_IDENTIFIER
from ...device import ContainerAllocation, Device
from ...errors import KubedeviceError
from ..nodeclaims import AllocatedDevice, DeviceConfig

SOURCES = ("FromClass", "FromClaim")
"""Lowest precedence first."""
ADMIN_ACCESS_ENV = "DRA_ADMIN_ACCESS"
"""Set to ``true`` in the container of an ``adminAccess`` result, as the example driver does."""
_ALLOWED_KEYS = frozenset({"apiVersion", "kind", "env"})


class ConfigError(KubedeviceError, ValueError):
    """A configuration the driver refuses: the claim's error, never the daemon's."""


@runtime_checkable
class ConfigHandler(Protocol):
    """A plugin that reads opaque configuration for its devices.

    ``configs`` holds the ``opaque.parameters`` (decoded JSON) that apply to ``device``, lowest
    precedence first; empty when none does. The answer's ``envs``, ``mounts`` and ``devices``
    are added to the device's CDI edits (its env wins over the device's own grant). Raising
    :class:`ValueError` (or any exception) fails this claim only, with the message as its error.
    """

    def apply_config(self, device: Device, configs: Sequence[Any], admin_access: bool) -> ContainerAllocation: ...


def configs_for(configs: Sequence[DeviceConfig], result: AllocatedDevice, driver: str) -> list[Any]:
    """The parameters of ``driver``'s entries that apply to ``result``, lowest precedence first."""
    applicable = [c for c in configs if c.driver is not None and _names(c.requests, result.request)]
    for entry in applicable:
        if entry.source not in SOURCES:  # GetOpaqueDeviceConfigs: "invalid config source"
            raise ConfigError(f"invalid config source: {entry.source!r}")
    ordered = [c for source in SOURCES for c in applicable if c.source == source]
    return [c.parameters for c in ordered if c.driver == driver]


def _names(requests: Sequence[str], request: str) -> bool:
    """``isMatch``: all requests, this one, or its main request (``gpu`` covers ``gpu/large``)."""
    return not requests or request in requests or request.partition("/")[0] in requests


def default_edits(configs: Sequence[Any]) -> ContainerAllocation:
    """The configured daemon's format: a JSON object whose ``env`` (names → strings) becomes the
    container's env, later entries overriding earlier ones; ``apiVersion`` and ``kind`` may name
    the format and are not read; any other key is refused, so a typo never passes silently."""
    env: dict[str, str] = {}
    for index, parameters in enumerate(configs):
        where = f"config {index}"
        if not isinstance(parameters, Mapping):
            raise ConfigError(f"{where}: parameters must be a JSON object, not {_json_type(parameters)}")
        unknown = sorted(set(parameters) - _ALLOWED_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown field parameters.{unknown[0]} (known: apiVersion, env, kind)")
        env.update(_env(where, parameters.get("env", {})))
    return ContainerAllocation(envs=env)


def _env(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: parameters.env must be an object of names to strings")
    for name, text in value.items():
        if not C_IDENTIFIER.match(name):
            raise ConfigError(f"{where}: parameters.env.{name}: not a valid environment variable name")
        if not isinstance(text, str):
            raise ConfigError(f"{where}: parameters.env.{name}: must be a string, not {_json_type(text)}")
    return dict(value)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "null" if value is None else type(value).__name__


def edits_for(handler: object, device: Device, configs: Sequence[Any], admin_access: bool) -> ContainerAllocation:
    """The container edits configuration adds to ``device`` (the plugin's hook, else the default)."""
    if isinstance(handler, ConfigHandler):
        edits = handler.apply_config(device, configs, admin_access)
    else:
        edits = default_edits(configs)
    if not admin_access:
        return edits
    return ContainerAllocation({**edits.envs, ADMIN_ACCESS_ENV: "true"}, edits.mounts, edits.devices)
