"""The table of every ``resource.k8s.io`` field of every release (``kubedevice.dra.apifields``)
against k8s.io/api's Go types of each release, and what the decoder makes of it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kubedevice.dra import apifields, features, models
from kubedevice.dra.models import DecodeError
from tests.dra import gotypes


def test_the_table_is_the_go_types_of_every_release() -> None:
    """Skipped without Go or the module proxy, failed under CI: a table never compared proves nothing."""
    if shutil.which("go") is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail("no go on PATH")
        pytest.skip("no go on PATH")
    committed = json.loads((Path(apifields.__file__).with_name("apifields.json")).read_text())
    assert committed == gotypes.table(), "run: python tests/dra/gotypes.py > src/kubedevice/dra/apifields.json"


def test_every_kind_a_release_serves_has_its_fields() -> None:
    for release in features.RELEASES:
        for version, kinds in features.API_KINDS[release].items():
            assert set(kinds) <= set(apifields.kinds(version, release)), (release, version)


@pytest.mark.parametrize(
    ("release", "version", "spec", "unknown"),
    [
        ("1.31", "v1alpha3", {"suitableNodes": {"nodeSelectorTerms": []}}, []),
        ("1.32", "v1alpha3", {"suitableNodes": {"nodeSelectorTerms": []}}, ["spec.suitableNodes"]),
        ("1.33", "v1beta1", {"extendedResourceName": "example.com/x"}, ["spec.extendedResourceName"]),
        ("1.34", "v1beta1", {"extendedResourceName": "example.com/x"}, []),
        ("1.34", "v1", {"config": [{"opaque": {"driver": "d", "x": None}}]}, ["spec.config[0].opaque.x"]),
    ],
)
def test_a_field_is_known_where_its_release_has_it(
    release: str, version: str, spec: dict[str, Any], unknown: list[str]
) -> None:
    doc = {"apiVersion": f"resource.k8s.io/{version}", "kind": "DeviceClass", "metadata": {"name": "c"}, "spec": spec}
    if not unknown:
        models.from_document(doc, release=release)
        return
    with pytest.raises(DecodeError) as caught:
        models.from_document(doc, release=release)
    assert caught.value.messages == [f'unknown field "{path}"' for path in unknown]


def test_map_keys_are_written_after_a_dot_as_strict_decoding_does() -> None:
    doc: dict[str, Any] = {
        "spec": {"devices": [{"name": "d", "basic": {"attributes": {"example.com/x": {"int": 1, "list": [1]}}}}]}
    }
    problems = apifields.strip_unknown(doc, "ResourceSlice", "v1beta1", "1.33")
    place = ("spec", "devices", 0, "basic", "attributes", "example.com/x", "list", "[key]")
    assert problems == [("spec.devices[0].basic.attributes.example.com/x.list", place)]
    assert doc["spec"]["devices"][0]["basic"]["attributes"]["example.com/x"] == {"int": 1}
