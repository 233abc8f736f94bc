"""Kubernetes' own DRA test driver as a peer: built, run against an API server, and fed claims.

The driver is ``k8s.io/kubernetes/test/e2e/dra/test-driver`` (its ``kubelet-plugin`` command, on
``k8s.io/dynamic-resource-allocation/kubeletplugin`` like every Go DRA driver), pinned by the
wrapper module ``cluster/go/dratestdriver`` and cached like the project's other Go peers. It
fetches each claim it is asked to prepare from the API server, so tests put allocated
ResourceClaims there (create + status update, as the scheduler does) and hand the very same
objects to file-based tools as YAML. Its sockets go to a kubelet directory of our own, never the
cluster kubelet's, so only our kubelet-side client talks to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Node
from lightkube.resources.resource_v1 import ResourceClaim, ResourceClaimStatus, ResourceSlice
from lightkube.types import PatchType

from kubedevice.errors import KubedeviceError

from .components import GO_MODULES
from .gobuild import build
from .waiting import eventually

DRIVER = "test-driver.cdi.k8s.io"
"""The test driver's default name (its ``--drivername``)."""
DEVICE_CLASS = "kubedevice-test"
"""Named by the claims' requests; the allocation is written directly, so no class has to exist."""
START_TIMEOUT = 30.0


class GoDriverError(KubedeviceError, RuntimeError):
    """The Go driver did not come up; the message carries the tail of its log."""


def binary() -> Path | None:
    """The cached ``dra-test-driver`` binary; None without Go.

    Built on first use: under a minute once the cluster's Kubernetes build has filled Go's build cache.
    """
    return build(GO_MODULES / "dratestdriver", ".", "dra-test-driver")


@dataclass(frozen=True)
class GoDriverOptions:
    kubeconfig: Path
    kubelet_dir: Path
    """Sockets go to ``plugins_registry/<driver>-reg.sock`` and ``plugins/<driver>/dra.sock`` below it."""
    cdi_dir: Path
    node: str
    driver: str = DRIVER
    devices: int = 4
    """Devices ``device-00`` … it publishes in its ResourceSlice (the prepare path does not check them)."""
    api_qps: float = 50.0
    """client-go's rate limit; the driver's default (50 QPS, burst 100) throttles many claims per call."""

    @property
    def registration(self) -> Path:
        return self.kubelet_dir / "plugins_registry" / f"{self.driver}-reg.sock"

    @property
    def endpoint(self) -> Path:
        return self.kubelet_dir / "plugins" / self.driver / "dra.sock"

    def argv(self, program: Path) -> list[str]:
        return [
            str(program),
            "--kubeconfig",
            str(self.kubeconfig),
            "--drivername",
            self.driver,
            "--kube-api-qps",
            str(self.api_qps),
            "--kube-api-burst",
            str(int(2 * self.api_qps)),
            "kubelet-plugin",
            "--node-name",
            self.node,
            "--num-devices",
            str(self.devices),
            "--plugin-registration-path",
            str(self.registration.parent),
            "--datadir",
            str(self.endpoint.parent.parent),
            "--cdi-dir",
            str(self.cdi_dir),
        ]


