"""Differential test: ``kubedevice dra validate`` against a real kube-apiserver of the same release.

A standalone kube-apiserver (the cached build of ``kubedevice.testing.components``) on its own
etcd, no other component, is sent every object of tests/dra/validgen.py as a server-side dry-run
create with strict field validation (``?dryRun=All&fieldValidation=Strict``): nothing is stored,
and the answer is the full decode, defaulting, strategy and validation path a ``kubectl apply``
takes. Our side is ``models.from_document`` then ``validation.validate`` with that release's
feature-gate defaults. Compared: the verdict (accepted or refused), and for a 422 the set of field
paths (``status.details.causes[].field``); each cause's message is compared too and the rate of
exact matches reported. A 400 (the decoder's refusal: unknown field, wrong JSON type) carries no
field paths, so only the verdict counts there.

Each server runs with the gates and ``--runtime-config`` of its ``ServerConfig`` and our side gets
the same gates, the same runtime config and the release itself (``validate(obj, gates, release)``).
Every release has a server with its default gates and ``resource.k8s.io/v1beta2`` on, where the
four claim-side kinds are compared (and DeviceTaintRules from 1.36, which has them in v1beta2).
1.34 and 1.35 have DeviceTaintRules in v1alpha3 only, off by default: two more servers enable
v1alpha3, one with the release's default gates and one with the gates of the feature on
(``TAINT_GATES``), and compare DeviceTaintRules only (validgen draws the v1alpha3 shape of the
release). On every server ``test_served_exactly_where_ours_says`` posts every kind in every version
and requires a 404 exactly where ``features.not_served`` says the kind is not served: no gate decides
it, the enabled API versions do. Every disagreement found is kept as a case file under
tests/dra/data/validation_cases/ with the server's answer and always runs: ``"xfail"`` in a case
names why it still disagrees (strict). ``KUBEDEVICE_VALIDATION_CASES`` sets the objects per kind
(default 300, the same for every release); with ``KUBEDEVICE_VALIDATION_KEEP=1`` a run writes its
disagreements there. Releases: every one of ``components.RELEASES`` whose build is cached, and the
default release (1.36) always: built if need be, like the e2e cluster; without it the test fails
in CI and skips elsewhere. All eight servers take about 65 s warm on 2 cores (5 s to start each).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from kubedevice.dra import features, models
from kubedevice.dra.convert import convert
from kubedevice.dra.models import DecodeError
from kubedevice.dra.strategy import drop_disabled_fields
from kubedevice.dra.validation import validate
from kubedevice.testing import components, pki
from kubedevice.testing.waiting import wait_for
from tests.dra import validgen

pytestmark = pytest.mark.interop

CASES_DIR = Path(__file__).resolve().parents[1] / "dra" / "data" / "validation_cases"
COUNT = int(os.environ.get("KUBEDEVICE_VALIDATION_CASES", "300"))


@dataclass(frozen=True)
class ServerConfig:
    """One kube-apiserver's flags, and the kinds compared on it."""

    release: str
    name: str
    gates: str
    runtime_config: str
    kinds: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.release}-{self.name}"


def dra_gates(release: str) -> str:
    """What a release needs for DRA beside its API versions: before 1.34 the (beta, off)
    DynamicResourceAllocation gate."""
    return "" if features.at_least(release, "1.34") else "DynamicResourceAllocation=true"


_ELSEWHERE = ("GenericWorkload", "DRAWorkloadResourceClaims")
"""Gates of workloads, not DRA objects: on, the API server waits for the scheduling API's alpha
(``failed to list *v1alpha2.PodGroup``) and never becomes ready."""


def all_gates(release: str) -> str:
    """Every DRA gate of the release on (a locked gate is at its default already)."""
    return ",".join(f"{gate}=true" for gate in sorted(features.defaults(release)) if gate not in _ELSEWHERE)


def every_version(release: str) -> str:
    """``--runtime-config`` turning on every ``resource.k8s.io`` version the release has."""
    return ",".join(f"{features.API_GROUP}/{version}=true" for version in features.API_KINDS[release])


