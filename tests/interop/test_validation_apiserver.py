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

Each server runs with its release's default gates (plus what ``GATE_FLAGS`` says) and our side gets
the same gates and the release itself (``validate(obj, gates, release)``). Every disagreement found
is kept as a case file under tests/dra/data/validation_cases/ with the server's answer and always
runs: ``"xfail"`` in a case names why it still disagrees (strict). ``KUBEDEVICE_VALIDATION_CASES``
sets the objects per kind (default 300, the same for every release); with
``KUBEDEVICE_VALIDATION_KEEP=1`` a run writes its disagreements there. Releases: every one of
``components.RELEASES`` whose build is cached, and the default release (1.36) always: built if need
be, like the e2e cluster; without it the test fails in CI and skips elsewhere. All four take 2 to 4
minutes warm on 2 shared cores, 20 to 75 s each with its server's start.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from kubedevice.dra import features, models
from kubedevice.dra.models import DecodeError
from kubedevice.dra.validation import validate
from kubedevice.testing import components, pki

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dra"))
import validgen

pytestmark = pytest.mark.interop

CASES_DIR = Path(__file__).resolve().parents[1] / "dra" / "data" / "validation_cases"
COUNT = int(os.environ.get("KUBEDEVICE_VALIDATION_CASES", "300"))
GATE_FLAGS = {"1.34": "", "1.35": "", "1.36": "DRADeviceTaintRules=true", "1.37": "DRADeviceTaintRules=true"}
"""Each release's server runs with its defaults, plus DRADeviceTaintRules from 1.36 on (the gate alone
serves the kind there). Before 1.36 DeviceTaintRules are served only as v1alpha3 and only with
DRADeviceTaints on, which would change what the server does to slices and claims, so those releases
run with their defaults and their DeviceTaintRules are not compared (``dra validate`` reports the kind
as not served there)."""
PLURALS = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
           "ResourceClaimTemplate": "resourceclaimtemplates", "DeviceTaintRule": "devicetaintrules"}


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

    def to_json(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "fields": sorted(self.fields), "messages": list(self.messages),
                "decode": self.decode}


