"""The daemon's YAML configuration, validated with pydantic.

A bad config must cost the operator one glance: :class:`ConfigError` is always a single
line naming the file, the line and column of the entry at fault and the field
(``config.yaml:7:15: resources[1].usb.vendor: ...``), and the CLI turns it into exit code 2
without a traceback. A file of more than :data:`MAX_VALUES` values is refused while it is read,
so a hostile or generated file costs a fraction of a second, not minutes of parsing.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from . import boundedyaml
from .dra.driverconfig import DraConfig
from .errors import FieldProblem, KubedeviceError, at, cannot_read
from .plugin_dir import resolve_plugin_dir
from .sources.schema import SCHEMA_CONFIG, ResourceConfig, path_problem, template_fields

#: Values (scalars, lists and maps) a config file may hold: a fleet's config has hundreds.
MAX_VALUES = 10_000


class ConfigError(KubedeviceError):
    """An unusable configuration; ``str()`` is one line naming the field."""


class Config(BaseModel):
    """Top level of the config file."""

    model_config = SCHEMA_CONFIG

    # strict=False: a path is YAML text, which only lax mode turns into a Path
    plugin_dir: Path | None = Field(None, strict=False, description="kubelet device plugin directory")
    host_root: Path = Field(Path("/"), strict=False, description="where the host's / is mounted (e.g. /host in a pod)")
    cdi_dir: Path = Field(Path("/var/run/cdi"), strict=False, description="where CDI spec files are written")
    resources: list[ResourceConfig] = Field(min_length=1)
    dra: DraConfig | None = Field(None, description="serve the resources as a DRA driver instead of device plugins")
    pod_resources_socket: Path | None = Field(
        None,
        strict=False,
        description="the kubelet's PodResources socket, read on each scrape to label device metrics with pods "
        "(default: <kubelet root>/pod-resources/kubelet.sock, the root being the plugin directory's parent, "
        "or --kubelet-dir for DRA)",
    )

    @field_validator("plugin_dir", "host_root", "cdi_dir", "pod_resources_socket")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError(f"must be an absolute path, not {str(value)!r}")
        problem = path_problem(str(value)) if value is not None else None
        if problem:
            raise ValueError(f"path {str(value)!r} {problem}")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: dict[str, int] = {}
        for i, resource in enumerate(self.resources):
            if resource.name in seen:
                first = seen[resource.name]
                raise FieldProblem(
                    ("resources", i, "name"),
                    f"resource {resource.name!r} is configured twice (first as resources[{first}])",
                )
            seen[resource.name] = i
        return self

    @model_validator(mode="after")
    def _grants_can_be_expressed(self) -> Config:
        """Refuse, rather than ignore, what the chosen API cannot carry.

        The device-plugin API has no owner or mode for a device node, so ``device_ownership``
        needs ``cdi:``; the DRA driver does not apply it yet. A DRA driver writes each device's
        CDI spec when it prepares the claim, before any container exists, so ``{index}`` (a
        device's place among one container's devices) has no value there either.
        """
        for i, resource in enumerate(self.resources):
            owner = ("resources", i, "device_ownership")
            if resource.device_ownership is not None and self.dra is not None:
                raise FieldProblem(owner, "not applied by the DRA driver (yet); remove it")
            if resource.device_ownership is not None and resource.cdi is None:
                raise FieldProblem(
                    owner,
                    "needs 'cdi:' on this resource: without CDI the kubelet's device "
                    "plugin API cannot set a node's owner or mode (use containerd's "
                    "device_ownership_from_security_context instead, see docs/sources.md)",
                )
            if self.dra is not None:
                _no_index_for_dra(resource, i)
        return self

    def resolved_plugin_dir(self, override: Path | None = None) -> Path:
        """Flag, then ``$KUBEDEVICE_PLUGIN_DIR``, then the config file, then the kubelet default."""
        return resolve_plugin_dir(override, self.plugin_dir)


def _no_index_for_dra(resource: ResourceConfig, index: int) -> None:
    templates: list[tuple[tuple[int | str, ...], str | None]] = [(("container_path",), resource.container_path)]
    templates += [(("mounts", i, "container_path"), m.container_path) for i, m in enumerate(resource.mounts)]
    for loc, template in templates:
        if template is not None and "index" in template_fields(template):
            raise FieldProblem(
                ("resources", index, *loc),
                f"{template!r} uses {{index}}, which a DRA driver cannot know when it prepares a claim "
                "(use {name} or {path})",
            )


def load_config(path: Path) -> Config:
    """Read and validate ``path``; every failure is a one-line :class:`ConfigError`."""
    try:
        text = boundedyaml.read_text(path)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(cannot_read(path, err)) from None
    return parse_config(text, str(path))


def parse_config(text: str, source: str = "<config>") -> Config:
    node, data = _parse_yaml(text, source)
    if node is None or data is None:  # no document, or a document of nothing but null
        raise ConfigError(f"{at(source, 1, 1)}: the file is empty: a config is a mapping with 'resources:'")
    if not isinstance(data, dict):
        raise ConfigError(f"{_place(source, node, ())}: a config is a mapping with 'resources:', not {_a(node)}")
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(describe(err, source, node)) from None


def _parse_yaml(text: str, source: str) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (for line numbers) and its data."""
    try:
        loader = _ConfigLoader(text)  # its reader refuses control characters at once
    except yaml.YAMLError as err:
        raise ConfigError(_yaml_problem(err, source)) from None
    try:
        node = loader.get_single_node()
        return node, loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        raise ConfigError(_yaml_problem(err, source)) from None
    finally:
        loader.dispose()


