"""``serve --owner-daemonset``'s view of its DaemonSet (kubedevice.node.owner) against the real
kube-apiserver of the e2e session: a DaemonSet seen present, then deleted (background, or held
by a finalizer as a foreground deletion is), decides an uninstall; a wrong name never does.
Our CDI spec files are real files in a temp dir; nothing else there is touched."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from kubedevice.allocation.cdi import CdiSpecDir
from kubedevice.config import parse_config
from kubedevice.node.owner import OwnerRef, OwnerWatch, Seen, clean_up_if_uninstalled, uninstalled
from kubedevice.testing.cluster import TEST_IMAGE, Cluster
from kubedevice.testing.waiting import eventually

pytestmark = pytest.mark.e2e
HOLD = "kubedevice.test/hold"
CONFIG = parse_config("""
resources:
  - name: example.com/serial
    static: {count: 1, paths: [/dev/null]}
    cdi: {kind: example.com/serial}
""")


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[tuple[Client, str]]:
    client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="kubedevice-e2e")
    name = f"kd-owner-{uuid.uuid4().hex[:6]}"
    client.create(Namespace.from_dict({"metadata": {"name": name}}))
    try:
        yield client, name
    finally:
        client.delete(Namespace, name)


def daemonset(name: str, finalizers: list[str]) -> Any:
    """A DaemonSet that selects no node, so no pod ever runs."""
    labels = {"app": name}
    return DaemonSet.from_dict(
        {
            "metadata": {"name": name, "finalizers": finalizers},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"kubedevice.test/none": "none"},
                        "containers": [{"name": "main", "image": TEST_IMAGE}],
                    },
                },
            },
        }
    )


async def until(watch: OwnerWatch, state: Seen) -> None:
    await eventually(
        f"the watch to see {state}", lambda: watch.history[-1:] == [state], 20, 0.02, seen=lambda: watch.history
    )


def our_specs(directory: Path) -> list[Path]:
    CdiSpecDir(directory, "example.com/serial").sync({"a": {"env": ["A=1"]}})
    (directory / "vendor.json").write_text("{}")
    return sorted(directory.glob("kubedevice-*.json"))


async def test_background_deletion_is_an_uninstall(
    cluster: Cluster, namespace: tuple[Client, str], tmp_path: Path
) -> None:
    client, ns = namespace
    client.create(daemonset("kd", []), namespace=ns)
    specs = our_specs(tmp_path)
    watch = OwnerWatch(OwnerRef(ns, "kd"), cluster.kubeconfig)
    task = asyncio.create_task(watch.run())
    try:
        await until(watch, Seen.PRESENT)
        assert await watch.check() is Seen.PRESENT and not uninstalled(watch.history)
        assert await clean_up_if_uninstalled(watch, CONFIG, tmp_path) == []  # a restart: kept
        assert sorted(tmp_path.glob("kubedevice-*.json")) == specs
        await asyncio.to_thread(client.delete, DaemonSet, "kd", namespace=ns)
        await until(watch, Seen.GONE)  # the watch saw it, before any SIGTERM
    finally:
        task.cancel()
    assert await clean_up_if_uninstalled(watch, CONFIG, tmp_path) == specs
    assert [p.name for p in tmp_path.iterdir()] == ["vendor.json"]
    await watch.close()


async def test_a_deletion_held_by_a_finalizer_is_an_uninstall_already(
    cluster: Cluster, namespace: tuple[Client, str]
) -> None:
    client, ns = namespace
    client.create(daemonset("held", [HOLD]), namespace=ns)
    watch = OwnerWatch(OwnerRef(ns, "held"), cluster.kubeconfig)
    task = asyncio.create_task(watch.run())
    try:
        await until(watch, Seen.PRESENT)
        await asyncio.to_thread(client.delete, DaemonSet, "held", namespace=ns)
        await until(watch, Seen.DELETING)
        assert await watch.check() is Seen.DELETING and uninstalled(watch.history)
    finally:
        task.cancel()
        await asyncio.to_thread(
            client.patch, DaemonSet, "held", {"metadata": {"finalizers": []}}, namespace=ns, patch_type=PatchType.MERGE
        )
        await watch.close()


async def test_a_daemonset_never_seen_is_no_uninstall(
    cluster: Cluster, namespace: tuple[Client, str], tmp_path: Path
) -> None:
    _, ns = namespace
    specs = our_specs(tmp_path)
    watch = OwnerWatch(OwnerRef(ns, "wrong-name"), cluster.kubeconfig)
    assert await watch.check() is Seen.GONE
    assert await clean_up_if_uninstalled(watch, CONFIG, tmp_path) == []
    assert sorted(tmp_path.glob("kubedevice-*.json")) == specs
    await watch.close()


def test_credentials_refused_at_the_last_look_count_as_uninstalled(cluster: Cluster, short_tmp: Path) -> None:
    """helm uninstall deletes the service account and its role with the DaemonSet: when the last
    look is refused (401 here, a token the API server does not know), a DaemonSet seen present counts
    as uninstalled; never seen present, nothing is removed."""
    import yaml

    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": "not-a-token-of-this-cluster"}
    refused = short_tmp / "refused.kubeconfig"
    refused.write_text(yaml.safe_dump(config))
    specs = CdiSpecDir(short_tmp / "cdi", "example.com/serial")
    specs.sync({"dev0": {"env": ["A=1"]}})

    async def scenario(seen_before: bool) -> list[Path]:
        watch = OwnerWatch(OwnerRef("default", "kubedevice"), refused)
        if seen_before:
            watch.history.append(Seen.PRESENT)
        try:
            return await clean_up_if_uninstalled(watch, CONFIG, short_tmp / "cdi")
        finally:
            await watch.close()

    assert asyncio.run(scenario(False)) == [] and specs.owned()
    assert [p.name for p in asyncio.run(scenario(True))] == ["kubedevice-example.com-serial-dev0.json"]
    assert specs.owned() == []
