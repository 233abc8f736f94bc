"""docs/conformance.md against the checker itself: its check table, thresholds, defaults and JSON.

The doc's JSON example is what ``to_json`` makes of a report built with the runner's own verdict
function, so a changed threshold or wording shows up here instead of in a reader's script.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kubedevice.conformance import CheckOptions, Phase, Report, Result, Status
from kubedevice.conformance import checks as catalogue
from kubedevice.conformance.checks import CATALOGUE
from kubedevice.conformance.model import FIRST_LIST_FAIL_S, FIRST_LIST_PASS_S, REREGISTER_PASS_S, RPC_TIMEOUT_S
from kubedevice.conformance.runner import _latency

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
SAMPLE_PLUGIN_SKIPS = {Phase.PREFERRED, Phase.PRESTART}  # it advertises neither option
SAMPLE_PLUGIN_COMEBACK_S = 10.012  # measured: tests/interop/test_check_go_plugins.py


def json_example() -> str:
    """The doc's example: the Kubernetes sample device plugin's report, ``results`` cut to one entry."""
    resource = "example.com/resource"
    restart = [
        _latency(check, resource, SAMPLE_PLUGIN_COMEBACK_S, 0.0, CheckOptions())
        for check in (catalogue.REREGISTER, catalogue.RESTORED)
    ]
    others = [
        Result(check, Status.SKIP if check.phase in SAMPLE_PLUGIN_SKIPS else Status.PASS, "", resource)
        for check in CATALOGUE
        if check.phase is not Phase.RESTART
    ]
    document = Report({"plugin_dir": "/tmp/dp"}, [*others, *restart]).to_json()
    document["results"] = [restart[0].to_json()]
    return json.dumps(document, indent=2) + "\n"


def section(title: str) -> str:
    text = DOC.read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def table_rows(text: str) -> dict[str, str]:
    """First cell (without backticks) to the whole row, for every row of every table in ``text``."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            rows[line.split("|")[1].strip().strip("`")] = line
    return rows


def test_the_json_example_is_what_the_checker_writes() -> None:
    [block] = re.findall(r"```json\n(.*?)```", section("JSON"), re.DOTALL)
    assert block == json_example()


def test_the_check_table_lists_the_catalogue_in_order() -> None:
    assert list(table_rows(section("The checks"))) == [check.id for check in CATALOGUE]


def test_the_thresholds_in_the_doc_are_the_models() -> None:
    rows = table_rows(section("The checks"))
    assert f"pass ≤ {FIRST_LIST_PASS_S:g} s, warn ≤ {FIRST_LIST_FAIL_S:g} s," in rows["devices.first_list"]
    assert f"pass ≤ {REREGISTER_PASS_S:g} s, fail beyond" in rows["restart.reregister"]
    assert f"Every RPC has a {RPC_TIMEOUT_S:g} s\ndeadline" in DOC.read_text()


def test_the_option_defaults_in_the_doc_are_the_runners() -> None:
    options = table_rows(DOC.read_text().split("## The checks\n", 1)[0])
    defaults = CheckOptions()
    assert f"| {defaults.timeout:g} |" in options["--timeout S"]
    assert f"| {defaults.restart_timeout:g} |" in options["--restart-timeout S"]
