"""``kubedevice.testing.scenarios``' device nodes made on the machine for an e2e test: what is made,
and that only what was made goes again (the e2e tests make them under the machine's ``/dev``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubedevice.testing.scenarios import node_on_this_machine

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")


def test_the_node_and_the_directories_made_for_it_go_after(tmp_path: Path) -> None:
    node = tmp_path / "dev" / "dri" / "card60"
    with node_on_this_machine(node, 0o660, 3100) as made:
        info = made.stat()
        assert stat.S_ISCHR(info.st_mode) and os.major(info.st_rdev) == 1 and os.minor(info.st_rdev) == 3
        assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o660, 0, 3100)
    assert not (tmp_path / "dev").exists()


def test_a_directory_that_holds_more_stays(tmp_path: Path) -> None:
    dri = tmp_path / "dri"
    with node_on_this_machine(dri / "card60"):
        (dri / "card61").touch()  # made meanwhile, not by us
    assert sorted(p.name for p in dri.iterdir()) == ["card61"]


def test_an_existing_path_is_not_ours(tmp_path: Path) -> None:
    taken = tmp_path / "kfd"
    taken.write_text("theirs")
    with pytest.raises(AssertionError, match="exists on this machine: not ours to use"), node_on_this_machine(taken):
        pass
    assert taken.read_text() == "theirs"


def test_a_node_replaced_meanwhile_is_left(tmp_path: Path) -> None:
    node = tmp_path / "kfd"
    with node_on_this_machine(node):
        node.rename(tmp_path / "moved")  # still alive: the new file cannot take its inode number
        node.write_text("someone else's")
    assert node.read_text() == "someone else's"