class _ConfigLoader(boundedyaml.BoundedLoader):
    max_values = MAX_VALUES


def _a(node: yaml.Node) -> str:
    """What a YAML node is, for a message: ``a list``, ``a string``."""
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return "a mapping" if isinstance(node, yaml.MappingNode) else "a single value"


def _yaml_problem(err: yaml.YAMLError, source: str) -> str:
    mark = getattr(err, "problem_mark", None)
    where = at(source, mark.line + 1, mark.column + 1) if mark is not None else source
    reason = getattr(err, "problem", None) or getattr(err, "reason", None) or str(err).splitlines()[0]
    return f"{where}: invalid YAML: {reason}"


def describe(err: ValidationError, source: str = "<config>", node: yaml.Node | None = None) -> str:
    """One line for the whole error: an unknown key first (it usually causes the rest), else the first error.

    Shaped ``file:line:col: field.path: message`` so that editors jump to the place.
    """
    errors: list[Any] = err.errors(include_url=False)
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        loc = tuple(unknown[0]["loc"])
        key = str(loc[-1])
        where = _place(source, node, loc, key_of_last=True)
        parent = _field_path(_walk(loc[:-1])[1])
        return f"{where}: {parent + ': ' if parent else ''}unknown key {key!r}{_suggest(key, _keys_at(loc[:-1]))}"
    first = errors[0]
    loc = tuple(first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    ctx = first.get("ctx") or {}
    if isinstance(ctx.get("error"), FieldProblem):  # a check across fields names the entry at fault
        loc += ctx["error"].loc
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):  # the tag's own key (a check's type)
        loc += (str(ctx.get("discriminator", "")).strip("'"),)
    extra = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_place(source, node, loc)}: {_field_path(_walk(loc)[1]) or 'config'}: {message}{extra}"


def resource_problem(source: str | Path, config: Config, problem: FieldProblem, resource: str) -> str:
    """The one line for a problem found after the config was read (discovery's limits): the file is
    read again for the place of ``problem.loc`` within the entry of ``resource``."""
    index = next((i for i, r in enumerate(config.resources) if r.name == resource), None)
    if index is None:
        return f"{source}: resource {resource}: {problem.args[0]}"
    loc = ("resources", index, *problem.loc)
    try:
        node, _ = _parse_yaml(boundedyaml.read_text(source), str(source))
    except (OSError, UnicodeDecodeError, ConfigError):
        node = None
    return f"{_place(str(source), node, loc)}: {_field_path(_walk(loc)[1])}: {problem.args[0]}"


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (valid keys: {', '.join(valid)})" if valid else ""


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the schema accepts in the mapping at ``loc`` (aliases as written in YAML)."""
    model, _ = _walk(loc)
    models = [m for m in _members(model) if isinstance(m, type) and issubclass(m, BaseModel)]
    return [f.alias or name for m in models for name, f in m.model_fields.items()]


def _walk(loc: tuple[int | str, ...]) -> tuple[Any, tuple[int | str, ...]]:
    """The schema type at ``loc``, and ``loc`` without pydantic's union tags (not keys the user wrote)."""
    tp: Any = Config
    written: list[int | str] = []
    for part in loc:
        if tp is None:
            written.append(part)
            continue
        step, is_tag = _step(tp, part)
        if not is_tag:
            written.append(part)
        tp = step
    return tp, tuple(written)


def _members(tp: Any) -> list[Any]:
    """``X | None``, ``Annotated[X, ...]`` and unions flattened to their member types."""
    if get_origin(tp) is Annotated:
        return _members(get_args(tp)[0])
    if get_origin(tp) in (Union, UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [] if tp is type(None) else [tp]


def _step(tp: Any, part: int | str) -> tuple[Any, bool]:
    """One step down ``loc``: a list item, a field or a dict value; or a union member by its tag (``True``)."""
    for member in _members(tp):
        origin = get_origin(member)
        if isinstance(part, int) and origin is list:
            return get_args(member)[0], False
        if isinstance(part, str) and origin is dict:
            return get_args(member)[1], False
        if isinstance(part, str) and isinstance(member, type) and issubclass(member, BaseModel):
            for name, field in member.model_fields.items():
                if part in (name, field.alias):
                    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation, False
    tagged = [m for m in _members(tp) if isinstance(m, type) and issubclass(m, BaseModel)]
    found = next((m for m in tagged if "type" in m.model_fields and m.model_fields["type"].default == part), None)
    return found, found is not None


def _place(source: str, node: yaml.Node | None, loc: tuple[int | str, ...], key_of_last: bool = False) -> str:
    """``file:line:col`` of the deepest YAML node along ``loc`` (the key itself for an unknown key)."""
    found = node
    for i, part in enumerate(loc):
        # the key itself: an unknown key, or one followed by "[key]" (pydantic's and FieldProblem's mark)
        key = (key_of_last and i == len(loc) - 1) or loc[i + 1 : i + 2] == ("[key]",)
        if isinstance(found, yaml.SequenceNode) and isinstance(part, int) and part < len(found.value):
            found = found.value[part]
        elif isinstance(found, yaml.MappingNode):
            pair = next(((k, v) for k, v in found.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
            if pair is not None:
                found = pair[0] if key else pair[1]
    if found is None:
        return source
    return at(source, found.start_mark.line + 1, found.start_mark.column + 1)


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("function-") or part.endswith("]"):  # pydantic validator/union tags
            continue
        else:
            out += f".{part}" if out else part
    return out
