"""``kubedevice dra explain|allocate|available|validate`` without FILEs: the cluster as input.

:mod:`kubedevice.dra.cli` hands over here when no FILE is given; each command reads what it
needs in one snapshot (:func:`.cluster.snapshot`: a LIST per kind) and judges it with the same
code as files: the allocator, ``available``, validation. The release whose defaults apply is
the API server's (``/version``) unless ``--kubernetes-version`` says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import typer
from pydantic import ValidationError

from ...errors import UsageError, fail
from ..available import InputError, PoolState, as_json_report, available
from ..available import render as render_pools
from ..explain import explain
from ..models import DeviceClass, Pod, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from ..structured import Node
from ..validation import validate
from .cluster import (
    NODES,
    Access,
    ApiAccessError,
    ApiServer,
    Snapshot,
    list_items,
    resource_path,
    snapshot,
    stamped,
)
from .nodefilters import NodeInfo, PodPlacement
from .options import pod_name
from .podexplain import Workload, as_json, claim_label, explain_pod, render

GatesFor = Callable[[str], dict[str, bool]]
"""The effective feature gates for a release (``--feature-gates`` on its defaults)."""


def _run(main: Callable[[], Any]) -> Any:
    """A command's coroutine; Ctrl-C ends it quietly (exit 130, as a shell reports SIGINT)."""
    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None


# --- explain pod/NAME ---------------------------------------------------------------------------


EXPLAIN_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", NODES)


@dataclass(frozen=True)
class Loaded:
    """A pod and everything its scheduling reads, with what reading it cost."""

    pod: dict[str, Any]
    snapshot: Snapshot
    requests: int
    seconds: float


async def load_for_pod(access: Access, name: str, release: str | None) -> Loaded:
    """The pod (one GET) and a snapshot of what its scheduling reads, requested at once."""
    api = ApiServer(access.config())
    try:
        return await load_pod_from(api, access.namespace or api.namespace, name, release)
    finally:
        await api.close()


async def load_pod_from(api: ApiServer, namespace: str, name: str, release: str | None) -> Loaded:
    """:func:`load_for_pod` from an open ``api`` (``benchmarks/explain_offline.py`` gives one
    that answers from memory)."""
    began = time.perf_counter()
    pod, snap = await asyncio.gather(
        api.get(f"/api/v1/namespaces/{namespace}/pods/{name}", absent_ok=True),
        snapshot(api, EXPLAIN_KINDS, release=release, namespaces={"ResourceClaimTemplate": namespace}),
    )
    if pod is None:
        raise ApiAccessError(f'pod "{namespace}/{name}" not found (API server {api.server})')
    return Loaded(pod, snap, api.requests, time.perf_counter() - began)


def workload(loaded: Loaded, gates: Mapping[str, bool]) -> Workload:
    """The models the explanation reads, from what was listed."""
    snap = loaded.snapshot
    try:
        pod = Pod.model_validate(loaded.pod)
    except ValidationError as error:
        raise ApiAccessError(f"the API server's pod cannot be read: {error.errors()[0]['msg']}") from None
    return Workload(
        pod=pod,
        placement=PodPlacement.of(loaded.pod.get("spec") or {}),
        classes=snap.of(DeviceClass),
        slices=snap.of(ResourceSlice),
        claims=snap.of(ResourceClaim),
        templates=snap.of(ResourceClaimTemplate),
        nodes=[NodeInfo.of(n) for n in snap.raw[NODES]],
        gates=gates,
        release=snap.release,
    )


