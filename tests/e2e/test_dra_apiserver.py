"""The DRA driver's API-server-facing parts against the session's real kube-apiserver (+ etcd):
the slice publisher and fetching claims.

Each test uses its own Node object (created here, no kubelet behind it) and deletes it with its
slices, so the cluster's kubelet, which deletes its own node's slices whenever it starts (other
tests restart it), never interferes, and the device-plugin tests never see these nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node, Pod, ServiceAccount, ServiceAccountToken
from lightkube.resources.resource_v1 import ResourceClaim, ResourceClaimStatus, ResourceSlice
from lightkube.types import PatchType

from kubedevice.device import Device, Health
from kubedevice.dra.driver import DraDriver, DriverService
from kubedevice.dra.driver.claims import ApiClaims
from kubedevice.dra.driver.publisher import InvalidSlices, SlicePublisher
from kubedevice.dra.models import to_document
from kubedevice.plugin.base import Plugin
from kubedevice.testing import components, waiting
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.dradriver import DRIVER, kubelet, null_plugin
from kubedevice.testing.dradriver import Node as TempNode
from kubedevice.testing.kubeapi import KubeApi

from .conftest import session_minor

pytestmark = pytest.mark.e2e


@pytest.fixture
def kubeconfig(cluster: Cluster) -> Path:
    return cluster.kubeconfig


@pytest.fixture
def node_name() -> str:
    return f"kd-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def tmp_node() -> Iterator[TempNode]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))
    yield TempNode(root)
    shutil.rmtree(root)


@asynccontextmanager
async def api(kubeconfig: Path, node_name: str) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-test")
    await client.create(Node(metadata=ObjectMeta(name=node_name)))
    try:
        yield client
    finally:
        # the slices first: the garbage collector deletes them too once their owner node is gone
        async for s in client.list(ResourceSlice, fields={"spec.nodeName": node_name}):
            with contextlib.suppress(ApiError):
                await client.delete(ResourceSlice, s.metadata.name)  # type: ignore[union-attr]
        await client.delete(Node, node_name)
        await client.close()


async def slices(client: AsyncClient, node: str) -> list[dict[str, Any]]:
    found = [s.to_dict() async for s in client.list(ResourceSlice, fields={"spec.nodeName": node})]
    return sorted(found, key=lambda s: s["metadata"]["name"])


async def eventually(check: Any, timeout: float = 1.0) -> float:
    """Seconds until ``await check()`` is true; fails after ``timeout`` (the 1 s republish promise),
    naming the check and the value :func:`_equal` compared last."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    _LAST.clear()
    name = check.__name__
    what = f"the condition on line {check.__code__.co_firstlineno}" if name == "<lambda>" else name
    await waiting.eventually(what, check, timeout, 0.02, seen=lambda: _LAST.get("value", "(nothing compared)"))
    return loop.time() - start


def devices(n: int, prefix: str = "d") -> list[Device]:
    return [Device(f"{prefix}{i}") for i in range(n)]


async def test_publishes_the_pool_owned_by_the_node_and_exactly_dra_slices_output(
    kubeconfig: Path, node_name: str
) -> None:
    driver = DraDriver(DRIVER, [null_plugin()])
    async with api(kubeconfig, node_name) as client:
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        await publisher.sync()
        [published] = await slices(client, node_name)
        node_uid = (await client.get(Node, node_name)).metadata.uid  # type: ignore[union-attr]
        assert published["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
        ]
        assert published["spec"]["pool"] == {"name": node_name, "generation": 1, "resourceSliceCount": 1}
        offline = to_document(driver.slices(node_name)[0])  # what `kubedevice dra slices` prints
        offline["spec"]["pool"]["generation"] = 1
        assert published["metadata"]["name"] == offline["metadata"]["name"]
        assert published["spec"] == offline["spec"]
        version = published["metadata"]["resourceVersion"]
        await publisher.sync()  # nothing changed: no write, same generation
        [again] = await slices(client, node_name)
        assert again["metadata"]["resourceVersion"] == version and publisher.generation == 1


