"""``kubedevice dra`` without FILEs, against an HTTP API server serving stored objects.

The server here is a real HTTP server on 127.0.0.1 that answers what kube-apiserver answers for
the requests these commands send (``/version``, discovery, LISTs, a GET of a pod), recording
each request, so the tests see the commands' requests and their answers end to end; the
scheduling answers themselves are proven against the real kube-scheduler in
``tests/e2e/test_dra_live.py``. The workload is ``kubedevice.testing.dralive``'s: five nodes, one
of them tainted, GPUs of two models and sizes, a tainted device, partitionable GPUs, a NIC.
"""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kubedevice.commands import run
from kubedevice.dra import models
from kubedevice.dra.convert import convert
from kubedevice.dra.live.cluster import ApiAccessError, Snapshot, decode
from kubedevice.dra.live.kubectl import kubectl_args
from kubedevice.dra.live.podexplain import compress
from kubedevice.testing.dralive import GPU_CLASS, NIC_CLASS, Layout, class_document, memory_is, model, request
from kubedevice.testing.waiting import budget

NAMESPACE = "team-a"
SCHEDULER_SAID = "0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 cannot allocate all claims."
LAYOUT = Layout("n")
PLURALS = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
           "ResourceClaimTemplate": "resourceclaimtemplates"}  # fmt: skip


@dataclass
class Stored:
    """What the server holds and serves, and the requests it got."""

    version: str = "v1.36.3"
    served: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    refuse: str = ""
    requests: list[str] = field(default_factory=list)
    events: dict[str, queue.Queue[dict[str, Any] | None]] = field(default_factory=lambda: defaultdict(queue.Queue))
    """Per kind, what its watch sends next; None ends the watch (the server closes it)."""

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        if self.refuse and self.refuse in path:
            message = f'{self.refuse} is forbidden: User "u" cannot list resource "{self.refuse}"'
            return 403, {"kind": "Status", "status": "Failure", "message": message, "code": 403}
        if path == "/version":
            return 200, {"gitVersion": self.version}
        if path == "/apis/resource.k8s.io":
            return 200, {"kind": "APIGroup", "versions": [{"version": v} for v in self.served]}
        if path == "/api/v1/nodes":
            return 200, self.list("Node", "v1")
        parts = path.strip("/").split("/")
        if path.startswith("/api/v1/namespaces/") and parts[4] == "pods":
            pod = self.pods.get(f"{parts[3]}/{parts[5]}")
            return (200, pod) if pod else (404, {"kind": "Status", "code": 404, "message": "not found"})
        if path.startswith("/apis/resource.k8s.io/") and parts[2] in self.served:
            kind = next(k for k, plural in PLURALS.items() if plural == parts[-1])
            namespace = parts[4] if len(parts) > 5 else None
            if query.get("resourceVersion") != ["0"] or query.get("resourceVersionMatch") != ["NotOlderThan"]:
                return 400, {"kind": "Status", "code": 400, "message": "not from the watch cache"}
            return 200, self.list(kind, parts[2], namespace)
        return 404, {"kind": "Status", "code": 404, "message": f"no {path}"}

    def list(self, kind: str, version: str, namespace: str | None = None) -> dict[str, Any]:
        items = [
            {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
            for o in self.objects.get(kind, [])
            if namespace is None or o["metadata"].get("namespace") == namespace
        ]
        return {"kind": f"{kind}List", "apiVersion": version, "metadata": {"resourceVersion": "42"}, "items": items}


def serve(stored: Stored) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            stored.requests.append(self.path)
            if parse_qs(url.query).get("watch") == ["true"]:
                self.watch(url.path)
                return
            status, body = stored.answer(url.path, parse_qs(url.query))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def watch(self, path: str) -> None:
            """A watch as kube-apiserver streams one: JSON events, one per line, until it ends it."""
            kind = "Node" if path == "/api/v1/nodes" else next(k for k, p in PLURALS.items() if path.endswith(p))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # HTTP/1.0: the body ends when the connection closes
            while (event := stored.events[kind].get()) is not None:
                self.wfile.write(json.dumps(event).encode() + b"\n")
                self.wfile.flush()

        def log_message(self, *_: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            """A client that went away mid-answer (a command that gave up on a slow server) is
            the client's business: socketserver's traceback would land in the command's stderr."""

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def kubeconfig(server: str, context: str = "here", namespace: str = NAMESPACE) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
    })  # fmt: skip


