"""A report on what queues did: read their history through the data source, aggregate it with
Spark, write the aggregates as Parquet, draw PNG charts and one report.html that shows them.

    out/
      report.html            charts and tables, charts referenced by relative path
      charts/*.png
      summary.parquet        per queue: completed, dead, dead_ratio, wait and processing p50/p95/p99
      throughput.parquet     per queue, minute and outcome: items finished
      attempts.parquet       per queue and attempts: items
      top_errors.parquet     per queue: the most frequent last errors of dead items, grouped
                             with numbers, ids and addresses replaced; one example each

The history is read and aggregated in simplequeue.reports.history, drawn in .charts, and shown
by .page.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from simplequeue.reports.charts import draw_charts
from simplequeue.reports.history import ReportRequest, aggregate, history, without_history, write_parquet
from simplequeue.reports.page import write_html


def make_report(spark: SparkSession, request: ReportRequest, say: Callable[[str], None]) -> Path:
    request.out.mkdir(parents=True, exist_ok=True)
    say(f"reading the history of {request.queue or 'every queue'} from {request.url}")
    unseen = without_history(request)
    if unseen:  # their items finish without a record: say so before anyone reads their absence
        say(f"not in this report, keeping no history (retention_seconds 0): {', '.join(unseen)}")
    aggregates = aggregate(history(spark, request))
    finished = sum(row["finished"] for row in aggregates.summary)
    say(f"{finished:,} finished items in {len(aggregates.summary)} queues; writing Parquet aggregates")
    files = write_parquet(request.out, aggregates)
    say("drawing charts")
    charts = draw_charts(request.out, aggregates) if aggregates.summary else []
    return write_html(request.out, request, aggregates, charts, files, unseen)


__all__ = ["ReportRequest", "make_report"]
