"""The flow limits' arithmetic (domain/limits.py): the room a pop has, the bucket's refill and cap,
and that no sequence of pops at any times takes more tokens than the rate and the burst allow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from simplequeue.domain.limits import Bucket, FlowLimits, room

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
FULL = Bucket(None, None)


def test_no_limits_leave_every_pop_whole() -> None:
    limits = FlowLimits()
    assert not limits.limited
    allowed = room(limits, 10, 1000, FULL, T0)
    assert (allowed.items, allowed.bound_by, allowed.tokens) == (10, None, None)


def test_max_leased_leaves_what_the_leases_do_not_hold() -> None:
    limits = FlowLimits(max_leased=5)
    assert (room(limits, 10, 3, FULL, T0).items, room(limits, 10, 3, FULL, T0).bound_by) == (2, "max_leased")
    assert room(limits, 10, 7, FULL, T0).items == 0  # over it (a limit lowered): none, never negative
    assert room(limits, 2, 3, FULL, T0).bound_by is None  # the pop asked for no more than there is


def test_a_bucket_never_counted_is_full_and_a_rate_alone_holds_a_second() -> None:
    assert FlowLimits(rate_per_second=2.5).burst == 3
    assert FlowLimits(rate_per_second=0.1).burst == 1
    assert FlowLimits(rate_per_second=2, rate_burst=7).burst == 7
    allowed = room(FlowLimits(rate_per_second=2, rate_burst=4), 10, 0, FULL, T0)
    assert (allowed.items, allowed.tokens, allowed.at, allowed.bound_by) == (4, 4.0, T0, "rate")


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    limits = FlowLimits(rate_per_second=2, rate_burst=4)
    empty = Bucket(0.0, T0)
    assert empty.tokens_at(limits, T0 + timedelta(seconds=0.5)) == 1.0
    assert empty.tokens_at(limits, T0 + timedelta(seconds=60)) == 4.0
    # A clock that reads earlier than the last count (a pop that waited for the lock) adds nothing,
    # and the count's time stays the later one, so the time between is credited once, later.
    assert empty.tokens_at(limits, T0 - timedelta(seconds=1)) == 0.0
    late = room(limits, 1, 0, Bucket(0.5, T0), T0 - timedelta(seconds=1))
    assert (late.items, late.at) == (0, T0)


def test_a_whole_token_counted_in_float_seconds_is_whole() -> None:
    limits = FlowLimits(rate_per_second=3)
    third = Bucket(0.0, T0).tokens_at(limits, T0 + timedelta(microseconds=333_334))
    assert room(limits, 5, 0, Bucket(third, T0), T0).items == 1


def test_the_refill_wait_is_until_the_next_whole_token() -> None:
    limits = FlowLimits(rate_per_second=4, rate_burst=2)
    allowed = room(limits, 5, 0, Bucket(2.0, T0), T0)
    assert allowed.refill_seconds(limits, 2) == 0.25
    assert allowed.refill_seconds(limits, 1) is None  # a token is left
    assert room(FlowLimits(max_leased=1), 5, 0, FULL, T0).refill_seconds(FlowLimits(max_leased=1), 1) is None


@given(
    rate=st.floats(0.5, 50),
    burst=st.integers(1, 20),
    pops=st.lists(st.tuples(st.floats(0, 3), st.integers(1, 30)), min_size=1, max_size=60),
)
def test_no_pops_at_any_times_take_more_than_the_rate_and_burst_allow(
    rate: float, burst: int, pops: list[tuple[float, int]]
) -> None:
    limits = FlowLimits(rate_per_second=rate, rate_burst=burst)
    bucket, now, taken = FULL, T0, 0
    for gap, asked in pops:
        now += timedelta(seconds=gap)
        allowed = room(limits, asked, 0, bucket, now)
        assert allowed.tokens is not None
        assert allowed.at is not None
        assert 0 <= allowed.items <= asked
        taken += allowed.items
        bucket = Bucket(allowed.tokens - allowed.items, allowed.at)
        assert bucket.tokens is not None
        assert bucket.tokens >= -1e-6
        elapsed = (now - T0).total_seconds()
        assert taken <= burst + rate * elapsed + 1e-6
