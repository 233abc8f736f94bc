"""Config validation: the four documented configs pass, bad input fails naming the field."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from kubedevice.sources.schema import ExecCheck, ResourceConfig

from .conftest import FOUR_CONFIGS


def errors(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        ResourceConfig.model_validate(data)
    return [(".".join(map(str, e["loc"])), e["msg"]) for e in info.value.errors()]


def test_the_four_documented_configs_validate_as_written() -> None:
    parsed = [ResourceConfig.model_validate(r) for r in yaml.safe_load(FOUR_CONFIGS)["resources"]]
    assert [r.source_kind for r in parsed] == ["static", "glob", "usb", "pci"]
    fpga = parsed[3].pci
    assert fpga is not None and (fpga.vendor, fpga.pci_class, fpga.vfio) == ("10ee", "1200", True)


@pytest.mark.parametrize(
    ("data", "where", "fragment"),
    [
        ({"name": "a.com/x", "static": {"count": 1, "paths": ["dev/null"]}}, "static.paths.0", "must be absolute"),
        ({"name": "a.com/x", "glob": {"paths": ["/dev/../etc/*"]}}, "glob.paths.0", "'..'"),
        ({"name": "a.com/x", "static": {"count": 1}, "permissions": "rwx"}, "permissions", "letters from 'rwm'"),
        ({"name": "a.com/x", "usb": {"vendor": "1a6"}}, "usb.vendor", "4 hex digits"),
        ({"name": "a.com/x", "usb": {"vendor": "zz6e"}}, "usb.vendor", "4 hex digits"),
        ({"name": "a.com/x", "usb": {"vendor": 1234}}, "usb.vendor", "must be quoted"),
        ({"name": "a.com/x", "pci": {"vendor": "10ee", "class": "120"}}, "pci.class", "2, 4 or 6 hex digits"),
        ({"name": "x", "static": {"count": 1}}, "name", "domain-prefixed path"),
        ({"name": "kubernetes.io/x", "static": {"count": 1}}, "name", 'must not have "kubernetes.io/" domain'),
        ({"name": "a.com/x"}, "", "exactly one source"),
        ({"name": "a.com/x", "static": {"count": 1}, "glob": {"paths": ["/dev/a*"]}}, "", "got static, glob"),
        ({"name": "a.com/x", "static": {"count": 1}, "colour": "red"}, "colour", "Extra inputs"),
        ({"name": "a.com/x", "static": {"count": 1}, "env": {"A": "{idz}"}}, "env", "unknown field(s) idz"),
        ({"name": "a.com/x", "static": {"count": 1}, "env": {"1A": "x"}}, "env", "invalid environment"),
        ({"name": "a.com/x", "static": {"count": 0}}, "static.count", "greater than or equal to 1"),
        (
            {"name": "a.com/x", "static": {"count": 1}, "mounts": [{"host_path": "lib"}]},
            "mounts.0.host_path",
            "absolute",
        ),
        ({"name": "a.com/x", "static": {"count": 1}, "cdi": {"kind": "nodash"}}, "cdi", "vendor/class"),
        (
            {"name": "a.com/x", "static": {"count": 1}, "health": {"checks": [{"type": "ping"}]}},
            "health.checks.0",
            "tag",
        ),
        (
            {
                "name": "a.com/x",
                "static": {"count": 1},
                "health": {"checks": [{"type": "sysfs", "attribute": "x", "equals": "1"}]},
            },
            "",
            "must be absolute for a static source",
        ),
        (
            {"name": "a.com/x", "static": {"count": 1}, "health": {"failure_threshold": 0}},
            "health.failure_threshold",
            "greater than or equal to 1",
        ),
    ],
)
def test_bad_config_is_refused_at_the_field(data: dict[str, Any], where: str, fragment: str) -> None:
    found = errors(data)
    assert any(loc == where and fragment in msg for loc, msg in found), found


def test_ids_are_normalised_to_lowercase_hex() -> None:
    parsed = ResourceConfig.model_validate({"name": "a.com/x", "pci": {"vendor": "0x10EE", "device": "903F"}})
    assert parsed.pci is not None and (parsed.pci.vendor, parsed.pci.device) == ("10ee", "903f")


def test_exec_check_is_an_argv_list_with_known_placeholders_only() -> None:
    ok = ResourceConfig.model_validate(
        {
            "name": "a.com/x",
            "static": {"count": 1},
            "health": {"checks": [{"type": "exec", "argv": ["probe", "{path}"]}]},
        }
    )
    assert isinstance(ok.health.checks[0], ExecCheck)
    bad = errors(
        {"name": "a.com/x", "static": {"count": 1}, "health": {"checks": [{"type": "exec", "argv": "probe {x}"}]}}
    )
    assert bad and bad[0][0].startswith("health.checks.0")
