"""The Helm chart's DaemonSet on every node of a real 3-node cluster (``cluster.sh up --nodes 3``):
the image scripts/image.sh built, imported with ctr into each node's own containerd (no registry).

Every node is a private namespace with its own kubelet and containerd; the daemon's pods run with
the host network of their node, where 127.0.0.1 reaches the API server (through the node's relay).
One cluster for the module, two releases one after the other: the device-plugin mode (capacity on
every node, a ``node_selector`` resource following one node's labels live, a node drained and
uncordoned, uninstall), then the DRA mode (each node's own slices, a claim prepared on every node,
the admission policy against the nodes' real tokens, uninstall).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from . import clusterkit
from .clusterkit import delete_pods, device_pod, unique, wait_for
from .helmkit import CHART, REPO, Helm

pytestmark = pytest.mark.e2e

NAMESPACE = "kube-system"
RELEASE = "kubedevice"
RESOURCE = "example.com/fleet"
ZONED = "example.com/zoned"
ZONE_LABEL = "kubedevice.test/zone"
DEVICES = 2
DRA_RELEASE = "kd-dra"
DRA_FULLNAME = f"{DRA_RELEASE}-kubedevice"
DRIVER = "null.example.com"  # examples/dra-null-class.yaml selects it
DRA_DEVICES = 4
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


@pytest.fixture(scope="module")
def fleet(image_archive: Path) -> Iterator[Any]:
    with clusterkit.module_cluster("kd-hm-", image_archive, nodes=3) as cluster:
        yield cluster


def _helm(helm: Helm, cluster: Any, *args: str, check: bool = True) -> None:
    done = helm.run("--kubeconfig", str(cluster.kubeconfig), "--namespace", NAMESPACE, *args)
    assert not check or done.returncode == 0, done.stderr


def _kubectl(cluster: Any, *args: str) -> str:
    """The real kubectl of the cluster's release (``cordon``, ``drain`` and ``label`` as users run them)."""
    kubectl = clusterkit.components.kubectl(cluster.state().kubernetes_version)
    done = subprocess.run(
        [str(kubectl), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def _install(helm: Helm, cluster: Any, release: str, values: dict[str, Any], scratch: Path) -> None:
    path = scratch / f"{release}.yaml"
    path.write_text(json.dumps({"image": {"pullPolicy": "Never"}, **values, **clusterkit.api_access(cluster)}))
    _helm(helm, cluster, "install", release, str(CHART), "--values", str(path))


def _daemon_pods(cluster: Any, prefix: str = f"{RELEASE}-") -> list[dict[str, Any]]:
    return [pod for pod in cluster.api().pods(NAMESPACE) if pod["metadata"]["name"].startswith(prefix)]


def _running_on_every_node(cluster: Any, prefix: str = f"{RELEASE}-") -> dict[str, dict[str, Any]] | None:
    pods = [pod for pod in _daemon_pods(cluster, prefix) if not pod["metadata"].get("deletionTimestamp")]
    running = {
        pod["spec"].get("nodeName"): pod
        for pod in pods
        if any("running" in status["state"] for status in pod["status"].get("containerStatuses", []))
    }
    return running if len(pods) == len(running) == len(cluster.nodes()) else None


def _identity(pods: dict[str, dict[str, Any]]) -> dict[str, tuple[str, list[int]]]:
    """Node → its daemon pod's UID and restart counts: equal before and after = the same pod, never restarted."""
    return {
        node: (pod["metadata"]["uid"], [s["restartCount"] for s in pod["status"]["containerStatuses"]])
        for node, pod in pods.items()
    }


@pytest.fixture(scope="module")
def plugins(fleet: Any, helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The chart in device-plugin mode: ``RESOURCE`` on every node, ``ZONED`` only where the Node
    has the label ``ZONE_LABEL=a`` (none has it at install)."""
    started = time.monotonic()
    _install(
        helm,
        fleet,
        RELEASE,
        {
            "config": {
                "resources": [
                    {"name": RESOURCE, "static": {"count": DEVICES, "paths": ["/dev/null"]}},
                    {"name": ZONED, "static": {"count": 1, "paths": ["/dev/null"]}, "node_selector": {ZONE_LABEL: "a"}},
                ]
            }
        },
        tmp_path_factory.mktemp("values"),
    )
    try:
        wait_for("a daemon pod running on every node", lambda: _running_on_every_node(fleet), 180, 0.5)
        api = fleet.api()
        for node in fleet.nodes():
            wait_for(
                f"{RESOURCE} on {node.name}",
                lambda n=node: api.resource(n.name, RESOURCE) == (DEVICES, DEVICES),
                60,
                0.2,
            )
        print(f"install to capacity on {len(fleet.nodes())} nodes: {time.monotonic() - started:.1f} s")
        yield fleet
    finally:
        _helm(helm, fleet, "uninstall", RELEASE, "--wait", check=False)


def test_the_daemonset_serves_every_node(plugins: Any) -> None:
    api = plugins.api()
    running = _running_on_every_node(plugins)
    names = [node.name for node in plugins.nodes()]
    assert running is not None and sorted(running) == sorted(names)
    # No node has the label: the selected resource is served nowhere.
    assert [api.resource(name, ZONED) for name in names] == [(0, 0)] * len(names)
    # Each node's own daemon gives its devices: a pod asking for all of them runs on every node.
    pods = {name: unique("fleet") for name in names}
    for name, pod in pods.items():
        api.create_pod(device_pod(pod, {RESOURCE: DEVICES}, name))
    wait_for(
        "a device pod running on every node",
        lambda: all((api.pod(p) or {}).get("status", {}).get("phase") == "Running" for p in pods.values()),
        90,
        0.2,
    )
    delete_pods(api, list(pods.values()))


def _sockets(node: Any) -> dict[str, int]:
    """The node's device plugin sockets by name, with their inodes: a socket made again has a new one."""
    return {path.name: path.stat().st_ino for path in node.plugin_dir.iterdir() if path.is_socket()}


def test_a_label_change_on_one_node_changes_its_resources_only(plugins: Any) -> None:
    api = plugins.api()
    labelled, others = plugins.node(3), [plugins.node(1), plugins.node(2)]
    before = _identity(wait_for("the daemon pods", lambda: _running_on_every_node(plugins), 60, 0.2))
    sockets = {node.name: _sockets(node) for node in others}
    _kubectl(plugins, "label", "node", labelled.name, f"{ZONE_LABEL}=a")
    try:
        wait_for(f"{ZONED} on {labelled.name}", lambda: api.resource(labelled.name, ZONED) == (1, 1), 60, 0.2)
        time.sleep(3)  # three node-status periods (1 s here): long enough for a wrong change to show
        for node in others:  # untouched: no resource of theirs started, stopped or registered again
            assert api.resource(node.name, ZONED) == (0, 0), node.name
            assert api.resource(node.name, RESOURCE) == (DEVICES, DEVICES), node.name
            assert _sockets(node) == sockets[node.name], node.name
        assert api.resource(labelled.name, RESOURCE) == (DEVICES, DEVICES)
        # The daemon applied the change live: the same pods, none restarted, on every node.
        assert _identity(_running_on_every_node(plugins) or {}) == before
        # The real scheduler finds the device where the label put it.
        pod = unique("zoned")
        api.create_pod(device_pod(pod, {ZONED: 1}))
        wait_for("the zoned pod running", lambda: clusterkit.scenarios.pod_outcome(api, pod), 90, 0.2)
        placed = api.pod(pod) or {}
        assert (placed["status"]["phase"], placed["spec"]["nodeName"]) == ("Running", labelled.name), placed["status"]
        delete_pods(api, [pod])
    finally:
        _kubectl(plugins, "label", "node", labelled.name, f"{ZONE_LABEL}-")
    # Label removed: the resource is stopped (its devices unhealthy, then its socket gone).
    wait_for(f"no allocatable {ZONED} on {labelled.name}", lambda: api.resource(labelled.name, ZONED)[1] == 0, 60, 0.2)
    assert _identity(_running_on_every_node(plugins) or {}) == before


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    """Pods of one device each, spread one per node at most apart (``maxSkew: 1``), where a cordoned
    node does not count (``nodeTaintsPolicy: Honor``): so the first three are one per node, and a
    drained node's pods go to the others. No toleration: a cordoned node takes none of them."""
    labels = {"app": name}
    container = {
        "name": "main",
        "image": clusterkit.TEST_IMAGE,
        "imagePullPolicy": "Never",
        "resources": {"limits": {RESOURCE: "1"}, "requests": {RESOURCE: "1"}},
    }
    spread = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": labels},
        "nodeTaintsPolicy": "Honor",
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container],
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "topologySpreadConstraints": [spread],
                },
            },
        },
    }


