"""The configuration of one resource: where its devices come from and what they grant.

Validation rejects at start-up what would otherwise fail later on a node: relative paths,
permission letters outside ``rwm``, malformed vendor IDs, env templates naming unknown fields,
a resource with zero or several sources, and what a kernel or the kubelet bounds (a path's
PATH_MAX, an environment string's MAX_ARG_STRLEN, a device ID's 63 characters). Decoding is
strict: a number is never read from a string or a bool, an integer never from ``2.0``, and no
number is infinite or NaN; every number has bounds. Messages are written to read well after the
lead's ``field.path:`` prefix; a check across fields blames the entry at fault
(:class:`~kubedevice.errors.FieldProblem`).
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from ..apimachinery import content
from ..apimachinery.validation import C_IDENTIFIER
from ..device import MAX_MESSAGE_BYTES
from ..errors import FieldProblem
from ..names import extended_resource_name_error
from .facts import ENV_FACTS
from .fields import MAX_TEXT, PATH_MAX, SCHEMA_CONFIG, AbsPath, HexId, Model, PciClass, each_once, path_problem
from .glob import GlobConfig
from .pci import PciConfig
from .registry import SOURCE_KINDS, SOURCES
from .source import Source
from .static import StaticConfig
from .udev import UdevConfig
from .usb import UsbConfig, UsbNode

__all__ = [
    "MAX_TEXT",
    "PATH_MAX",
    "SCHEMA_CONFIG",
    "SOURCE_KINDS",
    "AbsPath",
    "GlobConfig",
    "HexId",
    "PciClass",
    "PciConfig",
    "ResourceConfig",
    "StaticConfig",
    "UdevConfig",
    "UsbConfig",
    "UsbNode",
    "path_problem",
]
_SET_FIELDS = {"ids", "devices", "paths", "count", "resource"}
_PER_DEVICE_FIELDS = {"serials", "vendors", "products", "pci_addresses", "numa_nodes", "devlinks", "container_paths"}
ENV_FIELDS = frozenset(_SET_FIELDS | _PER_DEVICE_FIELDS | set(ENV_FACTS))
#: Fields of ``container_path`` templates (the device's own and mounts'), per device.
PATH_FIELDS = frozenset({"path", "name", "index", "devlink"})
_SAMPLE_FIELDS: dict[str, object] = {"path": "/dev/sample", "name": "sample", "index": 0, "devlink": "/dev/sample"}
_CDI_PART = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
#: Linux's MAX_ARG_STRLEN: one argument, or one ``NAME=value`` environment string, NUL included;
#: a longer one fails the container's or check's execve with E2BIG.
MAX_ARG_STRLEN = 131072


def exec_string_problem(text: str) -> str | None:
    """Why ``text`` (an argument or a ``NAME=value`` string) cannot be passed to a process, or None."""
    size = len(text.encode()) + 1
    if size > MAX_ARG_STRLEN:
        return f"is {size} bytes with its NUL, over the {MAX_ARG_STRLEN} execve takes (Linux MAX_ARG_STRLEN)"
    return None


ExecText = Annotated[str, StringConstraints(max_length=MAX_ARG_STRLEN)]
#: An annotation's value: bounded by the Allocate answer as a whole (:mod:`kubedevice.sources.limits`).
AnnotationText = Annotated[str, StringConstraints(max_length=MAX_MESSAGE_BYTES)]


def _permissions(value: str) -> str:
    if not value or not set(value) <= set("rwm"):
        raise ValueError(f"permissions {value!r} must be letters from 'rwm' (read, write, mknod)")
    return value


Permissions = Annotated[str, AfterValidator(_permissions)]


class PresentCheck(Model):
    """Healthy while every host path of the device exists."""

    type: Literal["present"] = "present"


class OpenableCheck(Model):
    """Healthy while every host path opens (non-blocking, read-only); catches dead nodes."""

    type: Literal["openable"] = "openable"


class ExecCheck(Model):
    """Healthy while a command exits 0 within its timeout (argv list, never a shell)."""

    type: Literal["exec"] = "exec"
    argv: list[ExecText] = Field(min_length=1)
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)

    @model_validator(mode="after")
    def _known_fields(self) -> ExecCheck:
        for i, arg in enumerate(self.argv):
            try:
                check_template(arg, frozenset({"id", "path", "paths", "sysfs"}))
            except ValueError as err:
                raise FieldProblem(("argv", i), str(err)) from None
            problem = exec_string_problem(arg)
            if problem:
                raise FieldProblem(("argv", i), f"argument {problem}")
        return self


class SysfsCheck(Model):
    """Healthy while an attribute reads ``equals`` (relative to the device's sysfs directory)."""

    type: Literal["sysfs"] = "sysfs"
    attribute: str = Field(min_length=1)
    equals: str

    @model_validator(mode="after")
    def _safe_attribute(self) -> SysfsCheck:
        if ".." in self.attribute.split("/"):
            raise FieldProblem(("attribute",), f"attribute {self.attribute!r} must not contain '..'")
        return self


HealthCheck = Annotated[PresentCheck | OpenableCheck | ExecCheck | SysfsCheck, Field(discriminator="type")]


def _default_checks() -> list[HealthCheck]:
    return [PresentCheck()]


class HealthConfig(Model):
    """Checks run every ``interval_seconds`` and on hotplug; thresholds damp flapping."""

    checks: list[HealthCheck] = Field(default_factory=_default_checks)
    interval_seconds: float = Field(default=10.0, gt=0, le=86_400)
    failure_threshold: int = Field(default=3, ge=1, le=10_000, description="consecutive failures before Unhealthy")
    recovery_threshold: int = Field(default=1, ge=1, le=10_000, description="consecutive passes before Healthy again")


def _path_template(template: str) -> str:
    """A ``container_path`` template: known fields only, and absolute once rendered."""
    check_template(template, PATH_FIELDS)
    try:
        sample = template.format_map(_SAMPLE_FIELDS)
    except (ValueError, TypeError) as exc:  # a format spec that does not fit, such as {path:d}
        raise ValueError(f"template {template!r}: {exc}") from exc
    problem = path_problem(sample)
    if problem:
        raise ValueError(f"template {template!r} {problem} once rendered")
    return template


def template_fields(template: str) -> frozenset[str]:
    """The field names a (validated) template uses."""
    return frozenset(name for _, name, _, _ in string.Formatter().parse(template) if name is not None)


PathTemplate = Annotated[str, AfterValidator(_path_template)]


class MountConfig(Model):
    """A host path mounted into each container; ``container_path`` may name the device
    (``{path}``, ``{name}``, ``{index}``) so that its firmware or data follows it."""

    host_path: AbsPath
    container_path: PathTemplate | None = None
    read_only: bool = False


class CdiConfig(Model):
    """Write CDI spec files and answer Allocate with CDI names (``cri``) or annotations."""

    kind: str | None = Field(default=None, description="vendor.com/class; defaults to the resource name")
    mode: Literal["cri", "annotations"] = "cri"

    @model_validator(mode="after")
    def _valid_kind(self) -> CdiConfig:
        if self.kind is not None:
            try:
                cdi_kind_error(self.kind)
            except ValueError as err:
                raise FieldProblem(("kind",), str(err)) from None
        return self


_FILE_MODE = re.compile(r"^0[0-7]{3}\Z")
_MAX_ID = 4_294_967_294  # uint32 in CDI; 4294967295 is (uid_t)-1, "leave unchanged" to chown


def _file_mode(value: Any) -> Any:
    """YAML 1.1 reads an unquoted ``0660`` as the number 432: ask for quotes rather than guess."""
    if isinstance(value, int) or not isinstance(value, str) or not _FILE_MODE.match(value):
        raise ValueError(f'{value!r} must be a quoted octal file mode like "0660"')
    return value


class DeviceOwnership(Model):
    """Owner and mode of the device nodes a container gets, written into the CDI spec (non-root pods)."""

    uid: StrictInt | None = Field(default=None, ge=0, le=_MAX_ID)
    gid: StrictInt | None = Field(default=None, ge=0, le=_MAX_ID)
    mode: Annotated[str, BeforeValidator(_file_mode)] | None = None

    @model_validator(mode="after")
    def _something(self) -> DeviceOwnership:
        if self.uid is None and self.gid is None and self.mode is None:
            raise ValueError("set at least one of uid, gid and mode")
        return self

    @property
    def file_mode(self) -> int | None:
        """The mode as CDI's ``fileMode`` wants it: a number (``"0660"`` is 432)."""
        return int(self.mode, 8) if self.mode is not None else None


def _quoted_label_value(value: Any) -> Any:
    """YAML reads ``gpu: true`` or ``cores: 8`` as a bool or number, never a label's string: ask for quotes."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} must be quoted: label values are strings, YAML read a {type(value).__name__}")
    return value


LabelValue = Annotated[str, BeforeValidator(_quoted_label_value)]


def cdi_kind_error(kind: str) -> None:
    """Raise ``ValueError`` unless ``kind`` is a CDI ``vendor/class`` (rules of the CDI parser)."""
    vendor, _, cls = kind.partition("/")
    if not _CDI_PART.match(vendor) or not _CDI_PART.match(cls) or "/" in cls:
        raise ValueError(
            f"CDI kind {kind!r} must be 'vendor/class': each part starts with a letter, ends with a "
            "letter or digit, and uses only letters, digits, '_', '-' and '.'"
        )


def check_template(template: str, allowed: frozenset[str]) -> None:
    try:
        fields = template_fields(template)
    except ValueError as exc:
        raise ValueError(f"template {template!r}: {exc}") from exc
    unknown = fields - allowed
    if unknown:
        raise ValueError(
            f"template {template!r} uses unknown field(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(allowed))}"
        )


class ResourceConfig(Model):
    """One extended resource: a name, exactly one source, and what its devices grant."""

    name: str
    # One optional field per source of the registry, in its order (checked below): typed for mypy.
    static: StaticConfig | None = None
    glob: GlobConfig | None = None
    usb: UsbConfig | None = None
    pci: PciConfig | None = None
    udev: UdevConfig | None = None
    permissions: Permissions = "rw"
    container_path: PathTemplate | None = None
    shared_paths: list[AbsPath] = Field(default_factory=list)
    """Nodes no device owns but each needs (``/dev/kfd``, ``/dev/nvidiactl``): granted once per container."""
    mounts: list[MountConfig] = Field(default_factory=list)
    env: dict[str, ExecText] = Field(default_factory=dict)
    annotations: dict[str, AnnotationText] = Field(default_factory=dict)
    health: HealthConfig = HealthConfig()
    replicas: int = Field(default=1, ge=1, le=1000, description="IDs advertised per physical device")
    policy: Literal["spread", "pack"] = "spread"
    one_replica_per_device: bool = False
    cdi: CdiConfig | None = None
    device_ownership: DeviceOwnership | None = None
    node_selector: dict[str, LabelValue] = Field(default_factory=dict)
    """Serve only on nodes whose labels hold every pair (a pod's ``nodeSelector``): :mod:`kubedevice.node.labels`."""

    @field_validator("name")
    @classmethod
    def _resource_name(cls, name: str) -> str:
        error = extended_resource_name_error(name)
        if error:
            raise ValueError(error)
        return name

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, selector: dict[str, str]) -> dict[str, str]:
        """Kubernetes' own label rules, so a selector that no node could ever match fails here."""
        for key, value in selector.items():
            if errors := content.is_label_key(key):
                raise FieldProblem((key, "[key]"), f"label key {key!r} is not a valid label key: {'; '.join(errors)}")
            if errors := content.is_label_value(value):
                why = "; ".join(errors)
                raise FieldProblem((key,), f"label {key!r}: value {value!r} is not a valid label value: {why}")
        return selector

    @field_validator("shared_paths")
    @classmethod
    def _shared_once(cls, paths: list[str]) -> list[str]:
        each_once(paths)
        return paths

    @field_validator("env")
    @classmethod
    def _env_templates(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [name for name in env if not C_IDENTIFIER.match(name)]
        if bad:
            names = ", ".join(map(repr, sorted(bad)))
            raise FieldProblem((bad[0], "[key]"), f"invalid environment variable names: {names}")
        for name, template in env.items():
            try:
                check_template(template, ENV_FIELDS)
            except ValueError as err:
                raise FieldProblem((name,), str(err)) from None
            problem = exec_string_problem(f"{name}={template}")
            if problem:
                raise FieldProblem((name,), f"'{name}=…' {problem}")
        return env

    @model_validator(mode="after")
    def _consistent(self) -> ResourceConfig:
        chosen = [kind for kind in SOURCE_KINDS if getattr(self, kind) is not None]
        if len(chosen) != 1:
            got = ", ".join(chosen) or "none"
            nulls = [kind for kind in SOURCE_KINDS if kind in self.model_fields_set and getattr(self, kind) is None]
            blamed = chosen[1:2] or nulls[:1]  # the second source, or one written as null
            raise FieldProblem(
                tuple(blamed), f"exactly one source of {', '.join(SOURCE_KINDS)} is required (got {got})"
            )
        if self.cdi is not None and self.cdi.kind is None:
            try:
                cdi_kind_error(self.name)
            except ValueError as err:
                raise FieldProblem(
                    ("name",), f"{err} (the CDI kind defaults to the resource name; set cdi.kind)"
                ) from None
        source, config = self.source
        if not source.sysfs:
            self._no_relative_sysfs()
        source.check(config, self.name, self.replicas)
        if self.container_path is not None:
            try:
                self._container_path_fits(self.container_path)
            except ValueError as err:
                raise FieldProblem(("container_path",), str(err)) from None
        for i, mount in enumerate(self.mounts):
            if mount.container_path is not None:
                try:
                    self._fields_fit(f"mounts[{i}].container_path", mount.container_path)
                except ValueError as err:
                    raise FieldProblem(("mounts", i, "container_path"), str(err)) from None
        return self

    def _container_path_fits(self, template: str) -> None:
        """Refuse what would put two devices at one path, or a template that could never apply."""
        source, config = self.source
        problem = source.not_one_node(config)
        if problem:
            raise ValueError(problem)
        if not template_fields(template) & PATH_FIELDS:
            reason = source.several(config)
            if reason:
                fields = "{path}, {name}, {index} or {devlink}" if source.devlinks else "{path}, {name} or {index}"
                raise ValueError(
                    f"container_path {template!r} has no per-device field ({fields}) "
                    f"but {reason}: two devices in one container would need the same path"
                )
        self._fields_fit("container_path", template)

    def _fields_fit(self, where: str, template: str) -> None:
        """``{index}`` counts the devices of one container, which a CDI spec written ahead cannot know."""
        if self.cdi is not None and "index" in template_fields(template):
            raise ValueError(
                f"{where} {template!r} uses {{index}}, which cdi cannot express: a device's CDI spec is "
                "written before any container asks for it (use {name} or {path})"
            )
        source, config = self.source
        if not source.matched_paths(config) and template_fields(template) & {"path", "name"}:
            raise ValueError(
                f"{where} {template!r}: {source.kind} devices have no matched path for {{path}} or {{name}}"
            )
        if not source.devlinks and "devlink" in template_fields(template):
            raise ValueError(f"{where} {template!r} uses {{devlink}}, which only udev devices have (udev's symlinks)")

    def _no_relative_sysfs(self) -> None:
        for i, check in enumerate(self.health.checks):
            if isinstance(check, SysfsCheck) and not check.attribute.startswith("/"):
                raise FieldProblem(
                    ("health", "checks", i, "sysfs", "attribute"),
                    f"sysfs attribute {check.attribute!r} must be absolute for a {self.source_kind} source "
                    "(only usb and pci devices have a sysfs directory)",
                )

    @property
    def source_kind(self) -> str:
        return next(kind for kind in SOURCE_KINDS if getattr(self, kind) is not None)

    @property
    def source(self) -> tuple[Source[Any], Any]:
        """The resource's source and its config (``SOURCES["pci"]`` and the ``pci:`` model)."""
        kind = self.source_kind
        return SOURCES[kind], getattr(self, kind)

    @property
    def cdi_kind(self) -> str:
        return (self.cdi.kind if self.cdi is not None else None) or self.name


def _fields_match_registry() -> None:
    """A source registered without its typed field (or with another model) could never be chosen."""
    declared = tuple(name for name in ResourceConfig.model_fields if name in SOURCES)
    fields = ResourceConfig.model_fields
    if declared != SOURCE_KINDS or any(fields[k].annotation != SOURCES[k].config | None for k in SOURCE_KINDS):
        raise ImportError(f"ResourceConfig's source fields {declared} do not match the registry's {SOURCE_KINDS}")


_fields_match_registry()
