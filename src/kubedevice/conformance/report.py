"""Show a :class:`Report`: a table at a terminal, one line per result elsewhere, JSON for machines.

Off a terminal rich would draw the table 80 columns wide (it cannot know the width), folding
every long detail over several lines: a plugin with a few resources ran to hundreds of lines
that neither grep nor a CI log reads well. There each result is one line instead.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..terminal import on_terminal
from .model import Report, Result, Status

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def to_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)


def print_report(report: Report, console: Console) -> None:
    """The table when ``console`` writes to a terminal, else one unwrapped line per result; then the summary.

    The file itself is asked, not only ``console.is_terminal``: ``FORCE_COLOR`` (set in many CI
    environments) makes rich call a pipe a terminal, but its width there is still a guess of 80.
    """
    if on_terminal(console):
        print_table(report, console)
    else:
        console.out(*plain_lines(report), sep="\n", highlight=False)
    print_summary(report, console)


def plain_lines(report: Report) -> list[str]:
    """``STATUS  check  [resource]  value  detail`` per result, columns aligned, nothing wrapped."""
    several = len(report.resources()) > 1
    rows = [
        (r.status.value.upper(), r.check.id, r.resource or "-", _value(r), " ".join(r.detail.split()))
        for r in report.results
    ]
    width = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    lines = [f"kubedevice check: {_title(report)}"]
    for status, check_id, resource, value, detail in rows:
        cells = [status.ljust(width[0]), check_id.ljust(width[1])]
        cells += [resource.ljust(width[2])] if several else []
        lines.append("  ".join([*cells, value.rjust(width[3]), detail]).rstrip())
    return lines


def print_table(report: Report, console: Console) -> None:
    """One row per result; the resource column only when the plugin serves several."""
    several = len(report.resources()) > 1
    table = Table(title=f"kubedevice check: {escape(_title(report))}", title_justify="left")
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    if several:
        table.add_column("resource", overflow="fold")
    table.add_column("value", no_wrap=True, justify="right")
    table.add_column("detail", overflow="fold")
    for r in report.results:
        cells = [f"[{_STYLE[r.status]}]{r.status.value}[/]", r.check.id]
        cells += [escape(r.resource or "")] if several else []
        table.add_row(*cells, _value(r), escape(r.detail))
    console.print(table)


def print_summary(report: Report, console: Console) -> None:
    """The verdict with the counts, and where the full record is for a script."""
    counts = ", ".join(f"{n} {s}" for s, n in report.summary().items())
    console.out(f"{'FAILED' if report.failed else 'PASSED'}: {counts}", highlight=False)
    console.out("(--json prints every result with all its fields, for scripts)", highlight=False)


def _title(report: Report) -> str:
    """The target, and the resource when there is only one (several get a column of their own)."""
    resources = report.resources()
    title = ", ".join(f"{k} {v}" for k, v in report.target.items())
    return f"{title} ({resources[0]})" if len(resources) == 1 else title


def _value(result: Result) -> str:
    return f"{result.value:.3f} {result.unit}" if result.value is not None else ""
