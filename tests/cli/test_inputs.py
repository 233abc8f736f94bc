"""Every option of every command, fed hostile values: one ``kubedevice:`` line and exit 2, never a traceback.

The commands and options come from the command tree itself (``tests/cli/tree.py``), the lazily
loaded tools included, so an option added tomorrow is tested without being named here. Its
hostile values follow from what it is declared as: its Python type (a number, a choice, a
path, a string) and its metavar (``SECONDS``, ``FILE``, ``DIR``, ``PATH``, ``NODE``,
``HOST:PORT``, ...; a ``FILE`` declared ``writable`` is one the command writes).

A value is either one the option must refuse (*refused*: exit 2, exactly one stderr line
``kubedevice: ...`` that names the option or the value, nothing on stdout: refused before the
command starts anything) or one it may accept (*maybe*: whatever happens, no traceback, no
"Exception ignored", no coroutine left unawaited; a usage error is still one line). Each runs in
every context the command has (device plugins and DRA, for instance), the other required
options given good values, as a forked ``kubedevice`` process (``tests/cli/forks.py``): refusals
cost milliseconds, and a daemon that started is stopped with SIGTERM at its deadline.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubedevice.testing.dradriver import claim_object

from .forks import Outcome, Zygote
from .tree import Command, Param, commands, is_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NULL = str(EXAMPLES / "null.yaml")
DRA_NULL = str(EXAMPLES / "dra-null.yaml")
DRA = EXAMPLES / "dra"

REFUSE_DEADLINE = 30.0
"""A refusal comes in milliseconds; this only bounds a command that started instead."""
MAYBE_DEADLINE = 1.5
"""A command that accepts a value and starts serving is stopped (SIGTERM) after this long."""

# The good command lines each value is tried in: {W} is the invocation's own fresh directory.
# A command missing here is tried bare, which its required options make a failure that says so.
CONTEXTS: dict[str, list[list[str]]] = {
    "serve": [
        ["--config", NULL, "--plugin-dir", "{W}/plugins"],
        [
            "--config",
            DRA_NULL,
            "--node",
            "node-1",
            "--claims-dir",
            "{W}/claims",
            "--kubelet-dir",
            "{W}/kubelet",
            "--cdi-dir",
            "{W}/cdi",
        ],
    ],
    "discover": [["--config", NULL]],
    "kubelet": [
        ["--plugin-dir", "{W}/plugins", "--exit-after", "0.2"],
        ["--dra", "--claims", "{W}/claims", "--kubelet-dir", "{W}/kubelet", "--exit-after", "0.2"],
    ],
    "check": [
        ["--plugin-dir", "{W}/plugins", "--timeout", "0.2", "--no-restart"],
        [
            "--dra",
            "--kubelet-dir",
            "{W}/kubelet",
            "--driver",
            "null.example.com",
            "--claims",
            "{W}/claims",
            "--timeout",
            "0.2",
        ],
    ],
    "host-service install": [
        ["--host-root", "{W}/host", "--config", NULL, "--image-root", "{W}/image", "--systemctl", "true"]
    ],
    "host-service uninstall": [["--host-root", "{W}/host", "--systemctl", "true"]],
    "host-service supervise": [
        [
            "--host-root",
            "{W}/host",
            "--config",
            NULL,
            "--systemctl",
            "true",
            "--ready-file",
            "{W}/ready",
            "--interval",
            "0.1",
        ]
    ],
    "dra validate": [[str(DRA / "class.yaml")], ["--kubeconfig", "{W}/kubeconfig"]],
    "dra convert": [["--output-version", "resource.k8s.io/v1", str(DRA / "class.yaml")]],
    "dra explain": [
        ["--class", str(DRA / "class.yaml"), "--slices", str(DRA / "slices.yaml")],
        [
            "--class",
            str(DRA / "class.yaml"),
            "--slices",
            str(DRA / "slices.yaml"),
            "--pod",
            str(DRA / "pod.yaml"),
            "--node",
            "node-1",
        ],
        ["pod/p", "--kubeconfig", "{W}/kubeconfig"],  # the cluster: an API server that refuses connections
    ],
    "dra allocate": [
        [str(DRA / "class.yaml"), str(DRA / "slices.yaml"), str(DRA / "claim.yaml"), "--node", "node-1"],
        ["--node", "node-1", "--kubeconfig", "{W}/kubeconfig"],
    ],
    "dra available": [[str(DRA / "available.yaml")], ["--kubeconfig", "{W}/kubeconfig"]],
    "dra slices": [["--config", NULL, "--node", "node-1"]],
}


@dataclass(frozen=True)
class Value:
    text: str
    refused: bool
    what: str
    judged: bool = False
    """Content a command may judge instead of refusing: a YAML document that is no object is, to
    ``dra validate``, an invalid object (exit 1, its verdict on stdout naming the file)."""


def refused(text: str, what: str, *, judged: bool = False) -> Value:
    return Value(text, True, what, judged)


def maybe(text: str, what: str) -> Value:
    return Value(text, False, what)


class Files:
    """Hostile files and directories, made once per module."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "a-dir").mkdir()
        self.dir = str(root / "a-dir")
        self.file = self._write("a-file.yaml", "resources: []\n")
        self.missing = str(root / "missing.yaml")
        self.under_file = str(root / "a-file.yaml" / "child")
        self.not_yaml = self._write("not-yaml.yaml", "a: [\n")
        self.yaml_list = self._write("list.yaml", "- 1\n- 2\n")
        self.yaml_scalar = self._write("scalar.yaml", "42\n")
        self.empty = self._write("empty.yaml", "")
        self.binary = str(root / "binary.yaml")
        Path(self.binary).write_bytes(b"\xff\xfe\x00\x01kind: \x80\n")
        self.huge = str(root / "huge.yaml")
        with open(self.huge, "wb") as handle:
            handle.truncate(17 * 1024 * 1024)  # sparse: above every reader's 16 MiB bound
        self.unreadable = self._write("unreadable.yaml", "a: 1\n")
        os.chmod(self.unreadable, 0)

    def _write(self, name: str, text: str) -> str:
        path = self.root / name
        path.write_text(text)
        return str(path)

    def input_file(self) -> list[Value]:
        values = [
            refused(self.dir, "a directory"),
            refused(self.missing, "a missing file"),
            refused(self.under_file, "a path whose parent is a file"),
            refused(self.not_yaml, "not YAML"),
            refused(self.yaml_list, "YAML of the wrong shape (a list)", judged=True),
            refused(self.yaml_scalar, "YAML of the wrong shape (a number)", judged=True),
            refused(self.binary, "not UTF-8"),
            refused(self.huge, "larger than any reader takes"),
            refused("/proc/self/mem", "a file whose read fails (EIO)"),
            maybe(self.empty, "an empty file"),
        ]
        if os.geteuid() != 0:  # root reads a file of mode 0 anyway
            values.append(refused(self.unreadable, "a file without read permission"))
        return values

    def output_file(self) -> list[Value]:
        return [
            refused(self.dir, "a directory"),
            refused(self.under_file, "a path whose parent is a file"),
            refused("{W}/no-such-dir/out", "a path whose parent is missing"),
            maybe("{W}/out", "a new file"),
        ]

    def directory(self) -> list[Value]:
        return [
            refused(self.file, "a file"),
            refused(self.under_file, "a path whose parent is a file"),
            maybe("{W}/new-dir", "a missing directory"),
            maybe("", "an empty path"),
        ]

    def any_path(self) -> list[Value]:
        return [
            refused(self.missing, "a missing path"),
            refused(self.under_file, "a path whose parent is a file"),
            maybe(self.file, "a regular file"),
            maybe(self.dir, "a directory"),
        ]


