"""The file claim source reads each request's files afresh: an edit of the same size, within the
same timestamp tick, is seen by the next request (its parse is kept only for identical bytes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kubedevice.dra.driver.claims import FileClaims
from kubedevice.dra.driver.state import ClaimError


def claim(name: str, uid: str) -> str:
    return json.dumps({"kind": "ResourceClaim", "metadata": {"namespace": "ns", "name": name, "uid": uid}})


def test_an_edit_of_the_same_size_is_seen_at_the_next_request(tmp_path: Path) -> None:
    source = FileClaims(tmp_path)
    path = tmp_path / "c.json"
    path.write_text(claim("a", "uid-1"))
    assert asyncio.run(source.get("ns", "a")).uid == "uid-1"
    path.write_text(claim("a", "uid-2"))  # same length, likely the same mtime tick
    assert asyncio.run(source.get("ns", "a")).uid == "uid-2"
    path.write_text(claim("b", "uid-2"))
    with pytest.raises(ClaimError, match="cannot get claim ns/a: not found"):
        asyncio.run(source.get("ns", "a"))


def test_a_removed_file_is_forgotten_and_a_bad_one_named(tmp_path: Path) -> None:
    source = FileClaims(tmp_path)
    (tmp_path / "c.json").write_text(claim("a", "uid-1"))
    asyncio.run(source.get("ns", "a"))
    (tmp_path / "c.json").unlink()
    with pytest.raises(ClaimError, match="not found"):
        asyncio.run(source.get("ns", "a"))
    (tmp_path / "bad.yaml").write_bytes(b"\xff\xfe not text")
    with pytest.raises(ClaimError, match=r"bad\.yaml: cannot read claims"):
        asyncio.run(source.get("ns", "a"))
