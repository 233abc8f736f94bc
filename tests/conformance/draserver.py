"""A tiny DRA kubelet plugin for the checker's tests: correct by default, broken on request.

It is a real gRPC server on real sockets (registration and ``v1.DRAPlugin``) that reads the
claims from the same files as the checker and writes one CDI spec per claim. Each fault breaks
one promise the kubelet relies on; ``rpc_error_on_wrong_uid`` is not a fault but what the Go
``kubeletplugin`` helper does (the whole call fails with "claim ... got replaced").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc import aio

from kubedevice.api import dra_v1_pb2 as v1
from kubedevice.api import dra_v1_pb2_grpc as v1_grpc
from kubedevice.api import pluginregistration_v1_pb2 as regpb
from kubedevice.api import pluginregistration_v1_pb2_grpc as regpb_grpc
from kubedevice.dra.driver.claims import FileClaims
from kubedevice.dra.driver.state import ClaimError

KIND = "example.com/tiny"


@dataclass
class Faults:
    skip_claim: str = ""  # never answer the claim of this name
    shared_cdi: bool = False  # one CDI ID (and spec file) for every claim, removed by any unprepare
    ignore_uid: bool = False  # prepare a claim whatever UID the kubelet names
    rpc_error_on_wrong_uid: bool = False  # the Go helper's (legal) answer to a replaced claim
    unknown_unprepare_error: bool = False  # an error for a claim it never prepared
    wrong_device: bool = False  # answer another device than the allocated one
    services: list[str] = field(default_factory=lambda: ["v1.DRAPlugin"])


class TinyDriver(v1_grpc.DRAPluginServicer, regpb_grpc.RegistrationServicer):  # type: ignore[misc]
    def __init__(self, name: str, kubelet_dir: Path, claims_dir: Path, cdi_dir: Path, faults: Faults) -> None:
        self.name = name
        self.claims = FileClaims(claims_dir)
        self.cdi_dir = cdi_dir
        self.faults = faults
        self.registration = kubelet_dir / "plugins_registry" / f"{name}-reg.sock"
        self.endpoint = kubelet_dir / "plugins" / name / "dra.sock"
        self.prepared: dict[str, list[v1.Device]] = {}
        self.statuses: list[regpb.RegistrationStatus] = []
        self._servers: list[aio.Server] = []

    async def start(self) -> None:
        self.endpoint.parent.mkdir(parents=True, exist_ok=True)
        self.registration.parent.mkdir(parents=True, exist_ok=True)
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        for path, add in (
            (self.endpoint, v1_grpc.add_DRAPluginServicer_to_server),
            (self.registration, regpb_grpc.add_RegistrationServicer_to_server),
        ):
            server = aio.server()
            add(self, server)
            server.add_insecure_port(f"unix://{path}")
            await server.start()
            self._servers.append(server)

    async def stop(self) -> None:
        for server in self._servers:
            await server.stop(0)

    async def GetInfo(self, request: Any, context: Any) -> regpb.PluginInfo:
        return regpb.PluginInfo(
            type="DRAPlugin", name=self.name, endpoint=str(self.endpoint), supported_versions=self.faults.services
        )

    async def NotifyRegistrationStatus(self, request: regpb.RegistrationStatus, context: Any) -> Any:
        self.statuses.append(request)
        return regpb.RegistrationStatusResponse()

    async def NodePrepareResources(self, request: v1.NodePrepareResourcesRequest, context: Any) -> Any:
        response = v1.NodePrepareResourcesResponse()
        for ref in request.claims:
            if ref.name == self.faults.skip_claim:
                continue
            try:
                claim = await self.claims.get(ref.namespace, ref.name)
            except ClaimError as err:
                response.claims[ref.uid].error = str(err)
                continue
            if claim.uid != ref.uid and not self.faults.ignore_uid:
                if self.faults.rpc_error_on_wrong_uid:
                    await context.abort(grpc.StatusCode.UNKNOWN, f"get resource claims: claim {ref.name} got replaced")
                response.claims[ref.uid].error = "got replaced"
                continue
            devices = []
            for result in claim.results:
                if result.driver != self.name:
                    continue
                device = result.device + ("-other" if self.faults.wrong_device else "")
                cdi_name = "shared" if self.faults.shared_cdi else f"{ref.uid}-{device}"
                self._write_spec("shared" if self.faults.shared_cdi else ref.uid, cdi_name)
                devices.append(
                    v1.Device(
                        request_names=[result.base_request],
                        pool_name=result.pool,
                        device_name=device,
                        cdi_device_ids=[f"{KIND}={cdi_name}"],
                    )
                )
            self.prepared[ref.uid] = devices
            response.claims[ref.uid].devices.extend(devices)
        return response

    async def NodeUnprepareResources(self, request: v1.NodeUnprepareResourcesRequest, context: Any) -> Any:
        response = v1.NodeUnprepareResourcesResponse()
        for ref in request.claims:
            answer = response.claims[ref.uid]
            if ref.uid not in self.prepared:
                if self.faults.unknown_unprepare_error:
                    answer.error = f"claim {ref.uid} is not prepared"
                continue
            del self.prepared[ref.uid]
            spec = self.cdi_dir / ("shared.json" if self.faults.shared_cdi else f"{ref.uid}.json")
            spec.unlink(missing_ok=True)
        return response

    def _write_spec(self, file: str, device: str) -> None:
        path = self.cdi_dir / f"{file}.json"
        spec = json.loads(path.read_text()) if path.exists() else {"cdiVersion": "0.6.0", "kind": KIND, "devices": []}
        if all(d["name"] != device for d in spec["devices"]):
            spec["devices"].append({"name": device, "containerEdits": {"env": [f"TINY={device}"]}})
        path.write_text(json.dumps(spec))