SECONDS = [
    refused("-1", "negative"),
    refused("-0.5", "negative"),
    refused("nan", "not a number"),
    refused("inf", "infinite"),
    refused("-inf", "negative infinity"),
    refused("abc", "not a number"),
    refused("", "empty"),
    maybe("0", "zero"),
    maybe("1e9", "huge"),
]
INTEGERS = [
    refused("-1", "negative"),
    refused("abc", "not a number"),
    refused("1.5", "not an integer"),
    refused("", "empty"),
    maybe("0", "zero"),
    maybe("99999999999999999999", "huge"),
]
STRINGS = [
    maybe("", "empty"),
    maybe("Bad_Value!=,", "punctuation and separators"),
    maybe("x" * 300, "long"),
    maybe("ü\t\n", "non-ASCII and control characters"),
]
# Strings whose metavar says what they are: values no such option takes.
BY_METAVAR: dict[str, list[Value]] = {
    "NODE": [
        refused("Bad_Node", "not a DNS subdomain"),
        refused("", "empty"),
        refused("x" * 254, "longer than 253"),
        refused("node..1", "an empty label"),
    ],
    "NAME": [refused("Bad_Driver", "not a DNS subdomain"), refused("", "empty")],
    "NAMESPACE/NAME": [
        refused("", "empty"),
        refused("no-slash", "no slash"),
        refused("a/b/c", "two slashes"),
        refused("Bad_NS/name", "not a namespace"),
    ],
    "HOST:PORT": [
        refused("", "empty"),
        refused("no-port", "no port"),
        refused(":99999", "port out of range"),
        refused(":-1", "negative port"),
        refused("[::1", "unclosed bracket"),
    ],
    "KEY=VALUE": [refused("no-equals", "no '='"), refused("=value", "no key")],
    "RES=N[,RES=N]": [refused("no-count", "no '='"), refused("a.com/x=-1", "negative count")],
    "NAME=BOOL,...": [
        refused("NoSuchGate=true", "unknown gate"),
        refused("DRAPartitionableDevices=maybe", "not a bool"),
    ],
    "yaml|json": [refused("xml", "not a format"), refused("", "empty")],
    "COMMAND": [refused("", "empty")],
    "NAMESPACE": [refused("Bad_NS", "not a DNS label"), refused("a.b", "a dot"), refused("", "empty")],
    "[pod/NAME]": [refused("node/x", "not a pod"), refused("pod/Bad_Name", "not a pod name")],
}


