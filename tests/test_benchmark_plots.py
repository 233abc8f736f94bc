"""benchmarks/plots.py draws a valid SVG from given samples (no timing: the samples are fixed)."""

from __future__ import annotations

import argparse
import itertools
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import plots

SVG = "{http://www.w3.org/2000/svg}"


def draw(path: Path) -> Path:
    ours = [float(v) for v in range(1, 101)]  # p50 51, p99 99 (nearest rank)
    go = [0.5 * v for v in range(1, 201)]  # p50 50.5, p99 99
    return plots.ecdf(
        path,
        "Allocate round trip",
        "µs",
        [plots.Panel("idle", {"kubedevice": ours, "Go stub": go}), plots.Panel("second", {"kubedevice": ours})],
        note="test note",
    )


def test_ecdf_writes_an_svg_with_both_series_and_their_percentiles(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the benchmarks extra: bash scripts/install.sh --benchmarks")
    path = draw(tmp_path / "deep" / "allocate.svg")
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    texts = {"".join(t.itertext()) for t in root.iter(f"{SVG}text")}
    assert "kubedevice: p50 51, p99 99 µs (n=100)" in texts
    assert "Go stub: p50 50.5, p99 99 µs (n=200)" in texts
    assert {"idle", "second", "µs"} <= texts
    assert any("test note" in t for t in texts)
    assert len(list(root.iter(f"{SVG}path"))) > 4  # the curves are drawn, not only the frame


def test_ecdf_is_reproducible(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the benchmarks extra: bash scripts/install.sh --benchmarks")
    assert draw(tmp_path / "a.svg").read_bytes() == draw(tmp_path / "b.svg").read_bytes()


@pytest.mark.parametrize("samples", [[], [0.0, 1.0]])
def test_ecdf_refuses_samples_a_log_axis_cannot_show(tmp_path: Path, samples: list[float]) -> None:
    with pytest.raises(ValueError, match="Allocate: idle: ours: no samples, or one not above 0"):
        plots.ecdf(tmp_path / "x.svg", "Allocate", "µs", [plots.Panel("idle", {"ours": samples})])
    assert not (tmp_path / "x.svg").exists()


def test_a_quick_run_leaves_the_docs_pictures_alone() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    plots.add_svg_option(parser)
    assert plots.svg_dir(parser.parse_args(["--quick"])) is None
    assert plots.svg_dir(parser.parse_args(["--no-svg"])) is None
    if plots.importlib.util.find_spec("matplotlib") is not None:
        assert plots.svg_dir(parser.parse_args(["--quick", "--svg", "/tmp/x"])) == Path("/tmp/x")
        assert plots.svg_dir(parser.parse_args([])) == plots.DOCS_DIR


def test_a_long_series_is_drawn_through_evenly_spaced_ranks_with_both_ends() -> None:
    assert plots._ranks(5, most=10) == [0, 1, 2, 3, 4]
    ranks = plots._ranks(6000, most=500)
    assert len(ranks) == 500 and ranks[0] == 0 and ranks[-1] == 5999
    assert max(b - a for a, b in itertools.pairwise(ranks)) <= 13
