"""``kubedevice dra convert``: DRA objects from one ``resource.k8s.io`` version to another, as the
API server converts them (``kubectl convert``'s job, which kubectl no longer does itself).

An object is written in one version and read in another through the API server's internal type:
decoded (strictly, defaults applied, :func:`kubedevice.dra.models.from_document`), then written
in the target version's shape (a device's fields under ``basic`` and a request's flat in v1alpha3
and v1beta1, v1alpha3's capacity a bare quantity). A field the target version of that release
lacks cannot be written there and is lost, as it is when the API server is read in that version:
it is not dropped silently but named on stderr, one ``kubedevice: warning:`` line each. Proven
against the API server's own conversion by tests/interop/test_validation_apiserver.py (created in
one version, read in another).

Exit codes: 0 converted (warnings or not); 2 bad input, in one ``kubedevice:`` line naming the
file: a file that cannot be read or decoded, a target version that release does not have, or a
kind the target version lacks.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..boundedyaml import read_input
from ..errors import KubedeviceError, cannot_read, fail, line
from . import apifields, features, models
from .models import DecodeError, DRAObject, ResourceSlice


class ConversionError(KubedeviceError, ValueError):
    """An object that cannot be written in the target version (the message says why)."""


def convert(obj: DRAObject, version: str, release: str = features.NEWEST) -> tuple[dict[str, Any], list[str]]:
    """``obj`` as a document of ``resource.k8s.io/<version>`` as Kubernetes ``release`` has it, and
    the paths (in the target's shape) of the fields it lost there."""
    if obj.kind not in features.API_KINDS[release].get(version, ()):
        raise ConversionError(f"Kubernetes {release} has no {obj.kind} in {features.API_GROUP}/{version}")
    retargeted = obj.model_copy(update={"api_version": f"{features.API_GROUP}/{version}"})
    lost = _bare_capacities(retargeted) if version == "v1alpha3" else []
    document = models.to_document(retargeted)
    lost += [name for name, _ in apifields.strip_unknown(document, obj.kind, version, release)]
    apifields.encode(document, obj.kind, version, release)
    return document, lost


def _bare_capacities(obj: DRAObject) -> list[str]:
    """v1alpha3's capacity is a bare quantity: a request policy has no place in it."""
    if not isinstance(obj, ResourceSlice):
        return []
    return [
        f"spec.devices[{i}].basic.capacity.{name}.requestPolicy"
        for i, device in enumerate(obj.spec.devices)
        for name, capacity in device.capacity.items()
        if capacity.request_policy is not None
    ]


def _target(output_version: str) -> str:
    """``resource.k8s.io/v1beta2`` -> ``v1beta2``, or exit 2."""
    group, _, version = output_version.rpartition("/")
    if group != features.API_GROUP or version not in models.VERSIONS:
        fail(f"--output-version {output_version!r}: expected {features.API_GROUP}/{{{','.join(models.VERSIONS)}}}")
    return version


def _objects(path: Path, release: str) -> list[tuple[str, DRAObject]]:
    """Each object of a file with its place (``file:line``), or exit 2 naming the first bad one."""
    try:
        documents = models.load_documents(read_input(path), str(path))
    except (OSError, UnicodeDecodeError) as error:
        fail(cannot_read(path, error))
    except DecodeError as error:
        fail(error.first())
    objects = []
    for number, document in documents:
        where = f"{path}:{number}"
        try:
            objects.append((where, models.from_document(document, where, release)))
        except DecodeError as error:
            fail(error.first())
    return objects


def convert_command(
    files: Annotated[list[Path], typer.Argument(metavar="FILE", hidden=True, show_default=False)],
    output_version: Annotated[
        str,
        typer.Option(
            "--output-version", metavar="resource.k8s.io/VERSION", help="The API version to write the objects in."
        ),
    ],
    kubernetes_version: Annotated[
        str,
        typer.Option(
            "--kubernetes-version",
            metavar="|".join(features.RELEASES),
            help="The release whose Go types the objects are read and written as.",
        ),
    ] = features.NEWEST,
    output: Annotated[str, typer.Option("--output", "-o", metavar="yaml|json", help="Output format.")] = "yaml",
) -> None:
    """Convert DRA objects to another resource.k8s.io API version, as the API server of
    --kubernetes-version converts them (defaults applied). Each FILE is YAML or JSON (- for
    standard input); kinds may be mixed. The objects go to stdout; each field the target version
    lacks goes to stderr as a "kubedevice: warning:" line naming it, and is left out. Exits 2 on bad input, 0 otherwise.
    """
    if kubernetes_version not in features.RELEASES:
        fail(f"--kubernetes-version {kubernetes_version!r}: expected one of {', '.join(features.RELEASES)}")
    if output not in ("yaml", "json"):
        fail(f"--output {output!r}: expected yaml or json")
    version = _target(output_version)
    documents = []
    for path in files:
        for where, obj in _objects(path, kubernetes_version):
            try:
                document, lost = convert(obj, version, kubernetes_version)
            except ConversionError as error:
                fail(f"{where}: {error}")
            for field in lost:
                print(line(f"warning: {where}: {field} has no place in {output_version}: left out"), file=sys.stderr)
            documents.append(document)
    typer.echo(models.dump_documents(documents, "json" if output == "json" else "yaml"), nl=False)
