"""Rules of the queue that every dialect follows alike: which pushed items speak for duplicates,
why a refused transition was refused, what a batch completion answers, when redriven items
come back, and the order pops hand items out in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from simplequeue.domain.errors import ItemDead, ItemNotFound, LeaseExpired, LeaseMismatch, QueueError
from simplequeue.domain.items import CompleteOutcome, Completion, ItemStatus, LeasedItem, NewItem, Pushed


@dataclass(frozen=True, slots=True)
class Found:
    """What a refused transition found of the item: its stored status and lease, and whether it is
    dead (stored so, or its lease expired on its last attempt: dead for every reader at once)."""

    status: str
    lease_token: UUID | None
    dead: bool


def why_refused(found: Found | None, lease_token: UUID | None) -> QueueError:
    """Why a compare-and-set changed nothing, given what it found of the item (None: no item):
    it is dead, or the token is not its current lease's."""
    if found is None:
        return ItemNotFound()
    return ItemDead() if found.dead else LeaseMismatch()


def why_not_extended(found: Found | None, lease_token: UUID) -> QueueError:
    """Why a lease extension changed nothing: as for any transition, or the lease ran out."""
    if found is not None and found.status == ItemStatus.LEASED and found.lease_token == lease_token:
        # The token matches, so only the expiry can have refused it: on the last attempt, that is death.
        return ItemDead() if found.dead else LeaseExpired()
    return why_refused(found, lease_token)


def dedup_leaders(items: Sequence[NewItem]) -> list[int]:
    """For each item, the index of the first item of the call that it repeats (itself when it
    repeats none): later ones become duplicates of it. An item repeats an earlier one with its
    queue and dedup_key, or, when its id is its idempotency key (NewItem.remembers_id), an earlier
    one of its queue with that id and the same kind of key (a retry that arrived together with the
    first attempt, such as two single pushes committed together)."""
    first: dict[tuple[str, str], int] = {}
    first_id: dict[UUID, int] = {}
    leaders = []
    for index, item in enumerate(items):
        if item.dedup_key is not None:
            leaders.append(first.setdefault((item.queue, item.dedup_key), index))
        elif item.remembers_id:
            leader = first_id.setdefault(item.id, index)
            same = items[leader].queue == item.queue and items[leader].remembers_id
            leaders.append(leader if same else index)
        else:
            leaders.append(index)
    return leaders


def id_holder_answer(item: NewItem, holder: tuple[str, datetime] | None) -> Pushed | None:
    """What a push of `item`, whose id was not inserted, answers given the queue and created_at of
    the item that holds the id (live, or finished within its window; None: nothing holds it now):
    a retry of that item when it is of the same queue, else None (the id is another queue's)."""
    if holder is None or holder[0] != item.queue or not item.remembers_id:
        return None
    return Pushed(item.id, holder[1], created=False)


def follow_leaders(results: list[Pushed | None], leaders: list[int]) -> list[Pushed | None]:
    """Items that repeat an earlier item's dedup_key (see dedup_leaders) get that item's result,
    as duplicates; `results` holds the leaders' own."""
    followed = []
    for n, leader in enumerate(leaders):
        result = results[leader]
        if leader != n and result is not None:
            result = Pushed(result.id, result.created_at, created=False)
        followed.append(result)
    return followed


def complete_outcomes(
    requested: Sequence[Completion], completed: set[UUID], still_there: set[UUID], dead: set[UUID]
) -> list[CompleteOutcome]:
    """Each request's outcome, given the ids the batch deleted, those it left in place, and of
    those, the dead ones."""

    def outcome(item: Completion) -> CompleteOutcome:
        if item.id in completed:
            return CompleteOutcome.COMPLETED
        if item.id in dead:
            return CompleteOutcome.DEAD
        if item.id in still_there:
            return CompleteOutcome.LEASE_MISMATCH
        return CompleteOutcome.NOT_FOUND

    return [outcome(item) for item in requested]


def repeat_rounds(ids: Sequence[UUID]) -> list[list[int]]:
    """Places of `ids` split into rounds of distinct ids, the k-th occurrence of an id in round k:
    run one after another, they treat a repeated id as that many requests in order would."""
    rounds: list[list[int]] = []
    seen: dict[UUID, int] = {}
    for n, item_id in enumerate(ids):
        k = seen[item_id] = seen.get(item_id, -1) + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(n)
    return rounds


def redrive_delay(position: int, rate_per_second: float | None) -> timedelta:
    """How long after the redrive the item at `position` (from 0) becomes poppable."""
    return timedelta(seconds=position / rate_per_second) if rate_per_second else timedelta(0)


def in_pop_order(items: Sequence[tuple[Any, LeasedItem]]) -> list[LeasedItem]:
    """(seq, item) pairs, as RETURNING/OUTPUT gives them in no defined order, in the order pops
    hand items out: highest rank (domain.aging), then lowest fair rank, then oldest created_at, then
    first pushed."""
    return [item for _, item in sorted(items, key=lambda pair: _pop_key(*pair))]


def _pop_key(seq: Any, item: LeasedItem) -> tuple[int, float, datetime, Any]:
    rank = item.priority if item.rank_priority is None else item.rank_priority
    return (-rank, item.fair_rank, item.created_at, seq)
