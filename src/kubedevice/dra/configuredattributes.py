"""Attributes and capacity from config: ``dra.resources.<resource>.attributes`` and ``.capacity``.

Each value is a constant (``family: instinct``, ``cores: 304``, ``ecc: true``), a template
over the device's facts (a string, as env templates are: ``"{model}"``; ``{{`` for a brace;
the fields are :data:`kubedevice.sources.facts.DEVICE_FIELDS`), or ``{file: NAME}``, a file
of the device's sysfs directory (``mem_info_vram_total``). ``type`` reads the text as an
``int``, ``bool``, ``string`` or ``semver`` (normalised as Kubernetes' CEL ``semver()`` does:
``v2.1`` is ``2.1.0``) for an attribute, or as a ``quantity`` (a capacity's only type:
``17163091968`` bytes, ``16Gi``).

A value that cannot be produced (a file that cannot be read, a fact the device lacks, text
that is not of its type) makes the device unhealthy, as an unhealthy device is published
(tainted, or left out), with one log line naming the file; it is read again whenever the
slices are built, and the line written again only when the reason changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ValidationInfo, field_validator, model_validator

from ..allocation.sharing import physical
from ..apimachinery.validation import C_IDENTIFIER, is_dns1123_subdomain
from ..device import Device, Health
from ..errors import FieldProblem, KubedeviceError
from ..sources.base import Found
from ..sources.discovery import dra_attributes
from ..sources.facts import DEVICE_FIELDS, PCI_FIELDS, SYSFS_FIELDS, DeviceFacts, FactUnavailable
from ..sources.hostroot import HostRoot
from ..sources.schema import SCHEMA_CONFIG, ResourceConfig, check_template, template_fields
from .deviceattribute import NumaForm, with_standard_attributes

log = logging.getLogger("kubedevice.dra.attributes")

ValueType = Literal["int", "bool", "string", "semver", "quantity"]
_TYPE_KEY = {"int": "int", "bool": "bool", "string": "string", "semver": "version", "quantity": "quantity"}
_INT = re.compile(r"^[+-]?([0-9]+|0[xX][0-9a-fA-F]+)\Z")
_TRUE, _FALSE = frozenset({"1", "y", "yes", "true", "on"}), frozenset({"0", "n", "no", "false", "off"})
_MAX_VALUE = 64  # the API's longest string or version value
#: Attributes the driver itself gives every device.
RESERVED = frozenset({"id", "resource", "group", "replica", "physicalDevice", "source", "numaNode"})
#: The capacity of a device shared as capacity (``dra.sharing: capacity``), the driver's own too.
RESERVED_CAPACITY = frozenset({"replicas"})
_NO_SYSFS = ("static", "glob")


class NotOfType(KubedeviceError, ValueError):
    """Text that is not a value of its type."""


def typed(text: str, kind: ValueType) -> dict[str, Any]:
    """``text`` as the one-key value of the API (``{"int": 3}``, ``{"quantity": "16Gi"}``)."""
    value: Any = text
    if kind == "int":
        if not _INT.match(text) or not -(2**63) <= int(text, 0 if "x" in text.lower() else 10) < 2**63:
            raise NotOfType(f"{text!r} is not an int64")
        value = int(text, 0 if "x" in text.lower() else 10)
    elif kind == "bool":
        if text.lower() not in _TRUE | _FALSE:
            raise NotOfType(f"{text!r} is not a bool (true/false, 1/0, y/n, yes/no, on/off)")
        value = text.lower() in _TRUE
    elif kind == "semver":
        value = _semver(text)
    elif kind == "quantity":
        value = _quantity(text)
    return {_TYPE_KEY[kind]: value}


def _semver(text: str) -> str:
    from ..cel.semver import SemverError, normalize_and_parse  # noqa: PLC0415 - the CEL engine only when used

    try:
        v = normalize_and_parse(text)
    except SemverError as err:
        raise NotOfType(f"{text!r} is not a semantic version: {err}") from None
    result = f"{v.major}.{v.minor}.{v.patch}"
    result += "-" + ".".join(map(str, v.pre)) if v.pre else ""
    result += "+" + ".".join(v.build) if v.build else ""
    if len(result) > _MAX_VALUE:
        raise NotOfType(f"version {result!r} is longer than {_MAX_VALUE} characters")
    return result


def _quantity(text: str) -> str:
    """The text the API server stores (``Quantity.String()``), so the published slice never differs from it."""
    from .structured.consumable_capacity import CapacityError, parse  # noqa: PLC0415 - only when used

    try:
        return str(parse(text, "quantity"))
    except CapacityError:
        raise NotOfType(f"{text!r} is not a quantity") from None


def _device_template(template: str) -> str:
    """Known fields, and format specs that fit text (every fact is text: ``{numa_node:d}`` is refused)."""
    check_template(template, DEVICE_FIELDS)
    try:
        template.format_map(dict.fromkeys(DEVICE_FIELDS, "sample"))
    except (ValueError, TypeError) as err:
        raise ValueError(f"template {template!r}: {err}") from None
    return template


def _sysfs_file(name: str) -> str:
    if name.startswith("/") or ".." in name.split("/") or "\0" in name or not name.strip("/"):
        raise ValueError(f"{name!r} must be a path relative to the device's sysfs directory, without '..'")
    return name


DeviceTemplate = Annotated[str, AfterValidator(_device_template)]


class _Model(BaseModel):
    model_config = SCHEMA_CONFIG


class ValueSource(_Model):
    """A value per device: a template over its facts or a file of its sysfs directory, read as ``type``
    (``None``: a string for an attribute, a quantity for a capacity). Constants are templates
    without a field, written as plain YAML values (:func:`_attribute_shorthand`)."""

    template: DeviceTemplate | None = None
    file: Annotated[str, AfterValidator(_sysfs_file)] | None = None
    type: ValueType | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ValueSource:
        if (self.template is None) == (self.file is None):
            written = [name for name in ("template", "file") if name in self.model_fields_set]
            raise FieldProblem(tuple(written[-1:]), "set exactly one of template and file")
        return self


def _attribute_shorthand(value: Any) -> Any:
    """``ecc: true``, ``cores: 304`` and ``model: "{model}"`` as the mapping they stand for."""
    if isinstance(value, bool):
        return {"template": str(value).lower(), "type": "bool"}
    if isinstance(value, int):
        return {"template": str(value), "type": "int"}
    if isinstance(value, str):
        return {"template": value}
    if isinstance(value, dict | ValueSource):
        return value
    raise ValueError(f"{value!r}: write text (a template), an int, a bool, or a mapping with template or file")


def _capacity_shorthand(value: Any) -> Any:
    """``slots: 4`` and ``memory: 16Gi`` as the mapping they stand for (a capacity is a quantity)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"template": str(value)}
    if isinstance(value, str):
        return {"template": value}
    if isinstance(value, dict | ValueSource):
        return value
    raise ValueError(f"{value!r}: a capacity is a quantity: write it as a number or text, or a mapping")


