"""kubedevice.testing.gobuild: cached by source, atomic, and clear when Go is missing or fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kubedevice.testing import gobuild

PROGRAM = 'package main\n\nimport "fmt"\n\nfunc main() {{ fmt.Println("{word}") }}\n'


@pytest.fixture
def go(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip without Go; keep Go's own build cache, which also follows XDG_CACHE_HOME, warm."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go toolchain not installed")
    gocache = subprocess.run([go, "env", "GOCACHE"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("GOCACHE", gocache)


@pytest.fixture
def cache(go: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "kubedevice"


@pytest.fixture
def module(cache: Path, tmp_path: Path) -> Path:
    root = tmp_path / "hello"
    (root / "cmd" / "hello").mkdir(parents=True)
    (root / "go.mod").write_text("module example.test/hello\n\ngo 1.22\n")
    (root / "cmd" / "hello" / "main.go").write_text(PROGRAM.format(word="one"))
    return root


def output(binary: Path) -> str:
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.strip()


def test_build_is_cached_until_a_source_changes(module: Path, cache: Path) -> None:
    first = gobuild.build(module, "./cmd/hello", "hello")
    assert first is not None and first.parent == cache and output(first) == "one"
    built = first.stat().st_mtime_ns
    assert gobuild.build(module, "./cmd/hello", "hello") == first
    assert first.stat().st_mtime_ns == built

    (module / "cmd" / "hello" / "main.go").write_text(PROGRAM.format(word="two"))
    second = gobuild.build(module, "./cmd/hello", "hello")
    assert second is not None and second != first
    assert (output(first), output(second)) == ("one", "two")
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.name, second.name])


def test_a_failed_build_carries_go_stderr_and_leaves_nothing(module: Path, cache: Path) -> None:
    (module / "cmd" / "hello" / "main.go").write_text("package main\n\nfunc main() { undefinedName() }\n")
    with pytest.raises(gobuild.BuildError, match="undefined: undefinedName"):
        gobuild.build(module, "./cmd/hello", "hello")
    assert list(cache.iterdir()) == []


def test_a_failed_install_names_the_cause(cache: Path) -> None:
    with pytest.raises(gobuild.BuildError, match="GOPROXY=off"):
        gobuild.install("example.test/absent/cmd/tool", "v1.0.0", "tool", {"GOPROXY": "off"})
    assert list((cache / "tool-v1.0.0").iterdir()) == []


def test_without_go_only_an_installed_tool_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "go.mod").write_text("module example.test/mod\n")
    assert gobuild.build(tmp_path / "mod", ".", "mod") is None
    assert gobuild.install("example.test/cmd/tool", "v1.0.0", "tool", {}) is None
    tool = gobuild.cache_dir() / "tool-v1.0.0" / "tool"
    tool.parent.mkdir(parents=True)
    tool.write_bytes(b"#!/bin/sh\n")
    assert gobuild.install("example.test/cmd/tool", "v1.0.0", "tool", {}) == tool
