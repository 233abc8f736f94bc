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

import glob as globlib
import re
import string
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from ..apimachinery import content
from ..apimachinery.validation import C_IDENTIFIER
from ..device import MAX_ID_LENGTH, MAX_MESSAGE_BYTES
from ..errors import FieldProblem
from ..names import extended_resource_name_error

SOURCE_KINDS = ("static", "glob", "usb", "pci", "udev")
_SET_FIELDS = {"ids", "devices", "paths", "count", "resource"}
_PER_DEVICE_FIELDS = {"serials", "vendors", "products", "pci_addresses", "numa_nodes", "devlinks", "container_paths"}
ENV_FIELDS = frozenset(_SET_FIELDS | _PER_DEVICE_FIELDS)
#: Fields of ``container_path`` templates (the device's own and mounts'), per device.
PATH_FIELDS = frozenset({"path", "name", "index", "devlink"})
_SAMPLE_FIELDS: dict[str, object] = {"path": "/dev/sample", "name": "sample", "index": 0, "devlink": "/dev/sample"}
#: The node kinds ``usb.nodes`` may ask for: the device's own bus node and its interfaces' class nodes.
UsbNode = Literal["bus", "tty", "video", "hidraw", "input", "sound"]
_HEX4 = re.compile(r"^(0x)?([0-9a-fA-F]{4})\Z")
_PCI_CLASS = re.compile(r"^(0x)?([0-9a-fA-F]{2}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6})\Z")
_CLASS_FORMAT = '2, 4 or 6 hex digits like "1200" (class, subclass, prog-if)'
_CDI_PART = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
#: Linux's PATH_MAX, the terminating NUL included: a longer path fails with ENAMETOOLONG.
PATH_MAX = 4096
#: Linux's MAX_ARG_STRLEN: one argument, or one ``NAME=value`` environment string, NUL included;
#: a longer one fails the container's or check's execve with E2BIG.
MAX_ARG_STRLEN = 131072
#: Any other text: far above any name, pattern or value a config needs.
MAX_TEXT = 4096
#: Every model of the config file (``config.py`` and the ``dra:`` section use it too).
SCHEMA_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, str_max_length=MAX_TEXT)


class _Model(BaseModel):
    model_config = ConfigDict(**SCHEMA_CONFIG, populate_by_name=True)


def path_problem(value: str) -> str | None:
    if not value.startswith("/"):
        return "must be absolute"
    if ".." in value.split("/"):
        return "must not contain '..'"
    if len(value.encode()) >= PATH_MAX:
        return f"is {len(value.encode())} bytes, over the {PATH_MAX - 1} a path may have (PATH_MAX)"
    return "must not contain NUL" if "\0" in value else None


def exec_string_problem(text: str) -> str | None:
    """Why ``text`` (an argument or a ``NAME=value`` string) cannot be passed to a process, or None."""
    size = len(text.encode()) + 1
    if size > MAX_ARG_STRLEN:
        return f"is {size} bytes with its NUL, over the {MAX_ARG_STRLEN} execve takes (Linux MAX_ARG_STRLEN)"
    return None


ExecText = Annotated[str, StringConstraints(max_length=MAX_ARG_STRLEN)]
#: An annotation's value: bounded by the Allocate answer as a whole (:mod:`kubedevice.sources.limits`).
AnnotationText = Annotated[str, StringConstraints(max_length=MAX_MESSAGE_BYTES)]


def _absolute(value: str) -> str:
    problem = path_problem(value)
    if problem:
        raise ValueError(f"path {value!r} {problem}")
    return value


def _hex(pattern: re.Pattern[str], what: str) -> Callable[[Any], Any]:
    """A before-validator for hex IDs: quoted (YAML reads 1234 as a number), normalised to lowercase."""

    def check(value: Any) -> Any:
        if isinstance(value, int):
            raise ValueError(f"{value} must be quoted: {what}")
        if isinstance(value, str):
            match = pattern.match(value)
            if not match:
                raise ValueError(f"{value!r} is not {what}")
            return match.group(2).lower()
        return value

    return check


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
    return value


AbsPath = Annotated[str, AfterValidator(_absolute)]
HexId = Annotated[str, BeforeValidator(_hex(_HEX4, '4 hex digits like "10ee"'))]
PciClass = Annotated[str, BeforeValidator(_hex(_PCI_CLASS, _CLASS_FORMAT))]


def _permissions(value: str) -> str:
    if not value or not set(value) <= set("rwm"):
        raise ValueError(f"permissions {value!r} must be letters from 'rwm' (read, write, mknod)")
    return value


Permissions = Annotated[str, AfterValidator(_permissions)]


#: Devices one resource advertises at most (IDs with their replicas), known from the config for a
#: static source; the kubelet's 4 MiB ListAndWatch answer bounds every source (:mod:`.limits`).
MAX_DEVICES = 100_000


class StaticConfig(_Model):
    """``count`` identical devices, each granting the same fixed paths (the null example)."""

    count: int = Field(ge=1, le=MAX_DEVICES)
    paths: list[AbsPath] = []