def scheduler_says(pod: Mapping[str, Any]) -> str:
    """The pod's ``PodScheduled`` condition as the scheduler left it: its one-line summary."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    found = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "PodScheduled"), None)
    if found is None:
        return "not yet tried"
    if found.get("status") == "True":
        return f"scheduled on {(pod.get('spec') or {}).get('nodeName', '?')}"
    return str(found.get("message") or found.get("reason") or "unschedulable")


def explain_pod_command(
    target: str, access: Access, release: str | None, gates_for: GatesFor, *, as_json_output: bool
) -> None:
    """``dra explain pod/NAME``: exit 0 when the pod fits on some node, 1 when on none."""
    name = pod_name(target)  # checked by the command line already; here for library callers
    loaded = _run(lambda: load_for_pod(access, name, release))
    snap = loaded.snapshot
    explanation = explain_pod(workload(loaded, gates_for(snap.release)))
    judged = f"Kubernetes {snap.git_version or snap.release}"
    if as_json_output:
        extra = {
            "kubernetesVersion": snap.git_version or snap.release,
            "apiVersion": snap.api_version,
            "scheduler": scheduler_says(loaded.pod),
        }
        typer.echo(json.dumps(as_json(explanation, extra), indent=2))
    else:
        counts = f"{len(snap.raw[NODES])} nodes, {len(snap.raw['ResourceSlice'])} ResourceSlices"
        counts += f", {len(snap.raw['ResourceClaim'])} ResourceClaims"
        header = [
            f"Pod {explanation.pod}: the scheduler says: {scheduler_says(loaded.pod)}",
            f"Judged as {judged} would ({snap.api_version}; {counts})",
            f"Claims: {', '.join(explanation.claims) or 'none'}",
        ]
        typer.echo(render(explanation, header), nl=False)
    if not explanation.fitting:
        raise typer.Exit(1)


# --- explain (classes) ------------------------------------------------------------------------


async def load(access: Access, kinds: Sequence[str], release: str | None) -> tuple[Snapshot, str]:
    """A snapshot of ``kinds`` and the namespace meant: ``-n``, else the context's."""
    api = ApiServer(access.config())
    try:
        return await snapshot(api, kinds, release=release), access.namespace or api.namespace
    finally:
        await api.close()


def snapshot_of(access: Access, kinds: Sequence[str], release: str | None) -> tuple[Snapshot, str]:
    return _run(lambda: load(access, kinds, release))  # type: ignore[no-any-return]


# --- allocate -----------------------------------------------------------------------------------


def allocate_command(
    access: Access,
    *,
    node: str,
    labels: Mapping[str, str],
    fmt: Literal["yaml", "json"],
    release: str | None,
    gates_for: GatesFor,
) -> None:
    """The namespace's pending claims allocated together on ``node``; every allocated claim is in use."""
    from ..cli import print_allocation  # noqa: PLC0415 - the file mode's printing, one copy

    snap, namespace = snapshot_of(access, ("DeviceClass", "ResourceSlice", "ResourceClaim", NODES), release)
    claims = snap.of(ResourceClaim)
    pending = [c for c in claims if c.metadata.namespace == namespace and not (c.status or {}).get("allocation")]
    if not pending:
        fail(f"no pending ResourceClaim in namespace {namespace}", 1)
    found = next((NodeInfo.of(n) for n in snap.raw[NODES] if (n.get("metadata") or {}).get("name") == node), None)
    target = Node(node, {**(found.labels if found else {}), **labels})
    allocated = [c for c in claims if (c.status or {}).get("allocation")]
    world = (snap.of(DeviceClass), snap.of(ResourceSlice), allocated)
    print_allocation(pending, world, target, (snap.release, gates_for(snap.release)), fmt)


# --- validate -----------------------------------------------------------------------------------


VALIDATED = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")


def validate_command(access: Access, release: str | None, gates_for: GatesFor) -> None:
    """Every stored DRA object judged as the release's API server would; exit 1 when any is invalid."""
    snap, _ = snapshot_of(access, VALIDATED, release)
    gates = gates_for(snap.release)
    checked = problems = 0
    for kind in VALIDATED:
        for obj in snap.objects[kind]:
            checked += 1
            errors = validate(obj, gates, snap.release)
            problems += bool(errors)
            name = obj.metadata.name if not obj.metadata.namespace else f"{obj.metadata.namespace}/{obj.metadata.name}"
            for error in errors:
                typer.echo(f'{kind} "{name}" is invalid: {error}')
    noun = "object" if checked == 1 else "objects"
    where = f"stored in {snap.api_version}, judged as Kubernetes {snap.git_version or snap.release}"
    if problems:
        typer.echo(f"{problems} of {checked} {noun} invalid ({where})")
        raise typer.Exit(1)
    typer.echo(f"{checked} {noun} valid ({where})")


