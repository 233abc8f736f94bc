"""kubedevice upgraded on a node: the files an older version left there, read by this one.

``tests/data/upgrade/<commit>/`` holds what the code of that commit wrote on a node
(``generate.py`` there runs it): the DRA driver's checkpoint after claims a and c were prepared
and b prepared then unprepared, the specs of a and c, and two device-plugin CDI specs. 6d01a0b is
the last release whose checkpoint is a snapshot alone; 6b1423d writes snapshot + change records.
Today's driver starts on that node over its real sockets, with the claim files gone (as after a
restart, only the checkpoint knows the claims): a and c stay prepared with the same CDI IDs and
specs, unprepare removes exactly their specs, and no file we do not own is touched. The device
plugin's CDI specs and ``serve --features-file``'s file by the old code are recognised as ours the
same way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kubedevice.allocation.cdi import CdiSpecDir
from kubedevice.config import parse_config
from kubedevice.dra.driver import DraDriver
from kubedevice.dra.driver import checkpoint as ckpt
from kubedevice.node.features import FeaturesFile
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.testing.dradriver import DRIVER, Node, kubelet, null_plugin, running

DATA = Path(__file__).resolve().parents[2] / "data" / "upgrade"
COMMITS = ["6d01a0b", "6b1423d"]
BOOT = "boot-1"  # the boot ID file of the node the old code ran on (testing.dradriver.Node)
PREPARED = {"11111111-1111-4111-8111-111111111111": ("default", "claim-a"),
            "33333333-3333-4333-8333-333333333333": ("default", "claim-c")}  # fmt: skip
UNPREPARED = ("default", "claim-b", "22222222-2222-4222-8222-222222222222")
DEVICE_PLUGIN_SPECS = ["kubedevice-example.com-null-null-0.json", "kubedevice-example.com-null-null-1.json"]
FOREIGN = {
    # Another driver whose name extends ours: our prefix, its kind.
    f"kubedevice-dra-{DRIVER}-x-1.json": json.dumps(
        {"cdiVersion": "0.6.0", "kind": f"k8s.{DRIVER}-x/device", "devices": []}
    ),
    # Our prefix, not a spec at all.
    f"kubedevice-dra-{DRIVER}-junk.json": "not json",
    # Another vendor's spec, and a resource whose name extends the device plugin's.
    "vendor.json": json.dumps({"cdiVersion": "0.5.0", "kind": "vendor.com/gpu", "devices": []}),
    "kubedevice-example.com-null-null-x-0.json": json.dumps(
        {"cdiVersion": "0.6.0", "kind": "example.com/null-x", "devices": []}
    ),
}


def old_node(node: Node, commit: str) -> Path:
    """The node as ``commit`` left it, plus files of others; the checkpoint's path."""
    checkpoint = node.kubelet_dir / "plugins" / DRIVER / ckpt.FILE_NAME
    node.options()  # the kubelet's directories and the boot ID file
    checkpoint.parent.mkdir()
    shutil.copy(DATA / commit / "dra" / ckpt.FILE_NAME, checkpoint)
    checkpoint.chmod(0o600)  # as those releases wrote it (git keeps no mode)
    shutil.copytree(DATA / commit / "cdi", node.cdi_dir)
    for name, text in FOREIGN.items():
        (node.cdi_dir / name).write_text(text)
    node.claims_dir.mkdir()  # empty: the claims' objects are not to be fetched again
    assert node.boot_id.read_text().strip() == BOOT
    return checkpoint


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def refs(uids: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(namespace, name, uid) for uid, (namespace, name) in uids.items()]


@pytest.mark.parametrize("commit", COMMITS)
async def test_claims_prepared_by_an_older_version_stay_prepared_and_unprepare_cleanly(node: Node, commit: str) -> None:
    path = old_node(node, commit)
    before = snapshot(node.cdi_dir)
    old, stale = ckpt.load(path, BOOT)
    assert (sorted(old.claims), stale) == (sorted(PREPARED), {})
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        assert snapshot(node.cdi_dir) == before  # nothing rewritten, restored or removed at start
        assert sorted(service.state.prepared()) == sorted(PREPARED)
        again = await client.prepare(refs(PREPARED))  # answered from the checkpoint: no claim file left
        for uid, answer in again.claims.items():
            assert answer.error == "", answer
            ids = [i for d in old.claims[uid].claim.devices for i in d.cdi_device_ids]
            assert [i for d in answer.devices for i in d.cdi_device_ids] == ids
        forgotten = await client.prepare([UNPREPARED])  # b was unprepared by the old version
        assert "not found" in forgotten.claims[UNPREPARED[2]].error
        done = await client.unprepare(refs(PREPARED))
        assert all(c.error == "" for c in done.claims.values()), done
        left = snapshot(node.cdi_dir)
        assert left == {k: v for k, v in before.items() if not any(uid in k for uid in PREPARED)}
        assert sorted(left) == sorted(DEVICE_PLUGIN_SPECS + list(FOREIGN))
        assert ckpt.load(path, BOOT)[0].claims == {}  # the old file, carried on in today's format
    assert not path.parent.exists()  # nothing prepared: the stop leaves no plugin directory
    assert snapshot(node.cdi_dir) == {k: v for k, v in before.items() if k in left}


async def test_a_checkpoint_others_may_read_is_rewritten_0600_at_start(node: Node) -> None:
    """ab05d96 and 931fee7 wrote the checkpoint with the CDI writer, mode 0644: the first start
    of this version rewrites it 0600, claims unchanged."""
    path = old_node(node, COMMITS[0])
    path.chmod(0o644)
    claims = ckpt.load(path, BOOT)[0].claims
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service:
        assert path.stat().st_mode & 0o777 == 0o600
        assert ckpt.load(path, BOOT)[0].claims == claims
        assert sorted(service.state.prepared()) == sorted(PREPARED)


@pytest.mark.parametrize("commit", COMMITS)
def test_device_plugin_specs_of_an_older_version_are_ours_and_only_ours(node: Node, commit: str) -> None:
    """The device plugin's specs by an older version: a sync with one device left keeps that
    spec byte for byte and removes the other; an uninstall removes ours and no one else's."""
    old_node(node, commit)
    before = snapshot(node.cdi_dir)
    config = "resources:\n  - name: example.com/null\n    static: {count: 1, paths: [/dev/null]}\n    cdi: {}\n"
    (resource,) = parse_config(config).resources
    ConfiguredPlugin(resource, Path("/"), node.cdi_dir)
    after_sync = snapshot(node.cdi_dir)
    assert after_sync == {k: v for k, v in before.items() if k != DEVICE_PLUGIN_SPECS[1]}
    removed = CdiSpecDir(node.cdi_dir, "example.com/null").remove_owned()
    assert [p.name for p in removed] == DEVICE_PLUGIN_SPECS[:1]
    assert snapshot(node.cdi_dir) == {k: v for k, v in after_sync.items() if k != DEVICE_PLUGIN_SPECS[0]}


def test_the_features_file_of_an_older_version_is_ours(tmp_path: Path) -> None:
    """``serve --features-file`` by 6b1423d (the first releases had none): the same devices leave
    it untouched, an uninstall removes it, and another file beside it, without our header, stays."""
    directory = tmp_path / "features.d"
    shutil.copytree(DATA / "6b1423d" / "features.d", directory)
    (directory / "other").write_text("vendor.example.com/gpu=true\n")
    before = snapshot(directory)
    features = FeaturesFile(directory / "kubedevice")
    features.follow([null_plugin()])
    assert snapshot(directory) == before
    assert features.remove()
    assert snapshot(directory) == {"other": before["other"]}
