"""kubedevice upgraded under running pods: the chart installed with the previous commit's image,
then ``helm upgrade`` to this tree's, on a real single-node Kubernetes.

Two releases side by side, as a node running both would have them: the device plugin and the DRA
driver. Device pods and a pod with a ResourceClaim run across the upgrade and must keep running
(same UIDs, no restart); the claim is never unprepared (its CDI spec stays on the node throughout)
and the checkpoint the old driver wrote is read by the new one; new pods get devices from the new
pods; ``helm uninstall`` then leaves nothing of ours on the node.

The previous image is built once per commit from ``git archive PREVIOUS`` with that tree's own
``scripts/image.sh`` and kept under ``~/.cache/kubedevice/image-commit-<commit>/`` (about a minute
warm-rootfs, on 2 cores); it is tagged ``commit-<commit>`` in the node's containerd so the two
images differ in the DaemonSet's spec, which is what makes the upgrade roll the pods.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubedevice.dra.driver import checkpoint as ckpt
from kubedevice.testing.gobuild import cache_dir

from . import clusterkit, imagekit
from .clusterkit import delete_pods, device_pod, unique, wait_for
from .helmkit import CHART, REPO, Helm

pytestmark = pytest.mark.e2e

PREVIOUS = "6b1423d"
"""The last landed commit before this work: the version a node is upgraded from."""
OLD_TAG = f"commit-{PREVIOUS}"
NAMESPACE = "kube-system"
DP, DRA = "kd-up-dp", "kd-up-dra"
RESOURCE = "example.com/upgrade"
DRIVER = "null.example.com"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def previous_image() -> Path:
    """The previous commit's OCI archive, built by its own scripts/image.sh once and cached."""
    cached = cache_dir() / f"image-commit-{PREVIOUS}"
    found = sorted(cached.glob("kubedevice-*.oci.tar"))
    if found:
        return found[0]
    imagekit.require_tools()
    stamp = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%ct", PREVIOUS], capture_output=True, text=True, check=False
    )
    if stamp.returncode != 0:
        clusterkit.unavailable(f"commit {PREVIOUS} is not in this clone's history: {stamp.stderr.strip()}")
    partial = cached.with_name(cached.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="kd-prev-") as tree:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        env = {**os.environ, "KUBEDEVICE_DIST": str(partial), "SOURCE_DATE_EPOCH": stamp.stdout.strip()}
        built = subprocess.run(
            ["bash", "scripts/image.sh"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=imagekit.BUILD_TIMEOUT,
            check=False,
        )
    assert built.returncode == 0, built.stderr[-4000:]
    partial.rename(cached)
    (archive_path,) = cached.glob("kubedevice-*.oci.tar")
    return archive_path


@pytest.fixture(scope="module")
def cluster(image_archive: Path) -> Iterator[Any]:
    old = previous_image()  # before the cluster: a failed build starts nothing
    old_name = f"docker.io/{imagekit.NAME}:{old.name.removeprefix('kubedevice-').removesuffix('.oci.tar')}"
    with clusterkit.module_cluster("kd-hu-") as cluster:
        clusterkit.import_image(cluster, old)
        clusterkit.ctr(cluster, "images", "tag", "--force", old_name, f"docker.io/{imagekit.NAME}:{OLD_TAG}")
        clusterkit.import_image(cluster, image_archive)  # this tree's, under the chart's default tag
        yield cluster


class Releases:
    """The two releases on the cluster, installed and upgraded with ``helm``."""

    def __init__(self, cluster: Any, helm: Helm, scratch: Path) -> None:
        self.cluster, self.api, self.scratch, self._helm = cluster, cluster.api(), scratch, helm

    def helm(self, *args: str) -> None:
        done = self._helm.run("--kubeconfig", str(self.cluster.kubeconfig), "--namespace", NAMESPACE, *args)
        assert done.returncode == 0, done.stderr

    def apply(self, verb: str, tag: str | None) -> None:
        image = {"pullPolicy": "Never", **({"tag": tag} if tag else {})}
        access = clusterkit.api_access(self.cluster)
        values = {
            DP: {"image": image, "metrics": {"port": 9501}, **access,
                 "config": {"resources": [{"name": RESOURCE, "static": {"count": 4, "paths": ["/dev/null"]}}]}},
            DRA: {"image": image, "dra": {"enabled": True, "driverName": DRIVER}, **access,
                  "config": {"resources": [{"name": "example.com/null", "static": {"count": 4, "paths": ["/dev/null"]},
                                            "env": {"NULL_DEVICE": "{ids}"}}]}},
        }  # fmt: skip
        for release, vals in values.items():
            path = self.scratch / f"{release}-{verb}.yaml"
            path.write_text(json.dumps(vals))
            self.helm(verb, release, str(CHART), "--values", str(path))

    def daemon(self, release: str) -> dict[str, Any] | None:
        """The release's one running daemon pod, None while there is none or more than one."""
        pods = [p for p in self.api.pods(NAMESPACE) if p["metadata"]["name"].startswith(f"{release}-kubedevice-")]
        statuses = [s for p in pods for s in p["status"].get("containerStatuses", [])]
        running = len(pods) == 1 and statuses and all("running" in s["state"] and s["ready"] for s in statuses)
        return pods[0] if running else None

    def daemons_with(self, tag: str) -> dict[str, dict[str, Any]] | None:
        found = {release: self.daemon(release) for release in (DP, DRA)}
        ready = {r: p for r, p in found.items() if p is not None and p["spec"]["containers"][0]["image"].endswith(tag)}
        return ready if len(ready) == 2 else None

    def slices(self) -> list[dict[str, Any]]:
        items = self.api.request("GET", f"{SLICES}?fieldSelector=spec.driver%3D{DRIVER}")["items"]
        return [s for s in items if s["spec"].get("nodeName") == self.cluster.node_name]

    def devices(self) -> int:
        return sum(len(s["spec"].get("devices", [])) for s in self.slices())

    def claim_pod(self, name: str) -> str:
        """A pod with a claim from examples/dra-null-pod.yaml, running; its claim's UID."""
        template, pod = clusterkit.claim_objects(name)
        self.api.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template)
        self.api.create_pod(pod)
        outcome = wait_for(f"{name} to run", lambda: clusterkit.scenarios.pod_outcome(self.api, name), 120, 0.2)
        assert outcome[0] == "Running", outcome
        claims = self.api.request("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")["items"]
        (claim,) = [c for c in claims if c["metadata"]["name"].startswith(name)]
        uid: str = claim["metadata"]["uid"]
        return uid

    def spec(self, claim_uid: str) -> Path:
        return Path(self.cluster.cdi_dir) / f"kubedevice-dra-{DRIVER}-{claim_uid}.json"

    def checkpoint(self) -> Path:
        return Path(self.cluster.kubelet_dir) / "plugins" / DRIVER / ckpt.FILE_NAME


