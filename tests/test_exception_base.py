"""Every exception kubedevice raises to its callers derives from ``errors.KubedeviceError``.

A library user catches our refusals and failures with one class, whichever layer raised them;
the few that do not derive are the ones ``KubedeviceError``'s docstring names, and why.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import kubedevice
from kubedevice.cel.values import Err
from kubedevice.errors import DependencyError, FieldProblem, KubedeviceError, UsageError

NOT_DERIVED = {
    "kubedevice.plugin.server.RpcFailure",
    "kubedevice.dra.driver.apiget.Unanswered",
    "kubedevice.dra.structured.types.TooMany",
}
"""Signals inside one module or package, never raised to a caller: an RPC's error status until the
handler aborts with it; a claim GET that falls back to lightkube; the allocator's backtracking past
the result limit (``errAllocationResultMaxSizeExceeded``, caught by ``structured.allocate``)."""


def _exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(kubedevice.__path__, "kubedevice."):
        if module.name.endswith("__main__"):
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.name:
                found[f"{module.name}.{name}"] = value
    return found


def test_every_public_exception_derives_from_the_one_base() -> None:
    exceptions = _exceptions()
    assert len(exceptions) > 50  # the walk found the package's modules
    stray = [
        name
        for name, cls in exceptions.items()
        if not issubclass(cls, KubedeviceError)
        and not issubclass(cls, Err)  # CEL error values: see KubedeviceError
        and not name.rsplit(".", 1)[1].startswith("_")
        and name not in NOT_DERIVED
    ]
    assert stray == []
    assert all(name in exceptions for name in NOT_DERIVED)  # no stale entry


def test_the_base_keeps_what_each_error_always_was() -> None:
    from kubedevice.boundedyaml import InputError
    from kubedevice.dra.models import DecodeError

    assert issubclass(UsageError, KubedeviceError) and issubclass(DependencyError, KubedeviceError)
    assert issubclass(FieldProblem, ValueError) and issubclass(DecodeError, ValueError)
    assert issubclass(InputError, OSError)
    assert not issubclass(Err, KubedeviceError)
