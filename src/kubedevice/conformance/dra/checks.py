"""The DRA checks: what the kubelet relies on when it prepares and unprepares claims on a driver.

Every check holds for the Go ``kubeletplugin`` helper (v0.36) as well as for ours. Where the
two legitimately differ the check accepts both: a claim whose UID does not match is refused by
the Go helper with a failed call ("claim ... got replaced") and by ours with a per-claim error;
either way nothing may be prepared for it. CDI IDs may repeat within a claim (the Go test
driver gives one ID per request), so only their form and their resolution are checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from ...dra.nodeclaims import Claim
from ...errors import counted
from ...kubelet.dra.plugin import DraClient
from ...kubelet.endpoint import go_error
from ..checks import skipped, verdict
from ..model import Check, Phase, Result, Status
from ..rules import qualified_cdi_name_problems
from . import metadata
from .cdi import defined_ids, spec_files

R, P, U, S, H = Phase.REGISTRATION, Phase.PREPARE, Phase.UNPREPARE, Phase.SERVICES, Phase.HEALTH_STREAM
SOCKET = Check("dra.registration.socket", R, "a registration socket of the driver appears and answers GetInfo")
TYPE = Check("dra.registration.type", R, "GetInfo names type DRAPlugin")
SERVICES = Check("dra.registration.services", R, "GetInfo lists v1.DRAPlugin or v1beta1.DRAPlugin")
ENDPOINT = Check("dra.registration.endpoint", R, "the endpoint is an absolute path that accepts connections")
NOTIFY = Check("dra.registration.notify", R, "NotifyRegistrationStatus is answered")
WRONG_UID = Check("dra.prepare.wrong_uid", P, "a claim with a wrong UID is not prepared")
ANSWERS = Check("dra.prepare.answers", P, "each claim prepared alone is answered, without error, under its UID")
DEVICES = Check("dra.prepare.devices", P, "prepared devices are the claim's allocation results for this driver")
CDI_IDS = Check("dra.prepare.cdi_ids", P, "CDI device IDs are fully qualified (vendor/class=name)")
CDI_SPECS = Check("dra.prepare.cdi_specs", P, "every CDI device ID is defined by a spec file in --cdi-dir")
METADATA = Check("dra.prepare.metadata", P, "device metadata files (KEP-5304) describe each request's devices")
IDEMPOTENT = Check("dra.prepare.idempotent", P, "preparing a prepared claim again gives the same answer")
BATCH = Check("dra.prepare.batch", P, "several claims in one call: each answered, same devices as alone")
UNPREPARED = Check("dra.unprepare.answers", U, "each claim unprepared alone is answered without error")
OTHERS = Check("dra.unprepare.others_intact", U, "unpreparing a claim leaves other claims' CDI IDs defined")
CDI_GONE = Check("dra.unprepare.cdi_removed", U, "CDI spec files written while preparing are gone after unprepare")
METADATA_GONE = Check("dra.unprepare.metadata_removed", U, "device metadata files are gone after unprepare")
UNBATCH = Check("dra.unprepare.batch", U, "several claims in one call: each answered without error")
NEVER = Check("dra.unprepare.unknown", U, "unpreparing a claim that was never prepared succeeds")
ALL_SERVICES = Check("dra.services.each", S, "each listed DRAPlugin service prepares and unprepares alike")
STREAM = Check("dra.health.stream", H, "the health stream sends a first message")
HEALTH_DEVICES = Check("dra.health.devices", H, "health lists well-formed devices, the allocated ones included")

CATALOGUE = (
    SOCKET, TYPE, SERVICES, ENDPOINT, NOTIFY,
    WRONG_UID, ANSWERS, DEVICES, CDI_IDS, CDI_SPECS, METADATA, IDEMPOTENT, BATCH,
    UNPREPARED, OTHERS, CDI_GONE, METADATA_GONE, UNBATCH, NEVER, ALL_SERVICES, STREAM, HEALTH_DEVICES,
)  # fmt: skip
NEVER_PREPARED = "kubedevice-check-never-prepared"
FIRST_HEALTH_S = 5.0
HEALTH_STATES = {"HEALTHY", "UNHEALTHY", "UNKNOWN"}

Device = tuple[tuple[str, ...], str, str, tuple[str, ...]]
"""A prepared device as compared: (request names, pool, device, CDI IDs), each list sorted."""


def answer_devices(answer: Any) -> tuple[Device, ...]:
    return tuple(
        sorted(
            (tuple(sorted(d.request_names)), d.pool_name, d.device_name, tuple(sorted(d.cdi_device_ids)))
            for d in answer.devices
        )
    )


def ref(claim: Claim, uid: str | None = None) -> tuple[str, str, str]:
    return claim.namespace, claim.name, uid or claim.uid


def expected(claim: Claim, driver: str) -> set[tuple[str, str, str]]:
    """(base request, pool, device) of the claim's results for ``driver``: what the kubelet expects back."""
    return {(r.base_request, r.pool, r.device) for r in claim.results if r.driver == driver}


