"""Each failure a new user met in a fresh clone (issue #27), as that user met it: the real command.

Every refusal is one ``kubedevice:`` line and the documented exit code: 2 for bad input, 1 for a
failed dependency (a port another process holds); a library caller gets the same message as a
typed exception. ``test_inputs.py`` covers the classes over every option; these are the instances.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubedevice
from kubedevice.errors import DependencyError
from kubedevice.kubeclient import KubeAccessError, load_kubeconfig
from kubedevice.metrics import ListenError, Metrics, Readiness, start_http_server

from .tree import commands

ROOT = Path(__file__).resolve().parents[2]
NULL = ROOT / "examples" / "null.yaml"
DRA_NULL = ROOT / "examples" / "dra-null.yaml"
DRA = ROOT / "examples" / "dra"
NOISE = ("Traceback", "Exception ignored", "was never awaited")


def kubedevice_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubedevice", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The refusal's single ``kubedevice:`` line, after checking the exit code and that nothing else was said."""
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, len(lines)) == (code, 1), result.stderr
    assert lines[0].startswith("kubedevice: "), result.stderr
    assert not [n for n in NOISE if n in result.stderr], result.stderr
    return lines[0].removeprefix("kubedevice: ")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process (here: this one) listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def dra_serve(tmp_path: Path, *extra: str | Path) -> list[str | Path]:
    """``serve`` of the DRA example, claims from files, on a kubelet directory that exists."""
    kubelet = tmp_path / "kubelet"
    for sub in ("plugins", "plugins_registry"):
        (kubelet / sub).mkdir(parents=True, exist_ok=True)
    (tmp_path / "claims").mkdir(exist_ok=True)
    return [
        "serve",
        "--config",
        DRA_NULL,
        "--node",
        "node-1",
        "--claims-dir",
        tmp_path / "claims",
        "--kubelet-dir",
        kubelet,
        "--cdi-dir",
        tmp_path / "cdi",
        *extra,
    ]


# --- what the daemon depends on ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["device plugins", "DRA"])
def test_a_taken_metrics_port_is_one_line_and_exit_1(tmp_path: Path, taken_port: int, mode: str) -> None:
    address = f"127.0.0.1:{taken_port}"
    if mode == "DRA":
        result = kubedevice_cli(*dra_serve(tmp_path, "--metrics-address", address))
    else:
        result = kubedevice_cli("serve", "--config", NULL, "--plugin-dir", tmp_path, "--metrics-address", address)
    assert one_line(result, 1) == (
        f"--metrics-address {address}: address already in use (another process listens there: "
        "stop it or choose another port)"
    )
    assert not list(tmp_path.rglob("*.sock")), "it served something before it failed"


def test_an_address_not_of_this_machine_is_one_line_and_exit_1(tmp_path: Path) -> None:
    address = "192.0.2.1:9500"  # TEST-NET-1: never a local address
    result = kubedevice_cli(*dra_serve(tmp_path, "--metrics-address", address))
    assert one_line(result, 1) == (
        f"--metrics-address {address}: cannot assign requested address (not an address of this machine)"
    )


def test_a_library_user_gets_the_same_line_as_a_typed_exception(taken_port: int) -> None:
    async def listen() -> None:
        await start_http_server(f"127.0.0.1:{taken_port}", Metrics.disabled(), Readiness([]))

    with pytest.raises(ListenError) as raised:
        asyncio.run(listen())
    assert isinstance(raised.value, DependencyError)
    assert str(raised.value).startswith(f"--metrics-address 127.0.0.1:{taken_port}: address already in use")


KUBECONFIGS = {
    "no current context": (
        "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
        "no current-context (kubectl config use-context NAME sets one)",
    ),
    "not YAML": ("clusters: [\n", ":2:1: not YAML: "),
    "a YAML list": ("- a\n- b\n", "a kubeconfig is a mapping (clusters, contexts, users), not a list"),
    "a context without its cluster": (
        "current-context: c\nclusters: []\ncontexts: [{name: c, context: {cluster: k}}]\n",
        "context 'c' names cluster 'k', which it lacks",
    ),
}


@pytest.mark.parametrize("case", KUBECONFIGS)
@pytest.mark.parametrize("mode", ["device plugins", "DRA"])
def test_a_broken_kubeconfig_is_one_line_naming_it(tmp_path: Path, case: str, mode: str) -> None:
    text, problem = KUBECONFIGS[case]
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(text)
    if mode == "DRA":  # without --claims-dir the driver needs the API server
        args = [arg for arg in dra_serve(tmp_path) if arg not in ("--claims-dir", tmp_path / "claims")]
        result = kubedevice_cli(*args, "--kubeconfig", kubeconfig)
    else:  # judged at start, though nothing in this config reads it
        result = kubedevice_cli("serve", "--config", NULL, "--plugin-dir", tmp_path, "--kubeconfig", kubeconfig)
    line = one_line(result, 2)
    assert line.startswith(f"kubeconfig {kubeconfig}") and problem in line, line
    with pytest.raises(KubeAccessError) as raised:  # the library's way in: the same words, typed
        load_kubeconfig(kubeconfig)
    assert str(raised.value) == line