def workload() -> Stored:
    """The layout's nodes and slices, train-1's four H100s allocated on n-b, a NIC share on n-a."""
    stored = Stored()
    stored.objects["Node"] = LAYOUT.node_documents()
    stored.objects["DeviceClass"] = [class_document(GPU_CLASS, "gpu"), class_document(NIC_CLASS, "nic")]
    stored.objects["ResourceSlice"] = [{**s, "metadata": {**s["metadata"], "uid": s["metadata"]["name"]}}
                                       for s in LAYOUT.slice_documents()]  # fmt: skip
    b = LAYOUT.name("b")
    results = [{"request": "gpu", "driver": "live.kubedevice.dev", "pool": b, "device": f"gpu-{i}"} for i in range(4)]
    held = claim("train-1-devices-abcde", [request("gpu", GPU_CLASS, 4, model("H100"))])
    held["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": on(b)},
                      "reservedFor": [{"resource": "pods", "name": "train-1", "uid": "u-1"}]}  # fmt: skip
    stored.objects["ResourceClaim"] = [held]
    stored.objects["ResourceClaimTemplate"] = [
        template("h100x4", [request("gpu", GPU_CLASS, 4, model("H100"))]),
        template("half", [request("gpu", GPU_CLASS, 1, memory_is(40))]),
    ]
    stored.pods = {f"{NAMESPACE}/{name}": pod(name, t) for name, t in (("train-2", "h100x4"), ("half-1", "half"))}
    return stored


def on(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def claim(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": name},
            "spec": {"devices": {"requests": [_defaulted(r) for r in requests]}}}  # fmt: skip


def _defaulted(entry: dict[str, Any]) -> dict[str, Any]:
    """As the API server stores a request: allocationMode defaulted."""
    return {**entry, "exactly": {"allocationMode": "ExactCount", **entry["exactly"]}}


def template(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": [_defaulted(r) for r in requests]}}}}  # fmt: skip


def pod(name: str, template_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {"nodeSelector": {"live.kubedevice.dev/pool": LAYOUT.prefix},
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
                 "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": template_name}],
                 "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                   "reason": "Unschedulable", "message": SCHEDULER_SAID}]},
    }  # fmt: skip


@dataclass
class Api:
    stored: Stored
    url: str
    config: Path


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    stored = workload()
    server, url = serve(stored)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(url))
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield Api(stored, url, config)
    server.shutdown()