async def test_splits_at_128_devices_bumps_the_generation_and_deletes_obsolete_slices(
    kubeconfig: Path, node_name: str
) -> None:
    plugin = Plugin("example.com/many", devices(200))
    driver = DraDriver(DRIVER, [plugin])
    async with api(kubeconfig, node_name) as client:
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        await publisher.sync()
        first = await slices(client, node_name)
        assert [len(s["spec"]["devices"]) for s in first] == [128, 72]
        assert {(s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"]) for s in first} == {(1, 2)}
        plugin.publish(devices(10))
        await publisher.sync()
        [only] = await slices(client, node_name)
        assert len(only["spec"]["devices"]) == 10
        assert only["spec"]["pool"] == {"name": node_name, "generation": 2, "resourceSliceCount": 1}


async def test_republishes_within_a_second_after_hotplug_health_deletion_and_edits(
    kubeconfig: Path, node_name: str
) -> None:
    plugin = Plugin("example.com/hot", devices(3))
    driver = DraDriver(DRIVER, [plugin])
    async with api(kubeconfig, node_name) as client:
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        driver.subscribe(publisher.changed)
        task = asyncio.create_task(publisher.run())
        try:
            await asyncio.wait_for(publisher.published.wait(), 10)

            async def names() -> list[str]:
                return [d["name"] for s in await slices(client, node_name) for d in s["spec"].get("devices", [])]

            plugin.publish(devices(4))  # hotplug
            await eventually(lambda: _equal(names(), ["d0", "d1", "d2", "d3"]))
            plugin.set_health("d1", Health.UNHEALTHY)  # tainted NoSchedule, see test_taints_...
            await eventually(lambda: _equal(tainted(client, node_name), {"d1"}))
            plugin.set_health("d1", Health.HEALTHY)
            await eventually(lambda: _equal(tainted(client, node_name), set()))
            assert await names() == ["d0", "d1", "d2", "d3"]

            [current] = await slices(client, node_name)
            await client.delete(ResourceSlice, current["metadata"]["name"])  # someone deletes it
            await eventually(lambda: _equal(names(), ["d0", "d1", "d2", "d3"]))

            [current] = await slices(client, node_name)
            current["spec"]["devices"] = current["spec"]["devices"][:1]  # someone edits it
            await client.replace(ResourceSlice.from_dict(current))  # type: ignore[call-overload]
            await eventually(lambda: _equal(names(), ["d0", "d1", "d2", "d3"]))
            [final] = await slices(client, node_name)
            assert final["spec"]["pool"]["generation"] > current["spec"]["pool"]["generation"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


WATCH_LIST_COMPRESSION = "1.37"
"""The first release whose API server gzips a watch-list's response (WatchListCompression, beta
and on by default in 1.37: k8s.io/apiserver pkg/features/kube_features.go), in gzip members that
end at every flush (pkg/endpoints/handlers/watch.go ``perFlushGzipWriter``)."""


@contextlib.contextmanager
def compressing_api_server(cluster: Cluster, directory: Path) -> Iterator[Path]:
    """A kubeconfig of a kube-apiserver that compresses watch-lists: the session cluster's own when
    it runs 1.37, else a second one of the cached 1.37 build on the cluster's etcd (skipped when
    that build is not cached, as tests/e2e/test_kubelet_upgrade.py does with releases it needs)."""
    if session_minor() >= int(WATCH_LIST_COMPRESSION.split(".")[1]):
        yield cluster.kubeconfig
        return
    build = components.cache_dir() / f"kubernetes-{components.RELEASES[WATCH_LIST_COMPRESSION]}"
    if not (build / "kube-apiserver").is_file():
        pytest.skip(f"the kube-apiserver of {WATCH_LIST_COMPRESSION} is not built (cached in {build})")
    with second_api_server(cluster, directory, "", build / "kube-apiserver") as kubeconfig:
        yield kubeconfig


@pytest.mark.parametrize("server", ["session", WATCH_LIST_COMPRESSION])
async def test_slices_the_kubelet_wipes_with_a_delete_collection_come_back(
    cluster: Cluster, node_name: str, tmp_node: TempNode, server: str
) -> None:
    """A starting kubelet deletes its node's slices of every driver with one DeleteCollection by
    node name (k8s.io/kubernetes pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go
    ``wipeResourceSlices``), about a second after our driver registers with it: the running
    publisher's watch sees it and writes them again, every time, all on its first watch request.
    On a 1.37 API server the watch-list's response is gzip members, of which httpx decodes only
    the first: this failed there (the slices stayed gone) before the watch asked for no gzip."""
    with contextlib.ExitStack() as stack:
        kubeconfig = (
            cluster.kubeconfig
            if server == "session"
            else stack.enter_context(compressing_api_server(cluster, tmp_node.root))
        )
        driver = DraDriver(DRIVER, [Plugin("example.com/wiped", devices(4))])
        wipe = f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D{node_name}"
        async with api(kubeconfig, node_name) as client, counted_client(kubeconfig) as (own, counted):
            publisher = SlicePublisher(own, DRIVER, node_name, lambda: driver.slices(node_name), token_file=None)

            async def published() -> bool:
                return sum(len(s["spec"].get("devices") or []) for s in await slices(client, node_name)) == 4

            async with running(publisher):
                await asyncio.wait_for(publisher.published.wait(), 10)
                with KubeApi(kubeconfig) as kubelet_side:
                    for _ in range(3):
                        await eventually(published, timeout=5)
                        await asyncio.to_thread(kubelet_side.request, "DELETE", wipe)
                        assert not await slices(client, node_name)
                        took = await eventually(published, timeout=5)
                        print(f"{server}: wiped by a DeleteCollection to published again: {took:.2f} s")
            assert counted.sent.count("WATCH slices") == 1, counted.sent


_LAST: dict[str, Any] = {}
"""What :func:`_equal` was given last: a timed-out :func:`eventually` says what it saw."""


async def _equal(value: Any, expected: Any) -> bool:
    _LAST["value"] = got = await value
    return bool(got == expected)


async def sizes(client: AsyncClient, node: str) -> list[int]:
    return [len(s["spec"].get("devices", [])) for s in await slices(client, node)]


async def tainted(client: AsyncClient, node: str) -> set[str]:
    return {d["name"] for s in await slices(client, node) for d in s["spec"].get("devices", []) if d.get("taints")}


async def test_taints_reach_the_api_server_keep_their_time_and_clear_on_recovery(
    kubeconfig: Path, node_name: str
) -> None:
    """DRADeviceTaints is on by default in 1.36: the server keeps the taint (it would drop the
    field silently if the gate were off) and stamps ``timeAdded``, which a later rewrite keeps."""
    plugin = Plugin("example.com/sick", devices(70))
    driver = DraDriver(DRIVER, [plugin])
    async with api(kubeconfig, node_name) as client:
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        driver.subscribe(publisher.changed)
        task = asyncio.create_task(publisher.run())
        try:
            await asyncio.wait_for(publisher.published.wait(), 10)
            assert [len(s["spec"]["devices"]) for s in await slices(client, node_name)] == [70]
            plugin.set_health("d3", Health.UNHEALTHY)
            took = await eventually(lambda: _equal(tainted(client, node_name), {"d3"}))
            print(f"unhealthy to taint in the API server: {took * 1000:.0f} ms")
            # 64 devices per slice once one carries a taint; the pool's slices are written one by
            # one, so a reader can see the first before the second exists
            await eventually(lambda: _equal(sizes(client, node_name), [64, 6]))
            published = await slices(client, node_name)
            [taint] = next(d["taints"] for s in published for d in s["spec"]["devices"] if d["name"] == "d3")
            assert (taint["key"], taint["effect"], taint.get("value")) == (f"{DRIVER}/unhealthy", "NoSchedule", None)
            stamped = taint["timeAdded"]
            await asyncio.sleep(1.1)  # timeAdded has a resolution of one second
            plugin.set_health("d5", Health.UNHEALTHY)  # a rewrite for another device
            await eventually(lambda: _equal(tainted(client, node_name), {"d3", "d5"}))
            again = {
                d["name"]: d["taints"][0]["timeAdded"]
                for s in await slices(client, node_name)
                for d in s["spec"]["devices"]
                if d.get("taints")
            }
            assert again["d3"] == stamped and again["d5"] != stamped
            plugin.set_health("d3", Health.HEALTHY)
            plugin.set_health("d5", Health.HEALTHY)
            took = await eventually(lambda: _equal(tainted(client, node_name), set()))
            print(f"recovery to taint cleared: {took * 1000:.0f} ms")
            assert [len(s["spec"]["devices"]) for s in await slices(client, node_name)] == [70]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_claims_are_fetched_from_the_api_server(kubeconfig: Path, node_name: str, tmp_node: TempNode) -> None:
    namespace = f"kd-{uuid.uuid4().hex[:6]}"
    async with api(kubeconfig, node_name) as client:
        await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
        try:
            claim = await _allocated_claim(client, namespace, "gpu", node_name, "null2")
            pending = await client.create(
                ResourceClaim.from_dict(_claim_document(namespace, "pending"))  # type: ignore[call-overload]
            )
            options = tmp_node.options()
            options.node = node_name
            service = DriverService(DraDriver(DRIVER, [null_plugin()]), ApiClaims(client), options, None)
            await service.start()
            try:
                async with kubelet(service) as kube:
                    uid = claim["metadata"]["uid"]
                    pending_uid = pending.metadata.uid
                    response = await kube.prepare(
                        [
                            (namespace, "gpu", uid),
                            (namespace, "gpu", "not-" + uid),
                            (namespace, "pending", pending_uid),
                            (namespace, "absent", "uid-absent"),
                        ]
                    )
                    assert [d.device_name for d in response.claims[uid].devices] == ["null2"]
                    assert "was replaced" in response.claims["not-" + uid].error
                    assert "is not allocated" in response.claims[pending_uid].error
                    assert f"cannot get claim {namespace}/absent" in response.claims["uid-absent"].error
            finally:
                await service.stop()
        finally:
            await client.delete(Namespace, namespace)


def _claim_document(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "null"}}]}},
    }


