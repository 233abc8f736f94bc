"""The driver's record of prepared claims: crash-safe, versioned, tied to one boot.

The kubelet does not prepare a running pod's claims again after the driver restarts (it
checkpoints a claim as prepared and skips it from then on: ``pkg/kubelet/cm/dra/manager.go``,
``prepareResources``), so the driver must remember what it prepared (to unprepare it later
and to keep its CDI specs) across its own restarts. After a reboot nothing prepared survives
(containers are gone, CDI directories are often tmpfs), so entries written under another boot
ID are dropped rather than trusted.

**The file** is a snapshot (one JSON document: version, boot ID, claims) followed by change
records, one JSON line each (``{"put": uid, "entry": …}`` or ``{"delete": uid}``), appended by
one ``write`` per call. Reading applies the records to the snapshot in order. A line not yet
ended by its newline is a write cut short by the process's death, whose RPC was never
answered: it is ignored, and the next save rewrites the file. When the records outgrow 4× the
snapshot (and 1 MiB), a save rewrites the whole file: a temp file renamed over it.

**The guarantee, and why there is no fsync.** Everything a save writes is in the file before
the RPC is answered, so a crash of the driver process (``kill -9``, OOM, a panic) at any point
keeps every claim whose prepare was answered and forgets every claim whose unprepare was
(the write sits in the kernel's page cache, which outlives the process;
``tests/dra/driver/test_checkpoint_crash.py`` kills a real serving process right after each
answer). What an fsync would add is durability across a crash of the *machine*, and that is
worth nothing here: a machine crash is a reboot, and a reboot drops every entry anyway. So the
only thing a machine crash may do to us is leave a file its data never reached (empty, or with
blocks that read as zero bytes); such a file cannot hold a record of this boot (within one
boot the page cache holds what was written), is read as no claims, and is rewritten. Any other
unreadable file still stops the driver (it is not ours to overwrite blindly).

**Formats, and what an upgrade reads.** ``VERSION`` names the shape of the snapshot and its
entries; every version of kubedevice so far wrote version 1, in three forms, all read here
(``tests/dra/driver/test_checkpoint_upgrade.py`` reads files the old code wrote): a snapshot
alone, mode 0644 (ab05d96, 931fee7, written by the CDI writer); a snapshot alone, 0600
(8842604 to 6d01a0b); a snapshot and change records, 0600 (e294383 on). A snapshot alone is
this format with no records; a file others may read is rewritten 0600 by the driver's first
save, at its start. A change to the document's shape must bump ``VERSION`` and keep a reader of
the older one here; a version this code does not know (a newer release's file, after a
rollback) stops the driver with a line naming it instead of being overwritten. The other way
round, a release before e294383 reads a file with records as corrupt and stops. An entry's
``metadata`` key (device metadata, :mod:`.metadata`) is written only for claims that have it;
earlier releases ignore it (they then leave those claims' metadata files in place), so it
needs no new version.

The Go peers: the ``kubeletplugin`` helper keeps no record at all; the dra-example-driver keeps
its record through the kubelet's ``checkpointmanager`` (``pkg/kubelet/util/store/filestore.go``,
``writeFile``: temp file, fsync of the file, rename, no fsync of the directory, so its rename is
not durable across a machine crash either). A rename per call (with ext4's flush of the
replaced file's data) or an fsync cost 1–6 ms of every prepare and unprepare on the benchmark
machine (``benchmarks/dra_prepare.py``); an appended line costs microseconds.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Any

from ...allocation.cdi import Spec
from ...errors import KubedeviceError
from ..nodeclaims import PreparedClaim, PreparedDevice

VERSION = 1
FILE_NAME = "checkpoint.json"
COMPACT_AFTER = 1024 * 1024
"""Bytes of change records after which a save rewrites the whole file (or 4× the snapshot, if more).

