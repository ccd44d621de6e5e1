"""The fair ranks a push gives (domain.fairness), apart from any store."""

from __future__ import annotations

from simplequeue.domain.fairness import NO_KEY, KeyShare, ranks, shares


def test_each_fair_queues_keys_are_shared_out_sorted_with_their_first_items_priority() -> None:
    items = [("q", "b", 5), ("q", "a", 0), ("q", "b", 1), ("q", None, 0), ("plain", None, 0)]
    assert shares(items, set()) == [
        KeyShare("q", NO_KEY, 1, 0),
        KeyShare("q", "a", 1, 0),
        KeyShare("q", "b", 2, 5),
    ], "a queue is fair when the push gives it a key; `plain` never saw one"
    assert shares([("plain", None, 0)], {"plain"}) == [KeyShare("plain", NO_KEY, 1, 0)]


def test_a_keys_items_take_consecutive_ranks_after_its_start() -> None:
    items = [("q", "a", 0), ("q", "b", 0), ("q", "a", 0), ("plain", None, 0)]
    starts = {"a": 10.0, "b": 3.0}
    found, last = ranks(items, lambda share: starts[share.key], set())
    assert found == [11.0, 4.0, 12.0, 0.0]
    assert last == {("q", "a"): 12.0, ("q", "b"): 4.0}
