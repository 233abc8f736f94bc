"""Config errors: one line, the user's own words, the place in the file, a suggestion for a typo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubedevice.config import ConfigError, load_config, parse_config
from kubedevice.plugin_dir import resolve_plugin_dir

GOOD = "resources:\n  - name: example.com/x\n    static: {count: 1}\n"


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "c.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("resources:", "resource:"), "c.yaml:1:1: unknown key 'resource' (did you mean 'resources'?)"),
        (GOOD.replace("static:", "statc:"), "c.yaml:3:5: resources[0]: unknown key 'statc' (did you mean 'static'?)"),
        (
            GOOD + "    health: {interval_seconds: 1, failure_treshold: 2}\n",
            "c.yaml:4:35: resources[0].health: unknown key 'failure_treshold' (did you mean 'failure_threshold'?)",
        ),
        (
            "resources:\n  - name: example.com/x\n    pci: {vendor: '10ee', clas: '12'}\n",
            "c.yaml:3:27: resources[0].pci: unknown key 'clas' (did you mean 'class'?)",
        ),
        (GOOD + "plugin_dri: /x\n", "c.yaml:4:1: unknown key 'plugin_dri' (did you mean 'plugin_dir'?)"),
    ],
)
def test_unknown_keys_are_named_with_the_nearest_valid_one(text: str, expected: str) -> None:
    assert error_of(text) == expected


def test_an_unknown_key_without_a_near_match_lists_the_valid_ones() -> None:
    message = error_of(GOOD + "    zzzzzz: 1\n")
    assert message.startswith("c.yaml:4:5: resources[0]: unknown key 'zzzzzz' (valid keys: name, static, glob,")


def test_a_key_inside_a_health_check_is_checked_against_that_check_type() -> None:
    message = error_of(GOOD + "    health: {checks: [{type: exec, argv: [x], timeout: 3}]}\n")
    where = "c.yaml:4:47: resources[0].health.checks[0]"
    assert message == f"{where}: unknown key 'timeout' (did you mean 'timeout_seconds'?)"
    message = error_of(GOOD + "    health: {checks: [{type: exec, argv: []}]}\n")
    assert message.startswith("c.yaml:4:42: resources[0].health.checks[0].argv: List should have at least 1 item")


def test_a_bad_resource_name_quotes_what_the_user_wrote() -> None:
    message = error_of(GOOD.replace("example.com/x", "Example.com/x"))
    assert message.startswith("c.yaml:2:11: resources[0].name: resource name 'Example.com/x'")
    assert "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric" in message
    assert "requests." not in message


def test_yaml_syntax_errors_are_file_line_col() -> None:
    assert error_of("resources: [\n").startswith("c.yaml:2:1: invalid YAML: ")


def test_a_missing_file_has_no_errno(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: cannot read: no such file or directory"


def test_plugin_dir_order_is_flag_env_config_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEDEVICE_PLUGIN_DIR", raising=False)
    assert resolve_plugin_dir(None) == Path("/var/lib/kubelet/device-plugins")
    assert resolve_plugin_dir(None, Path("/cfg")) == Path("/cfg")
    monkeypatch.setenv("KUBEDEVICE_PLUGIN_DIR", "/env")
    assert resolve_plugin_dir(None, Path("/cfg")) == Path("/env")
    assert resolve_plugin_dir(Path("/flag"), Path("/cfg")) == Path("/flag")


def test_a_command_reports_an_unknown_key_on_one_line_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(GOOD.replace("resources:", "resource:"))
    result = subprocess.run(
        [sys.executable, "-m", "kubedevice", "dra", "slices", "--config", str(config), "--node", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"kubedevice: {config}:1:1: unknown key 'resource' (did you mean 'resources'?)\n"


def test_dra_refuses_index_in_container_paths() -> None:
    """A DRA driver prepares a claim's devices before any container exists: no {index} to give."""
    text = (
        "dra: {driver: null.example.com}\n"
        "resources:\n"
        "  - name: example.com/tty\n"
        "    glob: {paths: ['/dev/tty*']}\n"
        "    container_path: '/dev/t{index}'\n"
    )
    refused = r"^<config>:5:21: resources\[0\]\.container_path: '/dev/t\{index\}' uses \{index\}, which a DRA driver"
    with pytest.raises(ConfigError, match=refused):
        parse_config(text)
    mount = text.replace(
        "    container_path: '/dev/t{index}'\n", "    mounts: [{host_path: /sys, container_path: '/sys/t{index}'}]\n"
    )
    with pytest.raises(ConfigError, match=r"^<config>:5:48: resources\[0\]\.mounts\[0\]\.container_path: "):
        parse_config(mount)
    assert parse_config(text.replace("{index}", "{name}")).resources[0].container_path == "/dev/t{name}"
    owned = text.replace("    container_path: '/dev/t{index}'\n", "    device_ownership: {uid: 1000}\n    cdi: {}\n")
    with pytest.raises(ConfigError, match=r"^<config>:5:23: resources\[0\]\.device_ownership: not applied by the DRA"):
        parse_config(owned)


