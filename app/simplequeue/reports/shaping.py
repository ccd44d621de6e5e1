"""What the report's charts and tables show, worked out from aggregated rows, without Spark or
matplotlib: which queues are shown and which are folded into "other (K queues)", a colour per
queue, series per time bucket, attempts per queue, ratios written with significant digits, axis
limits, and error messages with their variable parts (numbers, UUIDs, e-mail addresses, hex ids)
replaced by placeholders, so that errors which differ only there are counted together.

The error patterns are plain regular expressions that Python and Java (Spark's regexp_replace)
read alike: history.py groups the errors with them in Spark, normalise_error does it here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

TOP_QUEUES = 8  # queues drawn by name; the rest are folded into one "other (K queues)"
ATTEMPT_COLUMNS = 10  # attempts 1..9 by themselves, then "10+"

ERROR_PATTERNS: tuple[tuple[str, str], ...] = (
    ("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    ("[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}", "<email>"),
    ("\\b0[xX][0-9a-fA-F]+\\b", "<hex>"),
    ("\\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\\b", "<hex>"),
    ("\\b[0-9]+(\\.[0-9]+)?\\b", "<n>"),
)
_COMPILED = [(re.compile(pattern, re.ASCII), placeholder) for pattern, placeholder in ERROR_PATTERNS]

OTHER_COLOUR = "#8a8f98"
# tab10 without its grey (kept for "other"), then tab20 without its greys: distinct hues first.
_TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
_TAB20_MORE = [
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
]


def normalise_error(text: str | None) -> str:
    if text is None:
        return "(no error recorded)"
    for pattern, placeholder in _COMPILED:
        text = pattern.sub(placeholder, text)
    return text


@dataclass(frozen=True)
class Grouping:
    """Queues by volume (most finished first): `shown` by name, `others` folded into one."""

    shown: list[str]
    others: list[str]

    @property
    def other_label(self) -> str | None:
        if not self.others:
            return None
        return f"other ({len(self.others)} queue{'s' if len(self.others) != 1 else ''})"

    @property
    def labels(self) -> list[str]:
        """What the charts draw, in order: the shown queues, then "other (K queues)" if any."""
        return [*self.shown, *([self.other_label] if self.other_label else [])]

    def label(self, queue: str) -> str:
        return queue if queue in self.shown else (self.other_label or queue)


def group_queues(summary: Iterable[Mapping[str, Any]], top: int = TOP_QUEUES) -> Grouping:
    """The `top` queues with the most finished items by name, the rest as "other"; one queue
    alone is never folded (it would take as much room as its own row)."""
    ranked = [r["queue"] for r in sorted(summary, key=lambda r: (-r["finished"], r["queue"]))]
    if len(ranked) <= top + 1:
        return Grouping(ranked, [])
    return Grouping(ranked[:top], ranked[top:])


def colours(labels: Sequence[str], other: str | None = None) -> dict[str, str]:
    """A distinct colour per label, in order; `other` grey."""
    named = [label for label in labels if label != other]
    palette = _TAB10 + _TAB20_MORE
    if len(named) > len(palette):
        palette = [_hsv(i / len(named)) for i in range(len(named))]
    result = {label: palette[i] for i, label in enumerate(named)}
    if other is not None:
        result[other] = OTHER_COLOUR
    return result


def _hsv(hue: float) -> str:
    import colorsys

    r, g, b = colorsys.hsv_to_rgb(hue, 0.65, 0.8)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def shorten(name: str, width: int = 28) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def percent(ratio: float | None) -> str:
    """A ratio as a percentage with two significant digits: 1 in 20,000 is "0.005%", never
    "0.0%"; only 0 is "0%" and only 1 is "100%"."""
    if ratio is None:
        return "-"
    value = 100 * ratio
    if value <= 0:
        return "0%"
    if value >= 100:
        return "100%"
    decimals = max(0, 1 - math.floor(math.log10(value)))
    text = f"{value:.{decimals}f}"
    while float(text) >= 100 or float(text) == 0:  # 99.96 must not read as 100, nor 1e-9 as 0
        decimals += 1
        text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}%"


def ratio_axis_limit(largest_percent: float) -> float:
    """The right end of a percentage axis: the first of 1, 2, 2.5, 5 times 10^k above the largest
    value with a little room, and never past 100."""
    if largest_percent <= 0:
        return 1.0
    target = largest_percent * 1.08
    exponent = math.floor(math.log10(target))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        limit = step * 10.0**exponent
        if limit >= target:
            return min(limit, 100.0)
    return 100.0  # pragma: no cover (10 times 10^k is always above)


def dead_ratios(summary: Iterable[Mapping[str, Any]], grouping: Grouping) -> list[tuple[str, int, int]]:
    """(label, dead, finished) per label of the grouping, "other" summed."""
    sums: dict[str, list[int]] = {label: [0, 0] for label in grouping.labels}
    for row in summary:
        pair = sums[grouping.label(row["queue"])]
        pair[0] += row["dead"]
        pair[1] += row["finished"]
    return [(label, dead, finished) for label, (dead, finished) in sums.items()]


BUCKETS = (1, 5, 15, 60, 360, 1440)  # minutes


@dataclass(frozen=True)
class Series:
    bucket_minutes: int
    starts: list[datetime]
    counts: dict[str, list[int]]  # per label, one count per start (0 where nothing finished)
    total: list[int]


def throughput_series(
    rows: Iterable[Mapping[str, Any]], grouping: Grouping, most_points: int = 720
) -> Series:
    """Items finished per bucket per label, every bucket from the first to the last present (an
    idle minute is a 0, not a line drawn across it); the bucket grows (1, 5, 15 min, 1, 6, 24 h)
    until there are at most `most_points`."""
    points = [(r["minute"], grouping.label(r["queue"]), r["count"]) for r in rows]
    labels = grouping.labels
    if not points:
        return Series(1, [], {label: [] for label in labels}, [])
    first = min(p[0] for p in points)
    last = max(p[0] for p in points)
    span = (last - first).total_seconds() / 60
    bucket = next((b for b in BUCKETS if span / b < most_points), BUCKETS[-1])
    origin = _floor(first, bucket)
    size = int((last - origin).total_seconds() // (bucket * 60)) + 1
    counts = {label: [0] * size for label in labels}
    for minute, label, count in points:
        counts[label][int((minute - origin).total_seconds() // (bucket * 60))] += count
    starts = [origin + timedelta(minutes=bucket * i) for i in range(size)]
    total = [sum(c[i] for c in counts.values()) for i in range(size)]
    return Series(bucket, starts, counts, total)


def _floor(moment: datetime, bucket: int) -> datetime:
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    minutes = int((moment - day).total_seconds() // 60)
    return day + timedelta(minutes=minutes - minutes % bucket)


def attempts_table(
    rows: Iterable[Mapping[str, Any]], grouping: Grouping, columns: int = ATTEMPT_COLUMNS
) -> tuple[list[str], dict[str, list[int]]]:
    """Column names ("1", "2", … "10+") and, per label, items by attempts; attempts past the
    last column are counted in it."""
    rows = list(rows)
    largest = max((r["attempts"] for r in rows), default=1)
    width = min(max(largest, 1), columns)
    names = [str(a) for a in range(1, width + 1)]
    if largest > columns:
        names[-1] = f"{columns}+"
    table = {label: [0] * width for label in grouping.labels}
    for r in rows:
        table[grouping.label(r["queue"])][min(max(r["attempts"], 1), width) - 1] += r["count"]
    return names, table


def seconds(value: float | None) -> str:
    """A duration for a table cell or an axis: ms, s or min."""
    if value is None:
        return "-"
    if value < 0.9995:
        return f"{max(value, 0) * 1000:.3g} ms"
    if value < 119.95:
        return f"{value:.3g} s"
    if value < 7197:
        return f"{value / 60:.3g} min"
    return f"{value / 3600:,.3g} h" if value < 359_820 else f"{value / 3600:,.0f} h"