async def _allocated_claim(client: AsyncClient, namespace: str, name: str, pool: str, device: str) -> dict[str, Any]:
    """A claim with an allocation written through the status subresource (as the scheduler does)."""
    created = await client.create(ResourceClaim.from_dict(_claim_document(namespace, name)))  # type: ignore[call-overload]
    status = {
        "allocation": {
            "devices": {"results": [{"request": "req", "driver": DRIVER, "pool": pool, "device": device}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pool]}]}]
            },
        }
    }
    updated = await client.patch(
        ResourceClaimStatus, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
    )
    assert created.metadata is not None
    return dict(updated.to_dict())


async def test_the_service_publishes_once_registered_and_is_ready_after(
    kubeconfig: Path, node_name: str, tmp_node: TempNode
) -> None:
    async with api(kubeconfig, node_name) as client:
        driver = DraDriver(DRIVER, [null_plugin()])
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        options = tmp_node.options()
        options.node = node_name
        service = DriverService(driver, ApiClaims(client), options, publisher)
        await service.start()
        task = asyncio.create_task(service.run())
        try:
            await asyncio.sleep(0.5)
            assert await slices(client, node_name) == [] and not options.ready.is_set()
            async with kubelet(service):
                await asyncio.wait_for(options.ready.wait(), 5)
                [published] = await slices(client, node_name)
                assert len(published["spec"]["devices"]) == 4
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await service.stop()