class ApiServer:
    """kube-apiserver + etcd in a temp dir, stopped on close; ``dry_run`` posts one document."""

    def __init__(self, release: str, directory: Path) -> None:
        self.release, self.version = release, components.RELEASES[release]
        self.dir, self.processes = directory, list[subprocess.Popen[bytes]]()
        try:
            kube, etcd = components.kubernetes(self.version), components.etcd()
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
        self._spawn("etcd", [str(etcd), f"--data-dir={directory / 'etcd'}", "--name=default",
                             f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
                             f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
                             f"--initial-cluster=default={peer_url}", "--unsafe-no-fsync", "--log-level=warn"])
        p = directory / "pki"
        self._spawn("kube-apiserver", [
            str(kube / "kube-apiserver"), f"--etcd-servers={url}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={secure}", f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}", f"--client-ca-file={p / 'ca.crt'}",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/24", "--profiling=false", "--endpoint-reconciler-type=none",
            *([f"--feature-gates={GATE_FLAGS[self.release]}"] if GATE_FLAGS[self.release] else []),
            "--runtime-config=resource.k8s.io/v1beta2=true"])  # fmt: skip
        context = ssl.create_default_context(cafile=str(p / "ca.crt"))
        context.load_cert_chain(str(p / "admin.crt"), str(p / "admin.key"))
        self.http = httpx2.Client(base_url=f"https://127.0.0.1:{secure}", verify=context, trust_env=False,
                                  timeout=30)
        self._wait_ready()
        self._allow_admin_access()

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.dir / f"{name}.log").open("wb") as log:
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                   start_new_session=True))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        while True:
            try:
                if self.http.get("/readyz").status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            if any(p.poll() is not None for p in self.processes) or time.monotonic() > deadline:
                log = (self.dir / "kube-apiserver.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"kube-apiserver {self.version} did not become ready:\n{log}", pytrace=False)
            time.sleep(0.2)

    def _allow_admin_access(self) -> None:
        """Label the namespace for ``adminAccess`` (the DRAAdminAccess admission rule): whether a
        namespace carries the label is cluster state, which ``dra validate`` cannot see."""
        patch = {"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}}
        deadline = time.monotonic() + 30
        while True:  # the API server creates the namespace shortly after it is ready
            response = self.http.patch(f"/api/v1/namespaces/{validgen.NAMESPACE}", content=json.dumps(patch),
                                       headers={"Content-Type": "application/merge-patch+json"})
            if response.is_success:
                return
            assert time.monotonic() < deadline, response.text
            time.sleep(0.2)

    def close(self) -> None:
        self.http.close()
        self._stop()

    def _stop(self) -> None:
        for process in reversed(self.processes):  # the API server before etcd (its shutdown hangs otherwise)
            process.terminate()
            process.wait(60)

    def dry_run(self, doc: dict[str, Any]) -> Verdict:
        kind = doc.get("kind", "")
        group_version = doc["apiVersion"]
        namespace = f"/namespaces/{validgen.NAMESPACE}" if kind in validgen.NAMESPACED else ""
        path = f"/apis/{group_version}{namespace}/{PLURALS[kind]}?dryRun=All&fieldValidation=Strict"
        body = json.dumps(doc, ensure_ascii=False).encode()
        response = self.http.post(path, content=body, headers={"Content-Type": "application/json"})
        if response.is_success:
            return Verdict(True, frozenset(), (), False)
        status = response.json()
        causes = status.get("details", {}).get("causes", [])
        if response.status_code != 422 or not causes:
            return Verdict(False, frozenset(), (status.get("message", ""),), True)
        return Verdict(False, frozenset(c.get("field", "") for c in causes),
                       tuple(sorted(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)), False)


def ours(doc: dict[str, Any], release: str, gates: dict[str, bool]) -> Verdict:
    """``kubedevice dra validate``'s answer, as its CLI reaches it."""
    try:
        obj = models.from_document(json.loads(json.dumps(doc)))
    except DecodeError as error:
        return Verdict(False, frozenset(), tuple(error.messages), True)
    errors = validate(obj, gates, release)
    if not errors:
        return Verdict(True, frozenset(), (), False)
    return Verdict(False, frozenset(e.field for e in errors), tuple(sorted(str(e) for e in errors)), False)


def agree(server: Verdict, mine: Verdict) -> bool:
    """Same verdict, and for a field-level refusal by both, the same field paths."""
    if server.accepted != mine.accepted:
        return False
    if server.accepted:
        return True
    if server.decode or mine.decode:
        return server.decode == mine.decode
    return server.fields == mine.fields


@pytest.fixture(scope="module", params=list(components.RELEASES))
def server(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """Every release whose build is cached; the default release always (built if need be)."""
    release = request.param
    version = components.RELEASES[release]
    if release != components.DEFAULT_RELEASE and not (components.cache_dir() / f"kubernetes-{version}").exists():
        pytest.skip(f"kube-apiserver {version} is not built (the default release is the one CI builds)")
    directory = Path(tempfile.mkdtemp(prefix="kd-valdiff-", dir="/tmp"))
    api = ApiServer(release, directory)
    try:
        yield api
    finally:
        api.close()
        shutil.rmtree(directory, ignore_errors=True)


def _keep(release: str, kind: str, doc: dict[str, Any], server: Verdict, mine: Verdict) -> None:
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    body = json.dumps(doc, sort_keys=True, ensure_ascii=False)
    name = f"{release}-{kind}-{hashlib.sha256(body.encode()).hexdigest()[:10]}.json"
    case = {"release": release, "object": doc, "server": server.to_json(), "ours_when_found": mine.to_json()}
    (CASES_DIR / name).write_text(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")


@pytest.mark.parametrize("kind", list(validgen.BUILDERS))
def test_generated_objects_agree_with_the_api_server(server: ApiServer, kind: str) -> None:
    release = server.release
    gates = features.from_flags(release, GATE_FLAGS[release])
    if kind == "DeviceTaintRule" and not gates.get("DRADeviceTaintRules"):
        pytest.skip(f"{release} serves DeviceTaintRules only with gates that change the other kinds (GATE_FLAGS)")
    disagreements, messages_same, refused_by_both, accepted = [], 0, 0, 0
    for doc in validgen.generate(kind, COUNT, seed=int(release.split(".")[1])):
        answer, mine = server.dry_run(doc), ours(doc, release, gates)
        accepted += answer.accepted
        if not answer.accepted and not mine.accepted and not answer.decode and not mine.decode:
            refused_by_both += 1
            messages_same += answer.messages == mine.messages
        if not agree(answer, mine):
            disagreements.append((doc, answer, mine))
    if os.environ.get("KUBEDEVICE_VALIDATION_KEEP"):
        for doc, answer, mine in disagreements:
            _keep(release, kind, doc, answer, mine)
    rate = f"messages identical on {messages_same}/{refused_by_both} field-level refusals"
    print(f"{release} {kind}: {COUNT - len(disagreements)}/{COUNT} agree ({accepted} accepted by the server); {rate}")
    assert not disagreements, "\n".join(
        f"{json.dumps(d, ensure_ascii=False)[:600]}\n  server: {a}\n  ours:   {m}" for d, a, m in disagreements[:5])


def _cases() -> list[Any]:
    return [pytest.param(path, id=path.stem) for path in sorted(CASES_DIR.glob("*.json"))] if CASES_DIR.exists() else []


@pytest.mark.parametrize("path", _cases())
def test_kept_disagreements_now_agree(path: Path, request: pytest.FixtureRequest) -> None:
    """Each kept case against the server's recorded answer: no server needed, so it runs everywhere."""
    case = json.loads(path.read_text())
    if "xfail" in case:
        request.applymarker(pytest.mark.xfail(reason=case["xfail"], strict=True))
    recorded = case["server"]
    server = Verdict(recorded["accepted"], frozenset(recorded["fields"]), tuple(recorded["messages"]),
                     recorded["decode"])
    release = case["release"]
    mine = ours(case["object"], release, features.from_flags(release, GATE_FLAGS[release]))
    assert agree(server, mine), f"server: {server}\nours:   {mine}"
