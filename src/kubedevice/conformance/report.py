"""Show a :class:`Report`: a table for people, JSON for machines."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .model import Report, Status

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def to_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)


def print_table(report: Report, console: Console) -> None:
    """One row per result; the resource column only when the plugin serves several."""
    resources = report.resources()
    several = len(resources) > 1
    title = ", ".join(f"{k} {v}" for k, v in report.target.items())
    if len(resources) == 1:
        title += f" ({resources[0]})"
    table = Table(title=f"kubedevice check: {escape(title)}", title_justify="left")
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    if several:
        table.add_column("resource", overflow="fold")
    table.add_column("value", no_wrap=True, justify="right")
    table.add_column("detail", overflow="fold")
    for r in report.results:
        value = f"{r.value:.3f} {r.unit}" if r.value is not None else ""
        cells = [f"[{_STYLE[r.status]}]{r.status.value}[/]", r.check.id]
        cells += [escape(r.resource or "")] if several else []
        table.add_row(*cells, value, escape(r.detail))
    console.print(table)
    counts = ", ".join(f"{n} {s}" for s, n in report.summary().items())
    console.print(f"{'FAILED' if report.failed else 'PASSED'}: {counts}", highlight=False)
