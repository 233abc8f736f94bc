"""Run this directory's ``async def`` tests, each in a fresh event loop (as ``asyncio.run``), and
the ``node`` fixture: a temp node under /tmp (unix socket paths end at 107 bytes)."""

from __future__ import annotations

import asyncio
import inspect
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.testing.dradriver import Node


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    # A bound on a hang: test_checkpoint_crash starts `kubedevice serve` twice, 12 s each to
    # import at a load of 20 on 2 cores, and ran into 60 s there.
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), 180))
    return True


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield Node(root)
    shutil.rmtree(root)
