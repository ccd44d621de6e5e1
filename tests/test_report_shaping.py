"""The Spark report's pure parts, on aggregated rows (no Spark): which queues are drawn and which
folded into "other", a colour each, ratios with significant digits, axis limits, errors with
their variable parts replaced, series and attempts tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from simplequeue.reports.shaping import (
    OTHER_COLOUR,
    Grouping,
    attempts_table,
    colours,
    dead_ratios,
    group_queues,
    normalise_error,
    percent,
    ratio_axis_limit,
    seconds,
    shorten,
    throughput_series,
)

T0 = datetime(2026, 11, 24, 15, 0, tzinfo=UTC)


def rows(*volumes: int) -> list[dict[str, object]]:
    return [{"queue": f"q{i:02d}", "finished": v, "dead": 0} for i, v in enumerate(volumes)]


def test_the_busiest_queues_are_shown_and_the_rest_folded() -> None:
    grouping = group_queues(rows(5, 50, 500, 1, 7), top=2)
    assert grouping.shown == ["q02", "q01"]
    assert grouping.others == ["q04", "q00", "q03"]
    assert grouping.labels == ["q02", "q01", "other (3 queues)"]
    assert grouping.label("q03") == "other (3 queues)"
    assert grouping.label("q01") == "q01"


def test_ties_go_by_name_and_one_queue_is_never_folded_alone() -> None:
    assert group_queues(rows(1, 1, 1), top=2) == Grouping(["q00", "q01", "q02"], [])
    assert group_queues([], top=2).labels == []
    grouping = group_queues(rows(*range(100, 0, -1)))
    assert len(grouping.shown) == 8
    assert grouping.other_label == "other (92 queues)"


@pytest.mark.parametrize("count", [1, 2, 5, 9, 10, 18, 19, 40, 100])
def test_every_label_shown_gets_its_own_colour(count: int) -> None:
    labels = [f"q{i}" for i in range(count)] + ["other (3 queues)"]
    palette = colours(labels, "other (3 queues)")
    assert palette["other (3 queues)"] == OTHER_COLOUR
    assert len(set(palette.values())) == len(labels)
    assert list(palette) == labels


@pytest.mark.parametrize(
    ("ratio", "text"),
    [
        (None, "-"),
        (0, "0%"),
        (1 / 20_000, "0.005%"),  # not "0.0%"
        (1 / 3, "33%"),
        (0.032, "3.2%"),
        (0.25, "25%"),
        (0.08, "8%"),
        (0.0999, "10%"),
        (0.9996, "99.96%"),  # not "100%": something did not die
        (1, "100%"),
        (1e-9, "0.0000001%"),
    ],
)
def test_ratios_keep_two_significant_digits(ratio: float | None, text: str) -> None:
    assert percent(ratio) == text


@pytest.mark.parametrize(
    ("largest", "limit"),
    [(0, 1), (0.005, 0.01), (0.2, 0.25), (3, 5), (6.5, 10), (40, 50), (93, 100), (99.5, 100), (100, 100)],
)
def test_the_dead_ratio_axis_ends_where_the_data_needs_never_past_100(largest: float, limit: float) -> None:
    assert ratio_axis_limit(largest) == pytest.approx(limit)
    assert ratio_axis_limit(largest) >= largest


@pytest.mark.parametrize(
    ("raw", "grouped"),
    [
        ("mailbox full: alice@example.com", "mailbox full: <email>"),
        ("mailbox full: bob.smith+tag@mail.example.co.uk", "mailbox full: <email>"),
        ("order 3f2a9c1e-1b2c-4d5e-8f90-1234567890ab not found", "order <uuid> not found"),
        ("order 3F2A9C1E-1B2C-4D5E-8F90-1234567890AB not found", "order <uuid> not found"),
        ("segfault at 0x7ffde3a1 in worker 12", "segfault at <hex> in worker <n>"),
        ("trace 5f3a9b2c77e1deadbeef failed", "trace <hex> failed"),
        ("HTTP 503 after 12.5 s", "HTTP <n> after <n> s"),
        ("smtp timeout", "smtp timeout"),
        ("v2 api deadbeef", "v2 api deadbeef"),  # words and version tags stay
        (None, "(no error recorded)"),
    ],
)
def test_errors_lose_numbers_ids_and_addresses(raw: str | None, grouped: str) -> None:
    assert normalise_error(raw) == grouped


def test_errors_that_differ_only_in_their_address_group_together() -> None:
    raws = [f"cannot deliver to user{n}@example.com (attempt {n})" for n in range(50)]
    assert {normalise_error(r) for r in raws} == {"cannot deliver to <email> (attempt <n>)"}


def test_dead_ratios_sum_the_folded_queues() -> None:
    summary = [
        {"queue": "a", "finished": 20_000, "dead": 1},
        {"queue": "b", "finished": 10, "dead": 10},
        {"queue": "c", "finished": 5, "dead": 1},
        {"queue": "d", "finished": 5, "dead": 0},
    ]
    grouping = group_queues(summary, top=1)
    assert dead_ratios(summary, grouping) == [("a", 1, 20_000), ("other (3 queues)", 11, 20)]


def test_throughput_fills_idle_minutes_and_folds_the_rest() -> None:
    grouping = group_queues(rows(100, 10, 1), top=1)
    points = [
        {"queue": "q00", "minute": T0, "count": 4},
        {"queue": "q00", "minute": T0 + timedelta(minutes=3), "count": 6},
        {"queue": "q01", "minute": T0 + timedelta(minutes=1), "count": 2},
        {"queue": "q02", "minute": T0 + timedelta(minutes=1), "count": 1},
    ]
    series = throughput_series(points, grouping)
    assert series.bucket_minutes == 1
    assert series.starts == [T0 + timedelta(minutes=m) for m in range(4)]
    assert series.counts == {"q00": [4, 0, 0, 6], "other (2 queues)": [0, 3, 0, 0]}
    assert series.total == [4, 3, 0, 6]


def test_a_long_range_is_drawn_in_bigger_buckets() -> None:
    grouping = group_queues(rows(1))
    points = [
        {"queue": "q00", "minute": T0 + timedelta(minutes=m), "count": 1} for m in range(0, 3 * 1440, 7)
    ]
    series = throughput_series(points, grouping)
    assert series.bucket_minutes == 15
    assert len(series.starts) <= 720
    assert sum(series.total) == len(points)
    assert throughput_series([], grouping).starts == []


def test_attempts_past_the_last_column_are_counted_in_it() -> None:
    grouping = group_queues(rows(10, 5), top=1)
    attempts = [
        {"queue": "q00", "attempts": 1, "count": 9},
        {"queue": "q00", "attempts": 14, "count": 1},
        {"queue": "q01", "attempts": 10, "count": 5},
    ]
    names, table = attempts_table(attempts, grouping, columns=10)
    assert names == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10+"]
    assert table["q00"] == [9, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert table["q01"] == [0] * 9 + [5]
    names, _table = attempts_table([{"queue": "q00", "attempts": 2, "count": 1}], group_queues(rows(1)))
    assert names == ["1", "2"]


def test_durations_and_names_stay_short() -> None:
    assert [seconds(v) for v in (None, 0.0375, 0.9997, 13.4, 600, 7300)] == [
        "-",
        "37.5 ms",
        "1 s",
        "13.4 s",
        "10 min",
        "2.03 h",
    ]
    assert shorten("payments-reconciliation-nightly") == "payments-reconciliation-nig…"
    assert shorten("emails") == "emails"