def got(devices: Sequence[Device]) -> set[tuple[str, str, str]]:
    return {(request, pool, device) for requests, pool, device, _ in devices for request in requests}


def _uids(response: Any) -> set[str]:
    return set(response.claims)


def _call_error(err: grpc.RpcError) -> str:
    return go_error(err) if isinstance(err, grpc.aio.AioRpcError) else str(err)


def answer_problems(response: Any, claims: Sequence[Claim], what: str) -> list[str]:
    """Every claim answered under its UID, none other, no error (the kubelet fails the pod otherwise)."""
    want = {c.uid: c for c in claims}
    problems = [
        f"{what} left out {want[u].namespace}/{want[u].name} ({u})" for u in sorted(want.keys() - _uids(response))
    ]
    problems += [f"{what} answered unknown claim UID {u}" for u in sorted(_uids(response) - want.keys())]
    problems += [
        f"{what} of {want[u].namespace}/{want[u].name}: {response.claims[u].error}"
        for u in sorted(want.keys() & _uids(response))
        if response.claims[u].error
    ]
    return problems


@dataclass
class DraProbe:
    """The prepare/unprepare/health checks against one registered driver."""

    client: DraClient
    driver: str
    claims: list[Claim]
    cdi_dir: Path | None
    other_service: DraClient | None = None
    results: list[Result] = field(default_factory=list)
    _before: set[Path] = field(default_factory=set)
    _metadata_files: list[Path] = field(default_factory=list)

    def _add(self, result: Result) -> None:
        self.results.append(result)

    async def run(self) -> list[Result]:
        self._before = spec_files(self.cdi_dir) if self.cdi_dir else set()
        await self._wrong_uid()
        alone = await self._prepare_alone()
        if alone is None:
            self.results += skipped(
                CATALOGUE[CATALOGUE.index(CDI_IDS) : CATALOGUE.index(ALL_SERVICES)], "prepare failed"
            )
            await self._unprepare_quietly()
        else:
            self._cdi(alone)
            await self._idempotent(alone)
            await self._unprepare_alone(alone)
            await self._batch(alone)
            await self._never()
        await self._services(alone)
        await self._health()
        return self.results

    async def _wrong_uid(self) -> None:
        claim = self.claims[0]
        wrong = str(uuid.uuid4())
        try:
            response = await self.client.prepare([ref(claim, wrong)])
        except grpc.RpcError as err:
            self._add(Result(WRONG_UID, Status.PASS, f"the call failed: {_call_error(err)}"))
            return
        answer = response.claims.get(wrong)
        if answer is not None and answer.error:
            self._add(Result(WRONG_UID, Status.PASS, f"per-claim error: {answer.error}"))
            return
        problem = "not answered" if answer is None else f"prepared {len(answer.devices)} devices without error"
        self._add(Result(WRONG_UID, Status.FAIL, f"{claim.namespace}/{claim.name} with UID {wrong}: {problem}"))
        if answer is not None:
            await self._quiet(self.client.unprepare([ref(claim, wrong)]))

    async def _prepare_one(self, claim: Claim, what: str) -> tuple[tuple[Device, ...] | None, list[str]]:
        """``claim`` prepared alone: its devices (None when refused or wrong) and the problems found."""
        try:
            response = await self.client.prepare([ref(claim)])
        except grpc.RpcError as err:
            return None, [f"{claim.namespace}/{claim.name}: {_call_error(err)}"]
        found = answer_problems(response, [claim], what)
        return (None if found else answer_devices(response.claims[claim.uid])), found

    async def _prepare_alone(self) -> dict[str, tuple[Device, ...]] | None:
        """Each claim alone; its devices by UID, or ``None`` when no claim could be prepared."""
        answers: dict[str, tuple[Device, ...]] = {}
        problems: list[str] = []
        for claim in self.claims:
            devices, found = await self._prepare_one(claim, "NodePrepareResources")
            problems += found
            if devices is not None:
                answers[claim.uid] = devices
        self._add(verdict(ANSWERS, problems, None, f"{counted(len(answers), 'claim')} prepared one by one"))
        if not answers:
            return None
        mismatched = []
        for claim in self.claims:
            if claim.uid not in answers:
                continue
            want, have = expected(claim, self.driver), got(answers[claim.uid])
            if want != have:
                mismatched.append(
                    f"{claim.namespace}/{claim.name}: allocated {_show(want - have) or '-'} not prepared, "
                    f"prepared {_show(have - want) or '-'} not allocated"
                )
        count = sum(len(a) for a in answers.values())
        self._add(verdict(DEVICES, mismatched, None, f"{counted(count, 'device')}, as allocated"))
        return answers

    def _cdi(self, answers: dict[str, tuple[Device, ...]]) -> None:
        ids = sorted({i for devices in answers.values() for d in devices for i in d[3]})
        problems = [p for i in ids for p in qualified_cdi_name_problems(i)]
        shared = self._shared_ids(answers)
        detail = counted(len(ids), "ID") + (f"; shared by several claims: {', '.join(shared[:3])}" if shared else "")
        self._add(verdict(CDI_IDS, problems, None, detail))
        if self.cdi_dir is None:
            self.results += skipped([CDI_SPECS, METADATA], "needs --cdi-dir")
            return
        defined = defined_ids(self.cdi_dir)
        missing = [f"{i} is defined by no spec in {self.cdi_dir}" for i in ids if i not in defined]
        self._add(verdict(CDI_SPECS, missing, None, f"{counted(len(ids), 'ID')} defined"))
        self._metadata(answers, defined)

    def _metadata(self, answers: dict[str, tuple[Device, ...]], defined: dict[str, Path]) -> None:
        ids = metadata.metadata_ids(self.driver, answers)
        if not ids:
            self._add(Result(METADATA, Status.SKIP, f"no {self.driver}/metadata CDI IDs: device metadata is off"))
            return
        problems, self._metadata_files = metadata.problems(self.driver, self.claims, answers, defined)
        self._add(verdict(METADATA, problems, None, f"{len(ids)} requests' files describe their devices"))

    @staticmethod
    def _shared_ids(answers: dict[str, tuple[Device, ...]]) -> list[str]:
        owners: dict[str, set[str]] = {}
        for uid, devices in answers.items():
            for device in devices:
                for cdi_id in device[3]:
                    owners.setdefault(cdi_id, set()).add(uid)
        return sorted(i for i, uids in owners.items() if len(uids) > 1)

    async def _idempotent(self, answers: dict[str, tuple[Device, ...]]) -> None:
        problems = []
        for claim in self.claims:
            if claim.uid not in answers:
                continue
            devices, found = await self._prepare_one(claim, "NodePrepareResources again")
            if devices is not None and devices != answers[claim.uid]:
                found = [f"{claim.namespace}/{claim.name}: a different answer the second time"]
            problems += found
        self._add(verdict(IDEMPOTENT, problems, None, "same answers"))

    async def _unprepare_alone(self, answers: dict[str, tuple[Device, ...]]) -> None:
        problems, broken = [], []
        prepared = [c for c in self.claims if c.uid in answers]
        for i, claim in enumerate(prepared):
            try:
                response = await self.client.unprepare([ref(claim)])
            except grpc.RpcError as err:
                problems.append(f"{claim.namespace}/{claim.name}: {_call_error(err)}")
                continue
            problems += answer_problems(response, [claim], "NodeUnprepareResources")
            if self.cdi_dir is not None:
                defined = defined_ids(self.cdi_dir)
                broken += [
                    f"after unpreparing {claim.namespace}/{claim.name}, {cdi_id} of {other.namespace}/{other.name} "
                    "is defined by no spec"
                    for other in prepared[i + 1 :]
                    for cdi_id in sorted({x for d in answers[other.uid] for x in d[3]})
                    if cdi_id not in defined
                ]
        self._add(verdict(UNPREPARED, problems, None, f"{counted(len(prepared), 'claim')} unprepared one by one"))
        if self.cdi_dir is None:
            self._add(Result(OTHERS, Status.SKIP, "needs --cdi-dir"))
        elif len(prepared) < 2:
            self._add(Result(OTHERS, Status.SKIP, "needs two claims of the driver in --claims"))
        else:
            self._add(verdict(OTHERS, broken, None, "CDI IDs of the claims still prepared stayed defined"))
        self._cdi_gone("after unpreparing one by one")

    def _cdi_gone(self, when: str) -> None:
        if self.cdi_dir is None:
            if not any(r.check is CDI_GONE for r in self.results):
                self.results += skipped([CDI_GONE, METADATA_GONE], "needs --cdi-dir")
            return
        left = sorted(p.name for p in spec_files(self.cdi_dir) - self._before)
        self._keep_worst(
            verdict(CDI_GONE, [f"{when}, still there: {name}" for name in left], None, "no spec file left")
        )
        if not self._metadata_files:
            if not any(r.check is METADATA_GONE for r in self.results):
                self._add(Result(METADATA_GONE, Status.SKIP, "no device metadata was prepared"))
            return
        gone = [f"{when}, {p}" for p in metadata.left(self._metadata_files)]
        self._keep_worst(verdict(METADATA_GONE, gone, None, f"{len(self._metadata_files)} files removed"))

    def _keep_worst(self, result: Result) -> None:
        """A check judged after each round of unprepares: the first failure stays."""
        previous = next((r for r in self.results if r.check is result.check), None)
        if previous is None:
            self._add(result)
        elif previous.status is Status.PASS and result.status is not Status.PASS:
            self.results[self.results.index(previous)] = result

    async def _batch(self, answers: dict[str, tuple[Device, ...]]) -> None:
        claims = [c for c in self.claims if c.uid in answers]
        refs = [ref(c) for c in claims]
        if len(claims) < 2:
            self.results += skipped([BATCH, UNBATCH], "needs two claims of the driver in --claims")
            return
        try:
            response = await self.client.prepare(refs)
            problems = answer_problems(response, claims, "NodePrepareResources")
            problems += [
                f"{c.namespace}/{c.name}: other devices than when prepared alone"
                for c in claims
                if c.uid in response.claims and got(answer_devices(response.claims[c.uid])) != got(answers[c.uid])
            ]
        except grpc.RpcError as err:
            problems = [_call_error(err)]
        self._add(verdict(BATCH, problems, None, f"{counted(len(claims), 'claim')} in one call"))
        try:
            response = await self.client.unprepare(refs)
            problems = answer_problems(response, claims, "NodeUnprepareResources")
        except grpc.RpcError as err:
            problems = [_call_error(err)]
        self._add(verdict(UNBATCH, problems, None, f"{counted(len(claims), 'claim')} in one call"))
        self._cdi_gone("after unpreparing in one call")

    async def _never(self) -> None:
        claim = self.claims[0]
        uid = str(uuid.uuid4())
        try:
            response = await self.client.unprepare([(claim.namespace, NEVER_PREPARED, uid)])
        except grpc.RpcError as err:
            self._add(Result(NEVER, Status.FAIL, _call_error(err)))
            return
        fake = Claim(claim.namespace, NEVER_PREPARED, uid, True)
        self._add(verdict(NEVER, answer_problems(response, [fake], "NodeUnprepareResources"), None, "succeeded"))

    async def _services(self, answers: dict[str, tuple[Device, ...]] | None) -> None:
        if self.other_service is None:
            self._add(Result(ALL_SERVICES, Status.SKIP, "one DRAPlugin service listed"))
            return
        if not answers:
            self._add(Result(ALL_SERVICES, Status.SKIP, "no claim was prepared"))
            return
        claim = next(c for c in self.claims if c.uid in answers)
        service = self.other_service.registered.service
        try:
            response = await self.other_service.prepare([ref(claim)])
            problems = answer_problems(response, [claim], f"{service} NodePrepareResources")
            if not problems and got(answer_devices(response.claims[claim.uid])) != got(answers[claim.uid]):
                problems = [f"{service}: other devices for {claim.namespace}/{claim.name}"]
            unprepared = await self.other_service.unprepare([ref(claim)])
            problems += answer_problems(unprepared, [claim], f"{service} NodeUnprepareResources")
        except grpc.RpcError as err:
            problems = [f"{service}: {_call_error(err)}"]
        self._add(verdict(ALL_SERVICES, problems, None, f"{self.client.registered.service} and {service} agree"))

    async def _health(self) -> None:
        if not self.client.registered.health:
            self.results += skipped([STREAM, HEALTH_DEVICES], "v1alpha1.DRAResourceHealth not listed")
            return
        stream = self.client.watch_health()
        try:
            first = await asyncio.wait_for(anext(stream), FIRST_HEALTH_S)
        except TimeoutError:
            self._add(Result(STREAM, Status.FAIL, f"no message within {FIRST_HEALTH_S:g} s"))
            self.results += skipped([HEALTH_DEVICES], "no message")
            return
        except (grpc.RpcError, StopAsyncIteration) as err:
            why = _call_error(err) if isinstance(err, grpc.RpcError) else "the stream ended"
            self._add(Result(STREAM, Status.FAIL, why))
            self.results += skipped([HEALTH_DEVICES], "no message")
            return
        finally:
            await stream.aclose()
        self._add(Result(STREAM, Status.PASS, f"{counted(len(first), 'device')} in the first message"))
        problems = [f"device {p!r}/{d!r} is not named" for p, d in first if not p or not d]
        problems += [f"{p}/{d} has health {h!r}" for (p, d), h in first.items() if h not in HEALTH_STATES]
        allocated = {(pool, device) for c in self.claims for _, pool, device in expected(c, self.driver)}
        missing = sorted(f"{p}/{d}" for p, d in allocated - first.keys())
        if problems:
            self._add(verdict(HEALTH_DEVICES, problems, None, ""))
        else:
            warn = [f"allocated devices missing (the kubelet shows them as Unknown): {', '.join(missing)}"]
            self._add(verdict(HEALTH_DEVICES, warn if missing else [], None, "well-formed", warn=True))

    async def _unprepare_quietly(self) -> None:
        await self._quiet(self.client.unprepare([ref(c) for c in self.claims]))

    @staticmethod
    async def _quiet(call: Any) -> None:
        with contextlib.suppress(grpc.RpcError):
            await call


def _show(items: set[tuple[str, str, str]]) -> str:
    return ", ".join(f"{request}:{pool}/{device}" for request, pool, device in sorted(items))
