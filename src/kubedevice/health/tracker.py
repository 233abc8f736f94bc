"""Consecutive-result thresholds, so one bad probe does not flap a device (NVIDIA #1443, HAMi #1371).

Unlike NVIDIA's plugin, a device recovers: after ``recovery_threshold`` consecutive passes it is
Healthy again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..device import Health


@dataclass(slots=True)
class _State:
    health: Health = Health.HEALTHY
    streak: int = 0  # consecutive results that disagree with ``health``


class HealthTracker:
    """Health per device key from a stream of pass/fail observations."""

    def __init__(self, failure_threshold: int = 1, recovery_threshold: int = 1) -> None:
        if failure_threshold < 1 or recovery_threshold < 1:
            raise ValueError("thresholds must be at least 1")
        self._failure_threshold = failure_threshold
        self._recovery_threshold = recovery_threshold
        self._states: dict[str, _State] = {}

    def health(self, key: str) -> Health:
        state = self._states.get(key)
        return state.health if state else Health.HEALTHY

    def observe(self, key: str, passed: bool) -> Health:
        """Record one check result; returns the (possibly changed) health."""
        state = self._states.setdefault(key, _State())
        agrees = passed == (state.health is Health.HEALTHY)
        if agrees:
            state.streak = 0
            return state.health
        state.streak += 1
        needed = self._failure_threshold if passed is False else self._recovery_threshold
        if state.streak >= needed:
            state.health = Health.HEALTHY if passed else Health.UNHEALTHY
            state.streak = 0
        return state.health

    def retain(self, keys: Iterable[str]) -> None:
        """Forget devices that are gone, so a re-plugged device starts fresh."""
        keep = set(keys)
        for key in [k for k in self._states if k not in keep]:
            del self._states[key]