def _placed(cluster: Any, app: str, replicas: int) -> dict[str, int] | None:
    """Node → how many of the app's pods run there, once ``replicas`` run and no other is left."""
    pods = [pod for pod in cluster.api().pods() if pod["metadata"].get("labels", {}).get("app") == app]
    running = [
        pod for pod in pods if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    ]
    if len(pods) != len(running) or len(running) != replicas:
        return None
    counts: dict[str, int] = {}
    for pod in running:
        counts[pod["spec"]["nodeName"]] = counts.get(pod["spec"]["nodeName"], 0) + 1
    return counts


def _scale(cluster: Any, name: str, replicas: int) -> None:
    cluster.api().request(
        "PUT",
        f"{DEPLOYMENTS}/{name}/scale",
        {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas},
        },
    )


def test_a_drained_node_keeps_its_daemon_and_takes_pods_again_after_uncordon(plugins: Any) -> None:
    api = plugins.api()
    drained = plugins.node(2)
    hostnames = {
        node.name: (api.node(node.name) or {})["metadata"]["labels"].get("kubernetes.io/hostname")
        for node in plugins.nodes()
    }
    assert len(set(hostnames.values())) == len(hostnames), hostnames  # the spread's topology: one per node
    name = "drain"
    api.request("POST", DEPLOYMENTS, _deployment(name, 3))
    try:
        first = wait_for("one pod per node", lambda: _placed(plugins, name, 3), 90, 0.2)
        assert first == {node.name: 1 for node in plugins.nodes()}, first
        daemons = _identity(wait_for("the daemon pods", lambda: _running_on_every_node(plugins), 60, 0.2))
        started = time.monotonic()
        _kubectl(plugins, "drain", drained.name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
        moved = wait_for("the drained node's pod running elsewhere", lambda: _placed(plugins, name, 3), 90, 0.2)
        print(f"drain to every pod running again: {time.monotonic() - started:.1f} s; placed {moved}")
        assert drained.name not in moved and sum(moved.values()) == 3, moved
        assert (api.node(drained.name) or {})["spec"].get("unschedulable") is True
        # The DaemonSet's pod stays on the drained node, unrestarted, and its devices stay advertised.
        assert _identity(_running_on_every_node(plugins) or {}) == daemons
        assert api.resource(drained.name, RESOURCE) == (DEVICES, DEVICES)
        _kubectl(plugins, "uncordon", drained.name)
        # Every device wanted: the drained node's two free ones are the only ones left for the new pods.
        _scale(plugins, name, DEVICES * len(plugins.nodes()))
        full = wait_for(
            "a pod on every device", lambda: _placed(plugins, name, DEVICES * len(plugins.nodes())), 90, 0.2
        )
        assert full == {node.name: DEVICES for node in plugins.nodes()}, full
        assert _identity(_running_on_every_node(plugins) or {}) == daemons
    finally:
        api.request("DELETE", f"{DEPLOYMENTS}/{name}", {"propagationPolicy": "Foreground"})
        _kubectl(plugins, "uncordon", drained.name)
        wait_for("the deployment's pods gone", lambda: _placed(plugins, name, 0) is not None or None, 90, 0.2)


def test_uninstall_leaves_no_pod_device_or_socket(plugins: Any, helm: Helm) -> None:
    api = plugins.api()
    _helm(helm, plugins, "uninstall", RELEASE, "--wait")
    wait_for("no daemon pod left", lambda: not _daemon_pods(plugins) or None, 90, 0.5)
    for node in plugins.nodes():  # no node keeps a device of ours once its plugin's socket is gone
        wait_for(
            f"no allocatable {RESOURCE} on {node.name}", lambda n=node: api.resource(n.name, RESOURCE)[1] == 0, 60, 0.2
        )
    for node in plugins.nodes():  # our sockets gone from every node: only the kubelet's files remain
        assert sorted(p.name for p in node.plugin_dir.iterdir()) == ["kubelet.sock", "kubelet_internal_checkpoint"]


def _slices(cluster: Any) -> list[dict[str, Any]]:
    return list(cluster.api().request("GET", f"{SLICES}?fieldSelector=spec.driver%3D{DRIVER}")["items"])


def _slices_by_node(cluster: Any) -> dict[str, list[dict[str, Any]]] | None:
    """Node → the driver's slices there, once every node has published all its devices."""
    found: dict[str, list[dict[str, Any]]] = {}
    for item in _slices(cluster):
        found.setdefault(item["spec"].get("nodeName", ""), []).append(item)
    complete = all(
        sum(len(s["spec"].get("devices", [])) for s in found.get(node.name, [])) == DRA_DEVICES
        for node in cluster.nodes()
    )
    return found if complete else None


@pytest.fixture(scope="module")
def dra(fleet: Any, helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The chart in DRA mode (as tests/deploy/test_chart_dra_e2e.py installs it) on all three nodes."""
    _install(
        helm,
        fleet,
        DRA_RELEASE,
        {
            "dra": {"enabled": True, "driverName": DRIVER},
            "config": {
                "resources": [
                    {
                        "name": "example.com/null",
                        "static": {"count": DRA_DEVICES, "paths": ["/dev/null"]},
                        "env": {"NULL_DEVICE": "{ids}"},
                    }
                ]
            },
        },
        tmp_path_factory.mktemp("dra-values"),
    )
    try:
        wait_for(
            "a driver pod running on every node", lambda: _running_on_every_node(fleet, f"{DRA_FULLNAME}-"), 180, 0.5
        )
        yield fleet
    finally:
        _helm(helm, fleet, "uninstall", DRA_RELEASE, "--wait", check=False)


def test_dra_every_node_publishes_its_own_slices_and_prepares_a_claim(dra: Any) -> None:
    api = dra.api()
    by_node = wait_for("every node's slices", lambda: _slices_by_node(dra), 90, 0.2)
    assert sorted(by_node) == sorted(node.name for node in dra.nodes()), sorted(by_node)
    for node_name, slices in by_node.items():  # each node's pool is its own, written by its own pod
        assert {s["spec"]["pool"]["name"] for s in slices} == {node_name}, slices
        assert {m["manager"] for s in slices for m in s["metadata"]["managedFields"]} == {"kubedevice"}
    [device_class] = yaml.safe_load_all((REPO / "examples" / "dra-null-class.yaml").read_text())
    api.request("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
    workloads: dict[str, str] = {}
    try:
        for node in dra.nodes():  # one claim's pod per node: every node's driver prepares one
            workload = workloads[node.name] = unique("dra-fleet")
            template, pod = clusterkit.claim_objects(workload)
            pod["spec"]["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}
                        ]
                    }
                }
            }
            api.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template)
            api.create_pod(pod)
        for node in dra.nodes():
            workload = workloads[node.name]
            outcome = wait_for(
                f"the claim's pod on {node.name}", lambda w=workload: clusterkit.scenarios.pod_outcome(api, w), 120, 0.2
            )
            assert outcome[0] == "Running", outcome
            claims = api.request("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")["items"]
            (claim,) = [c for c in claims if c["metadata"]["name"].startswith(workload)]
            (result,) = claim["status"]["allocation"]["devices"]["results"]
            assert (result["driver"], result["pool"]) == (DRIVER, node.name), result
            assert (node.cdi_dir / f"kubedevice-dra-{DRIVER}-{claim['metadata']['uid']}.json").exists()
            log = clusterkit.scenarios.container_output(node, api.pod(workload))
            assert f"NULL_DEVICE={result['device']}" in log, log
    finally:
        delete_pods(api, list(workloads.values()), timeout=90)
        for workload in workloads.values():
            api.request("DELETE", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates/{workload}")
        api.request("DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{DRIVER}")
    for node in dra.nodes():  # unprepared on every node
        wait_for(
            f"no claim's CDI spec on {node.name}", lambda n=node: not list(n.cdi_dir.glob("kubedevice-dra-*")), 30, 0.2
        )


def _projected_token(node: Any, pod: dict[str, Any]) -> str:
    """The token the node's kubelet projected into the pod (kube-api-access-*), read on the node:
    the kubelet asks for it with a TokenRequest bound to the pod, so it carries the pod's node."""
    return clusterkit.in_namespace(
        node,
        f"cat /var/lib/kubelet/pods/{pod['metadata']['uid']}/volumes/kubernetes.io~projected/kube-api-access-*/token",
    ).strip()


def _refused(answer: tuple[int, str], writer: str, node: str) -> bool:
    status, body = answer
    return (
        status in (403, 422)
        and "ValidatingAdmissionPolicy" in body
        and (f"on node '{writer}' may not write ResourceSlices of node '{node}'" in body)
    )


def test_the_admission_policy_holds_each_nodes_real_token_to_its_own_slices(dra: Any) -> None:
    """The chart's policy (templates/resourceslices-policy.yaml) reads the node from the token's
    ``authentication.kubernetes.io/node-name`` extra (k8s.io/apiserver pkg/authentication/
    serviceaccount/util.go; on by default and locked since 1.32, ServiceAccountTokenPodNodeInfo):
    here with the tokens the real kubelets projected into the driver's pods, checked as
    Kubernetes' own e2e test/e2e/auth/per_node_update.go does, with a SelfSubjectReview."""
    api = dra.api()
    by_node = wait_for("every node's slices", lambda: _slices_by_node(dra), 90, 0.2)
    pods = _running_on_every_node(dra, f"{DRA_FULLNAME}-") or {}
    for writer, victim in ((dra.node(2), dra.node(3)), (dra.node(3), dra.node(1))):
        token = _projected_token(writer, pods[writer.name])
        status, body = clusterkit.as_token(
            dra,
            token,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        assert status == 201, (status, body)
        user = json.loads(body)["status"]["userInfo"]
        assert user["username"] == f"system:serviceaccount:{NAMESPACE}:{DRA_FULLNAME}", user
        assert user["extra"]["authentication.kubernetes.io/node-name"] == [writer.name], user
        # The other node's real slice: neither rewritten nor deleted with this token.
        target = by_node[victim.name][0]
        path = f"{SLICES}/{target['metadata']['name']}"
        changed = {**target, "metadata": {**target["metadata"], "labels": {"stolen": "yes"}}}
        assert _refused(clusterkit.as_token(dra, token, "PUT", path, changed), writer.name, victim.name)
        assert _refused(clusterkit.as_token(dra, token, "DELETE", path), writer.name, victim.name)
        assert api.get(path)["metadata"]["resourceVersion"] == target["metadata"]["resourceVersion"]
        # Nor a new slice for it; one for its own node is allowed (and deleted again).
        foreign, own = _slice_for(victim.name), _slice_for(writer.name)
        assert _refused(clusterkit.as_token(dra, token, "POST", SLICES, foreign), writer.name, victim.name)
        status, body = clusterkit.as_token(dra, token, "POST", SLICES, own)
        assert status == 201, (status, body)
        status, body = clusterkit.as_token(dra, token, "DELETE", f"{SLICES}/{own['metadata']['name']}")
        assert status == 200, (status, body)


def _slice_for(node: str) -> dict[str, Any]:
    """A slice of another driver name: the running driver deletes slices of its own that it did not publish."""
    name = unique("policy")
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "policy-test.example.com",
            "nodeName": node,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }


def test_dra_uninstall_removes_every_nodes_slices(dra: Any, helm: Helm) -> None:
    assert _slices_by_node(dra)
    started = time.monotonic()
    _helm(helm, dra, "uninstall", DRA_RELEASE, "--wait", "--timeout", "90s")
    wait_for("no driver pod left", lambda: not _daemon_pods(dra, f"{DRA_FULLNAME}-") or None, 90, 0.5)
    # Each kubelet deletes the driver's slices of its node 30 s after the driver unregistered.
    wait_for("no slice of the driver left", lambda: not _slices(dra) or None, 120, 0.5)
    print(f"DRA uninstall to no slices on {len(dra.nodes())} nodes: {time.monotonic() - started:.1f} s")
    for node in dra.nodes():
        assert not [p.name for p in (node.kubelet_dir / "plugins_registry").iterdir() if DRIVER in p.name], node.name
