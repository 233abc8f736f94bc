"""One wording for one rule: the config and the DRA tools judge a Kubernetes name with the same
functions (:mod:`kubedevice.apimachinery`), so they say the same thing about the same name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubedevice.apimachinery import content, meta, validation
from kubedevice.apimachinery.field import Path
from kubedevice.config import ConfigError, parse_config
from kubedevice.dra import features
from kubedevice.dra.models import from_document
from kubedevice.dra.validation import validate

KEYS = ["-gpu", "Example.com/gpu", "a/b/c", "", "k" * 64, "/gpu", "example.com/", "é"]
VALUES = ["-x", "v" * 64, "a b", "é"]
RESOURCES = ["x", "kubernetes.io/x", "requests.example.com/x", "Example.com/x", "a" * 245 + "/x", "a/b/c"]


def config_error(resource: dict[str, Any]) -> str:
    resource = {"name": "example.com/x", "static": {"count": 1}} | resource
    with pytest.raises(ConfigError) as caught:
        parse_config(json.dumps({"resources": [resource]}))
    return str(caught.value)


def taint_rule(key: str, value: str) -> Any:
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"taint": {"key": key, "value": value, "effect": "NoSchedule"}},
    }
    return from_document(doc, release=features.NEWEST)


@pytest.mark.parametrize("key", KEYS)
def test_a_label_key_is_worded_as_the_api_server_words_a_taint_key(key: str) -> None:
    dra = [e.detail for e in validate(taint_rule(key, "v")) if e.field == "spec.taint.key"]
    assert dra and dra == content.is_label_key(key)
    assert "; ".join(dra) in config_error({"node_selector": {key: "x"}})


@pytest.mark.parametrize("value", VALUES)
def test_a_label_value_is_worded_as_the_api_server_words_a_taint_value(value: str) -> None:
    dra = [e.detail for e in validate(taint_rule("k", value)) if e.field == "spec.taint.value"]
    assert dra and dra == content.is_label_value(value)
    assert "; ".join(dra) in config_error({"node_selector": {"k": value}})


@pytest.mark.parametrize("name", RESOURCES)
def test_a_resource_name_is_worded_as_the_api_server_words_an_extended_resource_name(name: str) -> None:
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "c"},
        "spec": {"extendedResourceName": name},
    }
    dra = [e.detail for e in validate(from_document(doc), release="1.37")]
    assert dra
    assert "; ".join(dra) in config_error({"name": name})


def test_the_wording_of_a_release_before_1_35() -> None:
    """apimachinery v0.34's ``IsQualifiedName`` and ``IsValidLabelValue`` say "a qualified name" and
    "characters"; v0.35's say "a valid label key" and "bytes" (``content.IsLabelKey``)."""
    assert validation.is_qualified_name("a/b/c", "1.34")[0].startswith("a qualified name must consist of")
    assert validation.is_qualified_name("a/b/c", "1.35")[0].startswith("a valid label key must consist of")
    assert validation.is_valid_label_value("v" * 64, "1.34")[0] == "must be no more than 63 characters"
    assert validation.is_valid_label_value("v" * 64, "1.35")[0] == "must be no more than 63 bytes"
    assert validation.is_qualified_name("k" * 64, "1.34") == ["name part must be no more than 63 characters"]


@pytest.mark.parametrize(
    ("prefix", "masked"),
    [("gpu-", "gpa"), ("-", "-"), ("a..-", "a.a"), ("ab", "ab"), ("é-", "\udcc3a")],
)
def test_mask_trailing_dash_drops_two_bytes_as_go(prefix: str, masked: str) -> None:
    assert meta.mask_trailing_dash(prefix) == masked


def test_a_generated_name_keeps_58_bytes_of_the_prefix() -> None:
    assert meta.generated_name("", "é" * 40) == "é" * 29 + "xxxxx"
    assert meta.generated_name("given", "ignored-") == "given"
    errors = meta.validate_object_meta({"generateName": "é" * 40}, Path("metadata"), False, features.NEWEST)
    assert [e.field for e in errors] == ["metadata.generateName", "metadata.name"]
