"""The report's one HTML page: a summary table, the charts by relative path, the top errors of dead
items, and links to the Parquet aggregates beside it."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simplequeue.reports.history import QUANTILES, Aggregates, ReportRequest
from simplequeue.reports.shaping import group_queues, percent, seconds


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    classes: Sequence[str],
    row_classes: Sequence[str] | None = None,
    raw: frozenset[int] | set[int] = frozenset(),
) -> str:
    """Every cell escaped (queue names and errors are the callers' text) but the columns in
    `raw`, which the caller escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        f"<tr class='{row_class}'>"
        + "".join(
            f"<td class='{c}'>{cell if i in raw else html.escape(cell)}</td>"
            for i, (c, cell) in enumerate(zip(classes, row, strict=True))
        )
        + "</tr>"
        for row, row_class in zip(rows, row_classes or [""] * len(rows), strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 1040px;
       color: #1f2933; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
.meta { color: #52606d; margin-top: 0; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #e4e7eb; padding-bottom: .3rem; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e4e7eb; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { white-space: nowrap; }
th { background: #f5f7fa; }
img { max-width: 100%; border: 1px solid #e4e7eb; border-radius: 4px; }
.empty { color: #52606d; font-style: italic; }
.note { background: #fff8e1; border-left: 4px solid #f0b429; padding: 0.5em 0.8em; }
.error { font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-word; }
.example { color: #52606d; font-size: .85rem; }
tr.other td, tr.total td { color: #52606d; }
tr.total td { font-weight: 600; border-top: 2px solid #cbd2d9; }
details { margin-top: .6rem; }
summary { cursor: pointer; color: #3e4c59; }
"""

SUMMARY_HEADERS = [
    "queue",
    "finished",
    "completed",
    "dead",
    "dead %",
    "wait p50 / p95 / p99",
    "processing p50 / p95 / p99",
]
SUMMARY_CLASSES = ["", "num", "num", "num", "num", "num", "num"]


def _summary_cells(row: dict[str, Any]) -> list[str]:
    return [
        row["queue"],
        f"{row['finished']:,}",
        f"{row['completed']:,}",
        f"{row['dead']:,}",
        percent(row["dead"] / row["finished"] if row["finished"] else None),
        " / ".join(seconds(row.get(f"wait_p{round(q * 100)}_s")) for q in QUANTILES),
        " / ".join(seconds(row.get(f"processing_p{round(q * 100)}_s")) for q in QUANTILES),
    ]


def _summed(label: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts summed; no quantiles (they cannot be)."""
    return {
        "queue": label,
        **{name: sum(row[name] for row in rows) for name in ("finished", "completed", "dead")},
    }


def _summary(aggregates: Aggregates) -> str:
    """The busiest queues, "other (K queues)" and all of them; every queue under a fold when
    some were folded."""
    grouping = group_queues(aggregates.summary)
    by_queue = {row["queue"]: row for row in aggregates.summary}
    ranked = [by_queue[q] for q in grouping.shown + grouping.others]
    rows = [(_summary_cells(by_queue[q]), "") for q in grouping.shown]
    if grouping.other_label:
        other = aggregates.other or _summed(grouping.other_label, [by_queue[q] for q in grouping.others])
        rows.append((_summary_cells({**other, "queue": grouping.other_label}), "other"))
    if len(ranked) > 1:
        rows.append((_summary_cells(_summed(f"all {len(ranked)} queues", ranked)), "total"))
    parts = [_table(SUMMARY_HEADERS, [r for r, _c in rows], SUMMARY_CLASSES, [c for _r, c in rows])]
    if grouping.others:
        parts.append(
            f"<details><summary>Every queue ({len(ranked)}), busiest first</summary>"
            + _table(SUMMARY_HEADERS, [_summary_cells(row) for row in ranked], SUMMARY_CLASSES)
            + "</details>"
        )
    return "".join(parts)


def _errors(aggregates: Aggregates) -> str:
    """Errors are grouped with their numbers, ids and addresses replaced; each shows one message
    as it was written. Over every queue first, then per queue (busiest first) under a fold when
    there are many queues."""
    if not aggregates.top_errors:
        return "<p class='empty'>No item died.</p>"
    parts = []
    if aggregates.errors_overall and len(aggregates.summary) > 1:
        rows = [
            [str(rank), _error_cell(r), str(r["queues"]), f"{r['count']:,}"]
            for rank, r in enumerate(aggregates.errors_overall, start=1)
        ]
        parts.append(_table(["#", "error", "queues", "items"], rows, ["num", "error", "num", "num"], raw={1}))
    grouping = group_queues(aggregates.summary)
    order = {q: i for i, q in enumerate(grouping.shown + grouping.others)}
    by_queue = sorted(aggregates.top_errors, key=lambda r: (order.get(r["queue"], len(order)), r["rank"]))
    rows = [[r["queue"], str(r["rank"]), _error_cell(r), f"{r['count']:,}"] for r in by_queue]
    table = _table(["queue", "#", "error", "items"], rows, ["", "num", "error", "num"], raw={2})
    if parts:
        queues = len({r["queue"] for r in by_queue})
        parts.append(f"<details><summary>Per queue ({queues} with dead items)</summary>{table}</details>")
    else:
        parts.append(table)
    return "".join(parts)


def _error_cell(row: dict[str, Any]) -> str:
    """Raw HTML: the grouped error, and an example of it when that differs."""
    cell = html.escape(row["error"])
    example = row.get("example")
    if example and example != row["error"]:
        cell += f"<div class='example'>e.g. {html.escape(example)}</div>"
    return cell


def write_html(
    out: Path,
    request: ReportRequest,
    aggregates: Aggregates,
    charts: list[tuple[str, str]],
    files: list[str],
    unseen: list[str] | None = None,
) -> Path:
    """The report page. `unseen`: queues in its scope that keep no history, named on the page so
    that nobody reads their absence as no work."""
    scope = f"queue {request.queue}" if request.queue else "every queue"
    since = request.since.isoformat(timespec="seconds") if request.since else "the start of the history kept"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>simplequeue report: {html.escape(scope)}</title><style>{STYLE}</style></head><body>",
        f"<h1>simplequeue report: {html.escape(scope)}</h1>",
        f"<p class='meta'>{html.escape(request.url)} · items finished from {html.escape(since)} to "
        f"{html.escape(request.until.isoformat(timespec='seconds'))} · made "
        f"{datetime.now(UTC).isoformat(timespec='seconds')}</p>",
    ]
    if unseen:
        names = ", ".join(html.escape(n) for n in unseen)
        parts.append(
            f"<p class='note'>Not in this report: {len(unseen)} queue{'s' if len(unseen) != 1 else ''} "
            f"keeping no history (<code>retention_seconds</code> 0), whose finished items leave no "
            f"record: {names}.</p>"
        )
    if not aggregates.summary:
        parts.append("<p class='empty'>No item finished in this time range.</p>")
    else:
        parts.append("<h2>Summary</h2>")
        parts.append(_summary(aggregates))
        for title, path in charts:
            parts.append(
                f"<h2>{html.escape(title)}</h2><img src='{html.escape(path)}' alt='{html.escape(title)}'>"
            )
        parts.append("<h2>Top errors of dead items</h2>")
        parts.append(_errors(aggregates))
    listed = ", ".join(f"<a href='{html.escape(f)}'>{html.escape(f)}</a>" for f in files)
    parts.append(f"<h2>Data</h2><p>Parquet aggregates beside this page: {listed}.</p></body></html>")
    page = out / "report.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