class GlobConfig(_Model):
    """Host paths by glob: each match is a device, or matches form groups (``group``/``group_by``)."""

    paths: list[AbsPath] = Field(min_length=1)
    group: bool = False
    group_by: Annotated[str, AfterValidator(_regex)] | None = None

    @model_validator(mode="after")
    def _one_grouping(self) -> GlobConfig:
        if self.group and self.group_by is not None:
            raise FieldProblem(("group_by",), "set either group or group_by, not both")
        return self


def _default_usb_nodes() -> list[UsbNode]:
    return ["bus"]


class UsbConfig(_Model):
    """USB devices by vendor/product (and serial) from ``/sys/bus/usb/devices``; ``nodes`` says which
    of its device nodes a device grants (its ``/dev/bus/usb`` node, its interfaces' ttys, ...)."""

    vendor: HexId
    product: HexId | None = None
    serial: str | None = None
    nodes: list[UsbNode] = Field(default_factory=_default_usb_nodes, min_length=1)

    @field_validator("nodes")
    @classmethod
    def _each_once(cls, nodes: list[UsbNode]) -> list[UsbNode]:
        twice = sorted({kind for kind in nodes if nodes.count(kind) > 1})
        if twice:
            second = next(i for i, kind in enumerate(nodes) if kind in nodes[:i])
            raise FieldProblem((second,), f"lists {', '.join(twice)} more than once")
        return nodes


def _quoted_pattern(value: Any) -> Any:
    """YAML reads ``ID_VENDOR_ID: 0403`` as the number 259: ask for quotes rather than guess the text."""
    if not isinstance(value, str):
        raise ValueError(f'{value!r} must be a quoted string: udev property values are text (write "{value}")')
    return value


class UdevConfig(_Model):
    """Device nodes by udev's database (``/run/udev/data``): subsystem and properties as shell patterns."""

    subsystem: str | None = Field(default=None, min_length=1)
    match: dict[str, Annotated[str, BeforeValidator(_quoted_pattern)]] = {}

    @field_validator("match")
    @classmethod
    def _property_names(cls, match: dict[str, str]) -> dict[str, str]:
        bad = [key for key in match if not C_IDENTIFIER.match(key)]  # udev's keys are identifiers
        if bad:
            names = ", ".join(map(repr, sorted(bad)))
            raise FieldProblem((bad[0], "[key]"), f"invalid udev property names: {names} (letters, digits and '_')")
        return match

    @model_validator(mode="after")
    def _selects(self) -> UdevConfig:
        if self.subsystem is None and not self.match:
            raise ValueError("set subsystem or match (or both): without either every device node of the host matches")
        return self


class PciConfig(_Model):
    """PCI functions by vendor/device/class from ``/sys/bus/pci/devices``; VFIO grants the group node."""

    vendor: HexId
    device: HexId | None = None
    pci_class: PciClass | None = Field(default=None, alias="class")
    vfio: bool = False


class PresentCheck(_Model):
    """Healthy while every host path of the device exists."""

    type: Literal["present"] = "present"


class OpenableCheck(_Model):
    """Healthy while every host path opens (non-blocking, read-only); catches dead nodes."""

    type: Literal["openable"] = "openable"


class ExecCheck(_Model):
    """Healthy while a command exits 0 within its timeout (argv list, never a shell)."""

    type: Literal["exec"] = "exec"
    argv: list[ExecText] = Field(min_length=1)
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)

    @model_validator(mode="after")
    def _known_fields(self) -> ExecCheck:
        for i, arg in enumerate(self.argv):
            try:
                _check_template(arg, frozenset({"id", "path", "paths", "sysfs"}))
            except ValueError as err:
                raise FieldProblem(("argv", i), str(err)) from None
            problem = exec_string_problem(arg)
            if problem:
                raise FieldProblem(("argv", i), f"argument {problem}")
        return self


class SysfsCheck(_Model):
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


class HealthConfig(_Model):
    """Checks run every ``interval_seconds`` and on hotplug; thresholds damp flapping."""

    checks: list[HealthCheck] = Field(default_factory=_default_checks)
    interval_seconds: float = Field(default=10.0, gt=0, le=86_400)
    failure_threshold: int = Field(default=3, ge=1, le=10_000, description="consecutive failures before Unhealthy")
    recovery_threshold: int = Field(default=1, ge=1, le=10_000, description="consecutive passes before Healthy again")


def _path_template(template: str) -> str:
    """A ``container_path`` template: known fields only, and absolute once rendered."""
    _check_template(template, PATH_FIELDS)
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


class MountConfig(_Model):
    """A host path mounted into each container; ``container_path`` may name the device
    (``{path}``, ``{name}``, ``{index}``) so that its firmware or data follows it."""

    host_path: AbsPath
    container_path: PathTemplate | None = None
    read_only: bool = False


class CdiConfig(_Model):
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


class DeviceOwnership(_Model):
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


def _check_template(template: str, allowed: frozenset[str]) -> None:
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


