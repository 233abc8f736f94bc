"""The tests' one wait: a bound stretched by the machine's load, never past MAX_STRETCH, and the
timeout message naming what was waited for, for how long and what was seen last."""

from __future__ import annotations

import asyncio

import pytest

from kubedevice.testing import waiting
from kubedevice.testing.waiting import MAX_STRETCH, eventually, stretch, wait_for


@pytest.mark.parametrize(
    ("load", "cores", "factor"),
    [(0.0, 2, 1.0), (2.0, 2, 1.0), (3.0, 2, 1.5), (20.0, 2, 10.0), (200.0, 2, MAX_STRETCH), (8.0, 16, 1.0)],
)
def test_the_stretch_is_runnable_processes_per_core_within_bounds(load: float, cores: int, factor: float) -> None:
    assert stretch(load, cores) == factor


def test_a_wait_that_runs_out_says_how_long_it_allowed_and_what_it_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "stretch", lambda: 2.0)  # a loaded machine, made so for the test
    with pytest.raises(AssertionError, match=r"timed out after 0.2 s waiting for nothing; last seen: 0$"):
        wait_for("nothing", lambda: 0, 0.1, 0.01)


def test_eventually_awaits_a_coroutine_predicate_and_returns_its_value() -> None:
    calls = []

    async def ready() -> str | None:
        calls.append(1)
        return "done" if len(calls) >= 3 else None

    assert asyncio.run(eventually("three calls", ready, 5.0, 0.001)) == "done"
