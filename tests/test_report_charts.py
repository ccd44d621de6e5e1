"""The Spark report drawn for 1, 5, 20 and 100 queues from synthetic aggregated rows (no Spark):
matplotlib's renderer places every text, and no two tick labels or cell labels in one axes meet,
no two panel titles meet, every legend lies inside its figure; the page shows the folded queues."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pip install 'simplequeue[spark]'")  # the report's package needs it

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from simplequeue.reports.charts import figures
from simplequeue.reports.history import Aggregates
from simplequeue.reports.page import write_html

from bench.report_screens import render, synthetic


def _boxes(figure: Figure, texts: list[Text]) -> list[tuple[str, Bbox]]:
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    return [
        (t.get_text(), t.get_window_extent(renderer))
        for t in texts
        if t.get_visible() and t.get_text().strip()
    ]


def _overlaps(boxes: list[tuple[str, Bbox]]) -> list[tuple[str, str]]:
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


def _tick_labels(axis: Axis) -> list[Text]:
    """The labels drawn: of ticks within the view, on either side."""
    locations = axis.get_majorticklocs()
    low, high = sorted(axis.get_view_interval())
    span = (high - low) * 1e-9
    return [
        label
        for location, tick in zip(locations, axis.get_major_ticks(len(locations)), strict=True)
        if low - span <= location <= high + span
        for label in (tick.label1, tick.label2)
        if label.get_visible()
    ]


def _axes_texts(axes: Axes) -> list[Text]:
    return [*_tick_labels(axes.xaxis), *_tick_labels(axes.yaxis), *axes.texts]


def check(figure: Figure, name: str) -> None:
    figure.canvas.draw()
    frame = figure.bbox
    for axes in figure.axes:
        for xy, axis in (("x", axes.xaxis), ("y", axes.yaxis)):  # tick labels along one axis never meet
            assert not _overlaps(_boxes(figure, _tick_labels(axis))), f"{name}: {xy} tick labels overlap"
        assert not _overlaps(_boxes(figure, list(axes.texts))), f"{name}: cell labels overlap"
        for label, box in _boxes(figure, _axes_texts(axes)):
            assert _inside(box, frame), f"{name}: {label!r} leaves the figure"
        legend = axes.get_legend()
        if legend is not None:
            assert _inside(legend.get_window_extent(), frame), f"{name}: a legend leaves the figure"
    titles = [c for a in figure.axes for c in a.get_children() if isinstance(c, Text) and c not in a.texts]
    assert not _overlaps(_boxes(figure, titles)), f"{name}: panel titles overlap"
    for legend in figure.legends:
        assert _inside(legend.get_window_extent(), frame), f"{name}: a legend leaves the figure"


def _inside(box: Bbox, frame: Bbox) -> bool:
    return (
        frame.x0 - 1 <= box.x0 <= box.x1 <= frame.x1 + 1 and frame.y0 - 1 <= box.y0 <= box.y1 <= frame.y1 + 1
    )


def test_the_check_sees_crowded_labels_and_a_legend_outside() -> None:
    """The check itself: it fails the old report's faults."""
    figure = plt.figure(figsize=(3, 2), dpi=110)
    try:
        axes = figure.add_subplot()
        for i in range(17):
            axes.bar(i, i, label=f"queue-number-{i}")
        axes.set_xticks(range(17), [f"queue-number-{i}" for i in range(17)])
        axes.legend(loc="upper left")
        with pytest.raises(AssertionError, match="tick labels overlap"):
            check(figure, "crowded")
        axes.set_xticks(range(17), [""] * 17)
        with pytest.raises(AssertionError, match="legend leaves the figure"):
            check(figure, "crowded")
    finally:
        plt.close(figure)


@pytest.mark.parametrize("queues", [1, 5, 20, 100])
def test_no_label_meets_another_at_any_number_of_queues(queues: int, tmp_path: Path) -> None:
    aggregates = synthetic(queues)
    drawn = figures(aggregates, tmp_path)
    try:
        assert [name for _t, name, _f in drawn] == [
            "throughput.png",
            "latency.png",
            "attempts.png",
            "dead_ratio.png",
        ]
        for _title, name, figure in drawn:
            check(figure, f"{queues} queues, {name}")
            assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        throughput = drawn[0][2]
        panels = 1 if queues == 1 else 1 + min(queues, 9)
        assert len(throughput.axes) == panels  # all, the 8 busiest, other
        colours = {line.get_color() for axes in throughput.axes[1:] for line in axes.get_lines()}
        assert len(colours) == panels - 1 or queues == 1  # one colour per queue drawn
    finally:
        for _t, _n, figure in drawn:
            plt.close(figure)


def test_the_dead_ratio_axis_stops_at_what_the_data_needs(tmp_path: Path) -> None:
    for queues, limit in ((1, 0.01), (5, 100.0)):  # 1 dead in 20,000; then a queue where all died
        drawn = figures(synthetic(queues), tmp_path)
        axes = drawn[3][2].axes[0]
        assert axes.get_xlim()[1] == pytest.approx(limit)
        labels = [t.get_text() for t in drawn[3][2].axes[1].get_yticklabels()]
        for _t, _n, figure in drawn:
            plt.close(figure)
    assert labels[-1].startswith("100%")
    assert "0.005%  (1 of 20,000)" in labels


def test_the_page_folds_the_quiet_queues_and_groups_errors(tmp_path: Path) -> None:
    page = render(tmp_path, 20).read_text()
    assert "other (12 queues)" in page
    assert "all 20 queues" in page
    assert "0.005%" in page
    assert "0.0%" not in page
    assert "Every queue (20), busiest first" in page
    assert "mailbox full: &lt;email&gt;" in page
    assert re.search(r"e\.g\. mailbox full: user\d+@example\.com", page)
    assert page.count("<img src='charts/") == 4
    single = render(tmp_path / "one", 1).read_text()
    assert "other (" not in single
    assert "<details>" not in single


def test_an_empty_report_draws_nothing(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from simplequeue.reports.history import ReportRequest

    request = ReportRequest("http://127.0.0.1:8000", tmp_path, None, None, datetime.now(UTC), None)
    text = write_html(tmp_path, request, Aggregates([], [], [], []), [], []).read_text()
    assert "No item finished in this time range." in text
