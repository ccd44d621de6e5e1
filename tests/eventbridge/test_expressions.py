"""EventBridge Scheduler's expressions read as our timings, and our timings written as them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from simplequeue.api.scheduler.expressions import ExpressionError, expression_of, timing_of
from simplequeue.domain.schedules import Timing


@pytest.mark.parametrize(
    ("expression", "zone", "timing"),
    [
        ("rate(1 minute)", None, Timing(every_seconds=60)),
        ("rate(10 minutes)", None, Timing(every_seconds=600)),
        ("rate(3 hours)", None, Timing(every_seconds=10800)),
        ("rate(7 days)", None, Timing(every_seconds=604800)),
        (
            "at(2031-07-01T09:00:00)",
            "Europe/Berlin",
            Timing(at=datetime(2031, 7, 1, 7, tzinfo=UTC), timezone="Europe/Berlin"),
        ),
        (
            "cron(0 9 ? * MON-FRI *)",
            "Europe/Berlin",
            Timing(cron="0 9 * * MON-FRI", timezone="Europe/Berlin"),
        ),
        ("cron(0 9 ? * 2-6 *)", None, Timing(cron="0 9 * * 1-5")),
        ("cron(0 9 ? * 1,7 *)", None, Timing(cron="0 9 * * 0,6")),
        ("cron(0 9 ? * */2 *)", None, Timing(cron="0 9 * * */2")),
        ("cron(0 9 ? JUL WED *)", None, Timing(cron="0 9 * JUL WED")),
        ("cron(0/5 * 1 * ? *)", None, Timing(cron="0/5 * 1 * *")),
    ],
)
def test_read(expression: str, zone: str | None, timing: Timing) -> None:
    assert timing_of(expression, zone) == timing


@pytest.mark.parametrize(
    "expression",
    [
        "rate(0 minutes)",
        "rate(1 second)",
        "at(2031-02-30T00:00:00)",
        "at(2031-02-01 00:00:00)",
        "cron(0 9 * * *)",
        "cron(0 9 ? * 0 *)",
        "cron(0 9 ? * 8 *)",
        "cron(0 9 L * ? *)",
        "cron(0 9 ? * 5L *)",
        "cron(0 9 ? * 2#1 *)",
        "cron(0 9 1W * ? *)",
        "cron(0 9 ? * * 2031)",
    ],
)
def test_refused(expression: str) -> None:
    with pytest.raises(ExpressionError):
        timing_of(expression, None)


@pytest.mark.parametrize(
    ("timing", "expression"),
    [
        (Timing(every_seconds=60), "rate(1 minute)"),
        (Timing(every_seconds=120), "rate(2 minutes)"),
        (Timing(every_seconds=3600), "rate(1 hour)"),
        (Timing(every_seconds=172800), "rate(2 days)"),
        (Timing(every_seconds=90), "rate(90 seconds)"),
        (Timing(at=datetime(2031, 1, 1, 8, tzinfo=UTC), timezone="Asia/Tokyo"), "at(2031-01-01T17:00:00)"),
        (Timing(cron="0 9 * * 1-5"), "cron(0 9 ? * 2-6 *)"),
        (Timing(cron="0 9 * * 0"), "cron(0 9 ? * 1 *)"),
        (Timing(cron="0 9 * * 7"), "cron(0 9 ? * 1 *)"),
        (Timing(cron="0 9 * * 5-7"), "cron(0 9 ? * 6-7,1 *)"),
        (Timing(cron="0 9 * * 0-6"), "cron(0 9 ? * 1-7 *)"),
        (Timing(cron="0 9 * * mon-fri"), "cron(0 9 ? * mon-fri *)"),
        (Timing(cron="0 9 1 * *"), "cron(0 9 1 * ? *)"),
        (Timing(cron="@hourly"), "cron(0 * * * ? *)"),
    ],
)
def test_written(timing: Timing, expression: str) -> None:
    assert expression_of(timing) == expression


@pytest.mark.parametrize(
    "expression", ["rate(5 minutes)", "cron(0 9 ? * 2-6 *)", "cron(15 3 1 * ? *)", "at(2031-05-06T07:08:09)"]
)
def test_what_is_written_reads_back(expression: str) -> None:
    assert expression_of(timing_of(expression, "America/Chicago")) == expression