@contextlib.asynccontextmanager
async def running(program: Path, options: GoDriverOptions, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """The driver, started and serving its registration socket; stopped with SIGTERM (it removes its sockets)."""
    # It creates the CDI and plugins directories but not its own socket directory (a DaemonSet mounts it).
    for directory in (options.endpoint.parent, options.registration.parent, options.cdi_dir):
        directory.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(*options.argv(program), stdout=out, stderr=out)
    try:
        await _until_serving(process, options, log)
        yield process
    finally:
        await stop(process)


async def stop(process: asyncio.subprocess.Process, timeout: float = 10.0) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _until_serving(process: asyncio.subprocess.Process, options: GoDriverOptions, log: Path) -> None:
    """Until the registration socket accepts a connection: its file appears at bind(), before
    listen(), and a connect in between is refused (seen under load)."""

    async def serving() -> bool:
        if process.returncode is not None:
            raise GoDriverError(f"exited with {process.returncode}")  # ends the wait: see below
        return await _accepts(options.registration)

    try:
        await eventually(f"the Go DRA test driver serving {options.registration}", serving, START_TIMEOUT)
    except (AssertionError, GoDriverError):
        await stop(process)
        tail = log.read_bytes()[-2000:].decode(errors="replace")  # noqa: ASYNC240 (once, on failure)
        raise GoDriverError(f"the Go DRA test driver did not serve {options.registration}:\n{tail}") from None


async def _accepts(path: Path) -> bool:
    try:
        _, writer = await asyncio.open_unix_connection(str(path))
    except OSError:  # absent, not a socket yet, or not listening yet
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


# --- claims in the API server -------------------------------------------------------------------


def claim_document(namespace: str, name: str, count: int) -> dict[str, Any]:
    """A ResourceClaim asking for ``count`` devices in one request named ``req`` (no allocation yet)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "req",
                        "exactly": {"deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": count},
                    },
                ]
            }
        },
    }


def allocation(driver: str, pool: str, devices: Sequence[str], node: str) -> dict[str, Any]:
    """The status a scheduler writes: ``devices`` of ``driver`` from ``pool``, usable on ``node``."""
    return {
        "devices": {"results": [{"request": "req", "driver": driver, "pool": pool, "device": d} for d in devices]},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]},
            ]
        },
    }


async def allocated_claim(
    client: AsyncClient,
    namespace: str,
    name: str,
    *,
    driver: str,
    pool: str,
    devices: Sequence[str],
    node: str | None = None,
) -> dict[str, Any]:
    """Create the claim and write its allocation through the status subresource; the object as stored."""
    await client.create(ResourceClaim.from_dict(claim_document(namespace, name, len(devices))))  # type: ignore[call-overload]
    status = {"allocation": allocation(driver, pool, devices, node or pool)}
    updated = await client.patch(
        ResourceClaimStatus, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
    )
    return dict(updated.to_dict())


def ref(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(namespace, name, uid): how the kubelet names the claim in its calls."""
    meta = obj["metadata"]
    return meta["namespace"], meta["name"], meta["uid"]


def write_claim_files(directory: Path, objects: Iterable[dict[str, Any]]) -> list[Path]:
    """Each claim as ``<namespace>-<name>.yaml``: the input of file-based tools (``kubedevice check --dra``)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for obj in objects:
        path = directory / f"{obj['metadata']['namespace']}-{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        written.append(path)
    return written


@contextlib.asynccontextmanager
async def node_and_namespace(client: AsyncClient, node: str, namespace: str) -> AsyncIterator[None]:
    """A Node object with no kubelet behind it (a driver's slices are owned by their node) and a namespace.

    On exit the node's slices, the node and the namespace (with its claims) are deleted.
    """
    await client.create(Node(metadata=ObjectMeta(name=node)))
    try:
        await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
        try:
            yield
        finally:
            await client.delete(Namespace, namespace)
    finally:
        async for s in client.list(ResourceSlice, fields={"spec.nodeName": node}):
            if s.metadata is not None and s.metadata.name is not None:
                with contextlib.suppress(ApiError):
                    await client.delete(ResourceSlice, s.metadata.name)
        await client.delete(Node, node)


async def slices(client: AsyncClient, node: str, driver: str) -> list[dict[str, Any]]:
    """The ResourceSlices of ``driver`` on ``node``, by name."""
    listed = client.list(ResourceSlice, fields={"spec.nodeName": node, "spec.driver": driver})
    found = [s.to_dict() async for s in listed]
    return sorted(found, key=lambda s: s["metadata"]["name"])


@dataclass
class GoDriverRun:
    """A running Go driver with its own Node object and namespace in the API server."""

    client: AsyncClient
    options: GoDriverOptions
    process: asyncio.subprocess.Process
    namespace: str

    async def claim(self, name: str, devices: Sequence[str]) -> dict[str, Any]:
        """An allocated claim for ``devices`` of this driver's pool (the node), as stored."""
        return await allocated_claim(
            self.client, self.namespace, name, driver=self.options.driver, pool=self.options.node, devices=devices
        )


@contextlib.asynccontextmanager
async def go_driver_run(
    program: Path, kubeconfig: Path, root: Path, *, driver: str = DRIVER, devices: int = 4, api_qps: float = 50.0
) -> AsyncIterator[GoDriverRun]:
    """Everything a test of the kubelet side needs, below ``root`` (kubelet dir, CDI dir, the driver's log).

    Typical use, e.g. for ``kubedevice check --dra``: ``claims = [await run.claim("a", ["device-00"])]``,
    ``write_claim_files(dir, claims)``, then point the tool at ``run.options.kubelet_dir``,
    ``run.options.driver``, that directory and ``run.options.cdi_dir``. All is removed on exit.
    """
    node = namespace = f"kd-go-{uuid.uuid4().hex[:8]}"
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="kubedevice-test")
    options = GoDriverOptions(kubeconfig, root / "kubelet", root / "cdi", node, driver, devices, api_qps)
    try:
        async with node_and_namespace(client, node, namespace), running(program, options, root / "go.log") as process:
            yield GoDriverRun(client, options, process, namespace)
    finally:
        await client.close()