class Numbered(Plugin):
    """A device with an attribute the API server refuses (a version that is not semver)."""

    def dra_attributes(self) -> dict[str, dict[str, dict[str, object]]]:
        return {d.id: {"bad": {"version": "not a semver"}} for d in self.devices()}


async def test_slices_the_api_server_would_refuse_are_not_sent(kubeconfig: Path, node_name: str) -> None:
    driver = DraDriver(DRIVER, [Numbered("example.com/bad", devices(1))])
    async with api(kubeconfig, node_name) as client:
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        with pytest.raises(InvalidSlices, match=r"attributes\[bad\]\.version"):
            await publisher.sync()
        assert await slices(client, node_name) == []


@contextlib.contextmanager
def second_api_server(cluster: Cluster, directory: Path, gates: str, binary: Path | None = None) -> Iterator[Path]:
    """A second kube-apiserver on the cluster's etcd (its own key prefix) with
    ``--feature-gates=<gates>``, the cluster's own or ``binary`` (another release's); its kubeconfig.
    No endpoint reconciler: it has no Service of its own to keep, and from 1.37 it refuses to run
    on a loopback address."""
    state = cluster.state()
    assert state is not None
    binary = binary or cluster.binaries.kube("kube-apiserver")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pki = cluster.dir / "pki"
    argv = [
        str(binary), f"--etcd-servers=http://127.0.0.1:{state.ports.etcd_client}",
        f"--etcd-prefix=/kd-second-{uuid.uuid4().hex[:8]}", "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1", f"--secure-port={port}", f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}", f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc", "--authorization-mode=RBAC",
        "--service-cluster-ip-range=10.96.0.0/24", "--profiling=false", "--endpoint-reconciler-type=none",
        *([f"--feature-gates={gates}"] if gates else []),
    ]  # fmt: skip
    with (directory / "kube-apiserver.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    kubeconfig = directory / "kubeconfig"
    port_of_cluster = f"127.0.0.1:{state.ports.apiserver}"
    kubeconfig.write_text(cluster.kubeconfig.read_text().replace(port_of_cluster, f"127.0.0.1:{port}"))
    try:
        with KubeApi(kubeconfig) as server:

            def log() -> str:
                return (directory / "kube-apiserver.log").read_text()[-2000:]

            def ready() -> bool:
                assert process.poll() is None, log()
                return server.ready()

            waiting.wait_for("the second kube-apiserver ready", ready, 60, 0.2, seen=log)
        yield kubeconfig
    finally:
        process.terminate()
        process.wait(30)


async def test_an_api_server_that_drops_taints_gets_no_unhealthy_device(
    cluster: Cluster, node_name: str, tmp_node: TempNode
) -> None:
    """Without the gate (off by default on 1.33-1.35) the server stores the slice without the
    taint: the unhealthy device would look healthy to the scheduler. The publisher notices and
    leaves tainted devices out: exactly two writes (the create that lost its taint, the rewrite
    without the device), counted on the wire, and none after. From 1.35 DRADeviceTaintRules (on by
    default from 1.37) depends on the gate, and the server refuses to start with it on alone."""
    gates = "DRADeviceTaints=false" + (",DRADeviceTaintRules=false" if session_minor() >= 35 else "")
    with second_api_server(cluster, tmp_node.root, gates) as kubeconfig:
        plugin = Plugin("example.com/sick", devices(3))
        plugin.set_health("d1", Health.UNHEALTHY)
        driver = DraDriver(DRIVER, [plugin])
        async with api(kubeconfig, node_name) as client, counted_client(kubeconfig) as (own, counted):
            publisher = SlicePublisher(own, DRIVER, node_name, lambda: driver.slices(node_name))
            driver.subscribe(publisher.changed)

            async def names() -> list[str]:
                return [d["name"] for s in await slices(client, node_name) for d in s["spec"].get("devices", [])]

            async with running(publisher):
                await asyncio.wait_for(publisher.published.wait(), 10)
                await eventually(lambda: _equal(names(), ["d0", "d2"]))
                assert publisher.taints_dropped
                await asyncio.sleep(2)  # a third write would have gone out by now
                assert counted.writes() == ["POST slices", "PUT slices"], counted.sent
                assert publisher.generation == 2
                plugin.set_health("d1", Health.HEALTHY)
                await eventually(lambda: _equal(names(), ["d0", "d1", "d2"]))


class Requests:
    """Every request one lightkube client sends, by kind, seen by an httpx request hook on the
    real client (not a fake server): what the API server receives from this publisher."""

    def __init__(self, client: AsyncClient) -> None:
        self.sent: list[str] = []
        client._client._client.event_hooks["request"].append(self._seen)  # lightkube's httpx client

    async def _seen(self, request: Any) -> None:
        path = request.url.path
        what = "node" if "/nodes/" in path else "slices" if "resourceslices" in path else path
        verb = "WATCH" if request.url.params.get("watch") else request.method
        self.sent.append(f"{verb} {what}")

    def writes(self) -> list[str]:
        return [r for r in self.sent if r.split()[0] in ("POST", "PUT", "DELETE", "PATCH")]


@asynccontextmanager
async def counted_client(kubeconfig: Path) -> AsyncIterator[tuple[AsyncClient, Requests]]:
    """A client for the publisher under test alone, with every request it sends counted; closed after."""
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-test")
    try:
        yield client, Requests(client)
    finally:
        await client.close()


async def sent_exactly(counted: Requests, expected: list[str]) -> None:
    """Until the publisher has sent ``expected`` (in any order: a watch may start beside a write),
    then half a second more in which it sends nothing else."""
    sent = f"exactly {expected} sent"
    await waiting.eventually(sent, lambda: sorted(counted.sent) == expected, 10, 0.02, seen=lambda: counted.sent)
    await asyncio.sleep(0.5)
    assert sorted(counted.sent) == expected, counted.sent


@asynccontextmanager
async def running(publisher: SlicePublisher) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(publisher.run())
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@asynccontextmanager
async def pod_token(client: AsyncClient, node: str, directory: Path) -> AsyncIterator[Path]:
    """A file with a token the real API server issued for a Pod on ``node``: a TokenRequest bound
    to the Pod, as the kubelet asks for the one it projects into a driver's pod, so it carries the
    node's name and UID (ServiceAccountTokenPodNodeInfo). The Pod has no kubelet behind it."""
    namespace = f"kd-token-{node}"
    await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    try:
        await client.create(ServiceAccount(metadata=ObjectMeta(name="driver", namespace=namespace)))
        pod = await client.create(
            Pod(
                metadata=ObjectMeta(name="driver", namespace=namespace),
                spec=PodSpec(
                    nodeName=node, serviceAccountName="driver", automountServiceAccountToken=False,
                    containers=[Container(name="driver", image="kubedevice:test")],
                ),
            )
        )  # fmt: skip
        assert pod.metadata is not None
        bound = BoundObjectReference(kind="Pod", apiVersion="v1", name="driver", uid=pod.metadata.uid)
        request = ServiceAccountToken(metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], boundObjectRef=bound))
        issued = await client.create(request, name="driver", namespace=namespace)
        assert issued.status is not None
        path = directory / "token"
        path.write_text(str(issued.status.token))
        yield path
    finally:
        with contextlib.suppress(ApiError):
            await client.delete(Pod, "driver", namespace=namespace, grace_period=0)
        await client.delete(Namespace, namespace)


