"""The options every ``dra`` command has for reading the cluster, as kubectl spells them.

Only typer here: the commands declare these at import, and the API client is imported when a
command actually reads the cluster (a FILE given reads no cluster and loads no client).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...apimachinery import validation
from ...cliparams import namespace
from ...errors import fail
from .. import features

Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
        help="Without FILEs: the kubeconfig (default: $KUBECONFIG's files merged, ~/.kube/config, in-cluster).",
    ),
]
Context = Annotated[
    str | None,
    typer.Option("--context", metavar="CONTEXT", help="Without FILEs: the kubeconfig context (default: current)."),
]
Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", metavar="NAMESPACE", callback=namespace, help="The namespace (default: the context's)."
    ),
]
ServerRelease = Annotated[
    str | None,
    typer.Option(
        "--kubernetes-version",
        metavar="|".join(features.RELEASES),
        help="The release whose feature-gate defaults apply (default: the API server's; with FILEs, the newest).",
    ),
]

POD_KINDS = ("pod", "pods", "po")


def pod_name(target: str) -> str:
    """``pod/NAME`` (or ``pods/NAME``, ``po/NAME``, as kubectl takes them) -> NAME; a bad one exits 2."""
    kind, slash, name = target.partition("/")
    if not slash or kind.lower() not in POD_KINDS:
        fail(f"{target!r}: expected pod/NAME (the pod to explain)")
    if validation.is_dns1123_subdomain(name):
        fail(f"{target!r}: {name!r} is not a pod name (a lowercase RFC 1123 subdomain)")
    return name
