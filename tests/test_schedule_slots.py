"""Schedules' slot arithmetic, pure: cron expressions read in a zone (its clock changes
included), every_seconds, at, and what a scheduler fires after a gap under each catch-up policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simplequeue.domain.cron import CronError, next_instant, parse_cron, previous_instant
from simplequeue.domain.schedules import (
    LATE_SECONDS,
    MAX_CATCH_UP,
    InvalidSchedule,
    Schedule,
    ScheduleSpec,
    Timing,
    dedup_key,
    jitter,
    plan_firing,
)

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def walk(expression: str, zone: ZoneInfo, start: datetime, count: int) -> list[str]:
    """The next `count` slots after start, as local wall times with their offsets."""
    cron, found, at = parse_cron(expression), [], start
    for _ in range(count):
        slot = next_instant(cron, zone, at)
        assert slot is not None
        found.append(slot.astimezone(zone).isoformat())
        at = slot
    return found


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timing", "field", "words"),
    [
        (Timing(cron="61 * * * *"), "cron", "minute: 61 is out of range 0-59"),
        (Timing(cron="* 24 * * *"), "cron", "hour: 24 is out of range 0-23"),
        (Timing(cron="* * 0 * *"), "cron", "day of month: 0 is out of range 1-31"),
        (Timing(cron="* * * 13 *"), "cron", "month: 13"),
        (Timing(cron="* * * * 8"), "cron", "day of week: 8"),
        (Timing(cron="*/0 * * * *"), "cron", "step 0"),
        (Timing(cron="5-1 * * * *"), "cron", "runs backwards"),
        (Timing(cron="* * * *"), "cron", "5 fields"),
        (Timing(cron="x * * * *"), "cron", "'x' is not a number"),
        (Timing(cron="0 9 * * *", timezone="Mars/Olympus"), "timezone", "not an IANA time zone"),
        (Timing(every_seconds=60, timezone="../etc"), "timezone", "not an IANA time zone"),
        (Timing(), "every_seconds", "give one of"),
        (Timing(every_seconds=60, cron="* * * * *"), "cron", "not every_seconds and cron"),
        (Timing(every_seconds=0), "every_seconds", "must be 1 to"),
        (Timing(every_seconds=-5), "every_seconds", "must be 1 to"),
        (Timing(every_seconds=10**12), "every_seconds", "must be 1 to"),
        (Timing(at=NOW - timedelta(seconds=1)), "at", "in the past"),
        (Timing(at=datetime(2030, 1, 1)), "at", "offset"),
    ],
)
def test_a_bad_timing_is_refused_in_one_line_naming_its_field(timing: Timing, field: str, words: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        timing.check(NOW)
    assert caught.value.field == field
    assert words in caught.value.detail
    assert "\n" not in caught.value.detail


@pytest.mark.parametrize(
    "timing",
    [
        Timing(every_seconds=1),
        Timing(cron="*/15 9-17 * * mon-fri", timezone="Europe/Berlin"),
        Timing(cron="0 0 1,15 jan,jul *"),
        Timing(cron="@hourly"),
        Timing(cron="0 12 * * 7"),
        Timing(at=NOW + timedelta(minutes=5)),
    ],
)
def test_good_timings_pass(timing: Timing) -> None:
    timing.check(NOW)


def test_a_spec_checks_its_own_fields() -> None:
    timing = Timing(every_seconds=60)
    for spec, field in [
        (ScheduleSpec("q", "{}", timing, jitter_seconds=-1), "jitter_seconds"),
        (ScheduleSpec("q", "{}", timing, overlap="never"), "overlap"),  # type: ignore[arg-type]
        (ScheduleSpec("q", "{}", timing, catch_up="some"), "catch_up"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidSchedule) as caught:
            spec.check(NOW)
        assert caught.value.field == field


def test_thirtieth_of_february_never_comes() -> None:
    assert next_instant(parse_cron("0 0 30 2 *"), ZoneInfo("UTC"), NOW) is None


def test_cron_errors_are_value_errors_naming_the_field() -> None:
    with pytest.raises(CronError, match="minute"):
        parse_cron("60 * * * *")


# --- every_seconds and at --------------------------------------------------------------------------


def test_every_seconds_slots_are_multiples_of_the_interval_since_the_epoch() -> None:
    timing = Timing(every_seconds=60)
    assert timing.next_slot(utc(2026, 6, 1, 12, 0, 30)) == utc(2026, 6, 1, 12, 1)
    assert timing.next_slot(utc(2026, 6, 1, 12, 1)) == utc(2026, 6, 1, 12, 2)  # strictly after
    assert timing.previous_slot(utc(2026, 6, 1, 12, 1)) == utc(2026, 6, 1, 12, 1)  # at or before
    assert Timing(every_seconds=7).next_slot(utc(1970, 1, 1)) == utc(1970, 1, 1, 0, 0, 7)


def test_at_fires_once() -> None:
    at = NOW + timedelta(hours=1)
    timing = Timing(at=at)
    assert timing.next_slot(NOW) == at
    assert timing.next_slot(at) is None
    assert timing.previous_slot(at) == at


# --- daylight saving time --------------------------------------------------------------------------


def test_new_york_spring_forward_fires_a_skipped_slot_once_at_the_gaps_end() -> None:
    # 2026-03-08: 02:00 EST becomes 03:00 EDT; 02:30 does not exist that day.
    assert walk("30 2 * * *", NEW_YORK, utc(2026, 3, 7, 12), 3) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]
    # Every skipped slot of the hour and 03:00 itself are one slot.
    assert walk("*/20 * * * *", NEW_YORK, utc(2026, 3, 8, 6, 30), 4) == [
        "2026-03-08T01:40:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:20:00-04:00",
        "2026-03-08T03:40:00-04:00",
    ]


def test_new_york_fall_back_fires_a_repeated_slot_once() -> None:
    # 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 happens twice.
    assert walk("30 1 * * *", NEW_YORK, utc(2026, 10, 31, 12), 2) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]
    assert walk("0,30 * * * *", NEW_YORK, utc(2026, 11, 1, 4, 45), 4) == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T02:00:00-05:00",  # the repeated 01:00 and 01:30 (EST) do not fire
        "2026-11-01T02:30:00-05:00",
    ]


def test_berlin_both_changes() -> None:
    # 2026-03-29: 02:00 CET becomes 03:00 CEST. 2026-10-25: 03:00 CEST becomes 02:00 CET.
    assert walk("15 2 * * *", BERLIN, utc(2026, 3, 28, 12), 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:15:00+02:00",
    ]
    assert walk("15 2 * * *", BERLIN, utc(2026, 10, 24, 12), 2) == [
        "2026-10-25T02:15:00+02:00",
        "2026-10-26T02:15:00+01:00",
    ]


def test_previous_slot_agrees_across_a_change() -> None:
    cron = parse_cron("30 2 * * *")
    assert previous_instant(cron, NEW_YORK, utc(2026, 3, 8, 12)) == utc(2026, 3, 8, 7)
    assert previous_instant(cron, NEW_YORK, utc(2026, 3, 8, 6, 59)) == utc(2026, 3, 7, 7, 30)


def _reference_next(expression: str, zone: ZoneInfo, after: datetime) -> datetime:
    """The rules read another way: walk instants minute by minute; an instant is a slot when its
    wall time is a first occurrence and some wall minute the clock passed over since the minute
    before (one, or a gap's worth) matches."""
    cron = parse_cron(expression)
    instant = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(60 * 24 * 400):
        here, before = instant.astimezone(zone), (instant - timedelta(minutes=1)).astimezone(zone)
        wall, wall_before = here.replace(tzinfo=None), before.replace(tzinfo=None)
        if here.fold == 0 and wall > wall_before:
            passed = wall_before + timedelta(minutes=1)
            while passed <= wall:
                in_day = cron.day_matches(passed.date())
                if in_day and passed.hour in cron.hours and passed.minute in cron.minutes:
                    return instant
                passed += timedelta(minutes=1)
        instant += timedelta(minutes=1)
    raise AssertionError("no slot within 400 days")


_FIELD = st.sampled_from(["*", "*/7", "0", "30", "0,15,45", "10-40/10", "59"])
_HOUR = st.sampled_from(["*", "1", "2", "3", "1-3", "*/5", "0,12"])
_DAY = st.sampled_from(["*", "1", "8", "1-7", "*/10"])
_WEEKDAY = st.sampled_from(["*", "0", "sun", "1-5", "6,7"])


@settings(max_examples=150, deadline=None)
@given(
    minute=_FIELD,
    hour=_HOUR,
    day=_DAY,
    weekday=_WEEKDAY,
    zone=st.sampled_from([NEW_YORK, BERLIN, ZoneInfo("UTC")]),
    # Around both of 2026's changes in each zone, and away from them.
    start=st.sampled_from(
        [utc(2026, 3, 7), utc(2026, 3, 28), utc(2026, 10, 24), utc(2026, 10, 31), utc(2026, 6, 1)]
    ),
    offset_minutes=st.integers(0, 3 * 24 * 60),
)
def test_next_slot_matches_a_minute_by_minute_walk(
    minute: str, hour: str, day: str, weekday: str, zone: ZoneInfo, start: datetime, offset_minutes: int
) -> None:
    expression = f"{minute} {hour} {day} * {weekday}"
    after = start + timedelta(minutes=offset_minutes, seconds=17)
    assert next_instant(parse_cron(expression), zone, after) == _reference_next(expression, zone, after)


# --- firing and catching up -----------------------------------------------------------------------


def schedule(timing: Timing, next_run_at: datetime, catch_up: str = "latest") -> Schedule:
    spec = ScheduleSpec("q", '{"k":1}', timing, catch_up=catch_up)  # type: ignore[arg-type]
    return Schedule("s", spec, created_at=NOW - timedelta(days=30), next_run_at=next_run_at)


HOURLY = Timing(cron="0 * * * *")


def test_nothing_fires_before_the_slot() -> None:
    assert plan_firing(schedule(HOURLY, NOW + timedelta(seconds=1)), NOW) is None


def test_a_slot_reached_on_time_fires_under_every_policy() -> None:
    for policy in ("none", "latest", "all"):
        firing = plan_firing(schedule(HOURLY, NOW, policy), NOW + timedelta(seconds=0.4))
        assert firing is not None
        assert firing.slots == (NOW,)
        assert firing.claimed == NOW
        assert firing.following == NOW + timedelta(hours=1)


@pytest.mark.parametrize(
    ("policy", "fired"),
    [
        ("none", ()),
        ("latest", (NOW + timedelta(hours=4),)),
        ("all", tuple(NOW + timedelta(hours=h) for h in range(5))),
    ],
)
def test_after_a_gap_the_policy_decides(policy: str, fired: tuple[datetime, ...]) -> None:
    # Down from just before NOW's slot until 4 h 10 min later: five hourly slots missed.
    firing = plan_firing(schedule(HOURLY, NOW, policy), NOW + timedelta(hours=4, minutes=10))
    assert firing is not None
    assert firing.slots == fired
    assert firing.following == NOW + timedelta(hours=5)


def test_latest_after_a_gap_ending_on_time_fires_the_on_time_slot_only() -> None:
    firing = plan_firing(schedule(HOURLY, NOW, "latest"), NOW + timedelta(hours=4, seconds=LATE_SECONDS / 2))
    assert firing is not None
    assert firing.slots == (NOW + timedelta(hours=4),)


@pytest.mark.parametrize(("policy", "fired"), [("none", 1), ("latest", 1), ("all", 6)])
def test_a_few_seconds_late_the_policy_decides_too(policy: str, fired: int) -> None:
    # An every-second schedule whose scheduler was held up for 5 s: only "all" fires them all.
    firing = plan_firing(schedule(Timing(every_seconds=1), NOW, policy), NOW + timedelta(seconds=5.5))
    assert firing is not None
    assert len(firing.slots) == fired
    assert firing.slots[-1] == NOW + timedelta(seconds=5)


def test_all_is_bounded() -> None:
    firing = plan_firing(schedule(Timing(every_seconds=1), NOW, "all"), NOW + timedelta(days=3))
    assert firing is not None
    assert len(firing.slots) == MAX_CATCH_UP
    assert firing.slots[-1] == NOW + timedelta(days=3)
    assert list(firing.slots) == sorted(firing.slots)


def test_an_at_schedule_fires_once_and_has_no_following_slot() -> None:
    at = NOW + timedelta(minutes=5)
    firing = plan_firing(schedule(Timing(at=at), at), at + timedelta(seconds=1))
    assert firing is not None
    assert firing.slots == (at,)
    assert firing.following is None


def test_dedup_keys_and_jitter_are_the_same_on_every_replica() -> None:
    assert dedup_key("nightly", utc(2026, 3, 8, 7)) == "schedule:nightly:2026-03-08T07:00:00Z"
    assert len(dedup_key("n" * 80, utc(2026, 3, 8, 7, 0, 0))) <= 128
    spread = {jitter("s", NOW + timedelta(minutes=m), 30) for m in range(50)}
    assert all(0 <= j < 30 for j in spread)
    assert len(spread) > 40
    assert jitter("s", NOW, 30) == jitter("s", NOW, 30)
    assert jitter("s", NOW, 0) == 0
