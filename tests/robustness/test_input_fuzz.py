"""Hostile input files: config, DRA YAML, CEL input lines.

Each command answers one clear line and exits 2 (``dra cel`` answers one JSON line per input
line and goes on), within bounded time and memory (a child process under a 1 GiB address-space
limit and a 60 s timeout), with no traceback. hypothesis covers the parsers in process.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubedevice.config import ConfigError, parse_config
from kubedevice.dra import models
from kubedevice.dra.cel.cli import answer

LIMIT_BYTES = 1024**3


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def kubedevice(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    raw = subprocess.run(
        [sys.executable, "-m", "kubedevice", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        preexec_fn=_limits,
        check=False,
    )
    out, err = raw.stdout.decode(errors="replace"), raw.stderr.decode(errors="replace")
    return subprocess.CompletedProcess(raw.args, raw.returncode, out, err)


def billion_laughs(tail: str) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 10):
        lines.append(f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n" + tail.replace("BOMB", "*l9") + "\n"


HOSTILE: dict[str, tuple[bytes, str]] = {
    "yaml bomb": (billion_laughs("resources: BOMB").encode(), "aliases expand to more than"),
    "deep list": (b"resources: " + b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
    "deep map": (b"resources: " + b"{a: " * 50_000 + b"1" + b"}" * 50_000, "nested deeper than 100 levels"),
    "recursive alias": (b"resources: &r [*r]\n", "recursive alias"),
    "invalid utf-8": (b"resources:\n  - name: example.com/\xff\xfe\n", "not UTF-8: byte 0xff at offset 33"),
}
DRA_BOMB = billion_laughs(
    "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: x}\nspec: {selectors: BOMB}"
)


def one_error_line(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_config(tmp_path: Path, case: str) -> None:
    blob, expected = HOSTILE[case]
    config = tmp_path / "config.yaml"
    config.write_bytes(blob)
    one_error_line(kubedevice("discover", "--config", str(config)), expected)


@pytest.mark.parametrize("case", ["deep list", "invalid utf-8"])
def test_hostile_dra_file(tmp_path: Path, case: str) -> None:
    blob, expected = HOSTILE[case]
    manifest = tmp_path / "dra.yaml"
    manifest.write_bytes(blob)
    one_error_line(kubedevice("dra", "validate", str(manifest)), expected)


def test_dra_yaml_bomb(tmp_path: Path) -> None:
    manifest = tmp_path / "dra.yaml"
    manifest.write_text(DRA_BOMB)
    one_error_line(kubedevice("dra", "validate", str(manifest)), "aliases expand to more than")


def test_100_mb_files_are_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    line = b"  - name: example.com/x\n    static: {count: 1, paths: [/dev/null]}\n"
    with big.open("wb") as handle:
        handle.write(b"resources:\n")
        for _ in range(100 * 1024 * 1024 // (len(line) * 1000) + 1):
            handle.write(line * 1000)
    one_error_line(kubedevice("discover", "--config", str(big)), "larger than 16 MiB")
    one_error_line(kubedevice("dra", "validate", str(big)), "larger than 16 MiB")


def test_cel_lines_never_end_the_stream() -> None:
    lines = [
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe{}",
        json.dumps({"expression": "(" * 5000 + "true" + ")" * 5000}).encode(),
        json.dumps({"expression": "a" * 2_000_000}).encode(),
        b'{"expression": "true"}',
    ]
    result = kubedevice("dra", "cel", stdin=b"\n".join(lines) + b"\n")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a.get("error") for a in answers] == ["input", "input", "compile", "compile", None]
    assert answers[-1] == {"result": True}


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
yaml_ish = st.text(alphabet=st.sampled_from(list("[]{}:,-&*!|>'\"#%@ \n\tab01resourcesname./")), max_size=300)


@given(text=st.one_of(yaml_ish, st.text(max_size=200)))
@FUZZ
def test_config_parser_only_raises_config_error(text: str) -> None:
    try:
        parse_config(text, "fuzz.yaml")
    except ConfigError as err:
        assert "\n" not in str(err).strip()


@given(text=st.one_of(yaml_ish, st.text(max_size=200)))
@FUZZ
def test_dra_loader_only_raises_decode_error(text: str) -> None:
    with contextlib.suppress(models.DecodeError):
        models.load_text(text, "fuzz.yaml")


@given(
    line=st.one_of(
        st.text(max_size=300),
        st.builds(
            json.dumps,
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                lambda inner: (
                    st.lists(inner, max_size=4)
                    | st.dictionaries(
                        st.sampled_from(["expression", "attributes", "capacity", "driver", "env", "features", "value"]),
                        inner,
                        max_size=4,
                    )
                ),
                max_leaves=20,
            ),
        ),
    )
)
@example(line="[" * 100_000 + "]" * 100_000)  # 101bdcd: RecursionError escaped json.loads
@FUZZ
def test_cel_answer_never_raises(line: str) -> None:
    result = answer(line)
    assert set(result) in ({"result"}, {"error", "message"})
