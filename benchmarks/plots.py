"""Latency distributions as SVG pictures, drawn by the benchmarks for docs/benchmarks.md.

A median and a p99 say little about a distribution with a long tail or two modes; an empirical
CDF of ours against the Go peer of the same run shows both. matplotlib comes from the
``benchmarks`` extra (``bash scripts/install.sh --benchmarks``) and is imported here only, when a
picture is drawn: kubedevice itself never imports it. Without it a benchmark prints its figures
and says, in one line, that it drew nothing.

The files are written reproducibly (no date, a fixed hash salt, text kept as text), so a picture
that did not change leaves git's diff empty.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from procstat import percentile  # beside this file: every benchmark puts its directory on the path

DOCS_DIR = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
"""Where the doc's command draws: docs/benchmarks.md shows the files found here."""
MOST_POINTS = 500
"""Points per curve at most (see ``_ranks``)."""


@dataclass(frozen=True)
class Panel:
    """One plot of a picture: its title and, per series name, the samples (in the picture's unit)."""

    title: str
    series: Mapping[str, Sequence[float]]


def add_svg_option(parser: argparse.ArgumentParser) -> None:
    """``--svg DIR`` and ``--no-svg``: every drawing benchmark takes the same two."""
    parser.add_argument(
        "--svg",
        type=Path,
        metavar="DIR",
        default=DOCS_DIR,
        help=f"draw the latency distributions into DIR (default {DOCS_DIR}; a --quick run draws nothing)",
    )
    parser.add_argument("--no-svg", action="store_true", help="draw nothing")


def svg_dir(args: argparse.Namespace) -> Path | None:
    """Where this run draws, or None: ``--no-svg``, a ``--quick`` run left at the doc's directory
    (a smoke run must not replace the doc's pictures), or no matplotlib (said in one line)."""
    if args.no_svg or (getattr(args, "quick", False) and args.svg == DOCS_DIR):
        return None
    if importlib.util.find_spec("matplotlib") is None:
        print("pictures not drawn: matplotlib is missing (bash scripts/install.sh --benchmarks)")
        return None
    return Path(args.svg)


def machine_note() -> str:
    """What a picture was measured on, printed under its title: the day, the CPUs, the load."""
    load = os.getloadavg()
    day = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return f"{day}, {os.cpu_count()} shared CPUs, load average {load[0]:.1f} / {load[1]:.1f} (1 / 5 min) at the end"


def ecdf(path: Path, title: str, unit: str, panels: Sequence[Panel], note: str = "") -> Path:
    """Draw each panel's series as empirical CDFs on a logarithmic time axis into the SVG ``path``.

    A series' legend carries its p50 and p99, so the picture and the table say the same. The log
    axis keeps a 10 ms and a 10 s distribution (re-registration, ours and Go's) readable side by side.
    """
    for panel in panels:
        for name, samples in panel.series.items():
            if not samples or min(samples) <= 0:
                raise ValueError(f"{title}: {panel.title}: {name}: no samples, or one not above 0")
    import matplotlib  # noqa: PLC0415  # the benchmarks extra, only when drawing

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "kubedevice"  # the same ids every run: a stable diff
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: smaller, searchable
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415

    figure = Figure(figsize=(max(6.4, 4.2 * len(panels)), 3.4), layout="constrained")
    figure.suptitle(f"{title}\n{note}" if note else title, fontsize=9)
    for axes, panel in zip(figure.subplots(1, len(panels), squeeze=False)[0], panels, strict=True):
        for name, samples in panel.series.items():
            ordered = sorted(samples)
            ranks = _ranks(len(ordered))
            p50, p99 = _fmt(percentile(ordered, 0.5)), _fmt(percentile(ordered, 0.99))
            label = f"{name}: p50 {p50}, p99 {p99} {unit} (n={len(ordered)})"
            axes.step([ordered[i] for i in ranks], [(i + 1) / len(ordered) for i in ranks], where="post", label=label)
        axes.set_xscale("log")
        axes.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10, 20, ...: plain numbers
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.set_title(panel.title, fontsize=9)
        axes.set_xlabel(unit, fontsize=8)
        axes.set_ylabel("fraction of calls at or below", fontsize=8)
        axes.set_ylim(0, 1.02)
        axes.grid(True, which="both", linewidth=0.3)
        axes.tick_params(labelsize=7)
        axes.legend(fontsize=7, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", metadata={"Date": None})
    print(f"drew {path}")
    return path


def _ranks(count: int, most: int = MOST_POINTS) -> list[int]:
    """The ranks a curve is drawn through: all of them up to ``most``, else ``most`` evenly spaced
    ones with the first and the last: 6,000 calls drawn at every rank made a 116 KB file, and a
    step of 1/``most`` is finer than the picture shows."""
    if count <= most:
        return list(range(count))
    return sorted({round(k * (count - 1) / (most - 1)) for k in range(most)})


def _fmt(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"
