"""``python -m kubedevice.testing.cluster up|down|status`` (``scripts/cluster.sh``): the test
cluster from a shell, as docs/real-cluster.md shows it.

Errors are the one line every kubedevice command prints (``kubedevice: ...`` on stderr): exit 2
for a bad flag, 1 when the cluster cannot start or stop (naming the log to read), 130 when
interrupted (SIGINT or SIGTERM), after what ``up`` had started is stopped again.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from ...commands import BareHelpGroup, invoke
from ...errors import fail
from .. import components
from ..gobuild import BuildError
from .cluster import DEFAULT_DIR, DIR_ENV, NODE_NAME, Cluster, up
from .configs import kubelet_skew_error
from .files import MARKER, MAX_NODES, pod_log_dirs
from .state import ClusterError

app = typer.Typer(
    name="cluster.sh",
    cls=BareHelpGroup,
    help="A real Kubernetes in private namespaces, for testing device plugins (docs/real-cluster.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)

Directory = Annotated[
    Path,
    typer.Option("--dir", envvar=DIR_ENV, metavar="DIR", help="The cluster directory."),
]


def _release(value: str | None) -> str | None:
    """A release ``components.RELEASES`` knows (each is built once and cached), or a usage error."""
    if value is not None and value not in components.RELEASES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(components.RELEASES)}")
    return value


@app.command(name="up")
def up_command(
    directory: Directory = DEFAULT_DIR,
    node_name: Annotated[
        str, typer.Option(metavar="NAME", help="The first node's name; further nodes add -2, -3, ...")
    ] = NODE_NAME,
    release: Annotated[
        str | None,
        typer.Option(
            "--version",
            metavar="RELEASE",
            callback=_release,
            help=f"The Kubernetes release, one of {', '.join(components.RELEASES)} (default "
            f"{components.DEFAULT_RELEASE}: {components.KUBERNETES_VERSION}); each is built once and cached.",
        ),
    ] = None,
    nodes: Annotated[
        int,
        typer.Option(
            metavar="N",
            help=f"How many nodes, 1 to {MAX_NODES}: each a kubelet and containerd in a private namespace of its own.",
        ),
    ] = 1,
    kubelet_release: Annotated[
        str | None,
        typer.Option(
            "--kubelet-version",
            metavar="RELEASE",
            callback=_release,
            help="The kubelets' release (default: --version's), at most 3 minor releases older than the "
            "control plane and never newer.",
        ),
    ] = None,
) -> None:
    """Start a cluster (building what is not cached), then print how to use it from a shell."""
    if not 1 <= nodes <= MAX_NODES:
        fail(f"--nodes: {nodes} is not between 1 and {MAX_NODES}")
    if kubelet_release is not None:
        skew = kubelet_skew_error(components.version_of(release), components.version_of(kubelet_release))
        if skew is not None:
            fail(f"--kubelet-version: {skew}")
    with _reported():
        _up(directory, node_name, release, nodes, kubelet_release)


@app.command()
def down(
    directory: Directory = DEFAULT_DIR,
    keep: Annotated[
        bool, typer.Option(help="Keep etcd's data, containerd's images and the rest (default: keep only the logs).")
    ] = False,
) -> None:
    """Stop the cluster, then remove what up made there but the logs."""
    with _reported():
        _down(Cluster(directory), keep)


@app.command()
def status(directory: Directory = DEFAULT_DIR) -> None:
    """Each process of the cluster, running or stopped; exit 1 unless all run."""
    running = Cluster(directory).running()
    if not running:
        print(f"no cluster in {directory}")
        raise typer.Exit(1)
    for name, alive in running.items():
        print(f"{name}: {'running' if alive else 'stopped'}")
    raise typer.Exit(0 if all(running.values()) else 1)


@contextlib.contextmanager
def _reported() -> Iterator[None]:
    """The cluster's failures as one line: a ClusterError names the log that tells more."""
    try:
        yield
    except ClusterError as err:
        fail(f"{err.message} (its log: {err.log})" if err.log is not None else err.message, 1)
    except BuildError as err:
        fail(str(err), 1)
    except KeyboardInterrupt:
        fail("interrupted; stopped what was started", 130)


def _up(directory: Path, node_name: str, release: str | None, nodes: int, kubelet_release: str | None) -> None:
    """Start, then build kubectl if it is not cached yet: after the cluster, so that a cold kubectl
    build never delays the cluster itself; interrupted, it stops the cluster as any part of ``up``."""
    cluster = up(directory, node_name, release, nodes, kubelet_release)
    version = components.version_of(release)
    try:
        kubectl: Path | str = components.kubectl(version)
    except BuildError as err:  # the cluster runs without it; say why there is none
        kubectl = str(err).splitlines()[0]
    except BaseException:
        cluster.down()
        raise
    for key, value in cluster.summary().items():
        print(f"{key}: {value}")
    print(
        f"kubectl: not built: {kubectl}"
        if isinstance(kubectl, str)
        else f"kubectl: {kubectl} ({version}, as the cluster)"
    )
    sudo = "sudo " if os.environ.get("SUDO_USER") else ""  # kubectl is in root's cache, nsenter needs root
    print("# to use them in this shell:")
    print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    if not isinstance(kubectl, str):
        print(f"alias kubectl={shlex.quote(f'{sudo}{kubectl} --kubeconfig {cluster.kubeconfig}')}")
    print(f"alias ctr={shlex.quote(sudo + shlex.join(cluster.ctr_command()))}")


def _down(cluster: Cluster, keep: bool) -> None:
    """Stop, then one line on the files: removed but the logs, or all kept (``--keep``)."""
    stopped = cluster.down()
    print(f"stopped: {', '.join(stopped)}" if stopped else f"stopped: nothing was running in {cluster.dir}")
    if keep:
        print(
            f"kept: {_megabytes(cluster.disk_usage())} in {cluster.dir} (--keep): etcd's data, containerd's "
            "images, certificates and logs; `down` without --keep removes all but the logs"
        )
        return
    result = cluster.remove_files()
    if result is None:
        print(f"removed: nothing ({cluster.dir} has no {MARKER}: `up` did not make it)")
        return
    removed, logs = result
    print(
        f"removed: {_megabytes(removed)} from {cluster.dir} (etcd's data, containerd's images and snapshots, the "
        f"kubelets' directories, certificates, kubeconfigs); kept the logs for debugging, {_megabytes(logs)}: "
        f"{cluster.logs} and {', '.join(map(str, pod_log_dirs(cluster.dir)))}"
    )


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """The command line on ``argv`` (default: the process's); its exit code, errors printed."""
    signal.signal(signal.SIGTERM, _interrupt)  # an interrupted `up` stops what it started
    try:
        return invoke(app, sys.argv[1:] if argv is None else argv, "cluster.sh")
    except SystemExit as stop:  # fail(): the line is printed
        return stop.code if isinstance(stop.code, int) else 1


if __name__ == "__main__":
    sys.exit(main())
