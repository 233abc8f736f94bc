"""Every Python block of the docs runs as printed: each is a file in docs/snippets/, run here as a user would.

A block and its file must be byte-identical, so the docs cannot drift from what runs. Each file
runs as its own process in a temp directory; the ones that need a kubelet get our simulator
(``kubedevice.kubelet``), and all of them end by themselves within seconds. A Python block that is
neither a snippet nor named in ``NOT_RUN`` with the reason fails ``test_every_python_block_is_accounted_for``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kubedevice.kubelet import KubeletSimulator
from kubedevice.plugin_dir import PLUGIN_DIR_ENV

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = ROOT / "docs" / "snippets"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
RUN_TIMEOUT = 60.0  # each snippet ends in seconds; this only bounds a hang on 2 busy cores

# (document, index of its ```python block) -> the snippet file that block is.
SNIPPET_OF = {
    ("README.md", 0): "smallest_plugin.py",
    ("docs/writing-a-plugin.md", 0): "smallest_plugin.py",
    ("docs/writing-a-plugin.md", 1): "check_my_plugin.py",
    ("docs/conformance.md", 0): "run_checks.py",
    ("docs/kubelet-simulator.md", 0): "kubelet_simulator.py",
    ("docs/cel.md", 0): "cel_selector.py",
    ("docs/dra.md", 0): "dra_library.py",
    ("docs/sources.md", 0): "fake_host.py",
    ("docs/dra-driver.md", 1): "seed_node.py",  # run, with the commands after it, by tests/dra/test_seed_walkthrough.py
}
NOT_RUN = {
    ("docs/real-cluster.md", 0): "needs root, unshare and a built Kubernetes; tests/e2e/ makes these calls",
    ("docs/dra-driver.md", 0): "an excerpt of src/kubedevice/examples/dra_null_driver.py, which needs a node name "
    "and an API server; tests/dra/driver/ runs that file's driver",
}


def python_blocks() -> dict[tuple[str, int], str]:
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {
        (str(doc.relative_to(ROOT)), i): block
        for doc in documents
        for i, block in enumerate(BLOCK.findall(doc.read_text()))
    }


def test_every_python_block_is_accounted_for() -> None:
    assert set(python_blocks()) == set(SNIPPET_OF) | set(NOT_RUN)
    assert {path.name for path in SNIPPETS.glob("*.py")} == set(SNIPPET_OF.values())  # no orphan file


def test_the_readme_library_example_is_the_first_python_block() -> None:
    """The README is rewritten around this example; it must stay the one this file runs."""
    first = BLOCK.search((ROOT / "README.md").read_text())
    assert first is not None and first.group(1) == (SNIPPETS / "smallest_plugin.py").read_text()


@pytest.mark.parametrize(("where", "snippet"), SNIPPET_OF.items(), ids=[f"{d}#{i}" for d, i in SNIPPET_OF])
def test_the_doc_block_is_the_snippet_file(where: tuple[str, int], snippet: str) -> None:
    assert python_blocks()[where] == (SNIPPETS / snippet).read_text(), f"{where[0]} differs from {snippet}"


def run_snippet(
    name: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python docs/snippets/NAME ARGS`` as a user runs a saved copy: its own process, a fresh directory.

    The system's temp directory stays as it is: pytest's is too deep for a plugin's socket path.
    """
    return subprocess.run(
        [sys.executable, str(SNIPPETS / name), *args],
        cwd=cwd, env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip


def assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    """Exit 0 and no traceback, not even the "exception ignored" kind printed at interpreter exit."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr


@contextmanager
def plugin_process(plugin_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """The README's library example, run as printed with ``$KUBEDEVICE_PLUGIN_DIR`` pointing at ``plugin_dir``."""
    proc = subprocess.Popen(
        [sys.executable, str(SNIPPETS / "smallest_plugin.py")],
        env={**os.environ, PLUGIN_DIR_ENV: str(plugin_dir)}, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_the_smallest_plugin_registers_says_so_and_stops_on_sigterm(tmp_path: Path) -> None:
    async def scenario(proc: subprocess.Popen[str]) -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        try:
            await sim.wait_until(lambda: sim.allocatable().get("example.com/null") == 4, RUN_TIMEOUT)
            proc.send_signal(signal.SIGTERM)
            await sim.wait_until(lambda: sim.allocatable().get("example.com/null") == 0, RUN_TIMEOUT)  # final list
        finally:
            await sim.stop()

    with plugin_process(tmp_path) as proc:
        asyncio.run(scenario(proc))
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, stderr
    assert "registered example.com/null with the kubelet" in stderr  # visible without any logging set up
    assert "Traceback" not in stderr


def test_check_my_plugin_runs_the_smallest_plugin_through_a_kubelet_restart(tmp_path: Path) -> None:
    result = run_snippet("check_my_plugin.py", str(SNIPPETS / "smallest_plugin.py"), cwd=tmp_path)
    assert_clean(result)
    assert result.stdout.splitlines() == [
        "admitted: ['null-0', 'null-1']",
        "registered again after the kubelet restart",
        "plugin exit code: 0",
    ]
    assert result.stderr.count("registered example.com/null with the kubelet") == 2  # the plugin's own log


def test_run_checks_passes_the_smallest_plugin(tmp_path: Path) -> None:
    with plugin_process(tmp_path) as plugin:
        result = run_snippet("run_checks.py", str(tmp_path), cwd=tmp_path)
        plugin.send_signal(signal.SIGTERM)
        plugin.communicate(timeout=RUN_TIMEOUT)
    assert_clean(result)
    summary = json.loads(result.stdout)
    assert summary["fail"] == 0 and summary["warn"] == 0 and summary["pass"] > 0, summary


def test_the_kubelet_simulator_example_ends_cleanly(tmp_path: Path) -> None:
    """It stops the plugin right after a kubelet restart, while the manager serves again: that
    re-serve used to outlive the stop and complain from grpc after the event loop closed."""
    result = run_snippet("kubelet_simulator.py", cwd=tmp_path)
    assert_clean(result)
    admitted, restored = result.stdout.splitlines()
    assert admitted.startswith("{'example.com/null': ['null-0', 'null-1']} (DeviceSpec(host_path='/dev/null'")
    assert restored == "{'uid-1': {'main': {'example.com/null': ['null-0', 'null-1']}}}"


def test_the_cel_example_matches(tmp_path: Path) -> None:
    result = run_snippet("cel_selector.py", cwd=tmp_path)
    assert_clean(result)
    assert result.stdout == "True\n"


def test_the_fake_host_example_runs(tmp_path: Path) -> None:
    assert_clean(run_snippet("fake_host.py", cwd=tmp_path, env={"TMPDIR": str(tmp_path)}))  # it keeps its tree


def test_the_dra_library_names_import(tmp_path: Path) -> None:
    assert_clean(run_snippet("dra_library.py", cwd=tmp_path))