# -- issue #27: every error at its entry, an empty file said so, values within bounds ----------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_an_empty_file_says_so(text: str) -> None:
    assert error_of(text) == "c.yaml:1:1: the file is empty: a config is a mapping with 'resources:'"


def test_a_file_that_is_not_a_mapping_says_what_it_is() -> None:
    assert error_of("- a\n- b\n") == "c.yaml:1:1: a config is a mapping with 'resources:', not a list"


def test_a_duplicate_resource_name_points_at_the_second_entry() -> None:
    text = GOOD + "  - name: example.com/y\n    static: {count: 1}\n  - name: example.com/x\n    static: {count: 2}\n"
    assert error_of(text) == (
        "c.yaml:6:11: resources[2].name: resource 'example.com/x' is configured twice (first as resources[0])"
    )


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("    replicas: '3'\n", "c.yaml:4:15: resources[0].replicas: Input should be a valid integer"),
        ("    replicas: 2.0\n", "c.yaml:4:15: resources[0].replicas: Input should be a valid integer"),
        ("    replicas: 9223372036854775808\n", "c.yaml:4:15: resources[0].replicas: Input should be less than"),
        (
            "    health: {interval_seconds: .inf}\n",
            "c.yaml:4:32: resources[0].health.interval_seconds: Input should be a finite number",
        ),
        (
            "    health: {failure_threshold: 99999}\n",
            "c.yaml:4:33: resources[0].health.failure_threshold: Input should be less",
        ),
        ("    one_replica_per_device: 'yes'\n", "c.yaml:4:29: resources[0].one_replica_per_device: Input should"),
        ("    udev: {subsystem: tty}\n", "c.yaml:4:11: resources[0].udev: exactly one source of static, glob"),
        ("    static: null\n", "c.yaml:3:13: resources[0].static: exactly one source of static, glob, usb"),
    ],
)
def test_numbers_and_bools_are_strict_and_bounded_and_blame_their_entry(entry: str, expected: str) -> None:
    text = GOOD + entry if "static" not in entry else GOOD.replace("    static: {count: 1}\n", entry)
    assert error_of(text).startswith(expected)


def test_a_path_past_path_max_is_refused() -> None:
    message = error_of(GOOD.replace("static: {count: 1}", "static: {count: 1, paths: [/" + "d/" * 2048 + "x]}"))
    assert message.startswith("c.yaml:3:32: resources[0].static.paths[0]: String should have at most 4096 characters")
    message = error_of(GOOD.replace("static: {count: 1}", "static: {count: 1, paths: [/" + "é" * 2100 + "]}"))
    assert "is 4201 bytes, over the 4095 a path may have (PATH_MAX)" in message


def test_static_ids_past_63_characters_are_refused_at_the_name() -> None:
    name = "example.com/" + "a" * 60
    message = error_of(f"resources:\n  - name: {name}\n    static: {{count: 20}}\n    replicas: 2\n")
    assert message.startswith(
        f"c.yaml:2:11: resources[0].name: static devices of this resource get IDs up to '{'a' * 60}-19::1'"
    )
    assert "over the 63 the device plugin API allows" in message


def test_more_values_than_a_config_holds_are_refused_while_reading() -> None:
    """200,000 env entries took minutes to parse; reading stops at the limit (10,000 values)."""
    text = GOOD + "    env:\n" + "".join(f"      V{i}: x\n" for i in range(200_000))
    assert error_of(text) == "c.yaml:4999:7: invalid YAML: more than 10,000 values"
