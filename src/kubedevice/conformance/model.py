"""What a conformance run produces: one result per check and resource, and their summary."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

# Thresholds, decided once here so the table, the JSON and the docs agree.
FIRST_LIST_PASS_S = 1.0  # a kubelet shows capacity 0 until the first ListAndWatch message
FIRST_LIST_FAIL_S = 5.0  # warn between the two, fail when nothing came by then
REREGISTER_PASS_S = 0.25
"""Re-registration (and devices back) after a kubelet restart: slower is a failure, since every pod
admitted before the plugin is back fails (kubernetes #109595, #133382). Calibrated on the real
kubelet v1.36.3: pods created as soon as it answers healthz reached admission 0.28-0.82 s after its
new kubelet.sock; a plugin back after 1 s lost them all (tests/e2e/test_check_calibration.py)."""
RPC_TIMEOUT_S = 5.0  # the deadline for every probe RPC, so a hung plugin cannot hang the checker


class Status(enum.StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


class Phase(enum.StrEnum):
    REGISTRATION = "registration"
    DEVICES = "devices"
    ALLOCATE = "allocate"
    PREFERRED = "preferred"
    PRESTART = "prestart"
    RESTART = "restart"
    PREPARE = "prepare"
    UNPREPARE = "unprepare"
    SERVICES = "services"
    HEALTH_STREAM = "health"


@dataclass(frozen=True, slots=True)
class Check:
    """A check's identity: a stable ``id`` for machines and a ``title`` for people."""

    id: str
    phase: Phase
    title: str


@dataclass(frozen=True, slots=True)
class Result:
    """The verdict of one check for one resource; ``value`` is a measurement in ``unit``."""

    check: Check
    status: Status
    detail: str = ""
    resource: str | None = None
    value: float | None = None
    unit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.check.id,
            "phase": self.check.phase.value,
            "title": self.check.title,
            "resource": self.resource,
            "status": self.status.value,
            "detail": self.detail,
            "value": self.value,
            "unit": self.unit,
        }


@dataclass(slots=True)
class Report:
    """Every result of a run, in the order the checks ran."""

    target: dict[str, str]
    results: list[Result] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.status is Status.FAIL for r in self.results)

    def summary(self) -> dict[str, int]:
        return {s.value: sum(1 for r in self.results if r.status is s) for s in Status}

    def resources(self) -> list[str]:
        return sorted({r.resource for r in self.results if r.resource is not None})

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "passed": not self.failed,
            "summary": self.summary(),
            "resources": self.resources(),
            "results": [r.to_json() for r in self.results],
        }