@dataclass(frozen=True)
class _Source:
    """A configured value to produce per device: a template or a file, and its type (resolved)."""

    template: str | None
    file: str | None
    type: ValueType


def _spec(value: ValueSource, capacity: bool) -> _Source:
    return _Source(value.template, value.file, value.type or ("quantity" if capacity else "string"))


def _name_problem(name: str) -> str | None:
    """A DRA attribute or capacity name: an identifier of at most 32 characters, after a domain or not."""
    domain, slash, ident = name.rpartition("/")
    if slash and (is_dns1123_subdomain(domain) or len(domain) > 63):
        return f"{name!r}: the domain {domain!r} must be a lowercase DNS subdomain of at most 63 characters"
    if not C_IDENTIFIER.match(ident) or len(ident) > 32:
        return f"{name!r} must be a C identifier of at most 32 characters (letters, digits, '_'), with a domain or not"
    if (not slash and name in RESERVED) or domain == "resource.kubernetes.io":
        return f"{name!r} is given by the driver itself; choose another name"
    return None


class ResourceAttributes(_Model):
    """What one resource's devices publish beyond the driver's own attributes."""

    attributes: dict[str, Annotated[ValueSource, BeforeValidator(_attribute_shorthand)]] = {}
    capacity: dict[str, Annotated[ValueSource, BeforeValidator(_capacity_shorthand)]] = {}

    @field_validator("attributes", "capacity")
    @classmethod
    def _names_and_constants(cls, values: dict[str, ValueSource], info: ValidationInfo) -> dict[str, ValueSource]:
        capacity = info.field_name == "capacity"
        for name, value in values.items():
            problem = _name_problem(name)
            if capacity and name in RESERVED_CAPACITY:
                problem = f"{name!r} is given by the driver itself (dra.sharing: capacity); choose another name"
            if problem:
                raise FieldProblem((name, "[key]"), problem)
            spec = _spec(value, capacity)
            if capacity and spec.type != "quantity":
                raise FieldProblem((name, "type"), f"a capacity is a quantity, not {spec.type}")
            if not capacity and spec.type == "quantity":
                raise FieldProblem((name, "type"), "a quantity is a capacity: put it under 'capacity'")
            if spec.template is not None and not template_fields(spec.template):
                try:  # a constant: wrong now, wrong on every node
                    typed(spec.template.format_map({}), spec.type)
                except NotOfType as err:
                    raise FieldProblem((name, "template"), str(err)) from None
        return values

    def source_problem(self, source_kind: str) -> FieldProblem | None:
        """What this resource's source cannot give: a file without a sysfs directory, a PCI fact elsewhere."""
        for section in ("attributes", "capacity"):
            for name, value in getattr(self, section).items():
                if value.file is not None and source_kind in _NO_SYSFS:
                    return FieldProblem(
                        (section, name, "file"), f"a {source_kind} device has no sysfs directory to read files from"
                    )
                fields = template_fields(value.template) if value.template is not None else frozenset()
                if source_kind != "pci" and fields & PCI_FIELDS:
                    wrong = ", ".join(sorted(fields & PCI_FIELDS))
                    return FieldProblem(
                        (section, name, "template"), f"{wrong}: only pci devices have these (this is {source_kind})"
                    )
                if source_kind in _NO_SYSFS and fields & SYSFS_FIELDS:
                    wrong = ", ".join(sorted(fields & SYSFS_FIELDS))
                    return FieldProblem((section, name, "template"), f"{wrong}: a {source_kind} device has no sysfs")
        return None


