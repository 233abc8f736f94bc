"""Checks every command applies alike to its options, as typer callbacks.

An option declares what its value is (``callback=seconds``, ``callback=directory``, ...), and
click runs the check while it parses the command line: a bad value is a usage error naming the
option (one line, exit 2) before the command starts anything, whichever command it is. The
rules themselves live with their subjects (:mod:`kubedevice.paths`, :mod:`kubedevice.names`);
``tests/cli/test_inputs.py`` feeds every option of every command values each kind must refuse.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from .apimachinery import validation
from .paths import directory_problem, output_file_problem, socket_problem


def seconds(value: float | None) -> float | None:
    """A duration: a finite number of seconds, zero or more (``nan`` and ``inf`` parse as floats)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value:g} is not a number of seconds (0 or more)")
    return value


def positive_seconds(value: float | None) -> float | None:
    """A timeout: a finite number of seconds above zero."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a number of seconds above 0")
    return value


def directory(value: Path | None) -> Path | None:
    """A directory, existing or not yet (some commands create theirs), but never anything else."""
    if value is not None and (problem := directory_problem(value)):
        raise typer.BadParameter(problem)
    return value


def output_file(value: Path | None) -> Path | None:
    """A file the command writes: not a directory, in a directory that exists."""
    if value is not None and (problem := output_file_problem(value)):
        raise typer.BadParameter(problem)
    return value


def existing_socket(value: Path | None) -> Path | None:
    """A unix socket to read now, which must exist: a command that asks once does not wait for it."""
    if value is not None and (problem := socket_problem(value)):
        raise typer.BadParameter(problem)
    return value


def node_name(value: str | None) -> str | None:
    """A Node's name: a lowercase RFC 1123 subdomain (``metadata.name`` of a Node)."""
    if value is not None and validation.is_dns1123_subdomain(value):
        raise typer.BadParameter(
            f"{value!r} is not a node name (a lowercase RFC 1123 subdomain: at most 253 characters, "
            "lower case letters, digits, '-' and '.', starting and ending with a letter or digit)"
        )
    return value


def namespace(value: str | None) -> str | None:
    """A namespace's name: a lowercase RFC 1123 label."""
    if value is not None and validation.is_dns1123_label(value):
        raise typer.BadParameter(
            f"{value!r} is not a namespace (a lowercase RFC 1123 label: at most 63 characters, "
            "lower case letters, digits and '-', starting and ending with a letter or digit)"
        )
    return value