def values_for(param: Param, files: Files) -> list[Value]:
    """The hostile values of one parameter, from its type and metavar."""
    if param.choices is not None:
        return [refused("bogus", "not a choice"), refused("", "empty")]
    if is_path(param):
        kind = param.metavar
        if kind == "FILE":
            return files.output_file() if param.info is not None and param.info.writable else files.input_file()
        if kind == "DIR":
            return files.directory()
        if kind == "PATH":
            return files.any_path()
        raise AssertionError(f"{param.label}: a path option's metavar says FILE, DIR or PATH, not {kind!r}")
    if param.base is float:
        return SECONDS
    if param.base is int:
        return INTEGERS
    if param.base is str:
        if param.metavar is not None and "|" in param.metavar and param.metavar != "yaml|json":
            return [refused("0.1", "not a release"), refused("", "empty"), *STRINGS]  # --kubernetes-version
        return [*BY_METAVAR.get(param.metavar or "", []), *STRINGS]
    raise AssertionError(f"{param.label}: no hostile values for a {param.base!r}")


def invocation(context: list[str], param: Param, value: str) -> list[str]:
    """The context with ``param`` set to ``value`` (replaced if the context gives it)."""
    if param.argument:
        return [*context, value]
    args, skip = [], False
    for arg in context:
        if skip:
            skip = False
            continue
        if arg in param.opts:
            skip = True
            continue
        args.append(arg)
    option = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    return [*args, f"{option}={value}"]  # '=': a value such as '-1' is not read as an option


def problems(outcome: Outcome, value: Value, param: Param, workdir: Path) -> list[str]:
    """What is wrong with one outcome (empty: all good)."""
    found = []
    for noise in ("Traceback", "Exception ignored", "was never awaited"):
        if noise in outcome.stderr:
            found.append(f"{noise!r} on stderr")
    lines = outcome.stderr_lines
    if value.judged and (outcome.code, lines) == (1, []) and value.text in outcome.stdout:
        return found  # judged: the verdict on stdout names the file
    if value.refused:
        if outcome.stopped:
            found.append(f"not refused: still running after {REFUSE_DEADLINE:g} s")
        elif outcome.code != 2:
            found.append(f"exit code {outcome.code}, not 2")
        if len(lines) != 1 or not lines[0].startswith("kubedevice: "):
            found.append(f"{len(lines)} stderr lines, not one 'kubedevice: ...' line")
        elif not _names(lines[0], param, value.text.replace("{W}", str(workdir))):
            found.append("the line names neither the option nor the value")
        if outcome.stdout.strip():
            found.append("output before the refusal (it started)")
    elif not outcome.stopped and outcome.code == 2 and (len(lines) != 1 or not lines[0].startswith("kubedevice: ")):
        found.append(f"exit code 2 with {len(lines)} stderr lines, not one 'kubedevice: ...' line")
    elif not outcome.stopped and outcome.code not in (0, 2) and lines and not lines[-1].startswith("kubedevice: "):
        found.append(f"exit code {outcome.code} without a last 'kubedevice: ...' line")
    return found


