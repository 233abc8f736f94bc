"""``kubedevice check --dra``: passes on our driver and on a Go-helper-like one, fails by name on broken ones.

Everything is real gRPC on real unix sockets in a temp dir; the claims are files that both the
checker and the driver read. The broken drivers are :class:`~.draserver.TinyDriver` with one fault.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedevice.conformance import Report, Status
from kubedevice.conformance.dra.checks import CATALOGUE
from kubedevice.conformance.dra.runner import DraCheckOptions, run_dra_checks
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver.metadata import Document, MetadataFiles
from kubedevice.dra.nodeclaims import ClaimRef
from kubedevice.testing.dradriver import DRIVER, NODE, Node, claim_object, file_service, null_plugin, running

from .conftest import by_status, result, run
from .draserver import Faults, TinyDriver

ROOT = Path(__file__).resolve().parents[2]
TINY = "tiny.example.com"


@pytest.fixture
def node() -> Iterator[Node]:
    root = Path(tempfile.mkdtemp(prefix="kd-", dir="/tmp"))  # unix socket paths end at 107 bytes
    yield Node(root)
    shutil.rmtree(root)


def _claims(node: Node, driver: str) -> None:
    node.add_claim(claim_object("a", [("gpu", "null0")], driver=driver))
    node.add_claim(claim_object("b", [("gpu", "null1"), ("nic/fast", "null2")], driver=driver))
    node.add_claim(claim_object("c", [("x", "other0")], driver="other.example.com"))  # not this driver's: not sent


def _options(node: Node, driver: str, **extra: Any) -> DraCheckOptions:
    return DraCheckOptions(node.kubelet_dir, driver, node.claims_dir, node.cdi_dir, timeout=10, **extra)


METADATA_CHECKS = {"dra.prepare.metadata", "dra.unprepare.metadata_removed"}


@pytest.mark.parametrize("device_metadata", [False, True], ids=["plain", "device-metadata"])
def test_our_driver_passes_every_check(node: Node, device_metadata: bool) -> None:
    _claims(node, DRIVER)

    async def scenario() -> Report:
        async with running(node, DraDriver(DRIVER, [null_plugin()], device_metadata=device_metadata)) as service:
            report = await run_dra_checks(_options(node, DRIVER))
            assert service.registered  # the checker told it so
            return report

    report = run(scenario())
    assert [r.check for r in report.results] == list(CATALOGUE)
    skipped = set() if device_metadata else METADATA_CHECKS
    assert by_status(report, Status.PASS) == {c.id for c in CATALOGUE} - skipped, report.to_json()
    assert by_status(report, Status.SKIP) == skipped
    assert result(report, "dra.prepare.devices").detail == "3 devices, as allocated"
    assert result(report, "dra.services.each").detail == "v1.DRAPlugin and v1beta1.DRAPlugin agree"
    if device_metadata:
        assert result(report, "dra.prepare.metadata").detail == "3 requests' files describe their devices"
        assert result(report, "dra.unprepare.metadata_removed").detail == "3 files removed"
    else:
        assert result(report, "dra.prepare.metadata").detail == f"no {DRIVER}/metadata CDI IDs: device metadata is off"
    assert node.cdi_specs() == {}  # the checker left nothing prepared


class LeftBehind(MetadataFiles):
    """Device metadata whose files outlive the claim."""

    def remove(self, namespace: str, name: str, uid: str, document: Document) -> str | None:
        return None


class OneDeviceShort(MetadataFiles):
    """Device metadata that leaves the last device of each request out of its file."""

    def contents(self, ref: ClaimRef, document: Document) -> dict[Path, bytes]:
        short = [{**r, "devices": r["devices"][:-1]} for r in document["requests"]]
        return super().contents(ref, {**document, "requests": short})


@pytest.mark.parametrize(
    ("broken", "check", "detail"),
    [
        (LeftBehind, "dra.unprepare.metadata_removed", "after unpreparing one by one, still there: /"),
        (OneDeviceShort, "dra.prepare.metadata", "default/a: null.example.com/metadata="),
    ],
)
def test_broken_device_metadata_fails_the_named_check(
    node: Node, broken: type[MetadataFiles], check: str, detail: str
) -> None:
    _claims(node, DRIVER)

    async def scenario() -> Report:
        service = file_service(node, DraDriver(DRIVER, [null_plugin()], device_metadata=True))
        service.metadata = broken(DRIVER, service.sockets.plugin_dir, node.cdi_dir)
        await service.start()
        try:
            return await run_dra_checks(_options(node, DRIVER))
        finally:
            await service.stop()

    report = run(scenario())
    assert by_status(report, Status.FAIL) >= {check}, report.to_json()
    assert result(report, check).detail.startswith(detail), result(report, check).detail
    if broken is OneDeviceShort:
        assert (
            "(metadata.resource.k8s.io/v1beta1): lists [], the answer [('node-a', 'null0')]"
            in result(report, check).detail
        )


def test_one_claim_is_counted_in_the_singular(node: Node) -> None:
    node.add_claim(claim_object("a", [("gpu", "null0")], driver=DRIVER))

    async def scenario() -> Report:
        async with running(node, DraDriver(DRIVER, [null_plugin()])):
            return await run_dra_checks(_options(node, DRIVER))

    report = run(scenario())
    assert result(report, "dra.prepare.answers").detail == "1 claim prepared one by one"
    assert result(report, "dra.prepare.devices").detail == "1 device, as allocated"
    details = [r.detail for r in report.results]
    assert not [d for d in details if re.search(r"\b1 (claims|devices|IDs)\b", d)], details


async def _check_tiny(node: Node, faults: Faults, **extra: Any) -> tuple[Report, TinyDriver]:
    tiny = TinyDriver(TINY, node.kubelet_dir, node.claims_dir, node.cdi_dir, faults)
    await tiny.start()
    try:
        return await run_dra_checks(_options(node, TINY, **extra)), tiny
    finally:
        await tiny.stop()


def test_the_go_helpers_failed_call_for_a_replaced_claim_passes(node: Node) -> None:
    """kubeletplugin v0.36 fails the whole NodePrepareResources call ("claim ... got replaced")."""
    _claims(node, TINY)
    report, tiny = run(_check_tiny(node, Faults(rpc_error_on_wrong_uid=True)))
    assert by_status(report, Status.FAIL) == set(), report.to_json()
    assert result(report, "dra.prepare.wrong_uid").detail == (
        "the call failed: rpc error: code = Unknown desc = get resource claims: claim a got replaced"
    )
    assert by_status(report, Status.SKIP) == {"dra.services.each", "dra.health.stream", "dra.health.devices"} | {
        *METADATA_CHECKS
    }
    assert [s.plugin_registered for s in tiny.statuses] == [True]


@pytest.mark.parametrize(
    ("faults", "check", "detail"),
    [
        (Faults(skip_claim="b"), "dra.prepare.answers", "NodePrepareResources left out default/b"),
        (Faults(ignore_uid=True), "dra.prepare.wrong_uid", "default/a with UID"),
        (Faults(unknown_unprepare_error=True), "dra.unprepare.unknown", "NodeUnprepareResources of default/"),
        (Faults(wrong_device=True), "dra.prepare.devices", "default/a: allocated gpu:node-a/null0 not prepared, "
                                                           "prepared gpu:node-a/null0-other not allocated"),
        (Faults(shared_cdi=True), "dra.unprepare.others_intact",
         f"after unpreparing default/a, {'example.com/tiny=shared'} of default/b is defined by no spec"),
    ],
)  # fmt: skip
def test_a_broken_driver_fails_the_named_check(node: Node, faults: Faults, check: str, detail: str) -> None:
    _claims(node, TINY)
    report, _ = run(_check_tiny(node, faults))
    assert check in by_status(report, Status.FAIL), report.to_json()
    assert detail in result(report, check).detail
    assert report.failed


def test_a_shared_cdi_id_is_shown(node: Node) -> None:
    _claims(node, TINY)
    report, _ = run(_check_tiny(node, Faults(shared_cdi=True)))
    assert result(report, "dra.prepare.cdi_ids").detail == "1 ID; shared by several claims: example.com/tiny=shared"


def test_without_cdi_dir_the_spec_checks_are_skipped(node: Node) -> None:
    _claims(node, TINY)

    async def scenario() -> Report:
        tiny = TinyDriver(TINY, node.kubelet_dir, node.claims_dir, node.cdi_dir, Faults(shared_cdi=True))
        await tiny.start()
        try:
            options = DraCheckOptions(node.kubelet_dir, TINY, node.claims_dir, None, timeout=10)
            return await run_dra_checks(options)
        finally:
            await tiny.stop()

    report = run(scenario())
    skipped = by_status(report, Status.SKIP)
    assert {"dra.prepare.cdi_specs", "dra.unprepare.others_intact", "dra.unprepare.cdi_removed"} <= skipped
    assert not report.failed


def test_a_driver_the_kubelet_would_refuse_fails_registration(node: Node) -> None:
    _claims(node, TINY)
    report, tiny = run(_check_tiny(node, Faults(services=["v1alpha4.Node"])))
    services = result(report, "dra.registration.services")
    assert services.status is Status.FAIL
    assert 'none of services supported by the plugin (["v1alpha4.Node"]) are supported by the kubelet' in (
        services.detail
    )
    assert [(s.plugin_registered, s.error) for s in tiny.statuses] == [(False, services.detail)]
    after = CATALOGUE[CATALOGUE.index(_check("dra.prepare.wrong_uid")) :]
    assert by_status(report, Status.SKIP) == {c.id for c in after}


def _check(check_id: str) -> Any:
    return next(c for c in CATALOGUE if c.id == check_id)


def test_no_registration_in_time_fails_the_first_check(node: Node) -> None:
    _claims(node, TINY)
    report = run(run_dra_checks(DraCheckOptions(node.kubelet_dir, TINY, node.claims_dir, timeout=0.5)))
    assert result(report, "dra.registration.socket").status is Status.FAIL
    assert by_status(report, Status.SKIP) == {c.id for c in CATALOGUE[1:]}


# --- the command line -------------------------------------------------------------------------


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "300"}


def test_check_dra_command_passes_on_serve_with_claims_dir(node: Node) -> None:
    node.add_claim(claim_object("a", ["null-0"]))
    node.add_claim(claim_object("b", [("gpu", "null-1"), ("gpu", "null-3")]))
    config = node.root / "dra-null-metadata.yaml"  # the example with device metadata: every check applies
    example = (ROOT / "examples" / "dra-null.yaml").read_text()
    config.write_text(
        example.replace("  driver: null.example.com\n", "  driver: null.example.com\n  device_metadata: true\n")
    )

    async def scenario() -> tuple[int, dict[str, Any]]:
        serve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubedevice", "serve", "--config", str(config), "--node", NODE,
            "--kubelet-dir", str(node.kubelet_dir), "--cdi-dir", str(node.cdi_dir),
            "--claims-dir", str(node.claims_dir), stderr=asyncio.subprocess.DEVNULL, env=_env(),
        )  # fmt: skip
        try:
            check = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kubedevice", "check", "--dra", "--kubelet-dir", str(node.kubelet_dir),
                "--driver", DRIVER, "--claims", str(node.claims_dir), "--cdi-dir", str(node.cdi_dir), "--json",
                "--timeout", "60", stdout=asyncio.subprocess.PIPE, env=_env(),
            )  # fmt: skip
            out, _ = await check.communicate()
            return check.returncode or 0, json.loads(out)
        finally:
            serve.send_signal(signal.SIGTERM)
            await serve.wait()

    code, report = run(scenario(), 120)
    assert code == 0, report
    assert report["passed"] and report["target"] == {"kubelet_dir": str(node.kubelet_dir), "driver": DRIVER}
    assert report["summary"] == {"pass": len(CATALOGUE), "warn": 0, "fail": 0, "skip": 0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--driver", "x.example.com"], "kubedevice: --dra needs --kubelet-dir, --driver and --claims"),
        (["--claims", "{claims}", "--driver", "x.example.com", "--kubelet-dir", "{root}"],
         "kubedevice: {claims}: no ResourceClaim is allocated to driver x.example.com"),
    ],
)  # fmt: skip
def test_check_dra_usage_errors(node: Node, args: list[str], message: str) -> None:
    node.add_claim(claim_object("a", ["null0"]))
    paths = {"claims": str(node.claims_dir), "root": str(node.root)}
    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "check", "--dra", *(a.format(**paths) for a in args)],
        check=False, capture_output=True, text=True, env=_env(), timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (2, message.format(**paths))


def test_check_without_dra_refuses_dra_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubedevice", "check", "--driver", "x.example.com"],
        check=False, capture_output=True, text=True, env=_env(), timeout=60,
    )  # fmt: skip
    message = "kubedevice: --kubelet-dir, --driver, --claims and --cdi-dir need --dra"
    assert (done.returncode, done.stderr.strip()) == (2, message)
