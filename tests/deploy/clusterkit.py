"""The real cluster (``kubedevice.testing.cluster``) as the deploy e2e tests use it.

Two settings of the test cluster differ from a production node and would stop the chart, so they
are set here, on this cluster only:
- its controller-manager runs every controller as ``system:kube-controller-manager``, whose
  bootstrap role may not create ControllerRevisions, so no DaemonSet gets a pod; that user is
  bound to ``cluster-admin``;
- its private mount namespace makes ``/dev`` a private mount, which containerd refuses for the
  chart's ``mountPropagation: HostToContainer``; ``/dev`` is made shared inside the namespace
  (as it is on a systemd host), nothing outside it changes.

``module_cluster`` is the cluster of one test module, with the image imported into every node's
containerd and stopped on every path.

``reboot`` simulates a node reboot: kubelet and containerd stopped, every container killed and
what ``/run`` (a tmpfs) held removed, then containerd and the kubelet started again, with a hook
between them for services ordered before the kubelet.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

cluster_module = pytest.importorskip("kubedevice.testing.cluster", reason="the real-cluster tool is not in this tree")
components = pytest.importorskip("kubedevice.testing.components")
scenarios = pytest.importorskip("kubedevice.testing.scenarios")
Cluster = cluster_module.Cluster
wait_for, device_pod, unique, delete_pods = (
    scenarios.wait_for,
    scenarios.device_pod,
    scenarios.unique,
    scenarios.delete_pods,
)

TEST_IMAGE = cluster_module.TEST_IMAGE
REPO = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").lower() not in ("", "0", "false")


def cluster_dir(prefix: str) -> Path:
    """``$KUBEDEVICE_CLUSTER_DIR`` (a helper's own, when several share the machine), else a fresh
    short temp dir (unix socket paths must stay under 108 bytes)."""
    chosen = os.environ.get(cluster_module.DIR_ENV)
    if chosen:
        path = Path(chosen)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix=prefix))


def unavailable(reason: str) -> None:
    """Skip on a developer machine, fail in CI, so CI never passes without running these."""
    if CI:
        pytest.fail(f"e2e tests cannot run here: {reason}", pytrace=False)
    pytest.skip(reason)


def start(directory: Path, nodes: int = 1) -> Any:
    reason = cluster_module.missing_prerequisite()
    if reason is not None:
        unavailable(reason)
    cluster = Cluster(directory)
    cluster.up(components.ensure_all(), nodes=nodes)
    api = cluster.api()
    api.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-controller-manager"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"}
            ],
        },
    )
    for node in cluster.nodes():
        in_namespace(node, "mount --make-shared /dev")
    return cluster


@contextlib.contextmanager
def module_cluster(prefix: str, image_archive: Path | None = None, nodes: int = 1) -> Iterator[Any]:
    """A cluster of ``nodes`` for one test module (``prefix`` names its temp dir), with the image
    (``image_archive``, when given) imported into every node's containerd: each node has images of
    its own and there is no registry. Stopped, and its directory removed, however the module ends."""
    directory = cluster_dir(prefix)
    cluster = start(directory, nodes)
    try:
        if image_archive is not None:
            for node in cluster.nodes():
                import_image(node, image_archive)
        yield cluster
    finally:
        stop(cluster)
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def api_access(cluster: Any) -> dict[str, Any]:
    """Chart values that let the pod reach the API server: this cluster has no service proxy, so
    the ``kubernetes`` Service's address leads nowhere; the node's network (where the API server
    listens on 127.0.0.1) and the in-cluster variables pointing there do."""
    port = str(cluster.state().ports.apiserver)
    return {
        "hostNetwork": True,
        "extraEnv": [
            {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
            {"name": "KUBERNETES_SERVICE_PORT", "value": port},
        ],
    }


def stop(cluster: Any) -> None:
    """``down``, then remove the containers' cgroups, which the tool leaves (it removes only its own)."""
    pids = [pid for node in cluster.nodes() for pid in _descendants(node.namespace_pid)] if cluster.state() else []
    cgroups = {group for pid in pids for group in _container_cgroups(pid)}
    cluster.down()
    _remove(cgroups)


def _remove(cgroups: set[Path]) -> None:
    for group in sorted(cgroups, key=lambda path: -len(path.parts)):
        with contextlib.suppress(OSError):
            group.rmdir()


def in_namespace(cluster: Any, script: str) -> str:
    """A shell script in the node's mount namespace (where /var/lib/kubelet and /run are the node's);
    ``cluster`` is the cluster (its first node) or one of its nodes (``cluster.node(K)``)."""
    pid = cluster.namespace_pid
    done = subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "-p", "sh", "-ec", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def ctr(cluster: Any, *args: str) -> str:
    """``ctr`` on the containerd of ``cluster`` (its first node) or of one of its nodes."""
    binary = getattr(cluster, "cluster", cluster).binaries.containerd / "ctr"
    done = subprocess.run(
        [str(binary), "--address", str(cluster.containerd_socket), "-n", "k8s.io", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def import_image(cluster: Any, archive: Path) -> None:
    ctr(cluster, "images", "import", "--platform", "linux/amd64", "--snapshotter", "native", str(archive))


def container_pid(cluster: Any, container_id: str) -> int:
    """The host PID of a running container's first process (ctr shows its PID in the node's
    namespace); ``cluster`` is the cluster (its first node) or the container's node."""
    task = container_id.removeprefix("containerd://")
    lines = [line.split() for line in ctr(cluster, "tasks", "ls").splitlines()[1:]]
    (node_pid,) = [fields[1] for fields in lines if fields and fields[0] == task]
    for pid in _descendants(cluster.namespace_pid):
        with contextlib.suppress(OSError):
            nspids = re.search(r"^NSpid:\t(.*)$", Path(f"/proc/{pid}/status").read_text(), re.M)
            if nspids and nspids[1].split()[1:2] == [node_pid]:
                return pid
    raise AssertionError(f"no process for task {task} (pid {node_pid} in the node's namespace)")


def as_token(cluster: Any, token: str, method: str, path: str, body: Any = None) -> tuple[int, str]:
    """One request to the API server authenticated by ``token`` only (no client certificate), as a
    pod holding that token would send it: (status, body)."""
    context = ssl.create_default_context(cafile=str(cluster.dir / "pki" / "ca.crt"))
    request = urllib.request.Request(
        cluster.api().server + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def claim_objects(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """examples/dra-null-pod.yaml as shipped (written for this cluster: its image, never pulled), renamed."""
    template, pod = yaml.safe_load_all((REPO / "examples" / "dra-null-pod.yaml").read_text())
    template["metadata"]["name"] = pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = name
    pod["metadata"]["name"] = name
    (main,) = pod["spec"]["containers"]
    assert (main["image"], main["imagePullPolicy"]) == (TEST_IMAGE, "Never")
    assert pod["spec"]["automountServiceAccountToken"] is False
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    return template, pod


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        found += map(int, children)
        todo += map(int, children)
    return found


def _container_cgroups(pid: int) -> list[Path]:
    """The cgroup directories (every hierarchy) of a container process: their last part is its ID."""
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            path = line.split(":", 2)[2]
            if re.fullmatch(r"[0-9a-f]{64}", Path(path).name):
                found += [
                    d / path.lstrip("/") for d in Path("/sys/fs/cgroup").iterdir() if (d / path.lstrip("/")).is_dir()
                ]
    return found


def reboot(cluster: Any, before_kubelet: Callable[[], None] = lambda: None) -> float:
    """Stop kubelet and containerd, kill every container, clear /run's runtime state, start both.

    Returns the monotonic time at which the new kubelet was started.
    """
    state = cluster.state()
    cluster.stop("kubelet")
    cluster.stop("containerd")
    # Container shims re-parent to the namespace's init: everything below it is a container.
    victims = _descendants(state.namespace_pid)
    cgroups = {group for pid in victims for group in _container_cgroups(pid)}
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_for(
        "the node's killed processes gone",
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in victims),
        20,
        seen=lambda: [pid for pid in victims if Path(f"/proc/{pid}").exists()],
    )
    _remove(cgroups)  # a reboot leaves none; left, the kubelet's cAdvisor stalls on them for a minute
    in_namespace(
        cluster,
        r"""
        awk '$5 ~ "^/run/(containerd|netns)/" {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
            umount -l "$m"; done
        rm -rf /run/containerd /run/netns""",
    )
    state = cluster.state()
    bins = cluster.binaries
    cluster.spawn(
        "containerd",
        [str(bins.containerd / "containerd"), f"--config={cluster.dir / 'config' / 'containerd.toml'}"],
        state,
    )
    wait_for("containerd serving its socket again", lambda: cluster_module.accepts(cluster.containerd_socket), 30)
    before_kubelet()
    started = time.monotonic()
    for attempt in range(3):
        # The kubelet exits when containerd's socket is there but its CRI service is not yet
        # ("validate CRI v1 runtime API ... Unavailable", seen on a loaded machine); systemd's
        # kubelet.service restarts it, and so does this.
        cluster.node(1).start_kubelet()
        try:
            cluster.wait_kubelet_healthy()
            break
        except cluster_module.ClusterError as err:
            if attempt == 2 or "the process exited" not in str(err):
                raise
            time.sleep(1)
    return started


def checkpoint(cluster: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((cluster.plugin_dir / "kubelet_internal_checkpoint").read_text())
    return loaded