def _configs() -> list[ServerConfig]:
    """Per release: its default gates (with what DRA needs before 1.34) and every gate on, each
    with every version of the group enabled, comparing every kind the release has."""
    configs = []
    for release in features.RELEASES:
        kinds = tuple(sorted({kind for kinds in features.API_KINDS[release].values() for kind in kinds}))
        api = every_version(release)
        configs += [
            ServerConfig(release, "defaults", dra_gates(release), api, kinds),
            ServerConfig(release, "all-gates", all_gates(release), api, kinds),
        ]
    return configs


SERVERS = _configs()
DEFAULTS = {config.release: config for config in SERVERS if config.name == "defaults"}


def _unavailable(reason: str) -> None:
    """Fail in CI (a differential that never runs proves nothing), skip on a developer machine."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"the validation differential cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Verdict:
    """One side's answer: accepted, and for a refusal the field paths and messages it named."""

    accepted: bool
    fields: frozenset[str]
    messages: tuple[str, ...]
    decode: bool
    """Refused by the decoder (no field paths to compare)."""
    served: bool = True
    """False: no such kind in that version on this server (a 404; kubectl's "no matches for kind")."""

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "fields": sorted(self.fields),
            "messages": list(self.messages),
            "decode": self.decode,
            "served": self.served,
        }


