"""The JSON fields of the ``resource.k8s.io`` Go types of every release, read from k8s.io/api's
``resource/<version>/types.go`` in the Go module cache (``go mod download k8s.io/api@v0.X.Y``).

``tests/dra/test_apifields.py`` compares them with ``kubedevice.dra.apifields``'s table; run as
``python tests/dra/gotypes.py`` it prints the table's rows as JSON, for a new release.
Only our own parsing of Go source: a struct's fields, their Go types and JSON names.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

API_VERSIONS = {
    "1.31": "v0.31.14",
    "1.32": "v0.32.13",
    "1.33": "v0.33.13",
    "1.34": "v0.34.4",
    "1.35": "v0.35.4",
    "1.36": "v0.36.3",
    "1.37": "v0.37.2",
}
VERSIONS = ("v1alpha3", "v1beta1", "v1beta2", "v1")
KINDS = (
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceTaintRule",
    "PodSchedulingContext",
)
_LEAVES = {"metav1.ObjectMeta", "metav1.TypeMeta", "metav1.ListMeta"}


def module_dir(version: str) -> Path:
    """k8s.io/api@version in the module cache, downloaded when missing."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/api@{version}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd="/",
    )
    return Path(json.loads(done.stdout)["Dir"])


def structs(source: str) -> dict[str, list[tuple[str, str]]]:
    """Each struct's (JSON name, Go type); ``<inline>`` for an embedded struct whose fields it adds.
    A field whose tag says ``omitempty`` has its type marked with a trailing ``,omitempty``."""
    source = re.sub(r"//[^\n]*", "", source)
    found: dict[str, list[tuple[str, str]]] = {}
    for match in re.finditer(r"\ntype (\w+) struct \{(.*?)\n\}", source, re.S):
        fields = []
        for line in match[2].splitlines():
            tag = re.search(r'json:"([^"]*)"', line)
            words = line.split()
            if tag is None or not words:
                continue
            name = tag[1].split(",")[0]
            if name == "-":
                continue
            embedded = words[1].startswith("`")  # an anonymous field: its type, then the tag
            if name == "" and embedded:  # Go promotes its fields (``json:",inline"`` or ``json:""``)
                fields.append(("<inline>", words[0]))
            else:
                omit = ",omitempty" if "omitempty" in tag[1].split(",")[1:] else ""
                fields.append((name, (words[0] if embedded else words[1]) + omit))
        found[match[1]] = fields
    return found


def _element(go_type: str) -> str:
    return re.sub(r"^(\*|\[\]|map\[[^\]]+\])+", "", go_type)


def rows(types: dict[str, list[tuple[str, str]]], struct: str, prefix: str = "") -> list[tuple[str, str]]:
    """(path, Go type) for every field below ``struct``, depth first in Go's field order."""
    out: list[tuple[str, str]] = []
    for name, tagged in types.get(struct, []):
        go_type = tagged.removesuffix(",omitempty")
        if go_type in _LEAVES and name != "metadata":
            continue
        if name == "<inline>":
            out += rows(types, go_type, prefix)
            continue
        path = f"{prefix}.{name}" if prefix else name
        out.append((path, tagged))
        element = _element(go_type)
        if element in types and element != struct:
            out += rows(types, element, path)
    return out


def table() -> list[list[str | None]]:
    """[kind, apiVersion, path, Go type, first release, first release without] for every field; the
    Go type ends in ``,omitempty`` where the JSON tag says so."""
    spans: dict[tuple[str, str, str, str], list[str]] = {}
    for release, api in API_VERSIONS.items():
        root = module_dir(api) / "resource"
        for version in VERSIONS:
            path = root / version / "types.go"
            if not path.is_file():
                continue
            types = structs(path.read_text())
            for kind in KINDS:
                if kind in types:
                    for field, go_type in rows(types, kind):
                        spans.setdefault((kind, version, field, go_type), []).append(release)
    releases = list(API_VERSIONS)
    out: list[list[str | None]] = []
    for (kind, version, field, go_type), seen in spans.items():
        start = releases.index(seen[0])
        for release in releases[start:]:
            if release not in seen:
                out.append([kind, version, field, go_type, seen[0], release])
                break
        else:
            out.append([kind, version, field, go_type, seen[0], None])
    return out


def dumps(rows: list[list[str | None]]) -> str:
    """One row a line: the form of ``src/kubedevice/dra/apifields.json``."""
    return "[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n"


if __name__ == "__main__":
    sys.stdout.write(dumps(table()))
