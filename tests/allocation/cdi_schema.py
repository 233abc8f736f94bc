"""The CDI JSON schema (``schema/schema.json`` and ``defs.json`` of the CDI specification),
transcribed so tests validate our spec files against the spec itself, offline."""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT7

DEFS: dict[str, Any] = {
    "definitions": {
        "uint32": {"type": "integer", "minimum": 0, "maximum": 4294967295},
        "int64": {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807},
        "ArrayOfStrings": {"type": "array", "items": {"type": "string"}},
        "FileName": {"type": "string"},
        "FilePath": {"type": "string"},
        "Env": {"$ref": "#/definitions/ArrayOfStrings"},
        "mapStringString": {"type": "object", "patternProperties": {".{1,}": {"type": "string"}}},
        "DeviceNode": {
            "type": "object",
            "properties": {
                "path": {"$ref": "#/definitions/FilePath"},
                "hostPath": {"$ref": "#/definitions/FilePath"},
                "permissions": {"type": "string"},
                "type": {"type": "string"},
                "major": {"$ref": "#/definitions/int64"},
                "minor": {"$ref": "#/definitions/int64"},
                "uid": {"$ref": "#/definitions/uint32"},
                "gid": {"$ref": "#/definitions/uint32"},
            },
            "required": ["path"],
        },
        "Mount": {
            "type": "object",
            "properties": {
                "hostPath": {"$ref": "#/definitions/FilePath"},
                "containerPath": {"$ref": "#/definitions/FilePath"},
                "options": {"$ref": "#/definitions/ArrayOfStrings"},
                "type": {"type": "string"},
            },
            "required": ["hostPath", "containerPath"],
        },
        "Hook": {
            "type": "object",
            "properties": {
                "hookName": {"type": "string"},
                "path": {"$ref": "#/definitions/FilePath"},
                "args": {"$ref": "#/definitions/ArrayOfStrings"},
                "env": {"$ref": "#/definitions/ArrayOfStrings"},
                "timeout": {"$ref": "#/definitions/uint32"},
            },
            "required": ["hookName", "path"],
        },
        "containerEdits": {
            "type": "object",
            "properties": {
                "env": {"type": "array", "items": {"$ref": "#/definitions/Env"}},
                "deviceNodes": {"type": "array", "items": {"$ref": "#/definitions/DeviceNode"}},
                "mounts": {"type": "array", "items": {"$ref": "#/definitions/Mount"}},
                "hooks": {"type": "array", "items": {"$ref": "#/definitions/Hook"}},
            },
        },
        "annotations": {"$ref": "#/definitions/mapStringString"},
    }
}

SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "cdiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "annotations": {"$ref": "defs.json#/definitions/annotations"},
        "devices": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "annotations": {"$ref": "defs.json#/definitions/annotations"},
                    "containerEdits": {"$ref": "defs.json#/definitions/containerEdits"},
                },
                "required": ["name", "containerEdits"],
                "additionalProperties": False,
            },
        },
        "containerEdits": {"$ref": "defs.json#/definitions/containerEdits"},
    },
    "required": ["cdiVersion", "kind", "devices"],
    "additionalProperties": False,
}

# The name rules the schema leaves to the CDI parser (pkg/parser): vendor/class and device names.
KIND = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
RELEASED_VERSIONS = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0"}


def validate_spec(document: dict[str, Any]) -> None:
    """Raise if ``document`` is not a valid CDI spec (schema plus name and version rules)."""
    registry: Registry[Any] = Registry().with_resource("defs.json", DRAFT7.create_resource(DEFS))
    Draft7Validator(SCHEMA, registry=registry).validate(document)
    assert document["cdiVersion"] in RELEASED_VERSIONS, document["cdiVersion"]
    assert KIND.match(document["kind"]), document["kind"]
    for device in document["devices"]:
        assert DEVICE_NAME.match(device["name"]), device["name"]
        for node in device["containerEdits"].get("deviceNodes", []):
            assert node["path"].startswith("/") and set(node.get("permissions", "")) <= set("rwm")


def qualified(name: str) -> bool:
    kind, sep, device = name.partition("=")
    return bool(sep and KIND.match(kind) and DEVICE_NAME.match(device))
