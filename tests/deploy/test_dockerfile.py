"""The Dockerfile, checked by reading it: no Docker engine here, so its stated properties are
asserted from the parsed instructions and the build context that .dockerignore leaves."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field

import pytest
import yaml

from .helmkit import MANIFESTS, REPO

COMPILERS = re.compile(r"\b(gcc|g\+\+|clang|cc|make|build-essential|python3?-dev|libc6?-dev|cargo|rustc)\b")


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for key, args in self.instructions if key == keyword]


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, with continuations joined and comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        result.append((keyword.upper(), args.strip()))
        pending = ""
    assert not pending, "dangling line continuation"
    return result


def stages() -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the build stages in order."""
    args: dict[str, str] = {}
    found: list[Stage] = []
    for keyword, rest in instructions((REPO / "Dockerfile").read_text()):
        if keyword == "FROM":
            base, _, name = rest.partition(" AS ")
            found.append(Stage(re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base.strip()), name.strip()))
        elif keyword == "ARG" and not found:
            key, _, default = rest.partition("=")
            args[key] = default
        else:
            found[-1].instructions.append((keyword, rest))
    return args, found


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list), "exec form keeps signals going to kubedevice, not a shell"
    return [str(v) for v in value]


# Debian's python3 per suite: the interpreter the virtualenv links to.
DEBIAN_PYTHON = {"bookworm": (3, 11), "trixie": (3, 13)}


def named(found: list[Stage], name: str) -> Stage:
    (stage,) = (stage for stage in found if stage.name == name)
    return stage


def test_build_and_runtime_share_a_debian_slim_base_whose_python_meets_requires_python() -> None:
    _, found = stages()
    assert [stage.name for stage in found] == ["base", "build", "runtime"]
    assert named(found, "build").base == named(found, "runtime").base == "base", (
        "the copied virtualenv links to the base stage's interpreter"
    )
    match = re.fullmatch(r"debian:(\w+)-slim", found[0].base)
    assert match, found[0].base
    floor = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert DEBIAN_PYTHON[match[1]] >= tuple(int(x) for x in floor.lstrip(">=").split("."))


def test_final_stage_only_copies_the_built_virtualenv_and_builds_nothing() -> None:
    _, found = stages()
    final = found[-1]
    copies = final.all("COPY")
    assert copies == ["--from=build /opt/kubedevice /opt/kubedevice"]
    assert not final.all("RUN"), "no package manager, compiler or pip run in the final stage"
    assert not final.all("ADD")
    for _, args in final.instructions:
        assert not COMPILERS.search(args)


def test_the_shared_base_keeps_no_apt_lists() -> None:
    (run,) = named(stages()[1], "base").all("RUN")
    assert "--no-install-recommends" in run and "rm -rf /var/lib/apt/lists/*" in run


def test_final_stage_runs_as_a_numeric_non_root_user() -> None:
    _, found = stages()
    (user,) = found[-1].all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0
    assert not gid or (gid.isdigit() and int(gid) != 0)


def test_no_build_stage_installs_compilers_or_keeps_pip() -> None:
    _, found = stages()
    runs = " ".join(run for stage in found for run in stage.all("RUN"))
    assert not COMPILERS.search(runs), "every dependency ships wheels; a compiler means a missing wheel"
    assert "uninstall --yes pip" in runs


def test_build_stage_installs_the_lock_then_the_wheel_without_dependencies() -> None:
    """The image runs what requirements/run.txt pins, as scripts/image.sh and the README install."""
    _, found = stages()
    runs = " ".join(run for stage in found for run in stage.all("RUN"))
    assert "--require-hashes -r requirements/run.txt" in runs
    assert "--no-deps /wheel/kubedevice-*.whl" in runs
    image_sh = (REPO / "scripts" / "image.sh").read_text()
    assert "--require-hashes -r requirements/run.txt" in image_sh
    assert "--no-deps /wheel/kubedevice-*.whl" in image_sh


def test_entrypoint_is_the_console_script_and_cmd_is_the_daemonset_line() -> None:
    _, found = stages()
    final = found[-1]
    (entrypoint,) = final.all("ENTRYPOINT")
    (cmd,) = final.all("CMD")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert exec_form(entrypoint) == ["kubedevice"] and "kubedevice" in scripts
    daemonset = next(
        d for d in yaml.safe_load_all((MANIFESTS / "kubedevice.yaml").read_text()) if d and d["kind"] == "DaemonSet"
    )
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert exec_form(cmd) == args[: len(exec_form(cmd))]
    assert any("PATH=/opt/kubedevice/bin:" in env for env in final.all("ENV"))
    (expose,) = final.all("EXPOSE")
    assert expose == args[args.index("--metrics-address") + 1].lstrip(":")


def dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.lstrip("!").strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, candidate) for candidate in candidates):
            excluded = not negate
    return excluded


def ignore_patterns() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "src/kubedevice/__init__.py",
        "src/kubedevice/metrics.py",
        "src/kubedevice/api/api.proto",
        "src/kubedevice/py.typed",
        "requirements/run.txt",
        "MANIFEST.in",
    ],
)
def test_build_context_keeps_what_the_build_needs(path: str) -> None:
    assert not dockerignore_excludes(path, ignore_patterns())


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        "tests/test_metrics.py",
        "benchmarks/x.py",
        "deploy/manifests/a.yaml",
        "src/kubedevice/__pycache__/x.pyc",
        "src/kubedevice.egg-info/PKG-INFO",
        ".mypy_cache/x",
        "Dockerfile",
    ],
)
def test_build_context_leaves_out_everything_else(path: str) -> None:
    assert dockerignore_excludes(path, ignore_patterns())


def test_every_copy_source_exists_and_survives_dockerignore() -> None:
    _, found = stages()
    patterns = ignore_patterns()
    for stage in found:
        for copy in stage.all("COPY"):
            if copy.startswith("--from="):
                continue
            *sources, _destination = copy.split()
            for source in sources:
                assert (REPO / source).exists(), source
                assert not dockerignore_excludes(source, patterns), source
    # and the package files the wheel needs are all in the context
    for file in (REPO / "src" / "kubedevice").rglob("*"):
        relative = file.relative_to(REPO).as_posix()
        if file.is_file() and "__pycache__" not in relative:
            assert not dockerignore_excludes(relative, patterns), relative


def test_the_matcher_follows_docker_semantics() -> None:
    patterns = ["*", "!src/", "**/__pycache__"]
    assert dockerignore_excludes("top.txt", patterns)
    assert not dockerignore_excludes("src/a/b.py", patterns)
    assert dockerignore_excludes("src/a/__pycache__/b.pyc", patterns)
    assert not dockerignore_excludes("x.py", ["*.txt"])
    assert not dockerignore_excludes("a/b.txt", ["*.txt"])  # a bare * never crosses a slash
