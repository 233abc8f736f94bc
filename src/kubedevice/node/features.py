"""``serve --features-file``: a Node Feature Discovery feature file of the served resources.

NFD's ``local`` source reads every file in ``/etc/kubernetes/node-feature-discovery/features.d/``
(lines ``name[=value]``, ``#`` comments; files over 64 KiB and names starting with ``.`` are
skipped) and turns each line into a node label, so a scheduler can send pods to nodes that have
the hardware. NFD re-reads the directory on every change, so a reader must never find a
half-written file: we write a dot-named temp file in the same directory (which NFD ignores) and
rename it over the old one.

A resource name (``example.com/gpu``) is not a label name: NFD takes the part before a ``/`` as
the label's namespace and allows only its own ones without extra configuration. Each resource
becomes ``feature.node.kubernetes.io/example.com-gpu.present`` and ``...gpu.count``, always
fully prefixed (NFD documents unprefixed names as deprecated). A name part longer than a label
allows (63 characters) is cut and ends in a hash of the full resource name, so it stays unique.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from .. import files
from ..paths import output_file_problem
from ..plugin.base import Plugin

log = logging.getLogger(__name__)

NAMESPACE = "feature.node.kubernetes.io"
NFD_MAX_BYTES = 65536
"""NFD ignores a whole feature file above this size (``MaxFeatureFileSize`` in its local source)."""
_MAX_NAME = 63
_LONGEST_SUFFIX = ".present"
_HEADER = "# Written by kubedevice serve --features-file: the resources this node serves.\n"


def feature_base(resource: str) -> str:
    """The label name part shared by a resource's features, without suffix: ``example.com-gpu``."""
    base = resource.replace("/", "-")
    room = _MAX_NAME - len(_LONGEST_SUFFIX)
    if len(base) <= room:
        return base
    digest = hashlib.sha256(resource.encode()).hexdigest()[:10]
    return f"{base[: room - len(digest) - 1]}-{digest}"


def render(counts: Mapping[str, int]) -> str:
    """The file for ``resource -> healthy devices advertised``.

    ``.count`` is always written (0 included); ``.present=true`` only while the count is above
    zero, so a ``nodeSelector`` or an ``Exists`` affinity on it means "has a usable device now".
    """
    lines = [_HEADER]
    for resource in sorted(counts):
        name = f"{NAMESPACE}/{feature_base(resource)}"
        if counts[resource] > 0:
            lines.append(f"{name}.present=true\n")
        lines.append(f"{name}.count={counts[resource]}\n")
    return "".join(lines)


def check_path(path: Path) -> None:
    """Refuse at start-up a path NFD would never read or we could never write (``ValueError``)."""
    if path.name.startswith("."):
        raise ValueError(f"--features-file {path}: NFD ignores files whose name starts with '.'")
    if problem := output_file_problem(path):
        raise ValueError(f"--features-file {problem}")


class FeaturesFile:
    """Keeps one feature file in step with the served plugins and their devices' health.

    Plugins may publish from any thread (the library contract), so writes are serialised. A
    failed write (a full disk) is logged and retried at the next change; serving goes on.
    """

    def __init__(self, path: Path) -> None:
        check_path(path)
        self.path = path
        self._lock = threading.Lock()
        self._plugins: dict[str, Plugin] = {}
        self._unsubscribe: dict[str, Callable[[], None]] = {}

    def follow(self, added: Iterable[Plugin], served: Iterable[str] | None = None) -> None:
        """Follow ``added`` (at start, or what a reload started), forget every resource not in
        ``served`` (what a reload stopped; ``None`` keeps all), then write the file once."""
        if served is not None:
            wanted = set(served)
            for name in [n for n in self._plugins if n not in wanted]:
                self._drop(name)
        for plugin in added:
            self._drop(plugin.resource_name)  # a changed resource: its old plugin is stopped
            self._plugins[plugin.resource_name] = plugin
            self._unsubscribe[plugin.resource_name] = plugin.subscribe(self.write)
        self.write()

    def _drop(self, name: str) -> None:
        self._plugins.pop(name, None)
        unsubscribe = self._unsubscribe.pop(name, None)
        if unsubscribe is not None:
            unsubscribe()

    def write(self) -> None:
        """Rewrite the file from the current devices (untouched when nothing changed)."""
        with self._lock:
            counts = {name: sum(d.healthy for d in p.devices()) for name, p in list(self._plugins.items())}
            data = render(counts).encode()
            if len(data) > NFD_MAX_BYTES:
                log.error("%s: %d bytes; NFD ignores feature files over %d", self.path, len(data), NFD_MAX_BYTES)
            try:
                if files.write_atomically(self.path, data, 0o644):
                    log.info("features file written", extra={"path": str(self.path), "resources": len(counts)})
            except OSError as err:
                log.error("cannot write features file %s: %s", self.path, err.strerror or err)

    def remove(self) -> bool:
        """Remove the file (an uninstall) if it is ours: a regular file starting with our header."""
        with self._lock:
            if not _ours(self.path):
                return False
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            log.info("removed features file %s", self.path)
            return True


def _ours(path: Path) -> bool:
    """Whether ``path`` is a regular file (never through a symlink) that we wrote."""
    return files.read_regular(path, len(_HEADER.encode())) == _HEADER.encode()