async def test_publisher_api_load_start_up_rest_and_restart(
    kubeconfig: Path, node_name: str, tmp_node: TempNode
) -> None:
    """With the pod's token naming its Node: start-up is one watch-list and one create; at rest,
    changes that change nothing and resyncs send nothing; a restart with the same devices is one
    watch-list, no write (Go's resourceslice controller: a watch-list, a Node GET and a create at
    start-up, a watch and a Node GET at a restart)."""
    driver = DraDriver(DRIVER, [null_plugin(8)])
    async with api(kubeconfig, node_name) as client, pod_token(client, node_name, tmp_node.root) as token:
        node_uid = (await client.get(Node, node_name)).metadata.uid  # type: ignore[union-attr]
        async with counted_client(kubeconfig) as (first, counted):
            publisher = SlicePublisher(first, DRIVER, node_name, lambda: driver.slices(node_name), token_file=token)
            async with running(publisher):
                await asyncio.wait_for(publisher.published.wait(), 10)
                assert sorted(counted.sent) == ["POST slices", "WATCH slices"]
                [stored] = await slices(client, node_name)
                assert stored["metadata"]["ownerReferences"][0]["uid"] == node_uid
                for _ in range(5):  # nothing differs: each wake compares with the cache only
                    publisher.changed()
                    await asyncio.sleep(0.2)
                assert await publisher.sync() is False
                assert len(counted.sent) == 2, counted.sent
        async with counted_client(kubeconfig) as (second, restarted):
            again = SlicePublisher(second, DRIVER, node_name, lambda: driver.slices(node_name), token_file=token)
            async with running(again):
                await asyncio.wait_for(again.published.wait(), 10)
                await sent_exactly(restarted, ["WATCH slices"])
                assert again.generation == 1 and again.watch_list
        [after] = await slices(client, node_name)
        assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_without_the_pods_token_the_node_is_read_once(kubeconfig: Path, node_name: str) -> None:
    """Certificates, or no token naming this Node: one Node GET for its UID, so start-up is a
    watch-list, a Node GET and a create, as Go's controller."""
    driver = DraDriver(DRIVER, [null_plugin(8)])
    async with api(kubeconfig, node_name) as client:
        async with counted_client(kubeconfig) as (own, counted):
            publisher = SlicePublisher(own, DRIVER, node_name, lambda: driver.slices(node_name), token_file=None)
            async with running(publisher):
                await asyncio.wait_for(publisher.published.wait(), 10)
                await sent_exactly(counted, ["GET node", "POST slices", "WATCH slices"])
        [stored] = await slices(client, node_name)
        node_uid = (await client.get(Node, node_name)).metadata.uid  # type: ignore[union-attr]
        assert stored["metadata"]["ownerReferences"][0]["uid"] == node_uid


