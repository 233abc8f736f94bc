"""The DRA driver's per-claim CDI spec files on the paths that skip work for speed: unprepare
removes each claim's file (one failure is that claim's error only, and it stays prepared), and a
prepare re-creates a CDI directory removed under the running driver. Real sockets, real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kubedevice.dra.driver import DraDriver
from kubedevice.testing.dradriver import DRIVER, Node, claim_object, kubelet, null_plugin, running


def spec_file(node: Node, uid: str) -> Path:
    return node.cdi_dir / f"kubedevice-dra-{DRIVER}-{uid}.json"


async def test_a_spec_that_cannot_be_removed_fails_only_its_claim_which_stays_prepared(node: Node) -> None:
    stuck, freed = node.add_claim(claim_object("stuck", ["null1"])), node.add_claim(claim_object("freed", ["null2"]))
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        prepared = await client.prepare([stuck, freed])
        assert [c.error for c in prepared.claims.values()] == ["", ""]
        blocker = spec_file(node, stuck[2])
        blocker.unlink()
        blocker.mkdir()  # unlink() of a directory fails: EISDIR
        (blocker / "keep").touch()

        answer = await client.unprepare([stuck, freed])

        assert answer.claims[stuck[2]].error.startswith(f"cannot remove CDI spec of claim {stuck[2]}: ")
        assert answer.claims[freed[2]].error == ""
        assert not spec_file(node, freed[2]).exists()
        assert set(service.state.prepared()) == {stuck[2]}
        blocker.joinpath("keep").unlink()
        blocker.rmdir()
        assert (await client.unprepare([stuck])).claims[stuck[2]].error == ""
        assert service.state.prepared() == {}


async def test_prepare_recreates_a_cdi_directory_removed_under_the_driver(node: Node) -> None:
    ref = node.add_claim(claim_object("late", ["null1"]))
    async with running(node, DraDriver(DRIVER, [null_plugin()])) as service, kubelet(service) as client:
        shutil.rmtree(node.cdi_dir, ignore_errors=True)
        answer = (await client.prepare([ref])).claims[ref[2]]
        assert answer.error == ""
        spec = json.loads(spec_file(node, ref[2]).read_text())
        assert [d["name"] for d in spec["devices"]] == [f"{ref[2]}-null1"]
        assert oct(spec_file(node, ref[2]).stat().st_mode & 0o777) == "0o644"
        assert (await client.unprepare([ref])).claims[ref[2]].error == ""