# --- available ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """``available``'s filters: a node (its labels from the cluster and ``--label``), a driver, a class."""

    node: str | None = None
    labels: Mapping[str, str] | None = None
    driver: str | None = None
    device_class: str | None = None

    def kinds(self) -> tuple[str, ...]:
        extra = (("DeviceClass",) if self.device_class else ()) + ((NODES,) if self.node else ())
        return ("ResourceSlice", "ResourceClaim", *extra)


def pools_of(snap: Snapshot, filters: Filters, gates: Mapping[str, bool]) -> list[PoolState]:
    """``available`` on the snapshot, narrowed by the filters (a Node's labels from the cluster)."""
    nodes = {str((n.get("metadata") or {}).get("name")): NodeInfo.of(n) for n in snap.raw.get(NODES, [])}
    found = nodes.get(filters.node or "")
    labels = {**(found.labels if found else {}), **(filters.labels or {})}
    try:
        return narrowed(
            [("", s) for s in snap.of(ResourceSlice)],
            [("", c) for c in snap.of(ResourceClaim)],
            snap.of(DeviceClass),
            Filters(filters.node, labels, filters.driver, filters.device_class),
            gates,
        )
    except InputError as error:
        raise ApiAccessError(f"the API server's objects: {error}") from None


def narrowed(
    slices: Sequence[tuple[str, ResourceSlice]],
    claims: Sequence[tuple[str, ResourceClaim]],
    classes: Sequence[DeviceClass],
    filters: Filters,
    gates: Mapping[str, bool],
) -> list[PoolState]:
    """``available`` for the node, of the driver, the devices the class selects: :class:`UsageError`
    for a class not among ``classes``, :class:`InputError` for a value the API server would refuse."""
    if filters.driver:
        slices = [(w, s) for w, s in slices if s.spec.driver == filters.driver]
    node = Node(filters.node, filters.labels or {}) if filters.node is not None else None
    pools = available(slices, claims, node)
    if not filters.device_class:
        return pools
    device_class = next((c for c in classes if c.metadata.name == filters.device_class), None)
    if device_class is None:
        raise UsageError(f"--class {filters.device_class!r}: no such DeviceClass")
    chosen = explain(device_class, [s for _, s in slices], None, gates)
    selected = {(v.driver, v.pool, v.device) for v in chosen if v.matched}
    kept = []
    for pool in pools:
        pool.devices = [d for d in pool.devices if (pool.driver, pool.name, d.name) in selected]
        if pool.devices:
            kept.append(pool)
    return kept


def holders(snap: Snapshot) -> dict[str, str]:
    """``namespace/claim`` -> the claim with the pods it is reserved for."""
    from ..structured import claim_ref  # noqa: PLC0415 - one name, kept beside its use

    return {claim_ref(c): claim_label(c) for c in snap.of(ResourceClaim)}