class ApiServer:
    """kube-apiserver + etcd in a temp dir, stopped on close; ``dry_run`` posts one document."""

    def __init__(self, config: ServerConfig, directory: Path) -> None:
        self.config, self.release, self.version = config, config.release, components.ALL_RELEASES[config.release]
        self.dir, self.processes = directory, list[subprocess.Popen[bytes]]()
        try:
            kube, etcd = components.apiserver(config.release), components.etcd()
        except Exception as error:
            _unavailable(f"no kube-apiserver {self.version}: {error}")
        try:
            self._start(kube, etcd)
        except BaseException:
            self._stop()  # a server that did not start must not leave its etcd running
            raise

    def _start(self, kube: Path, etcd: Path) -> None:
        directory = self.dir
        pki.create(directory / "pki", "node")
        client, peer, secure = _port(), _port(), _port()
        url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        self._spawn(
            "etcd",
            [
                str(etcd),
                f"--data-dir={directory / 'etcd'}",
                "--name=default",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        p = directory / "pki"
        self._spawn("kube-apiserver", [
            str(kube), f"--etcd-servers={url}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={secure}", f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}", f"--client-ca-file={p / 'ca.crt'}",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/24", "--profiling=false", "--endpoint-reconciler-type=none",
            *([f"--feature-gates={self.config.gates}"] if self.config.gates else []),
            f"--runtime-config={self.config.runtime_config}"])  # fmt: skip
        context = ssl.create_default_context(cafile=str(p / "ca.crt"))
        context.load_cert_chain(str(p / "admin.crt"), str(p / "admin.key"))
        self.http = httpx2.Client(base_url=f"https://127.0.0.1:{secure}", verify=context, trust_env=False, timeout=30)
        self._wait_ready()
        self._allow_admin_access()

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.dir / f"{name}.log").open("wb") as log:
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def _wait_ready(self) -> None:
        def log() -> str:
            return (self.dir / "kube-apiserver.log").read_text(errors="replace")[-2000:]

        def ready() -> bool:
            if any(p.poll() is not None for p in self.processes):
                pytest.fail(f"kube-apiserver {self.version} exited:\n{log()}", pytrace=False)
            try:
                return bool(self.http.get("/readyz").status_code == 200)
            except httpx2.TransportError:
                return False

        wait_for(f"kube-apiserver {self.version} ready", ready, 90, 0.2, seen=log)

    def _allow_admin_access(self) -> None:
        """Label the namespace for ``adminAccess`` (the DRAAdminAccess admission rule): whether a
        namespace carries the label is cluster state, which ``dra validate`` cannot see."""
        # 1.33's key is resource.k8s.io/admin-access (pkg/registry/resource/utils.go, v1.33.13)
        labels = {"resource.kubernetes.io/admin-access": "true", "resource.k8s.io/admin-access": "true"}
        patch = {"metadata": {"labels": labels}}
        answers: list[str] = []

        def labelled() -> bool:  # the API server creates the namespace shortly after it is ready
            response = self.http.patch(
                f"/api/v1/namespaces/{validgen.NAMESPACE}",
                content=json.dumps(patch),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            answers[:] = [response.text]
            return bool(response.is_success)

        wait_for(f"namespace {validgen.NAMESPACE} labelled", labelled, 30, 0.2, seen=lambda: answers)

    def close(self) -> None:
        self.http.close()
        self._stop()

    def _stop(self) -> None:
        for process in reversed(self.processes):  # the API server before etcd (its shutdown hangs otherwise)
            process.terminate()
            process.wait(60)

    def post(self, doc: dict[str, Any], dry_run: bool = True) -> httpx2.Response:
        """A create of ``doc`` (dry-run unless told) at its kind's resource in its own apiVersion."""
        query = "?dryRun=All&fieldValidation=Strict" if dry_run else "?fieldValidation=Strict"
        body = json.dumps(doc, ensure_ascii=False).encode()
        return self.http.post(
            _resource_path(doc["kind"], doc["apiVersion"]) + query,
            content=body,
            headers={"Content-Type": "application/json"},
        )

    def read(self, kind: str, api_version: str, name: str) -> dict[str, Any]:
        """A stored object as the API server writes it in ``api_version``."""
        response = self.http.get(f"{_resource_path(kind, api_version)}/{name}")
        assert response.is_success, response.text
        document: dict[str, Any] = response.json()
        return document

    def dry_run(self, doc: dict[str, Any]) -> Verdict:
        response = self.post(doc)
        if response.status_code == 404:
            return Verdict(False, frozenset(), (response.json().get("message", ""),), False, served=False)
        if response.is_success:
            return Verdict(True, frozenset(), (), False)
        status = response.json()
        causes = status.get("details", {}).get("causes", [])
        if response.status_code != 422 or not causes:
            return Verdict(False, frozenset(), (status.get("message", ""),), True)
        return Verdict(
            False,
            frozenset(c.get("field", "") for c in causes),
            tuple(sorted(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)),
            False,
        )


def _resource_path(kind: str, api_version: str) -> str:
    namespace = f"/namespaces/{validgen.NAMESPACE}" if kind in validgen.NAMESPACED else ""
    return f"/apis/{api_version}{namespace}/{features.RESOURCES[kind]}"


def ours(doc: dict[str, Any], config: ServerConfig) -> Verdict:
    """``kubedevice dra validate --kubernetes-version R --feature-gates G --runtime-config C``'s
    answer, as its CLI reaches it."""
    release = config.release
    gates = features.from_flags(release, config.gates)
    try:
        obj = models.from_document(json.loads(json.dumps(doc)), "", release)
    except DecodeError as error:
        return Verdict(False, frozenset(), tuple(error.messages), True)
    api = features.runtime_config(release, config.runtime_config)
    if unserved := features.not_served(obj.kind, obj.api_version, release, gates, api):
        return Verdict(False, frozenset(), (unserved,), False, served=False)
    errors = validate(obj, gates, release)
    if not errors:
        return Verdict(True, frozenset(), (), False)
    return Verdict(False, frozenset(e.field for e in errors), tuple(sorted(str(e) for e in errors)), False)


def agree(server: Verdict, mine: Verdict) -> bool:
    """Same verdict, and for a field-level refusal by both, the same field paths."""
    if server.served != mine.served or server.accepted != mine.accepted:
        return False
    if server.accepted or not server.served:
        return True
    if server.decode or mine.decode:
        return server.decode == mine.decode
    return server.fields == mine.fields


@pytest.fixture(scope="module", params=SERVERS, ids=[config.id for config in SERVERS])
def server(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """Every release whose build is cached; the default release always (built if need be)."""
    config: ServerConfig = request.param
    version = components.ALL_RELEASES[config.release]
    if config.release != components.DEFAULT_RELEASE and not components.apiserver_cached(config.release):
        pytest.skip(f"kube-apiserver {version} is not built (the default release is the one CI builds)")
    directory = Path(tempfile.mkdtemp(prefix="kd-valdiff-", dir="/tmp"))
    api = ApiServer(config, directory)
    try:
        yield api
    finally:
        api.close()
        shutil.rmtree(directory, ignore_errors=True)


def _keep(config: ServerConfig, kind: str, doc: dict[str, Any], server: Verdict, mine: Verdict) -> None:
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    body = json.dumps(doc, sort_keys=True, ensure_ascii=False)
    name = f"{config.release}-{kind}-{hashlib.sha256(body.encode()).hexdigest()[:10]}.json"
    case = {
        "release": config.release,
        "gates": config.gates,
        "runtime_config": config.runtime_config,
        "object": doc,
        "server": server.to_json(),
        "ours_when_found": mine.to_json(),
    }
    (CASES_DIR / name).write_text(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")


@pytest.mark.parametrize("kind", list(validgen.BUILDERS))
def test_generated_objects_agree_with_the_api_server(server: ApiServer, kind: str) -> None:
    config = server.config
    if kind not in config.kinds:
        pytest.skip(f"{config.id} compares {', '.join(config.kinds)}")
    disagreements, messages_same, refused_by_both, accepted = [], 0, 0, 0
    docs = validgen.generate(kind, COUNT, seed=int(config.release.split(".")[1]), release=config.release)
    for doc in docs:
        answer, mine = server.dry_run(doc), ours(doc, config)
        assert answer.served, f"{config.id} does not serve {doc['apiVersion']} {kind}: nothing would be compared"
        accepted += answer.accepted
        if not answer.accepted and not mine.accepted and not answer.decode and not mine.decode:
            refused_by_both += 1
            messages_same += answer.messages == mine.messages
        if not agree(answer, mine):
            disagreements.append((doc, answer, mine))
    if os.environ.get("KUBEDEVICE_VALIDATION_KEEP"):
        for doc, answer, mine in disagreements:
            _keep(config, kind, doc, answer, mine)
    rate = f"messages identical on {messages_same}/{refused_by_both} field-level refusals"
    print(f"{config.id} {kind}: {COUNT - len(disagreements)}/{COUNT} agree ({accepted} accepted by the server); {rate}")
    assert not disagreements, "\n".join(
        f"{json.dumps(d, ensure_ascii=False)[:600]}\n  server: {a}\n  ours:   {m}" for d, a, m in disagreements[:5]
    )


def _probe(kind: str, api_version: str, release: str) -> dict[str, Any]:
    """A valid object of ``kind`` (the v1 shape) named as ``api_version``: where the kind is served the
    server answers it somehow (created, or refused for the shape), where it is not, with a 404."""
    doc = validgen.BUILDERS[kind](random.Random(0), release)
    return {**doc, "apiVersion": api_version}


def test_served_exactly_where_ours_says(server: ApiServer) -> None:
    """Every kind in every version: a 404 exactly where ``not_served`` says so for this server's
    gates and ``--runtime-config``, whatever the gates (the v1alpha3 servers of 1.34 and 1.35 serve
    DeviceTaintRules with the feature's gates off and on; the defaults server of 1.36 serves them in
    v1beta2 with DRADeviceTaintRules off)."""
    config = server.config
    gates = features.from_flags(config.release, config.gates)
    api = features.runtime_config(config.release, config.runtime_config)
    served, wrong = [], []
    for kind in features.RESOURCES:
        for version in models.VERSIONS:
            api_version = f"{features.API_GROUP}/{version}"
            answer = server.post(_probe(kind, api_version, config.release))
            mine = features.not_served(kind, api_version, config.release, gates, api)
            if (answer.status_code == 404) != (mine is not None):
                wrong.append(f"{api_version} {kind}: server {answer.status_code} {answer.text[:200]}, ours {mine}")
            if answer.status_code != 404:
                served.append(f"{version}/{kind}")
    print(f"{config.id}: served {len(served)} of {len(features.RESOURCES) * len(models.VERSIONS)}: {', '.join(served)}")
    assert not wrong, "\n".join(wrong)
    assert served and len(served) < len(features.RESOURCES) * len(models.VERSIONS)  # both answers were seen


def _cases() -> list[Any]:
    return [pytest.param(path, id=path.stem) for path in sorted(CASES_DIR.glob("*.json"))] if CASES_DIR.exists() else []


@pytest.mark.parametrize("path", _cases())
def test_kept_disagreements_now_agree(path: Path, request: pytest.FixtureRequest) -> None:
    """Each kept case against the server's recorded answer: no server needed, so it runs everywhere.
    A case without flags was kept on its release's defaults server (gates then as now ours)."""
    case = json.loads(path.read_text())
    if "xfail" in case:
        request.applymarker(pytest.mark.xfail(reason=case["xfail"], strict=True))
    recorded = case["server"]
    server = Verdict(
        recorded["accepted"],
        frozenset(recorded["fields"]),
        tuple(recorded["messages"]),
        recorded["decode"],
        recorded.get("served", True),
    )
    defaults = DEFAULTS[case["release"]]
    config = ServerConfig(
        defaults.release,
        "kept",
        case.get("gates", defaults.gates),
        case.get("runtime_config", defaults.runtime_config),
        (),
    )
    mine = ours(case["object"], config)
    assert agree(server, mine), f"server: {server}\nours:   {mine}"


# --- conversion: written in one version, read in another ------------------------------------

CONVERSIONS = int(os.environ.get("KUBEDEVICE_CONVERSION_CASES", "8"))
_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def _stamped(doc: dict[str, Any]) -> dict[str, Any]:
    """Every taint with its ``timeAdded``, which the API server would otherwise default to now."""
    for node in _dicts_below(doc):
        taints = [node.get("taint"), *(node["taints"] if isinstance(node.get("taints"), list) else [])]
        for taint in taints:
            if isinstance(taint, dict):
                taint.setdefault("timeAdded", "2026-01-01T00:00:00Z")
    return doc


def _dicts_below(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _dicts_below(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dicts_below(item)


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """What a conversion decides: the metadata we wrote and the spec (the status is reset on create)."""
    meta = {k: v for k, v in doc.get("metadata", {}).items() if k not in _SERVER_FIELDS}
    return {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": meta, "spec": doc.get("spec")}


def _round_trips(
    server: ApiServer, kind: str, i: int, gates: dict[str, bool]
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], list[str], bool]]:
    """(which, ours, the server's, the fields we reported lost, whether the server's answer read
    back in the source version is what it stored) for object ``i`` of ``kind`` created in each
    version and read in each: ours converts the object as stored under ``gates``."""
    release = server.release
    versions = validgen.versions(kind, release)
    base = validgen.BUILDERS[kind](random.Random(f"{kind}-{i}"), release)
    for source in versions:
        doc = _stamped(validgen.in_version(base, source, release))
        name = doc["metadata"]["name"] = f"conv-{i}-{source}"
        if not server.post(doc, dry_run=False).is_success:
            continue
        decoded = models.from_document(json.loads(json.dumps(doc)), "", release)
        stored = drop_disabled_fields(decoded, gates, release)
        original = _comparable(server.read(kind, f"{features.API_GROUP}/{source}", name))
        for target in versions:
            mine, lost = convert(stored, target, release)
            theirs = server.read(kind, f"{features.API_GROUP}/{target}", name)
            back, _ = convert(models.from_document(copy.deepcopy(theirs), "", release), source, release)
            kept = _comparable(back) == original
            yield f"{kind} {source}->{target}", _comparable(mine), _comparable(theirs), lost, kept


def test_conversion_agrees_with_the_api_server(server: ApiServer) -> None:
    """Each kind created in every version the release has and read back in every version: the API
    server's own conversion, against ``kubedevice dra convert`` of the stored object (what the
    strategy keeps under this server's gates), field by field. And a loss is reported exactly when
    there is one: when the server's answer, converted back to the version it was written in, is not
    what the server stored. An object the server refuses is not a conversion and is skipped."""
    config = server.config
    gates = features.from_flags(config.release, config.gates)
    compared, lossy, wrong = 0, 0, []
    for kind in config.kinds:
        for i in range(CONVERSIONS):
            for which, mine, theirs, lost, kept in _round_trips(server, kind, i, gates):
                compared, lossy = compared + 1, lossy + bool(lost)
                if mine != theirs:
                    wrong.append(f"{which}:\n  ours:   {mine}\n  server: {theirs}")
                elif kept == bool(lost):  # a loss reported exactly when the way back misses something
                    back = "is" if kept else "is not"
                    wrong.append(f"{which}: reported lost {lost}; read back, the server's answer {back} what it stored")
    print(f"{config.id}: {compared - len(wrong)}/{compared} conversions agree ({lossy} lossy, each loss reported)")
    assert compared and not wrong, "\n".join(wrong[:3])