def _names(line: str, param: Param, value: str) -> bool:
    shown = [value, repr(value), " ".join(value.split())]
    return any(opt in line for opt in param.opts) or any(v and v in line for v in shown)


def leaf_params() -> Iterator[tuple[Command, Param]]:
    for command in commands():
        if command.group:
            continue
        for param in command.params:
            if not param.flag:
                yield command, param


CASES = list(leaf_params())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    return Files(tmp_path_factory.mktemp("hostile"))


WORKERS = 2
"""Zygotes forking at once: a refusal waits mostly on its process starting and ending."""


class Zygotes:
    """A few zygotes; :meth:`run` takes whichever is free."""

    def __init__(self, zygotes: list[Zygote]) -> None:
        self.all = zygotes
        self._free: queue.Queue[Zygote] = queue.Queue()
        for zygote in zygotes:
            self._free.put(zygote)

    def run(self, args: list[str], deadline: float, cwd: Path) -> Outcome:
        zygote = self._free.get()
        try:
            return zygote.run(args, deadline, cwd=cwd)
        finally:
            self._free.put(zygote)


@pytest.fixture(scope="module")
def zygotes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygotes]:
    home = tmp_path_factory.mktemp("home")
    hidden = ("KUBECONFIG", "KUBEDEVICE_PLUGIN_DIR", "NODE_NAME", "KUBERNETES_SERVICE_HOST", "POD_UID")
    env = {k: v for k, v in os.environ.items() if k not in hidden and not k.startswith("GRPC_")}
    env |= {"HOME": str(home), "COLUMNS": "100", "NO_COLOR": "1"}
    pool = Zygotes([Zygote(tmp_path_factory.mktemp("runs"), env) for _ in range(WORKERS)])
    yield pool
    for zygote in pool.all:
        zygote.close()


# A claim allocated to the examples' DRA driver, so that the DRA contexts get past "no claim".
CLAIM = json.dumps(claim_object("claim-1", ["null-0"], driver="null.example.com", pool="node-1"))


# A kubeconfig whose API server refuses connections (port 1): the commands that read the cluster
# must say so in one line and exit 1.
UNREACHABLE = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def fresh_workdir(workdir: Path) -> Path:
    for sub in ("claims", "host", "image"):
        (workdir / sub).mkdir(parents=True)
    (workdir / "claims" / "default-claim-1.json").write_text(CLAIM)
    (workdir / "kubeconfig").write_text(UNREACHABLE)
    return workdir


def test_every_command_and_option_is_found() -> None:
    found = {(c.name, p.label) for c, p in CASES}
    known = {("serve", "--metrics-address"), ("kubelet", "--exit-after"), ("dra explain", "--node")}
    assert known <= found, sorted(found)
    assert {c.name for c in commands() if not c.group} >= {"demo", "host-service supervise", "dra available", "dra cel"}


@pytest.mark.parametrize(("command", "param"), CASES, ids=[f"{c.name}:{p.label}" for c, p in CASES])
def test_hostile_values(command: Command, param: Param, files: Files, zygotes: Zygotes, tmp_path: Path) -> None:
    cases = [(context, value) for context in CONTEXTS.get(command.name, [[]]) for value in values_for(param, files)]

    def attempt(number: int, context: list[str], value: Value) -> str | None:
        workdir = fresh_workdir(tmp_path / f"w{number}")
        args = [a.replace("{W}", str(workdir)) for a in invocation(context, param, value.text)]
        deadline = REFUSE_DEADLINE if value.refused else MAYBE_DEADLINE
        outcome = zygotes.run([*command.path, *args], deadline, cwd=workdir)
        wrong = problems(outcome, value, param, workdir)
        shutil.rmtree(workdir, ignore_errors=True)
        if not wrong:
            return None
        shown = outcome.stderr.strip()[-600:] or "(nothing on stderr)"
        return f"{' '.join(outcome.args)}\n  {value.what}: {'; '.join(wrong)}\n  {shown}"

    with ThreadPoolExecutor(WORKERS) as pool:
        report = [r for r in pool.map(attempt, range(len(cases)), *zip(*cases, strict=True)) if r is not None]
    assert not report, "\n".join(report)
