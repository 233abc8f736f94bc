"""The ``kubedevice`` command tree as typer builds it, for tests that must cover every command and option.

Found by walking the click objects ``typer.main.get_command`` returns, the tools loaded as
``kubedevice`` loads them (``LazyGroup.get_command``), so a command or option added tomorrow is
covered without a test naming it. Each parameter's Python type comes from the command
function's own annotations (``typing.get_type_hints`` on the function typer wraps), and its
declared kind (``FILE``/``DIR``/``PATH``, ``writable``) from the metavar and the
``typer.Option``/``typer.Argument`` it was declared with.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Any

import typer
from typer.models import ParameterInfo

from kubedevice.commands import app


@dataclass(frozen=True)
class Param:
    """One option or argument of a command."""

    name: str
    opts: tuple[str, ...]
    """Its spellings (``('--config', '-c')``); empty for an argument."""
    flag: bool
    required: bool
    base: Any
    """The value's type once ``None`` and ``list[...]`` are taken off: float, int, str, Path, or a Literal."""
    multiple: bool
    metavar: str | None
    info: ParameterInfo | None

    @property
    def argument(self) -> bool:
        return not self.opts

    @property
    def choices(self) -> tuple[str, ...] | None:
        return typing.get_args(self.base) if typing.get_origin(self.base) is typing.Literal else None

    @property
    def label(self) -> str:
        return self.opts[0] if self.opts else (self.metavar or self.name).upper()


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    params: tuple[Param, ...]
    group: bool

    @property
    def name(self) -> str:
        return " ".join(self.path) or "kubedevice"


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """``list[Path] | None`` -> ``(Path, True)``; ``float | None`` -> ``(float, False)``."""
    if typing.get_origin(hint) in (typing.Union, UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not NoneType)
    if typing.get_origin(hint) is list:
        return typing.get_args(hint)[0], True
    return hint, False


def _params(command: Any) -> tuple[Param, ...]:
    function = inspect.unwrap(command.callback) if command.callback is not None else None
    hints = typing.get_type_hints(function, include_extras=True) if function is not None else {}
    defaults = inspect.signature(function).parameters if function is not None else {}
    params = []
    for param in command.params:
        hint = hints.get(param.name, str)
        info = None
        if typing.get_origin(hint) is typing.Annotated:
            hint, *extras = typing.get_args(hint)
            info = next((e for e in extras if isinstance(e, ParameterInfo)), None)
        default = defaults[param.name].default if param.name in defaults else None
        if info is None and isinstance(default, ParameterInfo):
            info = default
        base, multiple = _unwrap(hint)
        params.append(
            Param(
                name=param.name,
                opts=tuple(param.opts) if param.param_type_name == "option" else (),
                flag=bool(getattr(param, "is_flag", False)),
                required=bool(param.required),
                base=base,
                multiple=multiple,
                metavar=param.metavar,
                info=info,
            )
        )
    return tuple(params)


def commands() -> list[Command]:
    """Every command and group, the root first, each with its parameters."""
    found: list[Command] = []

    def walk(command: Any, path: tuple[str, ...], parent: Any) -> None:
        group = hasattr(command, "list_commands")
        found.append(Command(path, _params(command), group))
        if group:
            ctx = typer.Context(command, info_name=path[-1] if path else "kubedevice", parent=parent)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name), ctx)

    walk(typer.main.get_command(app), (), None)
    return found


def is_path(param: Param) -> bool:
    return isinstance(param.base, type) and issubclass(param.base, Path)
