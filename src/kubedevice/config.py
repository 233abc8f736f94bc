"""The daemon's YAML configuration, validated with pydantic.

A bad config must cost the operator one glance: :class:`ConfigError` is always a single
line naming the file and the field (``resources[1].usb.vendor: ...``), and the CLI turns
it into exit code 2 without a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .api import DEFAULT_PLUGIN_DIR
from .dra.driver.config import DraConfig
from .sources.schema import ResourceConfig

PLUGIN_DIR_ENV = "KUBEDEVICE_PLUGIN_DIR"


class ConfigError(Exception):
    """An unusable configuration; ``str()`` is one line naming the field."""


class Config(BaseModel):
    """Top level of the config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plugin_dir: Path | None = Field(None, description="kubelet device plugin directory")
    host_root: Path = Field(Path("/"), description="where the host's / is mounted (e.g. /host in a pod)")
    cdi_dir: Path = Field(Path("/var/run/cdi"), description="where CDI spec files are written")
    resources: list[ResourceConfig] = Field(min_length=1)
    dra: DraConfig | None = Field(None, description="serve the resources as a DRA driver instead of device plugins")

    @field_validator("plugin_dir", "host_root", "cdi_dir")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_absolute():
            raise ValueError(f"must be an absolute path, not {str(value)!r}")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: set[str] = set()
        for resource in self.resources:
            if resource.name in seen:
                raise ValueError(f"resource {resource.name!r} is configured twice")
            seen.add(resource.name)
        return self

    def resolved_plugin_dir(self, override: Path | None = None) -> Path:
        """Flag, then ``$KUBEDEVICE_PLUGIN_DIR``, then the config file, then the kubelet default."""
        env = os.environ.get(PLUGIN_DIR_ENV)
        return override or (Path(env) if env else None) or self.plugin_dir or Path(DEFAULT_PLUGIN_DIR)


def load_config(path: Path) -> Config:
    """Read and validate ``path``; every failure is a one-line :class:`ConfigError`."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    return parse_config(text, str(path))


def parse_config(text: str, source: str = "<config>") -> Config:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{source}{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'resources', got {type(data).__name__}")
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {describe(err)}") from None


def describe(err: ValidationError) -> str:
    """The first validation error as ``field.path: message`` (one line)."""
    first: Any = err.errors(include_url=False)[0]
    path = _field_path(first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    extra = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path or 'config'}: {message}{extra}"


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
