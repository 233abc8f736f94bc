"""Run the checker against a plugin that runs alongside it, with hard bounds on every test."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from kubedevice.conformance import CheckOptions, Report, Status, run_checks

from .scripted import ScriptedPlugin

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """A hang fails the test instead of stalling CI."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def check_plugin(plugin: ScriptedPlugin, *, restart: bool = False, **options: Any) -> Report:
    """Start ``plugin``, run the checker on its directory, stop the plugin."""
    task = asyncio.create_task(plugin.run())
    try:
        return await run_checks(CheckOptions(plugin_dir=plugin.plugin_dir, restart=restart, **options))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def by_status(report: Report, status: Status) -> set[str]:
    return {r.check.id for r in report.results if r.status is status}


def result(report: Report, check_id: str) -> Any:
    [found] = [r for r in report.results if r.check.id == check_id]
    return found


def scripted(tmp_path: Path) -> ScriptedPlugin:
    return ScriptedPlugin(tmp_path / "dp")