def test_a_directory_as_kubeconfig_is_called_a_directory(tmp_path: Path) -> None:
    line = one_line(kubedevice_cli("serve", "--config", NULL, "--plugin-dir", tmp_path, "--kubeconfig", tmp_path), 2)
    assert f"'{tmp_path}' is a directory" in line, line
    with pytest.raises(KubeAccessError, match=f"kubeconfig {tmp_path}: cannot read: is a directory"):
        load_kubeconfig(tmp_path)


# --- flags that accepted nonsense ----------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--exit-after", "-5"), ("--restart-after", "-1"), ("--grace-period", "-1"), ("--admit-timeout", "-1")],
)
def test_the_simulator_refuses_negative_seconds_as_check_does(tmp_path: Path, flag: str, value: str) -> None:
    line = one_line(kubedevice_cli("kubelet", "--plugin-dir", tmp_path / "dp", f"{flag}={value}"), 2)
    assert line.startswith(f"invalid value for '{flag}': {float(value):g} is not a number of seconds"), line
    assert not (tmp_path / "dp").exists()  # refused before it started
    assert "--timeout" in one_line(kubedevice_cli("check", "--plugin-dir", tmp_path, "--timeout=-1"), 2)


def test_a_node_name_that_is_no_dns_subdomain_is_refused_before_serving(tmp_path: Path) -> None:
    args = [arg if arg != "node-1" else "Bad_Node" for arg in dra_serve(tmp_path)]
    line = one_line(kubedevice_cli(*args), 2)
    assert line.startswith("invalid value for '--node'") and "'Bad_Node' is not a node name (a lowercase" in line
    without = [arg for i, arg in enumerate(args) if "--node" not in args[i - 1 : i + 1]]
    env = {**os.environ, "NODE_NAME": "Bad_Node"}  # from the environment, the same refusal
    assert "'Bad_Node' is not a node name" in one_line(kubedevice_cli(*without, env=env), 2)


@pytest.mark.parametrize("flags", [["--node", "node-1"], ["--label", "a=b"]])
def test_explain_refuses_pod_flags_without_pod(flags: list[str]) -> None:
    result = kubedevice_cli("dra", "explain", "--class", DRA / "class.yaml", "--slices", DRA / "slices.yaml", *flags)
    assert one_line(result, 2) == "--node and --label go with --pod: the node is where the pods would be scheduled"


def test_explain_refuses_a_claim_beside_pods() -> None:
    result = kubedevice_cli(
        "dra", "explain", "--class", DRA / "class.yaml", "--slices", DRA / "slices.yaml",
        "--pod", DRA / "pod.yaml", "--node", "node-1", "--claim", DRA / "claim.yaml",
    )  # fmt: skip
    assert one_line(result, 2) == "--claim does not go with --pod: the pods' files hold their claims"


def test_a_flag_of_the_other_mode_is_refused_not_ignored(tmp_path: Path) -> None:
    line = one_line(kubedevice_cli(*dra_serve(tmp_path, "--plugin-dir", tmp_path)), 2)
    assert line.startswith("serve: --plugin-dir is for device plugins"), line
    line = one_line(kubedevice_cli("serve", "--config", NULL, "--kubelet-dir", tmp_path), 2)
    assert line.startswith("serve: --kubelet-dir is for a config with a 'dra' section"), line


# --- what the docs promise -----------------------------------------------------------------


def test_every_name_the_package_docstring_shows_imports() -> None:
    """``help(kubedevice)`` shows import lines; each must work as printed, as must ``__all__``."""
    assert kubedevice.__doc__ is not None
    shown = re.findall(r"^\s*from (\S+) import (.+)$", kubedevice.__doc__, re.MULTILINE)
    assert shown, kubedevice.__doc__
    for module, names in shown:
        namespace: dict[str, object] = {}
        exec(f"from {module} import {names}", namespace)  # the line as a reader would run it
    for name in kubedevice.__all__:
        assert hasattr(kubedevice, name), name


