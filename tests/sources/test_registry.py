"""The source registry is what the schema and discovery know of sources: one entry per kind."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kubedevice.sources.registry import SOURCE_KINDS, SOURCES
from kubedevice.sources.schema import ResourceConfig


def test_every_registered_source_is_a_typed_field_of_a_resource() -> None:
    for kind, source in SOURCES.items():
        assert source.kind == kind
        assert ResourceConfig.model_fields[kind].annotation == source.config | None


def test_the_one_source_rule_names_the_registry_s_kinds_in_its_order() -> None:
    with pytest.raises(ValidationError) as info:
        ResourceConfig.model_validate({"name": "example.com/x"})
    assert f"exactly one source of {', '.join(SOURCE_KINDS)} is required (got none)" in str(info.value)


def test_each_source_is_chosen_by_its_key() -> None:
    configs = {
        "static": {"count": 1},
        "glob": {"paths": ["/dev/x"]},
        "usb": {"vendor": "1a6e"},
        "pci": {"vendor": "10ee"},
        "udev": {"subsystem": "tty"},
    }
    for kind in SOURCE_KINDS:
        resource = ResourceConfig.model_validate({"name": "example.com/x", kind: configs[kind]})
        source, config = resource.source
        assert (resource.source_kind, source) == (kind, SOURCES[kind])
        assert isinstance(config, source.config)
