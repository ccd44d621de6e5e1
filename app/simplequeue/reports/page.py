"""The report's one HTML page: a summary table, the charts by relative path, the top errors of dead
items, and links to the Parquet aggregates beside it."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from simplequeue.reports.history import QUANTILES, Aggregates, ReportRequest


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str]) -> str:
    """Every cell escaped: queue names and errors are the callers' text."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td class='{c}'>{html.escape(cell)}</td>" for c, cell in zip(classes, row, strict=True))
        + "</tr>"
        for row in rows
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
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f5f7fa; }
img { max-width: 100%; border: 1px solid #e4e7eb; border-radius: 4px; }
.empty { color: #52606d; font-style: italic; }
.error { font-family: ui-monospace, monospace; white-space: pre-wrap; word-break: break-word; }
"""


def write_html(
    out: Path, request: ReportRequest, aggregates: Aggregates, charts: list[tuple[str, str]], files: list[str]
) -> Path:
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
    if not aggregates.summary:
        parts.append("<p class='empty'>No item finished in this time range.</p>")
    else:
        parts.append("<h2>Summary</h2>")
        parts.append(
            _table(
                [
                    "queue",
                    "finished",
                    "completed",
                    "dead",
                    "dead %",
                    "wait p50 / p95 / p99",
                    "processing p50 / p95 / p99",
                ],
                [
                    [
                        row["queue"],
                        f"{row['finished']:,}",
                        f"{row['completed']:,}",
                        f"{row['dead']:,}",
                        f"{100 * row['dead_ratio']:.1f}%",
                        " / ".join(_seconds(row[f"wait_p{round(q * 100)}_s"]) for q in QUANTILES),
                        " / ".join(_seconds(row[f"processing_p{round(q * 100)}_s"]) for q in QUANTILES),
                    ]
                    for row in aggregates.summary
                ],
                ["", "num", "num", "num", "num", "num", "num"],
            )
        )
        for title, path in charts:
            parts.append(
                f"<h2>{html.escape(title)}</h2><img src='{html.escape(path)}' alt='{html.escape(title)}'>"
            )
        parts.append("<h2>Top errors of dead items</h2>")
        if aggregates.top_errors:
            rows = [
                [r["queue"], str(r["rank"]), r["error"], f"{r['count']:,}"] for r in aggregates.top_errors
            ]
            parts.append(_table(["queue", "#", "error", "items"], rows, ["", "num", "error", "num"]))
        else:
            parts.append("<p class='empty'>No item died.</p>")
    listed = ", ".join(f"<a href='{html.escape(f)}'>{html.escape(f)}</a>" for f in files)
    parts.append(f"<h2>Data</h2><p>Parquet aggregates beside this page: {listed}.</p></body></html>")
    page = out / "report.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