@pytest.fixture(scope="module")
def releases(cluster: Any, helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Releases]:
    releases = Releases(cluster, helm, tmp_path_factory.mktemp("values"))
    yield releases
    for release in (DP, DRA):
        helm.run("--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE, "uninstall", release)


def running_unchanged(api: Any, pods: dict[str, str]) -> bool:
    """Every pod in ``name -> UID`` is the same pod, running, its container never restarted."""
    for name, uid in pods.items():
        pod = api.pod(name) or {}
        statuses = pod.get("status", {}).get("containerStatuses", [])
        if pod.get("metadata", {}).get("uid") != uid or pod["status"].get("phase") != "Running":
            return False
        if not statuses or any(s["restartCount"] != 0 or "running" not in s["state"] for s in statuses):
            return False
    return True


def test_chart_upgrade_keeps_pods_claims_and_files_and_uninstall_leaves_nothing(releases: Releases) -> None:
    api, node = releases.api, releases.cluster.node_name
    releases.apply("install", OLD_TAG)
    wait_for("the old daemons ready", lambda: releases.daemons_with(OLD_TAG), 180, 0.5)
    wait_for(f"{RESOURCE} allocatable", lambda: api.resource(node, RESOURCE) == (4, 4), 60, 0.2)
    wait_for("our slices with their 4 devices", lambda: releases.devices() == 4, 60, 0.2, seen=releases.slices)
    workload = [unique("up-dp"), unique("up-dp")]
    for name in workload:
        api.create_pod(device_pod(name, {RESOURCE: 1}))
    device_class = yaml.safe_load((REPO / "examples" / "dra-null-class.yaml").read_text())
    api.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
    claim_pod = unique("up-dra")
    claim = releases.claim_pod(claim_pod)
    wait_for(
        "the device pods to run",
        lambda: all((api.pod(n) or {}).get("status", {}).get("phase") == "Running" for n in workload),
        90,
        0.2,
    )
    pods = {name: api.pod(name)["metadata"]["uid"] for name in [*workload, claim_pod]}
    spec = releases.spec(claim)
    spec_bytes = spec.read_bytes()
    boot = ckpt.read_boot_id()
    assert claim in ckpt.load(releases.checkpoint(), boot)[0].claims  # the old driver's checkpoint
    old_daemons = {r: p["metadata"]["uid"] for r, p in (releases.daemons_with(OLD_TAG) or {}).items()}

    started = time.monotonic()
    releases.apply("upgrade", None)

    def upgraded() -> dict[str, dict[str, Any]] | None:
        assert spec.read_bytes() == spec_bytes, "the claim's CDI spec changed during the upgrade"
        return releases.daemons_with(imagekit.version())

    new_daemons = wait_for("the new daemons ready", upgraded, 180, 0.2)
    print(f"e2e: upgrade_to_ready_s = {time.monotonic() - started:.1f}")
    assert not {p["metadata"]["uid"] for p in new_daemons.values()} & set(old_daemons.values())
    wait_for(f"{RESOURCE} allocatable again", lambda: api.resource(node, RESOURCE) == (4, 4), 60, 0.2)
    assert running_unchanged(api, pods), {n: api.pod(n) for n in pods}
    assert spec.read_bytes() == spec_bytes  # not unprepared, not rewritten
    checkpoint, stale = ckpt.load(releases.checkpoint(), boot)  # read by today's reader
    assert (list(checkpoint.claims), stale) == ([claim], {})
    assert releases.checkpoint().stat().st_mode & 0o777 == 0o600

    # The new daemons give devices: two more device pods take the last two, a new claim is prepared.
    more = [unique("up-dp-new"), unique("up-dp-new")]
    for name in more:
        api.create_pod(device_pod(name, {RESOURCE: 1}))
    wait_for(
        "the new device pods to run",
        lambda: all((api.pod(n) or {}).get("status", {}).get("phase") == "Running" for n in more),
        90,
        0.2,
    )
    fresh = releases.claim_pod(unique("up-dra-new"))
    assert releases.spec(fresh).exists()
    assert sorted(ckpt.load(releases.checkpoint(), boot)[0].claims) == sorted([claim, fresh])
    assert running_unchanged(api, pods)

    # Unprepared by the new driver, the old claim included; then nothing of ours is left.
    claim_pods = [p["metadata"]["name"] for p in api.pods() if p["metadata"]["name"].startswith("up-dra")]
    delete_pods(api, [*workload, *more, *claim_pods])
    # the driver removes a call's CDI specs before it records the unprepare in its checkpoint
    # (both before it answers): wait for both
    wait_for(
        "the claims' CDI specs removed and unrecorded",
        lambda: (
            not releases.spec(claim).exists()
            and not releases.spec(fresh).exists()
            and ckpt.load(releases.checkpoint(), boot)[0].claims == {}
        ),
        60,
        0.2,
    )
    for template in claim_pods:
        api.request("DELETE", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/{template}")
    api.request("DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{DRIVER}")
    for release in (DP, DRA):
        releases.helm("uninstall", release, "--wait", "--timeout", "90s")
    wait_for(
        "no daemon pod left",
        lambda: not [p for p in api.pods(NAMESPACE) if p["metadata"]["name"].startswith("kd-up-")],
        90,
        0.5,
    )
    wait_for("our slices gone", lambda: not releases.slices(), 90, 0.5)
    wait_for(f"no allocatable {RESOURCE}", lambda: api.resource(node, RESOURCE)[1] == 0, 60, 0.2)
    kubelet = Path(releases.cluster.kubelet_dir)
    assert not [p.name for p in (kubelet / "plugins_registry").iterdir() if DRIVER in p.name]
    assert not (kubelet / "plugins" / DRIVER).exists()
    assert not list(Path(releases.cluster.cdi_dir).glob("kubedevice-*"))
    plugin_dir = Path(releases.cluster.plugin_dir)
    assert sorted(p.name for p in plugin_dir.iterdir()) == ["kubelet.sock", "kubelet_internal_checkpoint"]
