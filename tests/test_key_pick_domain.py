"""The careful pop's pick among the keys it holds (domain/keys.py: pick): each key's room (its cap,
its tokens), then pop order, then the pop's size; and a key's bucket (domain/limits.py: key_bucket)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from simplequeue.domain.keys import KeyTurn, pick
from simplequeue.domain.limits import Bucket, key_bucket, key_refill


def test_each_key_gives_up_to_its_room_in_pop_order() -> None:
    turns = [
        KeyTurn("a", cap=2, leased=1, seqs=[10, 12, 14], places=[1, 3, 5]),
        KeyTurn("b", cap=None, leased=7, seqs=[11, 13], places=[2, 4]),
    ]
    assert pick(turns, 10) == ([10, 11, 13], "max_leased_per_key")  # a had room for 1 of its 3
    assert pick(turns, 2) == ([10, 11], "max_leased_per_key")
    assert pick(turns[1:], 10) == ([11, 13], None)


def test_a_key_over_its_cap_gives_nothing() -> None:
    assert pick([KeyTurn("a", cap=2, leased=3, seqs=[1], places=[1])], 5) == ([], "max_leased_per_key")


def test_a_key_out_of_tokens_is_bound_by_its_rate() -> None:
    turns = [
        KeyTurn("a", cap=None, leased=0, seqs=[1, 3], places=[1, 3], tokens=1),
        KeyTurn("b", cap=5, leased=0, seqs=[2, 4], places=[2, 4], tokens=0),
    ]
    assert pick(turns, 10) == ([1], "rate_per_key")
    # A cap below the tokens is what binds.
    assert pick([KeyTurn("c", cap=1, leased=0, seqs=[1, 2], places=[1, 2], tokens=3)], 5) == (
        [1],
        "max_leased_per_key",
    )


@st.composite
def turns_of(draw: st.DrawFn) -> list[KeyTurn]:
    places = draw(st.permutations(range(1, draw(st.integers(0, 30)) + 1)))
    keys = draw(st.lists(st.integers(0, 4), min_size=len(places), max_size=len(places)))
    turns = []
    for key in sorted(set(keys)):
        mine = sorted(p for p, k in zip(places, keys, strict=True) if k == key)
        cap = draw(st.none() | st.integers(1, 5))
        tokens = draw(st.none() | st.integers(0, 5))
        turns.append(KeyTurn(str(key), cap, draw(st.integers(0, 6)), [p * 100 for p in mine], mine, tokens))
    return turns


@given(turns_of(), st.integers(0, 40))
def test_a_pick_never_passes_a_room_nor_the_pop_and_keeps_pop_order(turns: list[KeyTurn], take: int) -> None:
    seqs, bound_by = pick(turns, take)
    assert len(seqs) <= take
    assert seqs == sorted(seqs)  # seq = place * 100 here: pop order
    for turn in turns:
        mine = [s for s in seqs if s in turn.seqs]
        assert len(mine) <= turn.room
        assert turn.tokens is None or len(mine) <= turn.tokens
        assert mine == list(turn.seqs[: len(mine)])  # a key's first items first
        if len(mine) < len(turn.seqs) and len(seqs) < take:
            assert bound_by is not None


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_keys_bucket_starts_full_at_a_seconds_worth_and_refills() -> None:
    fresh = key_bucket(2.5, Bucket(None, None), T0)
    assert (fresh.whole, fresh.at) == (3, T0)  # ceil(2.5): a second's worth, at least 1
    assert key_bucket(0.2, Bucket(None, None), T0).whole == 1
    after = key_bucket(2.0, Bucket(0.0, T0), T0 + timedelta(seconds=0.5))
    assert after.whole == 1
    assert fresh.refill_seconds(3) == pytest.approx(0.4)  # 3 - 3 = 0 left: a token at 2.5/s
    assert fresh.refill_seconds(1) is None
    assert key_refill({"a": fresh, "b": after}, {"a": 3, "b": 1}) == pytest.approx(0.4)
    assert key_refill({"a": fresh}, {}) is None


@given(
    st.floats(0.01, 1000),
    st.none() | st.floats(-5, 1000),
    st.floats(-10, 1000),
    st.integers(0, 2000),
)
def test_a_keys_bucket_never_holds_more_than_its_size_and_never_runs_time_backwards(
    rate: float, tokens: float | None, elapsed: float, taken: int
) -> None:
    stored = Bucket(tokens, None if tokens is None else T0)
    now = T0 + timedelta(seconds=elapsed)
    bucket = key_bucket(rate, stored, now)
    size = max(1, math.ceil(rate))
    assert bucket.tokens <= size
    assert bucket.whole <= size
    assert bucket.at >= now
    assert tokens is None or bucket.at >= T0
    if tokens is not None and elapsed <= 0:
        assert bucket.tokens == min(size, tokens)  # no time passed: nothing made
    wait = bucket.refill_seconds(taken)
    if wait is not None:  # it then holds one token again
        assert bucket.tokens - taken + wait * rate == pytest.approx(1)
