"""``status.devices`` written by the driver against the session's real kube-apiserver: the API
server accepts the entries (it validates them against the allocation), another driver's entry
in the same claim stays, and a second prepare changes nothing."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.resource_v1 import ResourceClaim, ResourceClaimStatus
from lightkube.types import PatchType

from kubedevice.dra.driver import DraDriver, DriverService
from kubedevice.dra.driver.claims import ApiClaims
from kubedevice.dra.driver.devicestatus import ApiStatus
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.dradriver import DRIVER, kubelet, null_plugin
from kubedevice.testing.dradriver import Node as TempNode

pytestmark = pytest.mark.e2e
OTHER = "other.example.com"


@pytest.fixture
def tmp_node() -> Iterator[TempNode]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield TempNode(root)
    shutil.rmtree(root)


def _results(pool: str) -> list[dict[str, Any]]:
    return [
        {"request": "req", "driver": DRIVER, "pool": pool, "device": "null1"},
        {"request": "other", "driver": OTHER, "pool": pool, "device": "gpu0"},
    ]


async def _allocated(client: AsyncClient, namespace: str, pool: str) -> dict[str, Any]:
    document = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": "shared"},
        "spec": {"devices": {"requests": [
            {"name": "req", "exactly": {"deviceClassName": "null"}},
            {"name": "other", "exactly": {"deviceClassName": "other"}},
        ]}},
    }  # fmt: skip
    await client.create(ResourceClaim.from_dict(document))  # type: ignore[call-overload]
    status = {"allocation": {"devices": {"results": _results(pool)}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pool]}]}]}}}  # fmt: skip
    updated = await client.patch(
        ResourceClaimStatus, "shared", {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
    )
    return dict(updated.to_dict())


async def test_status_devices_are_applied_beside_another_drivers(cluster: Cluster, tmp_node: TempNode) -> None:
    namespace, pool = f"kd-{uuid.uuid4().hex[:6]}", f"kd-{uuid.uuid4().hex[:8]}"
    client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="kubedevice-test")
    await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    try:
        claim = await _allocated(client, namespace, pool)
        theirs = {"driver": OTHER, "pool": pool, "device": "gpu0", "data": {"theirs": True}}
        await client.patch(
            ResourceClaimStatus, "shared",
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"namespace": namespace, "name": "shared"}, "status": {"devices": [theirs]}},
            namespace=namespace, patch_type=PatchType.APPLY, field_manager=OTHER, force=True,
        )  # fmt: skip
        options = tmp_node.options()
        options.node = pool
        service = DriverService(
            DraDriver(DRIVER, [null_plugin()]), ApiClaims(client), options, None, ApiStatus(client, DRIVER)
        )
        await service.start()
        try:
            async with kubelet(service) as kube:
                uid = claim["metadata"]["uid"]
                assert (await kube.prepare([(namespace, "shared", uid)])).claims[uid].error == ""
                first = (await client.get(ResourceClaim, "shared", namespace=namespace)).to_dict()
                assert (await kube.prepare([(namespace, "shared", uid)])).claims[uid].error == ""
                again = (await client.get(ResourceClaim, "shared", namespace=namespace)).to_dict()
        finally:
            await service.stop()
        devices = {d["driver"]: d for d in first["status"]["devices"]}
        assert devices[OTHER] == theirs
        ours = devices[DRIVER]
        assert (ours["pool"], ours["device"]) == (pool, "null1")
        assert ours["data"] == {"cdiDeviceIDs": [f"k8s.{DRIVER}/device={uid}-null1"]}
        [ready] = ours["conditions"]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Prepared")
        assert again["status"]["devices"] == first["status"]["devices"]
        managers = {m["manager"] for m in again["metadata"]["managedFields"] if m.get("subresource") == "status"}
        assert {f"kubedevice/{DRIVER}", OTHER} <= managers
    finally:
        await client.delete(Namespace, namespace)
        await client.close()