def test_every_dra_command_takes_the_release_and_its_gates_as_the_readme_says() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "Every `dra` command takes `--kubernetes-version" in readme and "`--feature-gates`" in readme
    dra = [c for c in commands() if c.path[:1] == ("dra",) and not c.group]
    assert {c.name for c in dra} >= {"dra validate", "dra explain", "dra allocate", "dra available", "dra slices"}
    for command in dra:
        options = {opt for param in command.params for opt in param.opts}
        # a conversion is the same whatever the gates (Kubernetes' conversion functions read none)
        wanted = (
            {"--kubernetes-version"} if command.name == "dra convert" else {"--kubernetes-version", "--feature-gates"}
        )
        assert wanted <= options, command.name


def test_what_is_free_and_what_is_published_depend_on_the_release(tmp_path: Path) -> None:
    """Without 1.36's defaults (partitionable devices, consumable capacity, taints) the API server
    drops those fields: fewer devices blocked by shared counters, slices without shared capacity.
    The example's per-device node selection needs DRAPartitionableDevices, without which a 1.35 API
    server would not store its slice at all (one judgement per object: validate's refusal)."""
    refused = kubedevice_cli("dra", "available", DRA / "available.yaml", "--kubernetes-version", "1.35")
    assert refused.returncode == 2 and "exactly one of `nodeName`" in refused.stderr, refused.stderr
    available = [
        kubedevice_cli(
            "dra",
            "available",
            DRA / "available.yaml",
            "--kubernetes-version",
            v,
            "--feature-gates",
            "DRAPartitionableDevices=true",
        )
        for v in ("1.35", "1.37")
    ]
    assert all(r.returncode == 0 for r in available), [r.stderr for r in available]
    assert available[0].stdout != available[1].stdout
    gated = kubedevice_cli("dra", "available", DRA / "available.yaml", "--feature-gates", "DRAConsumableCapacity=false")
    assert gated.returncode == 0 and gated.stdout != available[1].stdout, gated.stderr
    config = ROOT / "examples" / "dra-shared-capacity.yaml"
    slices = [
        kubedevice_cli("dra", "slices", "--config", config, "--node", "node-1", "--kubernetes-version", v)
        for v in ("1.35", "1.37")
    ]
    assert "allowMultipleAllocations" not in slices[0].stdout and "allowMultipleAllocations" in slices[1].stdout


def test_the_plugin_directory_is_named_by_where_it_came_from(tmp_path: Path) -> None:
    """The warning for a missing directory names what chose it: the variable or the config's key."""
    missing = tmp_path / "no-kubelet-here"
    config = tmp_path / "c.yaml"
    config.write_text(NULL.read_text() + f"plugin_dir: {missing}\n")
    assert "$KUBEDEVICE_PLUGIN_DIR" in first_warning(["--config", NULL], {"KUBEDEVICE_PLUGIN_DIR": str(missing)})
    assert f"plugin_dir in {config}" in first_warning(["--config", config], {})


def first_warning(args: list[str | Path], env: dict[str, str]) -> str:
    """``serve``'s first log line, then SIGTERM (it waits for its directory otherwise)."""
    base = {k: v for k, v in os.environ.items() if k != "KUBEDEVICE_PLUGIN_DIR"}
    serve = subprocess.Popen(
        [sys.executable, "-m", "kubedevice", "serve", *map(str, args)],
        stderr=subprocess.PIPE,
        text=True,
        env=base | env,
    )
    try:
        assert serve.stderr is not None
        line = serve.stderr.readline()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=60)
    assert "does not exist" in line and "--plugin-dir" not in line, line
    return line


# --- what users saw --------------------------------------------------------------------------


def test_serve_help_names_node_names_variable_once() -> None:
    help_text = " ".join(kubedevice_cli("serve", "--help", env={**os.environ, "COLUMNS": "200"}).stdout.split())
    assert help_text.count("NODE_NAME") == 1 and "[env var: NODE_NAME]" in help_text, help_text


def test_discover_into_a_file_keeps_each_row_on_one_line(tmp_path: Path) -> None:
    name = "very-long-vendor-domain.example.com/an-accelerator-with-a-long-name"
    config = tmp_path / "long.yaml"
    config.write_text(f"resources:\n  - name: {name}\n    static: {{count: 2, paths: [/dev/null]}}\n")
    out = kubedevice_cli("discover", "--config", config, env={**os.environ, "COLUMNS": "80", "FORCE_COLOR": "1"})
    rows = [row for row in out.stdout.splitlines() if "-0 " in row or "-1 " in row]
    assert len(rows) == 2 and all(name in row and "/dev/null" in row for row in rows), out.stdout


def test_a_features_file_under_a_file_says_the_parent_is_no_directory(tmp_path: Path) -> None:
    live = tmp_path / "live.yaml"
    live.write_text("")
    line = one_line(
        kubedevice_cli("serve", "--config", NULL, "--plugin-dir", tmp_path, "--features-file", live / "x"), 2
    )
    assert f"{live / 'x'} can never be written: {live} is not a directory" in line, line
