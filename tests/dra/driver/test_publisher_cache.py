"""The publisher's watch cache: which watch events are news (no API server needed: these
events are what the real watch delivers, applied by the real publisher; the API-facing behaviour
is proven against the real kube-apiserver in tests/e2e/test_dra_apiserver.py)."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError

from kubedevice.dra.driver.publisher import SlicePublisher, _gone

CONFIG = {
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


def publisher() -> SlicePublisher:
    client = AsyncClient(KubeConfig.from_dict(CONFIG))
    return SlicePublisher(client, "example.com", "n1", lambda: [])


def obj(name: str, version: int, devices: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}, "spec": {"devices": [{}] * devices}}


def test_news_wakes_the_sync_loop_and_our_own_echo_does_not() -> None:
    p = publisher()
    p._remember(obj("s0", 10))
    p._on_event("MODIFIED", obj("s0", 10))  # the echo of our own write
    assert not p._wake.is_set()
    p._on_event("MODIFIED", obj("s0", 11, devices=2))  # someone else's edit
    assert p._wake.is_set() and len(p._cache["s0"]["spec"]["devices"]) == 2


def test_a_late_event_never_overwrites_a_newer_cached_slice() -> None:
    p = publisher()
    p._remember(obj("s0", 20))
    p._on_event("MODIFIED", obj("s0", 15, devices=3))
    p._on_event("DELETED", obj("s0", 18))  # deleted before we created it again
    assert p._cache["s0"]["metadata"]["resourceVersion"] == "20" and not p._wake.is_set()


def test_events_up_to_the_last_list_are_already_in_the_cache() -> None:
    p = publisher()
    p._floor = 30
    p._on_event("ADDED", obj("ghost", 25))
    assert "ghost" not in p._cache and p._version == "25"


def test_an_external_deletion_drops_the_slice_and_the_node_uid() -> None:
    """The garbage collector deletes our slices when the Node is re-created: read its UID again."""
    p = publisher()
    p._owner_uid = "old"
    p._remember(obj("s0", 40))
    p._on_event("DELETED", obj("s0", 41))
    assert "s0" not in p._cache and p._owner_uid is None and p._wake.is_set()


def test_our_own_deletion_is_not_taken_for_someone_elses() -> None:
    p = publisher()
    p._owner_uid = "uid"
    p._cache.pop("s1", None)  # what _delete does before the request
    p._on_event("DELETED", obj("s1", 50))
    assert p._owner_uid == "uid" and not p._wake.is_set()


def test_a_resource_version_that_is_not_a_number_is_news() -> None:
    p = publisher()
    p._floor = 100
    p._remember(obj("s0", 200))
    p._on_event("MODIFIED", {"metadata": {"name": "s0", "resourceVersion": "opaque"}, "spec": {}})
    assert p._cache["s0"]["metadata"]["resourceVersion"] == "opaque" and p._wake.is_set()


def bookmark(version: int, end: bool = False) -> dict[str, Any]:
    """A BOOKMARK as the API server sends it; ``end``: the one that closes a watch-list's initial events."""
    annotations = {"k8s.io/initial-events-end": "true"} if end else None
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(version), "annotations": annotations}}}


def test_a_watch_list_snapshot_becomes_the_cache_at_its_closing_bookmark() -> None:
    p = publisher()
    p._cache = {"gone": obj("gone", 5)}  # from before a 410: no longer in the pool
    initial: dict[str, Any] | None = {}
    for event in ({"type": "ADDED", "object": obj("s0", 60)}, {"type": "ADDED", "object": obj("s1", 61)}):
        initial = p._apply(event, initial)
    assert p._cache == {"gone": obj("gone", 5)} and not p._listed.is_set()  # nothing applied until the end
    initial = p._apply(bookmark(70, end=True), initial)
    assert initial is None and p._listed.is_set() and p._wake.is_set()
    assert sorted(p._cache) == ["s0", "s1"] and (p._version, p._floor) == ("70", 70)


def test_our_write_newer_than_the_snapshot_stays() -> None:
    p = publisher()
    p._remember(obj("s0", 80))  # written while the snapshot streamed
    initial = p._apply({"type": "ADDED", "object": obj("s0", 75, devices=3)}, {})
    p._apply(bookmark(78, end=True), initial)
    assert p._cache["s0"]["metadata"]["resourceVersion"] == "80"


def test_after_the_snapshot_bookmarks_move_the_version_and_events_are_news() -> None:
    p = publisher()
    initial = p._apply(bookmark(90, end=True), {})
    p._wake.clear()
    p._apply(bookmark(95), initial)
    assert p._version == "95" and not p._wake.is_set()
    p._apply({"type": "ADDED", "object": obj("s2", 96)}, None)
    assert "s2" in p._cache and p._wake.is_set()


def test_an_error_event_is_the_servers_status() -> None:
    p = publisher()
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}
    with pytest.raises(ApiError) as raised:
        p._apply(gone, None)
    assert raised.value.status.code == 410 and _gone(raised.value)


def test_a_deletion_seen_before_our_creates_answer_keeps_the_slice_out() -> None:
    """The garbage collector deletes a slice with a stale owner UID within milliseconds: its ADDED
    and DELETED events can be applied before the create's answer is read. The answer must not
    bring the deleted slice back, or the sync loop would take it for published, for good."""
    p = publisher()
    p._owner_uid = "stale"
    p._on_event("ADDED", obj("s0", 60))
    p._on_event("DELETED", obj("s0", 61))
    p._remember(obj("s0", 60))  # the create's answer, read last
    assert "s0" not in p._cache and p._owner_uid is None and p._wake.is_set()
    p._remember(obj("s0", 62))  # created again, owned by the Node read now
    assert p._cache["s0"]["metadata"]["resourceVersion"] == "62"
    p._on_event("ADDED", obj("s0", 60))  # a late event about the first one
    assert p._cache["s0"]["metadata"]["resourceVersion"] == "62"
