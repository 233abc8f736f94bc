"""The checkpoint file: snapshot plus appended change records, read back after every kind of cut.

Real files in a temp dir; the short write is a real one (``RLIMIT_FSIZE`` in a child process).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import resource
import signal
from pathlib import Path

import pytest

from kubedevice.dra.driver import checkpoint as ckpt
from kubedevice.dra.nodeclaims import PreparedClaim, PreparedDevice

BOOT = "boot-1"


def entry(i: int) -> ckpt.Entry:
    device = PreparedDevice(("req",), "node", f"d{i}", (f"k8s.kubedevice/claim=c{i}-d{i}",), None)
    spec = {"cdiVersion": "0.6.0", "kind": "k8s.kubedevice/claim", "devices": [{"name": f"c{i}-d{i}"}]}
    return ckpt.Entry(PreparedClaim("default", f"c{i}", [device]), spec)


def claims(path: Path) -> dict[str, ckpt.Entry]:
    checkpoint, stale = ckpt.load(path, BOOT)
    assert stale == {}
    return checkpoint.claims


def history(path: Path) -> list[dict[str, ckpt.Entry]]:
    """Saves of a prepare, another, an unprepare and a third prepare; the claims after each."""
    checkpoint, _ = ckpt.load(path, BOOT)
    states = []
    for change in ("+1", "+2", "-1", "+3"):
        uid = f"uid-{change[1]}"
        if change[0] == "+":
            checkpoint.claims[uid] = entry(int(change[1]))
        else:
            del checkpoint.claims[uid]
        ckpt.save(path, checkpoint)
        states.append(dict(checkpoint.claims))
    return states


def test_changes_are_appended_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    states = history(path)
    assert claims(path) == states[-1]
    text = path.read_text()
    snapshot, end = json.JSONDecoder().raw_decode(text)
    assert snapshot == {"version": 1, "bootID": BOOT, "claims": {"uid-1": ckpt._entry_document(entry(1))}}
    records = [json.loads(line) for line in text[end:].split("\n") if line]
    assert records == [
        {"put": "uid-2", "entry": ckpt._entry_document(entry(2))},
        {"delete": "uid-1"},
        {"put": "uid-3", "entry": ckpt._entry_document(entry(3))},
    ]


def test_a_record_cut_anywhere_reads_as_before_it_and_the_next_save_rewrites(tmp_path: Path) -> None:
    """A process killed inside its append: every cut point gives the state before that call."""
    path = tmp_path / "checkpoint.json"
    states = history(path)
    whole = path.read_bytes()
    last = whole.rstrip(b"\n").rfind(b"\n") + 1  # the start of the last record
    for cut in range(last, len(whole) + 1):
        path.write_bytes(whole[:cut])
        checkpoint, _ = ckpt.load(path, BOOT)
        assert checkpoint.claims == (states[-1] if cut == len(whole) else states[-2]), cut
        if last < cut < len(whole):
            assert checkpoint.written is None  # the cut tail must not precede the next record
            checkpoint.claims["uid-9"] = entry(9)
            ckpt.save(path, checkpoint)
            assert json.loads(path.read_text())["claims"].keys() == {"uid-2", "uid-9"}


@pytest.mark.parametrize("content", [b"", b"\0" * 4096, b'{"version": 1, "bootID": "boot-1", "claims": {}}\n\0\0\0'])
def test_a_file_the_machine_crash_never_wrote_is_no_claims(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_bytes(content)
    checkpoint, stale = ckpt.load(path, BOOT)
    assert (checkpoint.claims, stale, checkpoint.written) == ({}, {}, None)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"version": 1, "bootID": "boot-1", "claims": {}}\n{"put": "u"}\n', "not a change record"),
        ('{"version": 1, "bootID": "boot-1", "claims": {}}\nnot json\n{"delete": "u"}\n', "corrupt checkpoint"),
        ("garbage", "corrupt checkpoint"),
    ],
)
def test_any_other_damage_stops_the_driver(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(content)
    with pytest.raises(ckpt.CheckpointError, match=message):
        ckpt.load(path, BOOT)


def test_records_of_another_boot_are_dropped_as_stale(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    states = history(path)
    checkpoint, stale = ckpt.load(path, "boot-2")
    assert (checkpoint.claims, stale) == ({}, states[-1])


def test_the_file_a_release_before_records_wrote_is_read(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    document = {"version": 1, "bootID": BOOT, "claims": {"uid-1": ckpt._entry_document(entry(1))}}
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    assert claims(path) == {"uid-1": entry(1)}


def test_records_are_folded_into_a_new_snapshot_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ckpt, "COMPACT_AFTER", 3000)
    path = tmp_path / "checkpoint.json"
    checkpoint, _ = ckpt.load(path, BOOT)
    sizes = []
    for i in range(60):
        checkpoint.claims[f"uid-{i % 3}"] = entry(i)
        ckpt.save(path, checkpoint)
        sizes.append(path.stat().st_size)
    snapshot = len(json.dumps(ckpt._document(checkpoint), indent=2, sort_keys=True)) + 1
    assert max(sizes) <= snapshot + max(3000, 4 * snapshot) + 1000  # the limit, plus one call's records
    assert any(b < a for a, b in itertools.pairwise(sizes))  # rewritten at least once
    assert claims(path) == checkpoint.claims


def _save_past_the_file_size_limit(path: Path, limit: int) -> str:
    """In a child: the next append is cut short by RLIMIT_FSIZE (a real short write)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not death
    checkpoint, _ = ckpt.load(path, BOOT)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    checkpoint.claims["uid-big"] = entry(7)
    try:
        ckpt.save(path, checkpoint)
    except OSError as err:
        return f"OSError {err}"
    return "saved"


def test_a_short_append_is_cut_back_and_the_file_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    states = history(path)
    size = path.stat().st_size
    with multiprocessing.get_context("fork").Pool(1) as pool:
        outcome = pool.apply(_save_past_the_file_size_limit, (path, size + 40))
    assert outcome.startswith("OSError")
    assert path.stat().st_size == size
    assert claims(path) == states[-1]
