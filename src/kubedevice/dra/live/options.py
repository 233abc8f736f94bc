"""The options every ``dra`` command has for reading the cluster, as kubectl spells them.

Only typer here: the commands declare these at import, and the API client is imported when a
command actually reads the cluster (a FILE given reads no cluster and loads no client).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...cliparams import namespace
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