A rewrite is a rename, milliseconds on a busy disk; reading back 1 MiB of records is ~0.1 s, once per start."""
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
log = logging.getLogger("kubedevice.dra.checkpoint")
_RECORD = json.JSONEncoder(separators=(",", ":"))
_string = encode_basestring_ascii
"""A string as JSON (what ``_RECORD.encode`` does for one, without its Python-level checks)."""


class CheckpointError(KubedeviceError):
    """A checkpoint that cannot be read or trusted; the driver must not overwrite it blindly."""


@dataclass(slots=True)
class Entry:
    """One prepared claim and the CDI spec written for it (to restore it if it goes missing)."""

    claim: PreparedClaim
    cdi_spec: Spec | None = None
    metadata: dict[str, Any] | None = None
    """The claim's device metadata (:mod:`.metadata`), to restore its files; None: none written.
    Kept in the entry only when set, so a file without it reads as before and a release that
    does not know it reads the entry (and leaves the metadata files alone)."""


@dataclass(slots=True)
class Written:
    """What the file holds, as this process last read or wrote it: the base of the next append."""

    claims: dict[str, Entry]
    snapshot_bytes: int
    appended_bytes: int = 0


@dataclass(slots=True)
class Checkpoint:
    boot_id: str
    claims: dict[str, Entry] = field(default_factory=dict)
    written: Written | None = None
    """None: the next save rewrites the whole file (nothing read yet, or the file needs it)."""


def read_boot_id(path: Path = BOOT_ID_PATH) -> str:
    try:
        return path.read_text().strip()
    except OSError as err:
        raise CheckpointError(f"cannot read the boot ID from {path}: {err.strerror or err}") from None


def load(path: Path, boot_id: str) -> tuple[Checkpoint, dict[str, Entry]]:
    """The checkpoint for this boot, plus the entries dropped because they belong to another boot."""
    try:
        raw, mode = _read(path)
    except FileNotFoundError:
        return Checkpoint(boot_id), {}
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read: {err.strerror or err}") from None
    if _lost_in_a_machine_crash(raw):
        log.warning("%s was cut short by a crash of the machine (a reboot): no claims are prepared", path)
        return Checkpoint(boot_id), {}
    try:
        stored_boot, claims, written = _parse(raw)
    except CheckpointError as err:
        raise CheckpointError(f"{path}: {err}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{path}: corrupt checkpoint ({type(err).__name__}: {err}); move it away") from None
    if stored_boot != boot_id:
        if claims:
            log.warning("dropping %d prepared claims from before the reboot", len(claims))
        return Checkpoint(boot_id), claims
    if mode & 0o077:
        log.info("%s is readable by others (written by a release before 8842604): the next save rewrites it 0600", path)
        written = None
    return Checkpoint(boot_id, claims, written), {}


def _read(path: Path) -> tuple[bytes, int]:
    """The file's bytes and permission bits, from one open file (the mode is that of what was read)."""
    with path.open("rb") as handle:
        return handle.read(), os.fstat(handle.fileno()).st_mode & 0o777


def _parse(raw: bytes) -> tuple[str, dict[str, Entry], Written | None]:
    """(boot ID, claims, what was read); ``written`` is None when a cut-short tail must be rewritten."""
    text = raw.decode()
    data, end = json.JSONDecoder().raw_decode(text)
    version = data["version"]
    if version != VERSION:
        raise CheckpointError(f"version {version!r} is not {VERSION}; refusing to overwrite it")
    claims = {uid: _entry(entry) for uid, entry in data["claims"].items()}
    *records, tail = text[end:].split("\n")
    for line in records:
        if line.strip():
            _apply(claims, json.loads(line))
    snapshot_bytes = len(text[:end].encode())
    written: Written | None = Written(dict(claims), snapshot_bytes, len(raw) - snapshot_bytes)
    if tail.strip():
        log.warning("ignoring a change to the checkpoint cut short by a crash (its call was never answered)")
        written = None
    return str(data["bootID"]), claims, written


def _apply(claims: dict[str, Entry], record: dict[str, Any]) -> None:
    if set(record) == {"put", "entry"}:
        claims[str(record["put"])] = _entry(record["entry"])
    elif set(record) == {"delete"}:
        claims.pop(str(record["delete"]), None)
    else:
        raise ValueError(f"not a change record: {sorted(record)}")


def _lost_in_a_machine_crash(raw: bytes) -> bool:
    """Empty, or with zero bytes in it: what a file looks like whose data never reached the disk.
    We never write either (``json.dumps`` escapes control characters), and within one boot the
    page cache always holds what was written, so such a file dates from before a reboot."""
    return not raw or b"\0" in raw