@dataclass(frozen=True)
class _Read:
    """What one physical device gave: its values, or why it could not."""

    found: Found
    values: dict[str, dict[str, Any]]
    failure: str | None


class ConfiguredAttributes:
    """One resource's configured attributes and capacity, and the standard ones, per device."""

    def __init__(
        self, host: HostRoot, resource: ResourceConfig, spec: ResourceAttributes | None, numa_form: NumaForm
    ) -> None:
        self.host, self.resource, self.numa_form = host, resource, numa_form
        sections = (("attributes", spec.attributes), ("capacity", spec.capacity)) if spec else ()
        self._specs = [
            (name, _spec(value, section == "capacity"))
            for section, values in sections
            for name, value in values.items()
        ]
        self._read: dict[str, _Read] = {}

    def published(
        self, devices: Sequence[Device], found: Sequence[Found]
    ) -> tuple[list[Device], dict[str, dict[str, Mapping[str, Any]]]]:
        """The devices (unhealthy where a value cannot be read) and their attributes by device ID."""
        reads = self._refresh(found)
        attributes = with_standard_attributes(self.host, dra_attributes(self.resource, found), self.numa_form)
        for device in devices:
            read = reads.get(physical(device))
            if read is not None:
                found_values = attributes.get(device.id, {})
                attributes[device.id] = {
                    **found_values,
                    **{name: _over(found_values.get(name), value) for name, value in read.values.items()},
                }
        return self._marked(devices, reads), attributes

    def devices(self, devices: Sequence[Device], found: Sequence[Found]) -> list[Device]:
        """The devices, unhealthy where a value cannot be read (what prepare and health see)."""
        return self._marked(devices, self._refresh(found))

    @staticmethod
    def _marked(devices: Sequence[Device], reads: Mapping[str, _Read]) -> list[Device]:
        def failed(device: Device) -> bool:
            read = reads.get(physical(device))
            return read is not None and read.failure is not None and device.healthy

        return [replace(d, health=Health.UNHEALTHY) if failed(d) else d for d in devices]

    def _refresh(self, found: Sequence[Found]) -> dict[str, _Read]:
        """Values read again for a device that changed or failed; one log line per new reason."""
        if not self._specs:
            return {}
        fresh: dict[str, _Read] = {}
        for item in found:
            before = self._read.get(item.key)
            if before is not None and before.found == item and before.failure is None:
                fresh[item.key] = before
                continue
            now = self._values(item)
            if now.failure is not None and (before is None or before.failure != now.failure):
                log.warning("%s device %s is unhealthy: %s", self.resource.name, item.key, now.failure)
            elif now.failure is None and before is not None and before.failure is not None:
                log.info("%s device %s: its attributes and capacity are read again", self.resource.name, item.key)
            fresh[item.key] = now
        self._read = fresh
        return fresh

    def _values(self, found: Found) -> _Read:
        facts = DeviceFacts(self.host, found, self.resource.source_kind)
        values: dict[str, dict[str, Any]] = {}
        for name, spec in self._specs:
            try:  # an attribute and a capacity of one name share the entry (their keys differ)
                values[name] = {**values.get(name, {}), **typed(self._text(spec, facts, found), spec.type)}
            except FactUnavailable as err:
                return _Read(found, {}, f"{name}: cannot read {err}")
            except NotOfType as err:
                return _Read(found, {}, f"{name}: {err}")
        return _Read(found, values, None)

    def _text(self, spec: _Source, facts: DeviceFacts, found: Found) -> str:
        if spec.template is not None:
            return spec.template.format_map(facts)
        path = f"{found.sysfs}/{spec.file}"
        try:
            text = self.host.read(path)
        except OSError as err:
            raise FactUnavailable(path, err.strerror or "cannot be read") from None
        except UnicodeDecodeError:
            raise FactUnavailable(path, "is not UTF-8 text") from None
        return text


def _over(discovered: Mapping[str, Any] | None, configured: Mapping[str, Any]) -> Mapping[str, Any]:
    """A configured value replaces the discovered one of its kind (attribute or capacity) and
    keeps the other: a configured capacity ``vendor`` leaves the discovered attribute."""
    if not discovered:
        return configured
    kinds = {key == "quantity" for key in configured}
    return {**{k: v for k, v in discovered.items() if (k == "quantity") not in kinds}, **configured}
