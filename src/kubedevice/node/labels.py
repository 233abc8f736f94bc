"""``node_selector``: one config for a mixed fleet, each node serving the resources its labels select.

A resource's ``node_selector`` means what a pod's ``nodeSelector`` means: every pair must equal
one of the node's labels. The daemon reads its own Node from the API server (a get, then a
watch on that one object: ``fieldSelector=metadata.name=<node>``) and serves the matching
resources; a label change is applied like a config reload (:meth:`.reload.Reloader.reselect`).

Until the labels are first read, no resource with a selector is served (a node must not
advertise hardware it may not have); after that, a broken watch keeps the last labels it read
and is re-established: an API server that blips must never take devices away from a node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import api_reason

log = logging.getLogger(__name__)
Labels = Mapping[str, str]
RETRY_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0)
"""Waits between attempts after a failure, the last one repeated: quick after a blip, quiet in an outage."""
_REFUSED = (401, 403)


def matches(selector: Labels, labels: Labels | None) -> bool:
    """A pod's ``nodeSelector`` rule; labels not yet known (``None``) match only an empty selector."""
    if not selector:
        return True
    return labels is not None and all(labels.get(key) == value for key, value in selector.items())


def select(config: Config, labels: Labels | None) -> Config:
    """The part of ``config`` this node serves (possibly no resource at all)."""
    chosen = [r for r in config.resources if matches(r.node_selector, labels)]
    return config.model_copy(update={"resources": chosen})


def selector_keys(config: Config) -> frozenset[str]:
    return frozenset(key for r in config.resources for key in r.node_selector)


def first_selector(config: Config) -> int | None:
    """Index of the first resource with a ``node_selector`` (for the start-up refusal's field), if any."""
    return next((i for i, r in enumerate(config.resources) if r.node_selector), None)


def describe_change(old: Labels | None, new: Labels, keys: Iterable[str]) -> str | None:
    """The changes among ``keys`` (the labels some selector reads), as ``k=v (was w)``; None if none.

    A node carries dozens of labels that others change for their own reasons: only the ones
    a selector reads are worth a line.
    """
    before = old or {}
    parts = []
    for key in sorted(keys):
        if old is not None and before.get(key) == new.get(key):
            continue
        now = f"{key}={new[key]}" if key in new else f"{key} unset"
        if old is None:
            parts.append(now)
        else:
            was = f"was {before[key]!r}" if key in before else "was unset"
            parts.append(f"{now} ({was})")
    if not parts:
        return None
    return ("first read: " if old is None else "") + ", ".join(parts)


def selection(source: NodeLabels | None) -> Callable[[Config], Config]:
    """What the reloader serves of a config: the part ``source``'s labels select.

    Without a source (the daemon started with no selector, so it has neither the node's name
    nor credentials checked), a config that gains a selector is refused rather than served blind.
    """

    def choose(config: Config) -> Config:
        if source is not None:
            return select(config, source.labels)
        index = first_selector(config)
        if index is not None:
            raise ValueError(
                f"resources[{index}].node_selector: this daemon started without any node_selector, so it "
                "does not read its node's labels; restart it (with --node or $NODE_NAME) to use one"
            )
        return config

    return choose


def connect(config: Config, node: str | None, kubeconfig: Path | None) -> NodeLabels | None:
    """The label source a config with selectors needs, or None for a config without any.

    Raises ``ValueError`` (one line naming the field, for exit code 2) when the selectors cannot
    be evaluated: no node name, or no API server credentials.
    """
    index = first_selector(config)
    if index is None:
        return None
    field = f"resources[{index}].node_selector"
    if not node:
        raise ValueError(f"{field} needs this node's name to read its labels: set --node or $NODE_NAME")
    from ..kubeclient import KubeAccessError, client  # noqa: PLC0415 - lightkube only when asked for

    try:
        api = client(kubeconfig)
    except KubeAccessError as err:
        raise ValueError(f"{field} needs the API server to read node {node}'s labels: {err}") from None
    return NodeLabels(node, api)


class NodeLabels:
    """The labels of one Node, followed through the API server (``get`` and ``watch`` on that name only)."""

    def __init__(self, node: str, api: Any) -> None:
        self.node = node
        self.labels: dict[str, str] | None = None
        """The last labels read; None until the first read."""
        self._api = api
        self._problem: str | None = None  # the failure last logged, so an outage logs once

    async def run(self, on_change: Callable[[Labels | None, Labels], None]) -> None:
        """Follow the Node until cancelled; ``on_change(old, new)`` after each change of its labels."""
        from lightkube.resources.core_v1 import Node  # noqa: PLC0415

        failures = 0
        while True:
            try:
                node = await self._api.get(Node, self.node)
                self._update(node, on_change)
                self._recovered()
                failures = 0
                stream = self._api.watch(
                    Node, fields={"metadata.name": self.node}, resource_version=node.metadata.resourceVersion
                )
                async for event, node in stream:
                    if event == "DELETED":
                        self._failed(f"node {self.node} was deleted; keeping its last known labels", None)
                    else:
                        self._update(node, on_change)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the API server or the connection: keep the labels, try again
                self._failed(api_reason(err), getattr(getattr(err, "status", None), "code", None))
            await asyncio.sleep(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
            failures += 1

    def _update(self, node: Any, on_change: Callable[[Labels | None, Labels], None]) -> None:
        labels = dict(node.metadata.labels or {})
        if labels != self.labels:
            old, self.labels = self.labels, labels
            on_change(old, labels)

    def _failed(self, reason: str, code: int | None) -> None:
        """One line per kind of trouble, not one per retry: a long outage must not flood the log."""
        if reason == self._problem:
            return
        self._problem = reason
        kept = "keeping the last labels read" if self.labels is not None else "serving no node_selector resource yet"
        if code in _REFUSED:
            log.error(
                "reading node %s was refused (%s): its service account needs get, list and watch on nodes "
                "(see docs/deploy.md); %s, retrying",
                self.node,
                reason,
                kept,
            )
        else:
            log.warning("reading node %s's labels failed: %s; %s, retrying", self.node, reason, kept)

    def _recovered(self) -> None:
        if self._problem is not None:
            log.info("reading node %s's labels again", self.node)
            self._problem = None

    async def close(self) -> None:
        await self._api.close()
