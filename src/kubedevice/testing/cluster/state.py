"""What ``up`` records in ``<dir>/state.json`` for ``down`` and the tests, and the cluster's one error."""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import KubedeviceError
from .. import components


class ClusterError(KubedeviceError, RuntimeError):
    """The cluster cannot start here; the message says exactly which part and why.

    ``message`` is that one line; when a process's log tells more, ``log`` names the file and
    ``str()`` adds its last lines (what a test's failure shows; the command line prints the line
    and the file's name)."""

    def __init__(self, message: str, log: Path | None = None, tail: str = "") -> None:
        super().__init__(f"{message}; {log} ends with:\n{tail}" if log is not None else message)
        self.message = message
        self.log = log


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    kubelet: int
    kubelet_healthz: int
    scheduler: int
    controller_manager: int

    @classmethod
    def free(cls, extra: int = 0) -> tuple[Ports, list[int]]:
        """The cluster's ports and ``extra`` more (further nodes'), none repeated."""
        with contextlib.ExitStack() as stack:  # all bound at once so none repeats
            sockets = [stack.enter_context(socket.socket()) for _ in range(7 + extra)]
            for sock in sockets:
                sock.bind(("127.0.0.1", 0))
            ports = [sock.getsockname()[1] for sock in sockets]
        return cls(*ports[:7]), ports[7:]


@dataclass
class State:
    """What ``down`` needs after ``up`` has returned, kept in ``<dir>/state.json``."""

    ports: Ports
    node_name: str
    cluster_id: str
    binaries: dict[str, str] = field(default_factory=dict)
    init_pid: int = 0
    """unshare(1), outside the namespace; its child is the namespace's init."""
    namespace_pid: int = 0
    """Host PID of the namespace's init, for nsenter."""
    pids: dict[str, int] = field(default_factory=dict)
    kubernetes_version: str = components.KUBERNETES_VERSION
    nodes: list[NodeState] = field(default_factory=list)
    """The nodes after the first (``up --nodes N``); empty for one node."""
    kubelet_versions: dict[str, str] = field(default_factory=dict)
    """Node name → the version of the kubelet it runs, where that is not ``kubernetes_version``
    (``up --kubelet-version``, :meth:`Node.upgrade_kubelet`)."""


@dataclass
class NodeState:
    """A further node's namespace and processes (the first node's are :class:`State`'s own)."""

    name: str
    kubelet: int
    kubelet_healthz: int
    init_pid: int = 0
    namespace_pid: int = 0
    pids: dict[str, int] = field(default_factory=dict)


def relayed_ports(state: State) -> list[int]:
    """The cluster's ports the host reaches (through :mod:`relay`), under the same numbers: every
    node's kubelet healthz among them (a further node's own relay serves its socket)."""
    return [
        state.ports.apiserver,
        state.ports.etcd_client,
        state.ports.kubelet_healthz,
        *(node.kubelet_healthz for node in state.nodes),
    ]
