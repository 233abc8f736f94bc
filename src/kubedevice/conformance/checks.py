"""The catalogue of checks, and the probes that talk to a plugin socket directly.

Each probe returns :class:`Result` records; a probe that cannot run (no healthy device, an
option the plugin did not advertise) reports ``skip`` with the reason rather than guessing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from ..api import HEALTHY, pb
from ..kubelet.endpoint import go_error
from . import rules
from .client import PluginClient
from .model import FIRST_LIST_PASS_S, Check, Phase, Result, Status

R, D, A, P, S, T = Phase.REGISTRATION, Phase.DEVICES, Phase.ALLOCATE, Phase.PREFERRED, Phase.PRESTART, Phase.RESTART
REGISTER = Check("registration.register", R, "registers with the kubelet")
VERSION = Check("registration.version", R, "API version is one the kubelet supports")
RESOURCE_NAME = Check("registration.resource_name", R, "resource name is a valid extended resource name")
ENDPOINT = Check("registration.endpoint", R, "endpoint is a socket path relative to the plugin directory")
ACCEPTED = Check("registration.accepted", R, "the kubelet accepts the registration (dial, options)")
OPTIONS_MATCH = Check("registration.options", R, "RegisterRequest options match GetDevicePluginOptions")
OPTIONS = Check("devices.options", D, "GetDevicePluginOptions answers")
FIRST_LIST = Check("devices.first_list", D, f"first ListAndWatch message within {FIRST_LIST_PASS_S:g} s")
IDS = Check("devices.ids", D, "device IDs are non-empty, unique and at most 63 characters")
HEALTH = Check("devices.health", D, "health is 'Healthy' or 'Unhealthy'")
TOPOLOGY = Check("devices.topology", D, "topology lists valid NUMA nodes")
RESPONSES = Check("allocate.responses", A, "one container response per container request")
PATHS = Check("allocate.paths", A, "device and mount paths are absolute")
PERMISSIONS = Check("allocate.permissions", A, "device permissions are letters from 'rwm'")
ENVS = Check("allocate.envs", A, "environment variable names are valid")
CDI = Check("allocate.cdi", A, "CDI device names are fully qualified (vendor.com/class=name)")
UNKNOWN = Check("allocate.unknown", A, "Allocate refuses unknown device IDs")
PREF_RESPONSES = Check("preferred.responses", P, "one preferred answer per container request")
PREF_AVAILABLE = Check("preferred.available", P, "answers only available IDs, each once")
PREF_MUST = Check("preferred.must_include", P, "answer includes every must_include ID")
PREF_SIZE = Check("preferred.size", P, "answer has allocation_size IDs")
PRESTART = Check("prestart.call", S, "PreStartContainer succeeds within the kubelet's 30 s")
REREGISTER = Check("restart.reregister", T, "re-registers after a kubelet restart")
RESTORED = Check("restart.devices", T, "devices are allocatable again after a kubelet restart")

CATALOGUE = (
    REGISTER, VERSION, RESOURCE_NAME, ENDPOINT, ACCEPTED, OPTIONS_MATCH,
    OPTIONS, FIRST_LIST, IDS, HEALTH, TOPOLOGY,
    RESPONSES, PATHS, PERMISSIONS, ENVS, CDI, UNKNOWN,
    PREF_RESPONSES, PREF_AVAILABLE, PREF_MUST, PREF_SIZE,
    PRESTART, REREGISTER, RESTORED,
)  # fmt: skip
_RESPONSE_RULES = (
    (PATHS, rules.path_problems),
    (PERMISSIONS, rules.permission_problems),
    (ENVS, rules.env_problems),
    (CDI, rules.cdi_problems),
)
UNKNOWN_ID = "kubedevice-check-unknown-device"
_SHOWN = 5  # problems listed in a detail line before "and N more"


def verdict(check: Check, problems: Sequence[str], resource: str | None, ok: str, *, warn: bool = False) -> Result:
    """``fail`` (or ``warn``) listing the first problems, else ``pass`` with ``ok`` as detail."""
    if not problems:
        return Result(check, Status.PASS, ok, resource)
    more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
    return Result(check, Status.WARN if warn else Status.FAIL, "; ".join(problems[:_SHOWN]) + more, resource)


def skipped(checks: Sequence[Check], reason: str, resource: str | None = None) -> list[Result]:
    return [Result(c, Status.SKIP, reason, resource) for c in checks]


def _ids(ids: Sequence[str]) -> str:
    return "[" + ", ".join(ids) + "]"


@dataclass(frozen=True, slots=True)
class SocketProbe:
    """The direct probes of one plugin socket; ``resource`` labels the results."""

    client: PluginClient
    resource: str | None
    list_timeout: float

    async def run(self, registered: pb.DevicePluginOptions | None) -> list[Result]:
        """Every socket-level phase; ``registered`` is what RegisterRequest carried, if known."""
        try:
            await self.client.connect()
            options = await self.client.options()
        except (TimeoutError, grpc.aio.AioRpcError) as err:
            reason = go_error(err) if isinstance(err, grpc.aio.AioRpcError) else "no connection"
            down = Result(OPTIONS, Status.FAIL, f"{self.client.socket}: {reason}", self.resource)
            rest = [c for c in CATALOGUE if c.phase not in (R, T) and c is not OPTIONS]
            return [down, *skipped(rest, "the plugin socket did not answer", self.resource)]
        results = [Result(OPTIONS, Status.PASS, _options_text(options), self.resource)]
        if registered is not None:
            results.append(self.options_match(registered, options))
        devices, listed = await self.devices()
        results += listed
        if devices is None:
            rest = [c for c in CATALOGUE if c.phase in (A, P, S)]
            return results + skipped(rest, "no device list", self.resource)
        healthy = [d.ID for d in devices if d.health == HEALTHY and d.ID]
        known = {d.ID for d in devices}
        results += await self.allocate(healthy, known)
        results += await self.preferred(options, healthy)
        return results + await self.pre_start(options, healthy)

    def options_match(self, registered: pb.DevicePluginOptions, answered: pb.DevicePluginOptions) -> Result:
        """Older kubelets read RegisterRequest.options, newer ones the RPC: they must agree."""
        if registered == answered:
            return Result(OPTIONS_MATCH, Status.PASS, _options_text(answered), self.resource)
        detail = f"RegisterRequest has {_options_text(registered)}, GetDevicePluginOptions {_options_text(answered)}"
        return Result(OPTIONS_MATCH, Status.FAIL, detail, self.resource)

    async def devices(self) -> tuple[list[pb.Device] | None, list[Result]]:
        try:
            message, took = await self.client.first_list(self.list_timeout)
        except (TimeoutError, EOFError, grpc.aio.AioRpcError) as err:
            reason = go_error(err) if isinstance(err, grpc.aio.AioRpcError) else str(err) or "no message"
            detail = f"no first message within {self.list_timeout:g} s: {reason}"
            failed = Result(FIRST_LIST, Status.FAIL, detail, self.resource)
            return None, [failed, *skipped((IDS, HEALTH, TOPOLOGY), "no device list", self.resource)]
        devices = list(message.devices)
        status = Status.PASS if took <= FIRST_LIST_PASS_S else Status.WARN
        first = Result(FIRST_LIST, status, f"{len(devices)} devices after {took:.3f} s", self.resource, took, "s")
        with_topology = sum(1 for d in devices if d.topology.nodes)
        return devices, [
            first,
            verdict(IDS, rules.id_problems(devices), self.resource, f"{len(devices)} unique IDs"),
            verdict(HEALTH, rules.health_problems(devices), self.resource, _health_text(devices)),
            verdict(
                TOPOLOGY, rules.topology_problems(devices), self.resource, f"{with_topology}/{len(devices)} with NUMA"
            ),
        ]

    async def allocate(self, healthy: Sequence[str], known: set[str]) -> list[Result]:
        """Allocate one device to one container, then one each to two containers, then an unknown ID."""
        if not healthy:
            return skipped((RESPONSES, PATHS, PERMISSIONS, ENVS, CDI, UNKNOWN), "no healthy device", self.resource)
        probes = [[healthy[:1]]] + ([[healthy[:1], healthy[1:2]]] if len(healthy) > 1 else [])
        responses: list[pb.ContainerAllocateResponse] = []
        problems: list[str] = []
        for containers in probes:
            what = f"Allocate({', '.join(_ids(c) for c in containers)})"
            try:
                reply = await self.client.allocate(containers)
            except grpc.aio.AioRpcError as err:
                problems.append(f"{what}: {go_error(err)}")
                continue
            problems += rules.response_count_problems(len(containers), len(reply.container_responses), what)
            responses += reply.container_responses
        ok = f"{len(probes)} requests answered"
        results = [verdict(RESPONSES, problems, self.resource, ok)]
        for check, judge in _RESPONSE_RULES:
            if responses:
                results.append(verdict(check, judge(responses), self.resource, f"{len(responses)} responses"))
            else:
                results.append(Result(check, Status.SKIP, "no Allocate response to inspect", self.resource))
        return [*results, await self.unknown(known)]

    async def unknown(self, known: set[str]) -> Result:
        """The kubelet never sends an unknown ID, so a plugin that grants one grants nothing real."""
        unknown = UNKNOWN_ID
        while unknown in known:
            unknown += "-x"
        try:
            await self.client.allocate([[unknown]])
        except grpc.aio.AioRpcError as err:
            if err.code() is grpc.StatusCode.DEADLINE_EXCEEDED:  # no answer is not a refusal
                return Result(UNKNOWN, Status.FAIL, f"no answer: {go_error(err)}", self.resource)
            return Result(UNKNOWN, Status.PASS, f"refused: {go_error(err)}", self.resource)
        return Result(UNKNOWN, Status.FAIL, f"Allocate([{unknown}]) succeeded", self.resource)

    async def preferred(self, options: pb.DevicePluginOptions, healthy: Sequence[str]) -> list[Result]:
        checks = (PREF_RESPONSES, PREF_AVAILABLE, PREF_MUST, PREF_SIZE)
        if not options.get_preferred_allocation_available:
            return skipped(checks, "get_preferred_allocation_available is false", self.resource)
        if not healthy:
            return skipped(checks, "no healthy device", self.resource)
        count: list[str] = []
        answered: list[tuple[pb.ContainerPreferredAllocationRequest, list[str]]] = []
        for request in _preferred_requests(healthy):
            try:
                reply = await self.client.preferred([request])
            except grpc.aio.AioRpcError as err:  # the kubelet fails admission on an error (kubernetes #97131)
                count.append(f"GetPreferredAllocation: {go_error(err)}")
                continue
            count += rules.response_count_problems(1, len(reply.container_responses), "GetPreferredAllocation")
            if reply.container_responses:
                answered.append((request, list(reply.container_responses[0].deviceIDs)))
        first = verdict(PREF_RESPONSES, count, self.resource, f"{len(answered)} requests answered")
        if not answered:
            return [first, *skipped(checks[1:], "no answer to inspect", self.resource)]
        return [first, *self._contract(answered)]

    def _contract(self, answered: Sequence[tuple[pb.ContainerPreferredAllocationRequest, list[str]]]) -> list[Result]:
        found: dict[str, list[str]] = {"available": [], "must_include": [], "size": [], "short": []}
        for request, answer in answered:
            for clause, problems in rules.preferred_problems(request, answer).items():
                found[clause] += problems
        size = verdict(PREF_SIZE, found["size"], self.resource, "every answer has allocation_size IDs")
        if size.status is Status.PASS and found["short"]:
            short = [f"short, the kubelet tops it up: {p}" for p in found["short"]]
            size = verdict(PREF_SIZE, short, self.resource, "", warn=True)
        return [
            verdict(PREF_AVAILABLE, found["available"], self.resource, "answers are subsets of available"),
            verdict(PREF_MUST, found["must_include"], self.resource, "must_include IDs kept"),
            size,
        ]

    async def pre_start(self, options: pb.DevicePluginOptions, healthy: Sequence[str]) -> list[Result]:
        if not options.pre_start_required:
            return skipped((PRESTART,), "pre_start_required is false", self.resource)
        if not healthy:
            return skipped((PRESTART,), "no healthy device", self.resource)
        started = time.monotonic()
        try:
            await self.client.pre_start(healthy[:1])
        except grpc.aio.AioRpcError as err:
            return [Result(PRESTART, Status.FAIL, go_error(err), self.resource)]
        took = time.monotonic() - started
        return [Result(PRESTART, Status.PASS, f"answered in {took:.3f} s", self.resource, took, "s")]


def _preferred_requests(healthy: Sequence[str]) -> list[pb.ContainerPreferredAllocationRequest]:
    """As the kubelet asks: one container per call, one request without and one with must_include."""
    plain = pb.ContainerPreferredAllocationRequest(available_deviceIDs=healthy, allocation_size=1)
    size = min(2, len(healthy))
    must = pb.ContainerPreferredAllocationRequest(
        available_deviceIDs=healthy, must_include_deviceIDs=healthy[-1:], allocation_size=size
    )
    return [plain, must]


def _options_text(options: pb.DevicePluginOptions) -> str:
    return (
        f"pre_start_required={options.pre_start_required}, "
        f"get_preferred_allocation_available={options.get_preferred_allocation_available}"
    )


def _health_text(devices: Sequence[pb.Device]) -> str:
    healthy = sum(1 for d in devices if d.health == HEALTHY)
    return f"{healthy} healthy, {len(devices) - healthy} unhealthy"
