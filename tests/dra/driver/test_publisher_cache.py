"""The publisher's watch cache: which watch events are news (no API server needed: these
events are what the real watch delivers, applied by the real publisher; the API-facing behaviour
is proven against the real kube-apiserver in tests/e2e/test_dra_apiserver.py)."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient, KubeConfig

from kubedevice.dra.driver.publisher import SlicePublisher

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
