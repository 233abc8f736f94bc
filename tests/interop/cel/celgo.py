"""The Go program that evaluates selectors with Kubernetes' own CEL code, built once and cached."""

from __future__ import annotations

from pathlib import Path

from kubedevice.testing import gobuild

MODULE = Path(__file__).resolve().parent


def go_binary() -> Path | None:
    """Path of the built program, or None when no Go toolchain is installed."""
    return gobuild.build(MODULE, ".", "celdiff")