async def test_an_api_server_that_refuses_watch_list_gets_a_list_and_a_watch(
    cluster: Cluster, node_name: str, tmp_node: TempNode
) -> None:
    """``WatchList=false``: the server answers the watch-list with 422; the publisher lists and
    watches instead, from then on, and still publishes exactly and sees external edits."""
    with second_api_server(cluster, tmp_node.root, "WatchList=false") as kubeconfig:
        driver = DraDriver(DRIVER, [null_plugin(8)])
        async with api(kubeconfig, node_name) as client, counted_client(kubeconfig) as (own, counted):
            publisher = SlicePublisher(own, DRIVER, node_name, lambda: driver.slices(node_name), token_file=None)
            async with running(publisher):
                await asyncio.wait_for(publisher.published.wait(), 10)
                await sent_exactly(counted, ["GET node", "GET slices", "POST slices", "WATCH slices", "WATCH slices"])
                assert not publisher.watch_list
                [stored] = await slices(client, node_name)
                await client.delete(ResourceSlice, stored["metadata"]["name"])  # seen by the watch
                await eventually(lambda: _equal(sizes(client, node_name), [8]), timeout=5)


async def test_a_device_flipping_fast_is_coalesced_and_the_end_state_exact(kubeconfig: Path, node_name: str) -> None:
    """101 health flips in about a second: at most one write per ``min_interval`` (plus the first
    and the last), and what the API server ends with is exactly the devices' last state."""
    plugin = Plugin("example.com/flip", devices(8))
    driver = DraDriver(DRIVER, [plugin])
    async with api(kubeconfig, node_name) as client, counted_client(kubeconfig) as (own, counted):
        publisher = SlicePublisher(own, DRIVER, node_name, lambda: driver.slices(node_name), min_interval=0.5)
        driver.subscribe(publisher.changed)
        async with running(publisher):
            await asyncio.wait_for(publisher.published.wait(), 10)
            before = len(counted.writes())
            loop = asyncio.get_running_loop()
            start = loop.time()
            for flip in range(101):
                plugin.set_health("d3", Health.UNHEALTHY if flip % 2 == 0 else Health.HEALTHY)
                await asyncio.sleep(0.01)
            took = loop.time() - start
            await eventually(lambda: _equal(tainted(client, node_name), {"d3"}), timeout=5)
            await asyncio.sleep(1.5)  # anything still queued would be written by now
            writes = len(counted.writes()) - before
            print(f"101 flips in {took:.2f} s: {writes} writes")
            assert 1 <= writes <= took / 0.5 + 2, (writes, took)
            [final] = await slices(client, node_name)
            expected = to_document(driver.slices(node_name)[0])
            expected["spec"]["pool"]["generation"] = publisher.generation
            for device in final["spec"]["devices"]:
                for taint in device.get("taints", []):
                    del taint["timeAdded"]
            assert final["spec"] == expected["spec"]


