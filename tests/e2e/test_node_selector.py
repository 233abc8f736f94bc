"""``node_selector`` against the real kube-apiserver of the e2e session: ``kubedevice serve --node``
follows a Node object of this test's own (its labels patched here) and the kubelet simulator's
allocatable follows the labels; the stream of a resource the change does not touch stays open.
Also: the Node deleted and created again (labels kept meanwhile), and refused credentials."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from grpc import aio
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from kubedevice.api import pb, pb_grpc
from kubedevice.kubeclient import client as kube_client
from kubedevice.kubelet import KubeletSimulator
from kubedevice.names import endpoint_for
from kubedevice.node.labels import NodeLabels
from kubedevice.testing.cluster import Cluster
from kubedevice.testing.waiting import eventually

pytestmark = pytest.mark.e2e
TIMEOUT = 20.0
ZONED, GPU = "example.com/zoned", "example.com/gpu"
CONFIG = f"""
resources:
  - name: {ZONED}
    static: {{count: 2, paths: [/dev/null]}}
    node_selector: {{kubedevice.test/zone: a}}
  - name: {GPU}
    static: {{count: 3, paths: [/dev/null]}}
    node_selector: {{kubedevice.test/accelerator: gpu}}
"""


@pytest.fixture
def node(cluster: Cluster) -> Iterator[tuple[Client, str]]:
    """A Node object of this test's own: no kubelet behind it, nothing schedules there."""
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="kubedevice-e2e")
    name = f"kd-selector-{uuid.uuid4().hex[:6]}"
    client.create(Node.from_dict({"metadata": {"name": name, "labels": {"kubedevice.test/zone": "a"}}}))
    try:
        yield client, name
    finally:
        try:
            client.delete(Node, name)
        except ApiError as err:
            if err.status.code != 404:
                raise


def label(client: Client, name: str, labels: dict[str, str | None]) -> None:
    """A merge patch of the Node's labels (None removes one), as ``kubectl label`` sends."""
    client.patch(Node, name, {"metadata": {"labels": labels}}, patch_type=PatchType.MERGE)


async def until(check: Callable[[], bool], what: str, log: Path) -> None:
    await eventually(what, check, TIMEOUT, seen=log.read_text)


async def test_labels_start_and_stop_resources_and_leave_the_others_streaming(
    cluster: Cluster, node: tuple[Client, str], short_tmp: Path
) -> None:
    client, name = node
    host, plugin_dir, log = short_tmp / "host", short_tmp / "plugins", short_tmp / "serve.log"
    (host / "dev").mkdir(parents=True)
    (host / "dev" / "null").touch()
    plugin_dir.mkdir()
    (short_tmp / "config.yaml").write_text(CONFIG)
    sim = KubeletSimulator(plugin_dir, grace_period=1.0)
    await sim.start()
    args = [
        sys.executable,
        "-m",
        "kubedevice",
        "serve",
        "--config",
        str(short_tmp / "config.yaml"),
        "--plugin-dir",
        str(plugin_dir),
        "--host-root",
        str(host),
        "--cdi-dir",
        str(short_tmp / "cdi"),
        "--node",
        name,
        "--kubeconfig",
        str(cluster.kubeconfig),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        await until(lambda: sim.allocatable() == {ZONED: 2}, "the zoned resource only", log)
        async with aio.insecure_channel(f"unix://{plugin_dir / endpoint_for(ZONED)}") as channel:
            stream = pb_grpc.DevicePluginStub(channel).ListAndWatch(pb.Empty())
            assert len((await stream.read()).devices) == 2

            await asyncio.to_thread(label, client, name, {"kubedevice.test/accelerator": "gpu"})
            await until(lambda: sim.allocatable() == {ZONED: 2, GPU: 3}, "gpu started by its label", log)
            await asyncio.to_thread(label, client, name, {"kubedevice.test/accelerator": "fpga"})
            await until(lambda: sim.allocatable().get(GPU) == 0, "gpu stopped (final Unhealthy list)", log)
            await until(lambda: not (plugin_dir / endpoint_for(GPU)).exists(), "gpu's socket removed", log)
            await asyncio.to_thread(label, client, name, {"unrelated.example.com/x": "1"})  # no selector reads it

            # The Node deleted: its last labels are kept, nothing stops; created again, it is followed.
            await asyncio.to_thread(client.delete, Node, name)
            await until(lambda: "was deleted; keeping its last known labels" in log.read_text(), "deletion", log)
            assert sim.allocatable().get(ZONED) == 2 and not stream.done()
            await asyncio.to_thread(
                client.create,
                Node.from_dict(
                    {
                        "metadata": {
                            "name": name,
                            "labels": {"kubedevice.test/zone": "a", "kubedevice.test/accelerator": "gpu"},
                        }
                    }
                ),
            )
            await until(lambda: sim.allocatable() == {ZONED: 2, GPU: 3}, "gpu back with the new Node", log)

            assert not stream.done(), "the untouched resource's stream was closed"
            await asyncio.to_thread(label, client, name, {"kubedevice.test/zone": None})
            await until(lambda: sim.allocatable().get(ZONED) == 0, "zoned stopped by its label's removal", log)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, TIMEOUT)
        await sim.stop()
    text = log.read_text()
    assert code == 0, text
    changes = [line for line in text.splitlines() if "node labels changed" in line]
    assert any(
        "kubedevice.test/accelerator=gpu (was unset)" in line and f"started {GPU}" in line for line in changes
    ), text
    assert any(
        "kubedevice.test/accelerator=fpga (was 'gpu')" in line and f"stopped {GPU}" in line for line in changes
    ), text
    assert not any("unrelated" in line for line in changes), text
    assert any("kubedevice.test/zone unset (was 'a')" in line and f"stopped {ZONED}" in line for line in changes)


async def test_refused_credentials_are_logged_once_and_select_nothing(
    cluster: Cluster, node: tuple[Client, str], short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A token the API server does not know (401), as after a ServiceAccount is deleted."""
    _, name = node
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": "not-a-token-of-this-cluster"}
    refused = short_tmp / "refused.kubeconfig"
    refused.write_text(yaml.safe_dump(config))
    labels = NodeLabels(name, kube_client(refused))
    changes: list[object] = []
    caplog.set_level("INFO", "kubedevice.node.labels")
    task = asyncio.create_task(labels.run(lambda old, new: changes.append(new)))
    try:
        await asyncio.sleep(4)  # three attempts at 1 s and 2 s back-off
    finally:
        task.cancel()
        await labels.close()
    refusals = [r for r in caplog.records if "was refused" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelname == "ERROR", caplog.text
    assert "get, list and watch on nodes" in refusals[0].getMessage()
    assert labels.labels is None and changes == []
