"""Tell an uninstall from a restart at shutdown, by the DaemonSet that runs the daemon.

The CDI spec files must outlive the daemon on a restart or a rolling update (containers that
restart meanwhile need them) but not an uninstall. A pod cannot tell the two apart by itself;
its DaemonSet can: ``helm uninstall`` deletes it before the pods. The daemon watches that one
object while it runs (the watch sees the deletion before the pod's SIGTERM, even when the
uninstall has already removed the ServiceAccount that the final check at shutdown needs), asks
once more at shutdown, and removes its specs only when it saw the DaemonSet exist and then saw
it gone or being deleted, or (at that last look) had its credentials refused, which happens when
the uninstall has deleted the ServiceAccount or its role. Anything else, including every other
API error, keeps them.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..allocation.cdi import CdiSpecDir
from ..apimachinery.validation import is_dns1123_label, is_dns1123_subdomain
from ..config import Config
from ..errors import api_reason

log = logging.getLogger(__name__)
RETRY_SECONDS = 2.0
FINAL_CHECK_SECONDS = 3.0


class Seen(enum.Enum):
    """What the API server said about the DaemonSet."""

    UNKNOWN = "unknown"  # not asked yet, or every answer was an error
    PRESENT = "present"
    DELETING = "deleting"  # deletionTimestamp set (foreground deletion)
    GONE = "gone"  # 404, a DELETED watch event, or credentials refused at the last look


@dataclass(frozen=True)
class OwnerRef:
    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> OwnerRef:
        """``NAMESPACE/NAME``; ValueError naming the option otherwise."""
        namespace, _, name = text.partition("/")
        if not namespace or not name or "/" in name:
            raise ValueError(f"--owner-daemonset {text!r} must be NAMESPACE/NAME")
        if is_dns1123_label(namespace):
            raise ValueError(f"--owner-daemonset {text!r}: {namespace!r} is not a namespace (a lowercase DNS label)")
        if is_dns1123_subdomain(name):
            raise ValueError(
                f"--owner-daemonset {text!r}: {name!r} is not a DaemonSet name (a lowercase DNS subdomain)"
            )
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def uninstalled(history: Iterable[Seen]) -> bool:
    """Remove our specs only if the DaemonSet was seen to exist and its latest known state is gone
    or deleting: a wrong name (never present) or an API error (UNKNOWN) keeps them."""
    known = [seen for seen in history if seen is not Seen.UNKNOWN]
    return Seen.PRESENT in known and known[-1] in (Seen.GONE, Seen.DELETING)


def state_of(daemonset: Any) -> Seen:
    """PRESENT or DELETING for a DaemonSet object (a lightkube model)."""
    return Seen.DELETING if daemonset.metadata.deletionTimestamp is not None else Seen.PRESENT


def _spec_dirs(config: Config, cdi_dir: Path) -> list[CdiSpecDir]:
    return [CdiSpecDir(cdi_dir, r.cdi_kind) for r in config.resources if r.cdi]


def cdi_specs(config: Config, cdi_dir: Path) -> list[Path]:
    """The spec files of ours in ``cdi_dir``: the configured CDI resources' own files only."""
    return [path for specs in _spec_dirs(config, cdi_dir) for path in specs.owned()]


def remove_cdi_specs(config: Config, cdi_dir: Path) -> list[Path]:
    return [path for specs in _spec_dirs(config, cdi_dir) for path in specs.remove_owned()]


class OwnerWatch:
    """Follows one DaemonSet through the API server (``get`` and ``watch`` on it, nothing else)."""

    def __init__(self, owner: OwnerRef, kubeconfig: Path | None = None) -> None:
        self.owner = owner
        self.history: list[Seen] = []
        self._kubeconfig = kubeconfig
        self._client: Any = None
        self._making_client = asyncio.Lock()  # the watch and the final check share one client

    async def _api(self) -> Any:
        async with self._making_client:
            if self._client is None:  # imports lightkube and reads credentials: off the loop
                self._client = await asyncio.to_thread(self._new_client)
        return self._client

    def _new_client(self) -> Any:
        from ..kubeclient import client  # noqa: PLC0415 - lightkube only when asked for

        return client(self._kubeconfig)

    def _record(self, seen: Seen) -> None:
        """Changes only: every status update of the DaemonSet is an event, the decision needs none."""
        if not self.history or self.history[-1] is not seen:
            log.info("DaemonSet %s: %s", self.owner, seen.value)
            self.history.append(seen)

    async def run(self) -> None:
        """Watch until cancelled; errors are logged and retried."""
        DaemonSet = await asyncio.to_thread(_daemonset_kind)

        while True:
            try:
                api = await self._api()
                stream = api.watch(DaemonSet, namespace=self.owner.namespace, fields={"metadata.name": self.owner.name})
                async for event, daemonset in stream:
                    self._record(Seen.GONE if event == "DELETED" else state_of(daemonset))
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any failure of the API or its client: retry
                log.warning("watching DaemonSet %s failed: %s", self.owner, api_reason(err))
            await asyncio.sleep(RETRY_SECONDS)

    async def check(self, timeout: float = FINAL_CHECK_SECONDS) -> Seen:
        """Ask now (a GET); UNKNOWN on any error, which is logged."""
        from lightkube.core.exceptions import ApiError  # noqa: PLC0415
        from lightkube.resources.apps_v1 import DaemonSet  # noqa: PLC0415

        try:
            async with asyncio.timeout(timeout):
                api = await self._api()
                daemonset = await api.get(DaemonSet, self.owner.name, namespace=self.owner.namespace)
            seen = state_of(daemonset)
        except ApiError as err:
            seen = _seen_after_refusal(err.status.code)
            if err.status.code != 404:  # a refusal is worth a line even where it decides
                log.warning("cannot read DaemonSet %s: %s", self.owner, api_reason(err))
        except Exception as err:  # timeouts, connection errors, credentials
            log.warning("cannot read DaemonSet %s: %s", self.owner, api_reason(err))
            seen = Seen.UNKNOWN
        self._record(seen)
        return seen

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


def _seen_after_refusal(code: int | None) -> Seen:
    """404: the DaemonSet is gone. 401/403: our service account or its role is gone, which
    ``helm uninstall`` deletes together with the DaemonSet (the watch may not have had the
    deletion yet). Counted only after the DaemonSet was seen present (:func:`uninstalled`)."""
    return Seen.GONE if code in (401, 403, 404) else Seen.UNKNOWN


def _daemonset_kind() -> Any:
    from lightkube.resources.apps_v1 import DaemonSet  # noqa: PLC0415 - lightkube only when asked for

    return DaemonSet


async def clean_up_if_uninstalled(watch: OwnerWatch, config: Config, cdi_dir: Path) -> list[Path]:
    """At shutdown: a last look at the DaemonSet, then our CDI specs removed if it was uninstalled."""
    await watch.check()
    if not uninstalled(watch.history):
        log.info(
            "keeping our CDI specs: DaemonSet %s was not seen uninstalled (%s)",
            watch.owner,
            watch.history[-1].value if watch.history else "never asked",
        )
        return []
    removed = remove_cdi_specs(config, cdi_dir)
    log.info("DaemonSet %s uninstalled: removed %d CDI spec(s) of ours", watch.owner, len(removed))
    return removed