async def test_a_re_created_node_gets_its_slices_back_with_the_new_uid(kubeconfig: Path, node_name: str) -> None:
    """The Node's UID is read once; when the Node is deleted and created again, the garbage
    collector deletes our slices (their owner is gone) and the publisher reads the new UID."""
    driver = DraDriver(DRIVER, [null_plugin()])
    async with api(kubeconfig, node_name) as client:
        publisher = SlicePublisher(client, DRIVER, node_name, lambda: driver.slices(node_name))
        async with running(publisher):
            await asyncio.wait_for(publisher.published.wait(), 10)
            await client.delete(Node, node_name)
            await client.create(Node(metadata=ObjectMeta(name=node_name)))
            uid = (await client.get(Node, node_name)).metadata.uid  # type: ignore[union-attr]

            async def owned_by_new_node() -> bool:
                found = await slices(client, node_name)
                return len(found) == 1 and found[0]["metadata"]["ownerReferences"][0]["uid"] == uid

            took = await eventually(owned_by_new_node, timeout=60)
            print(f"node re-created to slice owned by the new node: {took:.1f} s")
            await asyncio.sleep(2)
            assert await owned_by_new_node()


async def test_a_stale_uid_in_the_token_heals_by_a_node_get(
    kubeconfig: Path, node_name: str, tmp_node: TempNode
) -> None:
    """The token's UID is a hint: a token issued before the Node was re-created names the old
    UID; the first create uses it, the garbage collector deletes that slice (its owner is gone),
    and the publisher then reads the Node and creates it again owned by the Node."""
    driver = DraDriver(DRIVER, [null_plugin()])
    async with api(kubeconfig, node_name) as client, pod_token(client, node_name, tmp_node.root) as token:
        await client.delete(Node, node_name)
        await client.create(Node(metadata=ObjectMeta(name=node_name)))
        uid = (await client.get(Node, node_name)).metadata.uid  # type: ignore[union-attr]
        async with counted_client(kubeconfig) as (own, counted):
            publisher = SlicePublisher(own, DRIVER, node_name, lambda: driver.slices(node_name), token_file=token)
            async with running(publisher):

                async def owned_by_new_node() -> bool:
                    found = await slices(client, node_name)
                    return len(found) == 1 and found[0]["metadata"]["ownerReferences"][0]["uid"] == uid

                try:
                    took = await eventually(owned_by_new_node, timeout=60)
                except AssertionError:  # say what was sent and stored: the GC's part or ours
                    stored = await slices(client, node_name)
                    raise AssertionError(f"not healed in 60 s: sent {counted.sent}, stored {stored}") from None
                print(f"stale token UID to slice owned by the Node: {took:.1f} s; {counted.sent}")
                await asyncio.sleep(2)
                assert await owned_by_new_node()
                assert counted.sent[:2] == ["WATCH slices", "POST slices"]  # the stale UID, no GET
                assert counted.sent.count("GET node") == 1, counted.sent