class ResourceConfig(_Model):
    """One extended resource: a name, exactly one source, and what its devices grant."""

    name: str
    static: StaticConfig | None = None
    glob: GlobConfig | None = None
    usb: UsbConfig | None = None
    pci: PciConfig | None = None
    udev: UdevConfig | None = None
    permissions: Permissions = "rw"
    container_path: PathTemplate | None = None
    mounts: list[MountConfig] = []
    env: dict[str, ExecText] = {}
    annotations: dict[str, AnnotationText] = {}
    health: HealthConfig = HealthConfig()
    replicas: int = Field(default=1, ge=1, le=1000, description="IDs advertised per physical device")
    policy: Literal["spread", "pack"] = "spread"
    one_replica_per_device: bool = False
    cdi: CdiConfig | None = None
    device_ownership: DeviceOwnership | None = None
    node_selector: dict[str, LabelValue] = {}
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

    @field_validator("env")
    @classmethod
    def _env_templates(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [name for name in env if not C_IDENTIFIER.match(name)]
        if bad:
            names = ", ".join(map(repr, sorted(bad)))
            raise FieldProblem((bad[0], "[key]"), f"invalid environment variable names: {names}")
        for name, template in env.items():
            try:
                _check_template(template, ENV_FIELDS)
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
        if self.source_kind in ("static", "glob"):
            self._no_relative_sysfs()
        if self.static is not None:
            self._static_ids_fit(self.static)
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

    def _static_ids_fit(self, static: StaticConfig) -> None:
        """A static device's ID is ``<name's last part>-<i>`` (``::<replica>`` after it): within the
        63 characters of the device-plugin API, known from the config alone."""
        if static.count * self.replicas > MAX_DEVICES:
            raise FieldProblem(
                ("replicas",),
                f"static.count {static.count:,} × replicas {self.replicas:,} is {static.count * self.replicas:,} "
                f"devices, over the {MAX_DEVICES:,} a resource may advertise",
            )
        stem = self.name.rsplit("/", 1)[-1]
        longest = f"{stem}-{static.count - 1}" + (f"::{self.replicas - 1}" if self.replicas > 1 else "")
        if len(longest) > MAX_ID_LENGTH:
            raise FieldProblem(
                ("name",),
                f"static devices of this resource get IDs up to {longest!r} ({len(longest)} characters), over the "
                f"{MAX_ID_LENGTH} the device plugin API allows: shorten the name after its '/', or lower "
                "static.count or replicas",
            )

    def _container_path_fits(self, template: str) -> None:
        """Refuse what would put two devices at one path, or a template that could never apply."""
        if self.pci is not None:
            raise ValueError(
                "container_path applies to devices of one node; pci devices have none, or with vfio two "
                "(/dev/vfio/<group> and /dev/vfio/vfio), which keep their own paths"
            )
        if self.static is not None and len(self.static.paths) != 1:
            raise ValueError(
                f"container_path applies to devices of one node; this static device grants "
                f"{len(self.static.paths)} paths"
            )
        if self.usb is not None and (len(self.usb.nodes) > 1 or "sound" in self.usb.nodes):
            raise ValueError(
                f"container_path applies to devices of one node; usb nodes [{', '.join(self.usb.nodes)}] give "
                "each device several, which keep their own paths"
            )
        if not template_fields(template) & PATH_FIELDS:
            reason = self._several_devices()
            if reason:
                fields = "{path}, {name} or {index}" if self.udev is None else "{path}, {name}, {index} or {devlink}"
                raise ValueError(
                    f"container_path {template!r} has no per-device field ({fields}) "
                    f"but {reason}: two devices in one container would need the same path"
                )
        self._fields_fit("container_path", template)

    def _several_devices(self) -> str | None:
        """Why the source may yield more than one device, or ``None`` when it yields at most one."""
        if self.glob is not None and (len(self.glob.paths) != 1 or globlib.has_magic(self.glob.paths[0])):
            return "the glob can match several devices (only a glob of one literal path yields one)"
        if self.static is not None and self.static.count != 1:
            return f"static has count {self.static.count}"
        if self.usb is not None and self.usb.serial is None:
            return "usb without a serial can match several devices"
        if self.udev is not None:
            return "udev can match several device nodes"
        return None

    def _fields_fit(self, where: str, template: str) -> None:
        """``{index}`` counts the devices of one container, which a CDI spec written ahead cannot know."""
        if self.cdi is not None and "index" in template_fields(template):
            raise ValueError(
                f"{where} {template!r} uses {{index}}, which cdi cannot express: a device's CDI spec is "
                "written before any container asks for it (use {name} or {path})"
            )
        if self.pci is not None and template_fields(template) & {"path", "name"}:
            raise ValueError(f"{where} {template!r}: pci devices have no matched path for {{path}} or {{name}}")
        if self.udev is None and "devlink" in template_fields(template):
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
    def cdi_kind(self) -> str:
        return (self.cdi.kind if self.cdi is not None else None) or self.name