def kubedevice(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """A command line as the ``kubedevice`` entry point runs it: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        run(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


# --- explain pod/NAME -----------------------------------------------------------------------------


def test_explain_pod_judges_every_node_in_eight_requests(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kubedevice(capsys, "dra", "explain", "pod/train-2", "--json")
    assert (code, err) == (1, "")
    report = json.loads(out)
    a, b, c, d, e = LAYOUT.nodes
    assert report["fits"] == [] and report["kubernetesVersion"] == "v1.36.3"
    verdicts = {v["node"]: v for v in report["nodes"]}
    assert sorted(verdicts) == LAYOUT.nodes
    assert verdicts[e]["plugin"] == "TaintToleration" and verdicts[e]["draFilterPasses"]
    assert {n for n, v in verdicts.items() if v.get("plugin") == "DynamicResources"} == {a, b, c, d}
    in_use = next(g for g in report["doesNotFit"] if "in use" in g["reason"])
    assert in_use["nodes"] == [b]
    assert in_use["inUse"] == {f"live.kubedevice.dev/{b}/gpu-{i}": ["team-a/train-1-devices-abcde (pod team-a/train-1)"]
                               for i in range(4)}  # fmt: skip
    tainted = next(g for g in report["doesNotFit"] if g["nodes"] == [c])
    assert "1 by taints" in tainted["reason"] and tainted["details"] == [
        "request gpu: taint unhealthy=true:NoSchedule is not tolerated on 1 device"
    ]
    assert len(api.stored.requests) == 8, api.stored.requests  # version, discovery, the pod, 5 LISTs
    assert all(
        "resourceVersion=0&resourceVersionMatch=NotOlderThan" in r
        for r in api.stored.requests
        if "/apis/resource.k8s.io/v1/" in r
    )


def test_explain_pod_text_groups_nodes_and_names_holders(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kubedevice(capsys, "dra", "explain", "pod/train-2", "-n", NAMESPACE)
    assert code == 1
    assert out.startswith("Pod team-a/train-2: the scheduler says: 0/5 nodes are available:")
    assert "Does not fit on 5 nodes:\n" in out and "Fits on 0 nodes." in out
    assert "      in use: gpu-0..3 held by team-a/train-1-devices-abcde (pod team-a/train-1)\n" in out
    assert "  1 node: TaintToleration: node(s) had untolerated taint(s) (dedicated=infra:NoSchedule)\n" in out
    assert "      (the DRA filter alone passes on 1 of them)\n" in out
    assert "Not checked (need the node's other pods or volumes): NodePorts," in out


def test_a_pod_that_fits_gets_the_nodes_and_devices(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kubedevice(capsys, "dra", "explain", "pod/half-1", "--json")
    assert code == 0
    fits = {f["node"]: f["allocation"] for f in json.loads(out)["fits"]}
    a, d = LAYOUT.name("a"), LAYOUT.name("d")
    assert sorted(fits) == [a, d]
    assert fits[a] == [{"claim": "team-a/half-1-devices-", "request": "gpu", "driver": "live.kubedevice.dev",
                        "pool": a, "device": "gpu-0"}]  # fmt: skip
    assert fits[d][0]["device"] == "gpu-0-half-0"


def test_the_release_is_the_servers_unless_given(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    api.stored.version = "v1.35.4-gke.1"
    _, out, _ = kubedevice(capsys, "dra", "explain", "pod/train-2", "--json")
    assert json.loads(out)["kubernetesVersion"] == "v1.35.4-gke.1"
    api.stored.requests.clear()
    _, out, _ = kubedevice(capsys, "dra", "explain", "pod/train-2", "--json", "--kubernetes-version", "1.36")
    assert json.loads(out)["kubernetesVersion"] == "1.36" and "/version" not in api.stored.requests
    api.stored.version = "v1.30.0"  # before DRA's structured API
    code, out, err = kubedevice(capsys, "dra", "explain", "pod/train-2")
    assert (
        (code, out) == (1, "") and err.startswith("kubedevice: API server http://127.0.0.1:") and err.count("\n") == 1
    )
    assert "runs Kubernetes v1.30.0: kubedevice knows DRA of 1.31 to 1.37 (--kubernetes-version" in err


def test_the_newest_served_version_is_read(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    api.stored.served = ("v1beta2",)
    api.stored.objects = {"DeviceClass": api.stored.objects["DeviceClass"], "ResourceSlice": []}
    code, out, _ = kubedevice(capsys, "dra", "explain", "--json")
    assert code == 1 and [c["class"] for c in json.loads(out)] == [GPU_CLASS, NIC_CLASS]
    assert any(r.startswith("/apis/resource.k8s.io/v1beta2/deviceclasses?") for r in api.stored.requests)
    api.stored.served = ()
    code, _, err = kubedevice(capsys, "dra", "explain")
    assert code == 1 and "serves no resource.k8s.io version kubedevice reads (v1, v1beta2, v1beta1, v1alpha3)" in err


def test_a_1_31_cluster_is_read_in_v1alpha3(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    """1.31 serves v1alpha3 only: read, converted as files are, and judged as 1.31 (no taints,
    no counters: n-c's tainted gpu-0 is free there, and the pod fits on n-c alone as on 1.36)."""
    api.stored.version, api.stored.served = "v1.31.14", ("v1alpha3",)
    for kind, documents in api.stored.objects.items():
        if kind != "Node":
            api.stored.objects[kind] = [as_v1alpha3(d) for d in documents]
    code, out, _ = kubedevice(capsys, "dra", "explain", "pod/train-2", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["kubernetesVersion"] == "v1.31.14"
    assert [n["node"] for n in answer["fits"]] == [LAYOUT.name("c")]
    assert any(r.startswith("/apis/resource.k8s.io/v1alpha3/resourceslices?") for r in api.stored.requests)
    code, out, _ = kubedevice(capsys, "dra", "validate")
    assert (code, out) == (0, "11 objects valid (stored in resource.k8s.io/v1alpha3, judged as Kubernetes v1.31.14)\n")


def as_v1alpha3(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` as a 1.31 API server stores it (its metadata as the server set it)."""
    converted, _ = convert(models.from_document(document, "stored", "1.37"), "v1alpha3", "1.31")
    return {**converted, "metadata": document["metadata"]}


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["pod/nope"], 1, 'kubedevice: pod "team-a/nope" not found (API server http://127.0.0.1:'),
        (["pod/train-2", "-n", "other"], 1, 'kubedevice: pod "other/train-2" not found'),
        (["node/x"], 2, "kubedevice: 'node/x': expected pod/NAME"),
        (["", "--class", "c.yaml"], 2, "kubedevice: '': expected pod/NAME"),
        (["pod/train-2", "--node", "n-a"], 2, "kubedevice: --node does not go with pod/NAME"),
        (["pod/train-2", "--context", "gone"], 2, "kubedevice: --context 'gone': kubeconfig "),
    ],
)
def test_bad_pods_and_flags_are_one_line(
    api: Api, capsys: pytest.CaptureFixture[str], args: list[str], code: int, line: str
) -> None:
    exit_code, out, err = kubedevice(capsys, "dra", "explain", *args)
    assert (exit_code, out) == (code, "") and err.startswith(line) and err.count("\n") == 1, err


def test_a_refusing_or_unreachable_api_server_is_one_line_exit_1(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    api.stored.refuse = "resourceslices"
    code, _, err = kubedevice(capsys, "dra", "available")
    assert code == 1 and err.count("\n") == 1
    assert 'GET /apis/resource.k8s.io/v1/resourceslices: resourceslices is forbidden: User "u" cannot list' in err
    api.config.write_text(kubeconfig("https://127.0.0.1:1"))
    for args in (["explain", "pod/x"], ["available"], ["validate"], ["allocate", "--node", "n-a"], ["explain"]):
        code, out, err = kubedevice(capsys, "dra", *args)
        assert (code, out) == (1, ""), args
        assert err == "kubedevice: cannot reach the API server https://127.0.0.1:1: connection refused\n", args


# --- credentials as kubectl resolves them -----------------------------------------------------------


def test_kubeconfig_files_merge_as_kubectl_merges_them(
    api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first"  # names the current context, which only the second file defines
    first.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "here"}))
    second = tmp_path / "second"
    second.write_text(kubeconfig(api.url))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{first}:{second}")
    code, out, _ = kubedevice(capsys, "dra", "explain", "pod/train-2", "--json")
    assert code == 1 and json.loads(out)["pod"] == "team-a/train-2"  # the context's namespace
    code, _, err = kubedevice(capsys, "dra", "explain", "pod/train-2", "--context", "elsewhere")
    assert (
        code == 2
        and err == f"kubedevice: --context 'elsewhere': kubeconfig {first} has no such context (it has: here)\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    code, _, err = kubedevice(capsys, "dra", "available")
    assert code == 2 and err.startswith("kubedevice: no kubeconfig: $KUBECONFIG (") and err.count("\n") == 1
    code, _, err = kubedevice(capsys, "dra", "available", "--kubeconfig", str(tmp_path / "missing"))
    assert (
        code == 2 and err == f"kubedevice: kubeconfig {tmp_path / 'missing'}: cannot read: no such file or directory\n"
    )


# --- available, validate, allocate ----------------------------------------------------------------


def test_available_from_the_cluster_with_filters(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kubedevice(capsys, "dra", "available", "--json")
    pools = {p["pool"]: p for p in json.loads(out)}
    b = LAYOUT.name("b")
    assert code == 0 and pools[b]["summary"] == {"free": 0, "shared": 0, "allocated": 4, "blocked": 0}
    assert pools[b]["devices"][0]["heldBy"] == ["team-a/train-1-devices-abcde (pod team-a/train-1)"]
    _, out, _ = kubedevice(capsys, "dra", "available", "--class", NIC_CLASS, "--json")
    assert [(p["pool"], [d["name"] for d in p["devices"]]) for p in json.loads(out)] == [(LAYOUT.name("a"), ["nic-0"])]
    _, out, _ = kubedevice(capsys, "dra", "available", "--node", LAYOUT.name("d"))
    assert "COUNTER SET" in out and LAYOUT.name("a") not in out
    code, _, err = kubedevice(capsys, "dra", "available", "--class", "gone.example.com")
    assert code == 2 and err == "kubedevice: --class 'gone.example.com': no such DeviceClass\n"
    _, out, _ = kubedevice(capsys, "dra", "available", "--driver", "other.example.com", "--json")
    assert json.loads(out) == []


class Watcher:
    """``kubedevice dra available --watch --json`` as a user runs it: a process of its own,
    each drawing read as it comes; Ctrl-C is a real SIGINT."""

    def __init__(self, api: Api, *args: str) -> None:
        argv = [sys.executable, "-m", "kubedevice", "dra", "available", "--watch", "--json", *args]
        env = {**os.environ, "KUBECONFIG": str(api.config)}
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.drawings: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: [self.drawings.put(line) for line in self.process.stdout or []], daemon=True
        ).start()

    def summary(self, pool: str) -> dict[str, int]:
        """The next drawing's summary of ``pool``."""
        try:
            pools = json.loads(self.drawings.get(timeout=budget(20)))
        except queue.Empty:
            ended = self.process.poll()
            raise AssertionError(
                f"no drawing; exit code {ended}, stderr {self.stderr() if ended is not None else ''!r}"
            ) from None
        return next(p["summary"] for p in pools if p["pool"] == pool)

    def stderr(self) -> str:
        return (self.process.stderr or io.StringIO()).read()

    def end(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        """Signalled (or left to end by itself): its exit code and what it wrote to stderr."""
        if sig:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=budget(10)), self.stderr()
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def test_available_watch_follows_each_kind_and_ends_on_ctrl_c(api: Api) -> None:
    """One drawing per change: a claim deleted frees its devices; a watch the server ends is
    resumed, and one too old (410 Gone) is listed again; Ctrl-C ends the command at once, quietly."""
    b, held = LAYOUT.name("b"), api.stored.objects["ResourceClaim"][0]
    watcher = Watcher(api)
    try:
        assert watcher.summary(b) == {"free": 0, "shared": 0, "allocated": 4, "blocked": 0}
        api.stored.events["ResourceClaim"].put({"type": "DELETED", "object": held})
        assert watcher.summary(b)["free"] == 4
        api.stored.events["ResourceClaim"].put(None)  # the server ends the watch: resumed, nothing drawn
        api.stored.events["ResourceClaim"].put({"type": "ERROR", "object": {"kind": "Status", "code": 410}})
        assert watcher.summary(b)["allocated"] == 4  # listed again: the stored claim is back
        code, err = watcher.end()
        assert (code, err) == (130, "")
    finally:
        for events in api.stored.events.values():
            events.put(None)
        watcher.end(0)
    resumed = [r for r in api.stored.requests if "watch=true" in r and "resourceclaims" in r]
    assert len(resumed) == 3 and all("allowWatchBookmarks=true" in r for r in resumed)


def test_available_watch_ends_with_one_line_when_the_server_refuses(api: Api) -> None:
    watcher = Watcher(api)
    try:
        watcher.summary(LAYOUT.name("b"))
        message = "etcdserver: request timed out"
        api.stored.events["ResourceSlice"].put({"type": "ERROR", "object": {"code": 500, "message": message}})
        code, err = watcher.end(0)
    finally:
        for events in api.stored.events.values():
            events.put(None)
        watcher.end(0)
    path = "/apis/resource.k8s.io/v1/resourceslices"
    assert (code, err) == (1, f"kubedevice: API server {api.url}: WATCH {path}: {message}\n")


def test_validate_and_allocate_read_what_is_stored(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kubedevice(capsys, "dra", "validate")
    assert code == 0 and out == "11 objects valid (stored in resource.k8s.io/v1, judged as Kubernetes v1.36.3)\n"
    api.stored.objects["ResourceClaim"].append(claim("pending", [request("gpu", GPU_CLASS, 1, model("H100"))]))
    code, out, _ = kubedevice(capsys, "dra", "allocate", "--node", LAYOUT.name("c"), "-o", "json")
    allocated = json.loads(out)  # one claim: the object itself, as the file mode prints it
    assert code == 0 and allocated["metadata"]["name"] == "pending"
    assert allocated["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"  # gpu-0 is tainted
    code, _, err = kubedevice(capsys, "dra", "allocate", "--node", LAYOUT.name("b"))
    assert code == 1 and "ruled out: 4 in use" in err


# --- pieces -----------------------------------------------------------------------------------------


def test_server_objects_decode_as_files_do() -> None:
    """The watch-cache fast path gives the models the file path gives, for every kind."""
    documents = [*LAYOUT.slice_documents(), class_document(GPU_CLASS, "gpu"), *workload().objects["ResourceClaim"],
                 *workload().objects["ResourceClaimTemplate"]]  # fmt: skip
    fast = decode(documents, "1.36", "test")
    slow = [models.from_document(d, "x", "1.36") for d in documents]
    assert fast == slow


def _slice(name: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "d.example.com", "nodeName": name, "pool": {"name": name, "resourceSliceCount": 1},
                     "devices": devices}}  # fmt: skip


def test_equal_parts_of_slices_decode_as_one_object() -> None:
    """What the slices repeat (a device, an attribute, a capacity) is decoded once and shared,
    and every slice is still the model the file path gives it, field by field."""
    whole = {"name": "d0", "attributes": {"a": {"int": 1}, "b": {"string": "x"}}, "capacity": {"m": {"value": "1Gi"}}}
    tainted = {"name": "d2", "attributes": {"a": {"ints": [1, 2]}, "b": {"string": "x"}},
               "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}  # fmt: skip
    documents = [
        _slice("n1", [whole, {"name": "d1", "attributes": {"a": {"bool": True}}}]),
        _slice(
            "n2",
            [
                dict(whole),
                {"name": "d1", "attributes": {"a": {"int": 1}}},
                tainted,
                {"name": "d3", "attributes": {}},
                {"name": "d4"},
            ],
        ),
    ]
    fast = [s.spec.devices for s in decode(documents, "1.36", "test") if isinstance(s, models.ResourceSlice)]
    slow = [s.spec.devices for s in (models.from_document(d, "x", "1.36") for d in documents)
            if isinstance(s, models.ResourceSlice)]  # fmt: skip
    assert fast == slow
    assert [[d.model_fields_set for d in s] for s in fast] == [[d.model_fields_set for d in s] for s in slow]
    assert fast[0][0] is fast[1][0]  # the same device on two nodes
    assert fast[1][2].attributes["b"] is fast[0][0].attributes["b"]  # an attribute of a device not shared whole
    assert fast[0][1].attributes["a"].as_value() == {"bool": True}  # true is not 1 to the API server
    assert fast[1][1].attributes["a"].as_value() == {"int": 1}


def test_a_part_the_model_refuses_is_worded_as_from_a_file() -> None:
    document = _slice("n1", [{"name": "d0", "attributes": {"a": {"int": 2**63}}}])
    with pytest.raises(models.DecodeError) as slow:
        models.from_document(document, 'ResourceSlice "n1"', "1.36")
    with pytest.raises(ApiAccessError) as fast:
        decode([document], "1.36", "test")
    assert str(fast.value) == f"API server test: {slow.value.first()}"


def test_a_snapshot_shows_its_counts_not_its_objects() -> None:
    """``asyncio.run`` words its result's repr when it puts the SIGINT handler back: a snapshot's
    must not be its thousands of objects."""
    documents = LAYOUT.slice_documents()
    snap = Snapshot("v1.36.3", "1.36", "resource.k8s.io/v1", {"ResourceSlice": decode(documents, "1.36", "test")},
                    {"ResourceSlice": documents, "Node": []}, {})  # fmt: skip
    assert repr(snap) == "Snapshot(v1.36.3, resource.k8s.io/v1: ResourceSlice 6, Node 0)"


@pytest.mark.parametrize(
    ("args", "translated"),
    [
        (["explain", "pod/x", "-o", "json"], ["explain", "pod/x", "--json"]),
        (["explain", "pod/x", "-ojson"], ["explain", "pod/x", "--json"]),
        (["available", "--output=json", "-n", "ns"], ["available", "--json", "-n", "ns"]),
        (["allocate", "--node", "n", "-o", "json"], ["allocate", "--node", "n", "-o", "json"]),
    ],
)
def test_kubectl_spellings(args: list[str], translated: list[str]) -> None:
    assert kubectl_args(args) == translated


def test_kubectl_output_other_than_json_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        kubectl_args(["explain", "pod/x", "-o", "yaml"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "kubedevice: -o 'yaml': kubectl dra explain prints text, or JSON with -o json\n"


def test_device_names_compress_into_runs() -> None:
    assert compress(["gpu-3", "gpu-0", "gpu-1", "gpu-2", "gpu-7", "nic"]) == "nic, gpu-0..3, gpu-7"
    assert compress(["gpu-0-half-1", "gpu-0-half-0"]) == "gpu-0-half-0..1"