def report_json(pools: Sequence[PoolState], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """``available --json`` with each holding claim's pods (``heldBy``)."""
    report = as_json_report(pools)
    for pool in report:
        for device in pool["devices"]:
            if device.get("claims"):
                device["heldBy"] = [labels.get(c, c) for c in device["claims"]]
    return report


def report_text(pools: Sequence[PoolState], labels: Mapping[str, str]) -> str:
    """``available``'s tables, then who holds each device taken."""
    text = render_pools(pools)
    rows = [
        [p.driver, p.name, d.name, d.state, "; ".join(labels.get(c, c) for c in d.claims)]
        for p in pools
        for d in p.devices
        if d.claims
    ]
    if not rows:
        return text
    table = [["DRIVER", "POOL", "DEVICE", "STATE", "HELD BY"], *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return (
        text
        + "\n"
        + "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in table)
    )


def available_command(
    access: Access, filters: Filters, release: str | None, gates_for: GatesFor, *, as_json_output: bool, watch: bool
) -> None:
    """What is free per node and pool; with ``watch``, drawn again whenever a slice or claim changes."""
    if watch:
        _run(lambda: _watch(access, filters, release, gates_for, as_json_output=as_json_output))
        return
    snap, _ = snapshot_of(access, filters.kinds(), release)
    typer.echo(_frame(snap, filters, gates_for, as_json_output=as_json_output), nl=False)


def _frame(snap: Snapshot, filters: Filters, gates_for: GatesFor, *, as_json_output: bool, lines: bool = False) -> str:
    """One drawing: the tables, or JSON (one line per drawing with ``lines``, for ``--watch``)."""
    pools = pools_of(snap, filters, gates_for(snap.release))
    labels = holders(snap)
    if as_json_output:
        return json.dumps(report_json(pools, labels), indent=None if lines else 2) + "\n"
    return report_text(pools, labels)


# --- available --watch: one watch per kind ------------------------------------------------------


REDRAW_AFTER = 0.2
"""Seconds of quiet before a redraw: a burst of changes (a scheduler's batch) draws once."""
GONE = 410


async def _watch(
    access: Access, filters: Filters, release: str | None, gates_for: GatesFor, *, as_json_output: bool
) -> None:
    """List each kind once, then follow one watch per kind from the list's resourceVersion.

    A watch the server ends is resumed from the last version seen; one that is too old (410
    Gone) is listed again. Every change redraws, after :data:`REDRAW_AFTER` of quiet.
    """
    interrupted = _on_ctrl_c(asyncio.current_task())
    api = ApiServer(access.config())
    try:
        snap = await snapshot(api, filters.kinds(), release=release)
        stores = {kind: _keyed(items) for kind, items in snap.raw.items()}
        changed = asyncio.Event()
        version = snap.api_version.rpartition("/")[2]
        followers = [
            asyncio.create_task(_follow(api, kind, version, snap, store=stores[kind], changed=changed))
            for kind in filters.kinds()
        ]
        try:
            _draw(snap, filters, gates_for, as_json_output=as_json_output, first=True)
            while True:
                await _next_change(changed, followers)
                _refresh(snap, stores, api.server)
                _draw(snap, filters, gates_for, as_json_output=as_json_output, first=False)
        finally:
            for task in followers:
                task.cancel()
            await _ended_within(asyncio.gather(*followers, return_exceptions=True), CLOSE_WITHIN)
    finally:
        await _ended_within(api.close(), CLOSE_WITHIN)
        if interrupted.is_set():
            _exit_now(130)


CLOSE_WITHIN = 2.0
"""Seconds Ctrl-C waits for the watches and their connections to close: closing is a courtesy
to the server, and a connection that does not close must not keep the user's terminal."""


def _on_ctrl_c(main: asyncio.Task[Any] | None) -> asyncio.Event:
    """SIGINT cancels ``main`` and is remembered, so that the command ends after its bounded
    clean-up rather than in ``asyncio.run``'s, which waits without bound for every task and
    async generator left behind (on the real cluster a Ctrl-C'd watch once stayed for minutes)."""
    interrupted = asyncio.Event()

    def stop() -> None:
        interrupted.set()
        if main is not None:
            main.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop)
    return interrupted


def _exit_now(code: int) -> NoReturn:
    """What was drawn flushed, then the process ends with ``code`` at once (see :func:`_on_ctrl_c`)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone, a stream closed
            stream.flush()
    os._exit(code)


async def _ended_within(step: Awaitable[Any], seconds: float) -> None:
    """``step`` given at most ``seconds``; unlike ``wait_for`` it is then left as it is, never
    waited for again (a cancelled close that does not end would keep ``wait_for`` waiting)."""
    await asyncio.wait([asyncio.ensure_future(step)], timeout=seconds)


async def _next_change(changed: asyncio.Event, followers: Sequence[asyncio.Task[None]]) -> None:
    """Wait for a change and then for quiet; a follower that failed ends the command with its error."""
    waiter = asyncio.create_task(changed.wait())
    done, _ = await asyncio.wait([waiter, *followers], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task is not waiter:
            waiter.cancel()
            task.result()  # raises the follower's ApiAccessError
    while changed.is_set():
        changed.clear()
        await asyncio.sleep(REDRAW_AFTER)


async def _follow(
    api: ApiServer, kind: str, version: str, snap: Snapshot, *, store: dict[str, dict[str, Any]], changed: asyncio.Event
) -> None:
    """One kind's watch into ``store``, resumed where the server ended it; 410 Gone lists it again."""
    path = "/api/v1/nodes" if kind == NODES else resource_path(kind, version)
    api_version = "v1" if kind == NODES else snap.api_version
    resource_version = snap.resource_versions[kind]
    while True:
        resource_version, gone = await _follow_once(
            api, path, (kind, api_version), resource_version, store=store, changed=changed
        )
        if gone:
            listed = await list_items(api, path, kind, api_version)
            store.clear()
            store.update(_keyed(listed.items))
            resource_version = listed.resource_version
            changed.set()


async def _follow_once(
    api: ApiServer,
    path: str,
    kind: tuple[str, str],
    resource_version: str,
    *,
    store: dict[str, dict[str, Any]],
    changed: asyncio.Event,
) -> tuple[str, bool]:
    """One watch's events into ``store`` until the server ends it: the last version seen, and
    whether the server said it was too old (410 Gone). ``aclosing``: the stream is closed here,
    in this task, however the loop is left (a finaliser in another task is where closes hang)."""
    params = {"resourceVersion": resource_version, "allowWatchBookmarks": "true"}
    async with contextlib.aclosing(api.stream(path, params)) as events:
        async for event in events:
            kind_of_event, item = event.get("type"), event.get("object") or {}
            if kind_of_event == "ERROR":
                if item.get("code") != GONE:
                    said = item.get("message") or f"status {item.get('code', '?')}"
                    raise ApiAccessError(f"API server {api.server}: WATCH {path}: {said}")
                return resource_version, True
            resource_version = str((item.get("metadata") or {}).get("resourceVersion", resource_version))
            if kind_of_event != "BOOKMARK":
                stamped(item, *kind)
                if kind_of_event == "DELETED":
                    store.pop(_uid(item), None)
                else:
                    store[_uid(item)] = item
                changed.set()
    return resource_version, False


def _keyed(items: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A kind's store: its items by :func:`_uid`, as the watch events find them."""
    return {_uid(i): i for i in items}


def _uid(item: Mapping[str, Any]) -> str:
    meta = item.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def _refresh(snap: Snapshot, stores: Mapping[str, Mapping[str, dict[str, Any]]], server: str) -> None:
    """The snapshot made anew from the stores the watches keep."""
    from .cluster import decode  # noqa: PLC0415 - beside its one use here

    for kind, store in stores.items():
        items = sorted(store.values(), key=lambda i: (i.get("metadata") or {}).get("name", ""))
        snap.raw[kind] = items
        if kind != NODES:
            snap.objects[kind] = decode(items, snap.release, server)


def _draw(snap: Snapshot, filters: Filters, gates_for: GatesFor, *, as_json_output: bool, first: bool) -> None:
    frame = _frame(snap, filters, gates_for, as_json_output=as_json_output, lines=True)
    if as_json_output:
        sys.stdout.write(frame)
    elif sys.stdout.isatty():
        sys.stdout.write("\x1b[H\x1b[2J" + frame)  # home, clear: redrawn in place
    else:
        sys.stdout.write(("" if first else "\n") + f"--- {time.strftime('%H:%M:%S')}\n" + frame)
    sys.stdout.flush()
