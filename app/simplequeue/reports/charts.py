"""The report's PNG charts (matplotlib): throughput, wait and processing time, attempts, dead ratio.

Built to stay readable from one queue to hundreds: the busiest queues are drawn by name and the
rest folded into "other (K queues)" (shaping.group_queues); throughput is small multiples, one
panel and one scale per queue under a panel of all of them; times are on a log scale; attempts are
a table of shares; every label sits in its own row or column, so none can cover another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or a Spark driver

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from simplequeue.reports.history import QUANTILES, Aggregates, utc
from simplequeue.reports.shaping import (
    Grouping,
    attempts_table,
    colours,
    dead_ratios,
    group_queues,
    percent,
    ratio_axis_limit,
    shorten,
    throughput_series,
)

WIDTH = 9.0  # inches, at DPI: the page shows them at their size
DPI = 110
ROW = 0.32  # inches per queue in the charts with a row per queue
SMALL = 8  # points: tick labels, cell labels
COLUMNS = 3  # throughput panels side by side

Drawing = Callable[[Figure, Aggregates, Grouping, dict[str, str]], None]


def draw_charts(out: Path, aggregates: Aggregates) -> list[tuple[str, str]]:
    """Charts as (title, relative path)."""
    made: list[tuple[str, str]] = []
    for title, name, figure in figures(aggregates, out / "charts"):
        plt.close(figure)
        made.append((title, f"charts/{name}"))
    return made


def figures(aggregates: Aggregates, charts: Path) -> list[tuple[str, str, Figure]]:
    """Draw and save each chart; the figures stay open for the caller to look into (and close)."""
    charts.mkdir(parents=True, exist_ok=True)
    grouping = group_queues(aggregates.summary)
    palette = colours(grouping.labels, grouping.other_label)
    rows = len(grouping.labels)
    made = []
    drawings: list[tuple[str, str, Drawing, float]] = [
        ("Throughput", "throughput.png", _throughput, _throughput_height(rows)),
        ("Wait and processing time", "latency.png", _latency, 1.5 + ROW * rows),
        ("Attempts per item", "attempts.png", _attempts, 1.3 + ROW * rows),
        ("Dead ratio", "dead_ratio.png", _dead_ratio, 1.0 + ROW * rows),
    ]
    for title, name, draw, height in drawings:
        figure = plt.figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
        draw(figure, aggregates, grouping, palette)
        figure.savefig(charts / name)
        made.append((title, name, figure))
    return made


def _throughput_height(rows: int) -> float:
    if rows == 1:
        return 3.4
    return 0.5 + 2.4 + 1.65 * math.ceil(rows / min(COLUMNS, rows))


def _throughput(figure: Figure, aggregates: Aggregates, grouping: Grouping, palette: dict[str, str]) -> None:
    series = throughput_series([{**r, "minute": utc(r["minute"])} for r in aggregates.throughput], grouping)
    xs = mdates.date2num(series.starts)
    labels = grouping.labels
    unit = (
        f"{series.bucket_minutes} min" if series.bucket_minutes < 60 else f"{series.bucket_minutes // 60} h"
    )
    per = "minute" if series.bucket_minutes == 1 else unit
    locator = mdates.AutoDateLocator(tz=UTC, minticks=2, maxticks=4 if len(labels) > 1 else 8)
    formatter = mdates.ConciseDateFormatter(locator, tz=UTC)
    panels: list[tuple[Axes, str, list[int], str]] = []
    if len(labels) == 1:
        axes = figure.add_subplot()
        panels.append((axes, labels[0], series.counts[labels[0]], palette[labels[0]]))
        bottoms = {0}
    else:
        columns = min(COLUMNS, len(labels))
        grid_rows = math.ceil(len(labels) / columns)
        grid = figure.add_gridspec(1 + grid_rows, columns, height_ratios=[1.45] + [1.0] * grid_rows)
        total_axes = figure.add_subplot(grid[0, :])
        queues = sum(1 for _ in aggregates.summary)
        panels.append((total_axes, f"all {queues} queues", series.total, "#1f2933"))
        for index, label in enumerate(labels):
            axes = figure.add_subplot(grid[1 + index // columns, index % columns], sharex=total_axes)
            panels.append((axes, label, series.counts[label], palette[label]))
        # The x labels show under each panel with no panel below it.
        bottoms = {0} | {1 + i for i in range(len(labels)) if i + columns >= len(labels)}
    for index, (axes, label, counts, colour) in enumerate(panels):
        many = len(xs) > 60
        axes.plot(xs, counts, color=colour, linewidth=1.4, marker=None if many else "o", markersize=3)
        axes.fill_between(xs, counts, color=colour, alpha=0.12, linewidth=0)
        axes.set_ylim(bottom=0, top=max([*counts, 1]) * 1.1)
        axes.yaxis.set_major_locator(ticker.MaxNLocator(nbins=3 if index else 5, integer=True))
        axes.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _count(v)))
        axes.tick_params(labelsize=SMALL)
        axes.grid(alpha=0.3)
        axes.set_title(f"{shorten(label, 24)} · {sum(counts):,}", fontsize=9, loc="left")
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(formatter)
        if index not in bottoms:
            axes.tick_params(labelbottom=False)
    if xs.size == 1:  # one bucket: give the line some width to sit in
        panels[0][0].set_xlim(xs[0] - series.bucket_minutes / 1440, xs[0] + series.bucket_minutes / 1440)
    scale = "" if len(labels) == 1 else "; each panel has its own scale"
    figure.suptitle(f"items finished per {per} (UTC){scale}", fontsize=9, color="#52606d")


def _count(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    return f"{value:,.0f}"


def _summary_rows(aggregates: Aggregates, grouping: Grouping) -> list[tuple[str, Mapping[str, Any] | None]]:
    by_queue = {row["queue"]: row for row in aggregates.summary}
    rows: list[tuple[str, Mapping[str, Any] | None]] = [(q, by_queue[q]) for q in grouping.shown]
    if grouping.other_label:
        rows.append((grouping.other_label, aggregates.other))
    return rows


MINUTE, HOUR, DAY = 60, 3600, 86_400
DURATION_TICKS = (
    *(m * 10.0**e for e in range(-3, 1) for m in (1, 2, 5)),  # 1 ms … 5 s
    *(10, 20, 30, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 20 * MINUTE, 30 * MINUTE),
    *(HOUR, 2 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 30 * DAY),
)


def _duration_ticks(low: float, high: float) -> list[float]:
    """Round durations within [low, high], at least a fifth of the span apart on the log scale
    (so no two labels meet)."""
    span = math.log10(high / low)
    kept: list[float] = []
    for tick in DURATION_TICKS:
        if low <= tick <= high and (not kept or math.log10(tick / kept[-1]) >= span / 5):
            kept.append(tick)
    return kept


def _duration_label(value: float) -> str:
    for unit, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (1, "s")):
        if value >= unit:
            return f"{value / unit:g} {name}"
    return f"{value * 1000:g} ms"


def _latency(figure: Figure, aggregates: Aggregates, grouping: Grouping, palette: dict[str, str]) -> None:
    rows = _summary_rows(aggregates, grouping)
    names = [f"p{round(q * 100)}" for q in QUANTILES]
    markers = ("o", "D", "^")
    left = figure.add_subplot(1, 2, 1)
    right = figure.add_subplot(1, 2, 2, sharey=left)
    for axes, kind, title in (
        (left, "wait", "wait: created → first pop"),
        (right, "processing", "processing: first pop → finished"),
    ):
        values = [[row[f"{kind}_{n}_s"] if row is not None else None for n in names] for _label, row in rows]
        known = [v for vs in values for v in vs if v is not None and v > 0]
        low = min(known, default=0.001) / 1.6
        high = max(known, default=1.0) * 1.6
        if high / low < 10:  # at least a decade, around the middle
            middle = math.sqrt(high * low)
            low, high = middle / math.sqrt(10), middle * math.sqrt(10)
        for y, ((label, _row), vs) in enumerate(zip(rows, values, strict=True)):
            present = [(v if v > low else low, k) for k, v in enumerate(vs) if v is not None]
            if not present:
                continue
            xs = [v for v, _k in present]
            axes.hlines(y, min(xs), max(xs), color=palette[label], linewidth=2.2, alpha=0.55)
            for v, k in present:
                axes.plot(v, y, markers[k], color=palette[label], markersize=6.5, markeredgecolor="white")
        axes.set_xscale("log")
        axes.set_xlim(low, high)
        axes.xaxis.set_major_locator(ticker.FixedLocator(_duration_ticks(low, high)))
        axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _duration_label(v)))
        axes.xaxis.set_minor_locator(ticker.NullLocator())
        axes.set_title(title, fontsize=9)
        axes.grid(axis="x", alpha=0.3)
        axes.tick_params(labelsize=SMALL)
    left.set_yticks(range(len(rows)), [shorten(label) for label, _row in rows])
    left.set_ylim(len(rows) - 0.5, -0.5)
    right.tick_params(labelleft=False)
    handles = [
        Line2D([], [], marker=m, linestyle="", color="#52606d", label=n)
        for m, n in zip(markers, names, strict=True)
    ]
    figure.legend(
        handles=handles, loc="outside lower center", ncols=len(names), fontsize=SMALL, frameon=False
    )
    if grouping.other_label and aggregates.other is None:
        figure.suptitle(f"{grouping.other_label}: times not computed", fontsize=SMALL, color="#52606d")


def _attempts(figure: Figure, aggregates: Aggregates, grouping: Grouping, palette: dict[str, str]) -> None:
    columns, table = attempts_table(aggregates.attempts, grouping)
    labels = grouping.labels
    shares = []
    for label in labels:
        total = sum(table[label])
        shares.append([count / total if total else 0.0 for count in table[label]])
    axes = figure.add_subplot()
    masked = [[share if share > 0 else math.nan for share in row] for row in shares]
    axes.imshow(masked, aspect="auto", cmap="Blues", norm=LogNorm(vmin=1e-4, vmax=1.0), interpolation="none")
    for y, row in enumerate(shares):
        for x, share in enumerate(row):
            if share > 0:
                colour = "white" if share > 0.2 else "#1f2933"
                axes.text(x, y, percent(share), ha="center", va="center", fontsize=SMALL, color=colour)
    totals = [f"{shorten(label)} ({sum(table[label]):,})" for label in labels]
    axes.set_yticks(range(len(labels)), totals)
    axes.set_xticks(range(len(columns)), columns)
    axes.set_xticks([x - 0.5 for x in range(1, len(columns))], minor=True)
    axes.set_yticks([y - 0.5 for y in range(1, len(labels))], minor=True)
    axes.grid(which="minor", color="white", linewidth=1.5)
    axes.tick_params(which="minor", length=0)
    axes.tick_params(labelsize=SMALL)
    axes.set_xlabel("attempts", fontsize=9)
    axes.set_title("share of each queue's finished items, by attempts taken", fontsize=9)
    for side in axes.spines.values():
        side.set_visible(False)


def _dead_ratio(figure: Figure, aggregates: Aggregates, grouping: Grouping, palette: dict[str, str]) -> None:
    rows = dead_ratios(aggregates.summary, grouping)
    ratios = [100 * dead / finished if finished else 0.0 for _label, dead, finished in rows]
    axes = figure.add_subplot()
    bar_colours = ["#e6a29a" if label == grouping.other_label else "#c0392b" for label, _d, _f in rows]
    axes.barh(range(len(rows)), ratios, color=bar_colours, height=0.7)
    axes.set_yticks(range(len(rows)), [shorten(label) for label, _d, _f in rows])
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xlim(0, ratio_axis_limit(max(ratios, default=0.0)))
    axes.xaxis.set_major_locator(ticker.MaxNLocator(nbins=5))
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: percent(v / 100)))
    axes.set_xlabel("dead, % of finished", fontsize=9)
    axes.grid(axis="x", alpha=0.3)
    axes.tick_params(labelsize=SMALL)
    # The figures in a column of their own on the right: beside the bars, never over them.
    right = axes.twinx()
    right.set_ylim(axes.get_ylim())
    right.set_yticks(
        range(len(rows)),
        [
            f"{percent(dead / finished if finished else 0)}  ({dead:,} of {finished:,})"
            for _l, dead, finished in rows
        ],
    )
    right.tick_params(labelsize=SMALL, length=0)
    right.spines["right"].set_visible(False)
    right.spines["top"].set_visible(False)
    axes.spines["top"].set_visible(False)