def save(path: Path, checkpoint: Checkpoint) -> None:
    """Record ``checkpoint`` in the file: its changes appended, or the whole file rewritten.

    On an error (OSError) the file still reads as before the call and the next save rewrites it.
    """
    written = checkpoint.written
    if written is None or written.appended_bytes > max(COMPACT_AFTER, 4 * written.snapshot_bytes):
        _rewrite(path, checkpoint)
        return
    records = _changes(written.claims, checkpoint.claims)
    if not records:
        return
    checkpoint.written = None  # until the append is known to be whole
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:  # removed under us: the whole record, then
        _rewrite(path, checkpoint)
        return
    try:
        _append(fd, records)
    finally:
        os.close(fd)
    written.claims = dict(checkpoint.claims)
    written.appended_bytes += len(records)
    checkpoint.written = written


def _changes(before: dict[str, Entry], after: dict[str, Entry]) -> bytes:
    """The change records that turn ``before`` into ``after``, as lines (built by hand around
    ``json``'s C encoder: 32 claims per call made ``json.dumps`` per record a third of a save).

    An entry counts as changed when it is another object, not an unequal one: entries are
    replaced, never changed in place, and comparing every prepared claim's devices by value
    on every call cost a save time in proportion to the claims on the node. An equal entry put
    anew is only a redundant record."""
    lines = [f'{{"delete":{_string(uid)}}}\n' for uid in sorted(before.keys() - after.keys())]
    lines += [
        f'{{"put":{_string(uid)},"entry":{_RECORD.encode(_entry_document(e))}}}\n'
        for uid, e in after.items()
        if before.get(uid) is not e
    ]
    return "".join(lines).encode()


def _append(fd: int, data: bytes) -> None:
    """One write; a short one is cut back off (a half record must never precede the next one).

    ``write`` either fails having written nothing or returns how much it wrote, so the size to
    cut back to is read only after a short write (an ``fstat`` before every write was one of the
    four system calls of every append): with ``O_APPEND`` and one writer (this process, or one of two
    under the state's shared lock) the short write's bytes are the file's last ``done``."""
    done = os.write(fd, data)
    if done == len(data):
        return
    with contextlib.suppress(OSError):
        os.ftruncate(fd, os.fstat(fd).st_size - done)
    raise OSError(errno.ENOSPC, f"wrote {done} of {len(data)} bytes")


def _rewrite(path: Path, checkpoint: Checkpoint) -> None:
    """The whole file anew: a temp file renamed over the old one (a crash leaves old or new)."""
    path.parent.mkdir(exist_ok=True)  # our directory, inside the kubelet's plugins/: never create that
    data = (json.dumps(_document(checkpoint), indent=2, sort_keys=True) + "\n").encode()
    # One fixed temp name: a process killed mid-write leaves no stray files behind; writers are
    # one process, or several under the state's shared flock. O_NOFOLLOW: a planted link is refused.
    temp = path.with_name(f".{path.name}.tmp")
    checkpoint.written = None
    # 0600: which claims hold which devices is the node's business only.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)  # an older temp file may have had another mode
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    checkpoint.written = Written(dict(checkpoint.claims), len(data))


def _document(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "version": VERSION,
        "bootID": checkpoint.boot_id,
        "claims": {uid: _entry_document(e) for uid, e in sorted(checkpoint.claims.items())},
    }


def _entry_document(entry: Entry) -> dict[str, Any]:
    return {
        "namespace": entry.claim.namespace,
        "name": entry.claim.name,
        "devices": [
            {
                "requestNames": list(d.request_names),
                "pool": d.pool,
                "device": d.device,
                "cdiDeviceIDs": list(d.cdi_device_ids),
                **({"shareID": d.share_id} if d.share_id is not None else {}),
            }
            for d in entry.claim.devices
        ],
        "cdiSpec": entry.cdi_spec,
        **({"metadata": entry.metadata} if entry.metadata is not None else {}),
    }


def _entry(raw: dict[str, Any]) -> Entry:
    devices = [
        PreparedDevice(tuple(d["requestNames"]), d["pool"], d["device"], tuple(d["cdiDeviceIDs"]), d.get("shareID"))
        for d in raw["devices"]
    ]
    return Entry(PreparedClaim(raw["namespace"], raw["name"], devices), raw.get("cdiSpec"), raw.get("metadata"))
