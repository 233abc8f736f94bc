"""Our kubelet-side DRA client (kubedevice.kubelet.dra.plugin) against Kubernetes' own DRA test driver.

The Go driver (k8s.io/kubernetes/test/e2e/dra/test-driver, on the kubeletplugin library every Go
driver uses) runs against the session cluster's API server, with its sockets in a kubelet
directory of the test's own; the claims it prepares are real ResourceClaims allocated through
the status subresource. What passes here is what the real kubelet would get from that driver.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from grpc import aio
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.resource_v1 import ResourceClaim

from kubedevice.dra.driver.claims import ApiClaims, FileClaims
from kubedevice.kubelet.dra.plugin import DraClient, Registered, register
from kubedevice.testing import dratestdriver as go
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.waiting import eventually

pytestmark = pytest.mark.e2e

DRIVER = "go.kubedevice.test"


@pytest.fixture(scope="module")
def program() -> Path:
    built = go.binary()
    if built is None:  # as the cluster fixture: skip on a developer machine, fail in CI
        reason = "the Go toolchain is not installed and the DRA test driver is not cached"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return built


async def test_our_client_registers_prepares_and_unprepares_one_and_32_claims(
    cluster: Cluster, program: Path, short_tmp: Path
) -> None:
    async with go.go_driver_run(program, cluster.kubeconfig, short_tmp, driver=DRIVER) as run:
        client, options, node = run.client, run.options, run.options.node
        registered = await register(options.registration)
        expected = Registered(DRIVER, str(options.endpoint), "v1.DRAPlugin", "v1alpha1.DRAResourceHealth")
        assert registered == expected

        async def published() -> bool:
            found = await go.slices(client, node, DRIVER)
            return [d["name"] for s in found for d in s["spec"]["devices"]] == [f"device-0{i}" for i in range(4)]

        await eventually("the Go driver's 4 devices published", published, 10, 0.1)

        one = await run.claim("one", ["device-00"])
        many = [await run.claim(f"many-{i}", [f"device-0{i % 4}"]) for i in range(32)]
        async with DraClient(registered) as kubelet:
            uid = one["metadata"]["uid"]
            response = await kubelet.prepare([go.ref(one)])
            assert list(response.claims) == [uid] and response.claims[uid].error == ""
            [device] = response.claims[uid].devices
            assert (list(device.request_names), device.pool_name, device.device_name) == (["req"], node, "device-00")
            assert list(device.cdi_device_ids) == [f"{DRIVER}/test=claim-{uid}-req"]
            [spec] = [json.loads(p.read_text()) for p in options.cdi_dir.iterdir()]
            assert spec["devices"][0]["containerEdits"]["env"] == ["claim_one_req=true"]
            again = await kubelet.prepare([go.ref(one)])  # idempotent
            assert again.claims[uid].devices[0].cdi_device_ids == device.cdi_device_ids

            refs = [go.ref(obj) for obj in many]
            response = await kubelet.prepare(refs)
            assert {u: (c.error, [d.device_name for d in c.devices]) for u, c in response.claims.items()} == {
                obj["metadata"]["uid"]: ("", [f"device-0{i % 4}"]) for i, obj in enumerate(many)
            }
            assert len(list(options.cdi_dir.iterdir())) == 33

            response = await kubelet.unprepare([go.ref(one), *refs])
            assert {u: c.error for u, c in response.claims.items()} == {ref[2]: "" for ref in [go.ref(one), *refs]}
            assert list(options.cdi_dir.iterdir()) == []

            health = kubelet.watch_health()  # the health stream is offered and opens; no device reported yet
            assert await asyncio.wait_for(anext(health), 10) == {}
            await health.aclose()

        beta = Registered(registered.driver, registered.endpoint, "v1beta1.DRAPlugin")
        async with DraClient(beta) as kubelet:  # the older API the kubelet still speaks
            response = await kubelet.prepare([go.ref(one)])
            assert [d.device_name for d in response.claims[uid].devices] == ["device-00"]
            assert (await kubelet.unprepare([go.ref(one)])).claims[uid].error == ""
    assert not options.registration.exists() and not options.endpoint.exists()  # it removes its sockets


async def test_check_dra_passes_on_the_go_driver(cluster: Cluster, program: Path, short_tmp: Path) -> None:
    """``kubedevice check --dra`` judges Kubernetes' own driver as conformant: its expectations hold for Go."""
    async with go.go_driver_run(program, cluster.kubeconfig, short_tmp, driver=DRIVER) as run:
        claims = [await run.claim("one", ["device-00"]), await run.claim("two", ["device-01", "device-02"])]
        go.write_claim_files(short_tmp / "claims", claims)
        check = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubedevice", "check", "--dra", "--kubelet-dir", str(run.options.kubelet_dir),
            "--driver", DRIVER, "--claims", str(short_tmp / "claims"), "--cdi-dir", str(run.options.cdi_dir),
            "--json", "--timeout", "60", stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await check.communicate()
        report = json.loads(out)
        failed = [c for c in report["results"] if c["status"] == "fail"]
        assert check.returncode == 0 and not failed, json.dumps(failed, indent=1)
        assert report["summary"]["pass"] >= 15, report["summary"]


async def test_the_go_driver_refuses_replaced_and_unallocated_claims_as_a_call_error(
    cluster: Cluster, program: Path, short_tmp: Path
) -> None:
    """Unlike ours (a per-claim error), kubeletplugin fails the whole call: our client surfaces it as such."""
    async with go.go_driver_run(program, cluster.kubeconfig, short_tmp, driver=DRIVER) as run:
        client, options, namespace = run.client, run.options, run.namespace
        claim = await run.claim("gpu", ["device-01"])
        pending = await client.create(
            ResourceClaim.from_dict(go.claim_document(namespace, "pending", 1))  # type: ignore[call-overload]
        )
        assert isinstance(pending.metadata, ObjectMeta) and pending.metadata.uid
        async with DraClient(await register(options.registration)) as kubelet:
            with pytest.raises(aio.AioRpcError, match=f"claim {namespace}/gpu got replaced"):
                await kubelet.prepare([(namespace, "gpu", "not-" + claim["metadata"]["uid"])])
            with pytest.raises(aio.AioRpcError, match=f"claim {namespace}/pending not allocated"):
                await kubelet.prepare([(namespace, "pending", pending.metadata.uid)])
            assert list(options.cdi_dir.iterdir()) == []


async def test_claim_files_hold_the_objects_the_api_server_serves(cluster: Cluster, short_tmp: Path) -> None:
    """The files the harness writes for file-based tools (``kubedevice check --dra --claims``) read back as
    the very claims the drivers fetch from the API server."""
    node = namespace = f"kd-files-{uuid.uuid4().hex[:8]}"
    client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="kubedevice-test")
    try:
        async with go.node_and_namespace(client, node, namespace):
            objects = [
                await go.allocated_claim(
                    client, namespace, f"c{i}", driver=DRIVER, pool=node, devices=[f"device-0{j}" for j in range(i + 1)]
                )
                for i in range(2)
            ]
            go.write_claim_files(short_tmp / "claims", objects)
            files, api = FileClaims(short_tmp / "claims"), ApiClaims(client)
            for obj in objects:
                from_file = await files.get(namespace, obj["metadata"]["name"])
                assert from_file == await api.get(namespace, obj["metadata"]["name"])
                assert from_file.uid == obj["metadata"]["uid"] and from_file.allocated
    finally:
        await client.close()
