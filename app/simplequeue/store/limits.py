"""What one process knows of its queues' flow limits (domain/limits.py), shared by the stores.

A queue with limits is popped the careful way, several statements in one transaction: with
queue-wide limits, its row locked, its leases counted and its bucket's tokens taken; with limits per
key, the rows of the keys it takes from locked (passing over keys other pops hold), just those keys'
leases counted and their buckets' tokens taken; then the claim. Every other queue keeps the
one-statement pop, which claims nothing of a queue whose row says `limited`; so a process that has
not yet seen a queue's new limits hands out nothing of it rather than too much, and learns of them
within FRESH_SECONDS, when it pops that queue carefully once more.

A careful pop cut short by a limit leaves a hold: the long-poll probe (service/waiting.py) does not
wake that queue's waiters for items that are there but not allowed until the bucket holds a token
again, or, when leases bound it, until a completion through this process frees room or
LEASES_HOLD_SECONDS pass (completions through other replicas are found then).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from simplequeue.domain.limits import FlowLimits, Room

FRESH_SECONDS = 1.0
"""How long a queue seen without limits keeps the one-statement pop before it is looked at again."""

LEASES_HOLD_SECONDS = 0.25
"""How long waiters on a queue at its max_leased wait for room freed elsewhere before trying again."""


@dataclass(frozen=True, slots=True)
class Limited:
    """What a careful pop found: the queue's limits, the room they left (None: no limits), how many
    items it took of how many asked; when its keys' rates cut it short, how long until one of
    their buckets holds a token again."""

    limits: FlowLimits
    room: Room | None
    taken: int
    asked: int
    key_refill_seconds: float | None = None


@dataclass(slots=True)
class Hold:
    until: float  # monotonic
    limit: str  # the one that cut the pop short (domain/limits.py's LIMIT_NAMES)

    @property
    def by_leases(self) -> bool:
        """Whether a completion or failure may free its room (max_leased, max_leased_per_key)."""
        return self.limit not in ("rate", "rate_per_key")


class FlowState:
    """The queues this process saw with and without limits, and the holds its pops left."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._unlimited_since: dict[str, float] = {}
        self._holds: dict[str, Hold] = {}

    def careful(self, queue: str) -> bool:
        """Whether a pop of `queue` must take the careful way: unless it was seen without limits
        less than FRESH_SECONDS ago."""
        seen = self._unlimited_since.get(queue)
        return seen is None or self._monotonic() - seen >= FRESH_SECONDS

    def forget(self, queue: str) -> None:
        """Its settings changed here: look again at the next pop."""
        self._unlimited_since.pop(queue, None)
        self._holds.pop(queue, None)

    def popped(self, queue: str, found: Limited) -> None:
        """What a careful pop of `queue` found."""
        limits, room, taken, asked = found.limits, found.room, found.taken, found.asked
        if not limits.limited or room is None:
            self._unlimited_since[queue] = self._monotonic()
            self._holds.pop(queue, None)
            return
        self._unlimited_since.pop(queue, None)
        if taken >= asked or room.bound_by is None:
            self._holds.pop(queue, None)
            return
        refill = room.refill_seconds(limits, taken)
        if room.bound_by == "rate_per_key":
            refill = found.key_refill_seconds
        if room.bound_by in ("rate", "rate_per_key") and refill is not None:
            self._holds[queue] = Hold(self._monotonic() + refill, room.bound_by)
        else:
            # (A rate-bound pop whose bucket still holds a whole token found fewer items than the
            # bucket allowed: held briefly, as for leases, and named so, as it always was.)
            limit = "max_leased" if room.bound_by == "rate" else room.bound_by
            self._holds[queue] = Hold(self._monotonic() + LEASES_HOLD_SECONDS, limit)

    def hold_seconds(self, queue: str) -> float:
        """How much longer the queue's waiters should not be woken for items already there (0: none)."""
        hold = self._holds.get(queue)
        if hold is None:
            return 0.0
        left = hold.until - self._monotonic()
        if left <= 0:
            del self._holds[queue]
            return 0.0
        return left

    def held_by(self, queue: str) -> str | None:
        """The limit that cut the queue's last careful pop short ('max_leased',
        'max_leased_per_key', 'rate'), while its hold lasts; None when none did."""
        return self._holds[queue].limit if self.hold_seconds(queue) > 0 else None

    def room_freed(self) -> list[str]:
        """A completion or failure through this process: the queues held by their leases, whose
        holds end now (the item's queue is not known here, and few queues are held at once)."""
        freed = [queue for queue, hold in self._holds.items() if hold.by_leases]
        for queue in freed:
            del self._holds[queue]
        return freed
