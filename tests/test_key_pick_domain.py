"""The careful pop's pick among the keys it holds (domain/keys.py: pick): each key's room, then pop
order, then the pop's size."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from simplequeue.domain.keys import KeyTurn, pick


def test_each_key_gives_up_to_its_room_in_pop_order() -> None:
    turns = [
        KeyTurn("a", cap=2, leased=1, seqs=[10, 12, 14], places=[1, 3, 5]),
        KeyTurn("b", cap=None, leased=7, seqs=[11, 13], places=[2, 4]),
    ]
    assert pick(turns, 10) == ([10, 11, 13], True)  # a had room for 1 of its 3
    assert pick(turns, 2) == ([10, 11], True)
    assert pick(turns[1:], 10) == ([11, 13], False)


def test_a_key_over_its_cap_gives_nothing() -> None:
    assert pick([KeyTurn("a", cap=2, leased=3, seqs=[1], places=[1])], 5) == ([], True)


@st.composite
def turns_of(draw: st.DrawFn) -> list[KeyTurn]:
    places = draw(st.permutations(range(1, draw(st.integers(0, 30)) + 1)))
    keys = draw(st.lists(st.integers(0, 4), min_size=len(places), max_size=len(places)))
    turns = []
    for key in sorted(set(keys)):
        mine = sorted(p for p, k in zip(places, keys, strict=True) if k == key)
        cap = draw(st.none() | st.integers(1, 5))
        turns.append(KeyTurn(str(key), cap, draw(st.integers(0, 6)), [p * 100 for p in mine], mine))
    return turns


@given(turns_of(), st.integers(0, 40))
def test_a_pick_never_passes_a_room_nor_the_pop_and_keeps_pop_order(turns: list[KeyTurn], take: int) -> None:
    seqs, filled = pick(turns, take)
    assert len(seqs) <= take
    assert seqs == sorted(seqs)  # seq = place * 100 here: pop order
    for turn in turns:
        mine = [s for s in seqs if s in turn.seqs]
        assert len(mine) <= turn.room
        assert mine == list(turn.seqs[: len(mine)])  # a key's first items first
        if len(mine) < len(turn.seqs) and len(seqs) < take:
            assert filled
