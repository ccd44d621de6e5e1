"""The report's PNG charts (matplotlib): throughput, wait and processing time, attempts, dead ratio."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or a Spark driver

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from simplequeue.reports.history import QUANTILES, Aggregates, utc


def _chart(path: Path, draw: Callable[[Figure], None], width: float = 9.0, height: float = 3.6) -> None:
    figure = plt.figure(figsize=(width, height), dpi=110)
    try:
        draw(figure)
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)


def draw_charts(out: Path, aggregates: Aggregates) -> list[tuple[str, str]]:
    """Charts as (title, relative path)."""
    charts = out / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    queues = [row["queue"] for row in aggregates.summary]
    made: list[tuple[str, str]] = []

    def throughput(figure: Figure) -> None:
        axes = figure.add_subplot()
        for queue in queues:
            points: dict[datetime, int] = {}
            for r in aggregates.throughput:
                if r["queue"] == queue:
                    minute = utc(r["minute"])
                    points[minute] = points.get(minute, 0) + r["count"]
            xs = sorted(points)
            axes.plot(mdates.date2num(xs), [points[x] for x in xs], marker="o", markersize=3, label=queue)
        axes.set_ylabel("items finished per minute")
        axes.set_xlabel("minute (UTC)")
        locator = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=8)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
        axes.grid(alpha=0.3)
        if queues:
            axes.legend(loc="upper left", fontsize="small")

    def latency(figure: Figure) -> None:
        for index, name in enumerate(("wait", "processing")):
            axes = figure.add_subplot(1, 2, index + 1)
            width = 0.8 / len(QUANTILES)
            for k, q in enumerate(QUANTILES):
                label = f"p{round(q * 100)}"
                values = [row[f"{name}_{label}_s"] or 0.0 for row in aggregates.summary]
                axes.bar([i + k * width for i in range(len(queues))], values, width, label=label)
            axes.set_xticks([i + width for i in range(len(queues))], queues, rotation=20, fontsize="small")
            axes.set_title(f"{name} time (seconds)")
            axes.grid(axis="y", alpha=0.3)
            axes.legend(fontsize="small")

    def attempts(figure: Figure) -> None:
        axes = figure.add_subplot()
        counts = sorted({r["attempts"] for r in aggregates.attempts})
        width = 0.8 / max(len(queues), 1)
        for k, queue in enumerate(queues):
            by = {r["attempts"]: r["count"] for r in aggregates.attempts if r["queue"] == queue}
            axes.bar(
                [i + k * width for i in range(len(counts))],
                [by.get(a, 0) for a in counts],
                width,
                label=queue,
            )
        axes.set_xticks(
            [i + width * (len(queues) - 1) / 2 for i in range(len(counts))], [str(a) for a in counts]
        )
        axes.set_xlabel("attempts")
        axes.set_ylabel("items (log scale)")
        axes.set_yscale("log")  # retries are a few percent of first attempts: both stay visible
        axes.grid(axis="y", alpha=0.3)
        if queues:
            axes.legend(fontsize="small")

    def dead_ratio(figure: Figure) -> None:
        axes = figure.add_subplot()
        ratios = [100 * (row["dead_ratio"] or 0.0) for row in aggregates.summary]
        bars = axes.barh(queues, ratios, color="#c0392b")
        axes.bar_label(bars, [f"{r:.1f}%" for r in ratios], padding=3, fontsize="small")
        axes.set_xlabel("dead, % of finished")
        axes.set_xlim(0, max([*ratios, 1.0]) * 1.2)
        axes.invert_yaxis()
        axes.grid(axis="x", alpha=0.3)

    for title, name, draw, height in (
        ("Throughput", "throughput.png", throughput, 3.6),
        ("Wait and processing time", "latency.png", latency, 3.6),
        ("Attempts per item", "attempts.png", attempts, 3.2),
        ("Dead ratio", "dead_ratio.png", dead_ratio, 0.9 + 0.35 * max(len(queues), 1)),
    ):
        _chart(charts / name, draw, height=height)
        made.append((title, f"charts/{name}"))
    return made
