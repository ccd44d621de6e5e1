"""A fair queue's keys (its tenants, domain/fairness.py) and their own settings: a weight, and
limits that replace the queue's per-key defaults (max_leased_per_key, rate_per_key_per_second)
for a tenant who pays for more, or less."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_WEIGHT = 1000.0
MIN_WEIGHT = 0.001


@dataclass(frozen=True, slots=True)
class KeySettings:
    """A key's own settings; None: the queue's default for its keys."""

    weight: float = 1.0
    """Its share of turns: a key of weight 2 is handed out twice as many items as one of weight 1
    while both have items ready."""
    max_leased: int | None = None
    """Its items leased at once (None: the queue's max_leased_per_key)."""
    rate_per_second: float | None = None
    """Its items handed out per second (None: the queue's rate_per_key_per_second)."""


DEFAULT_KEY = KeySettings()


@dataclass(frozen=True, slots=True)
class KeyStats:
    """A key of a queue: its settings and its live items' counts."""

    key: str
    settings: KeySettings
    ready: int
    leased: int


TOP_KEYS = 10
"""How many keys a queue's stats show: those with the most ready items."""


@dataclass(frozen=True, slots=True)
class KeyLoad:
    """One of a queue's busiest keys (None: its unkeyed items, one more key): its items ready and
    leased (unexpired leases, as a pop counts them) and its cap (None: none)."""

    key: str | None
    ready: int
    leased: int
    max_leased: int | None

    @property
    def at_limit(self) -> bool:
        """Whether a pop hands out none of its items now: it holds as many leases as its cap."""
        return self.max_leased is not None and self.leased >= self.max_leased


UNLIMITED_ROOM = 2**31 - 1
"""A key's room when neither it nor its queue limits its leases."""


WALK_FACTOR = 4
"""How far past what a pop asks for its walks look when keys have limits: the keys' items
alternate (fairness), so a key with little room rarely holds more than a few of the first items;
what lies beyond the walk waits for the next pop."""


def walk_for(max_items: int) -> int:
    """How many items each walk of a pop with key limits looks at."""
    return max_items * WALK_FACTOR


@dataclass(frozen=True, slots=True)
class KeyTurn:
    """A key a careful pop holds the turn of: its cap on leases (None: none), its unexpired leases
    counted after it took the turn, the seqs of its items the pop's walk found, in pop order, with
    their places in the walk, and the whole tokens its bucket holds now (None: no rate)."""

    key: str
    cap: int | None
    leased: int
    seqs: Sequence[int]
    places: Sequence[int]
    tokens: int | None = None

    @property
    def room(self) -> int:
        by_cap = UNLIMITED_ROOM if self.cap is None else max(0, self.cap - self.leased)
        return by_cap if self.tokens is None else max(0, min(by_cap, self.tokens))

    @property
    def bound_by(self) -> str:
        """What limits its room: its rate when its tokens are fewer than its cap leaves."""
        by_cap = UNLIMITED_ROOM if self.cap is None else self.cap - self.leased
        return "rate_per_key" if self.tokens is not None and self.tokens < by_cap else "max_leased_per_key"


def pick(turns: Sequence[KeyTurn], take: int) -> tuple[list[int], str | None]:
    """The seqs a pop leases from the keys it holds: up to each key's room of its items, the first
    `take` of them in pop order; and the limit that cut some key's items short ('rate_per_key'
    when a rate did, else 'max_leased_per_key'; None: none did). A pop with fewer items than it
    asked for and a limit here was bound by the keys' limits."""
    chosen: list[tuple[int, int]] = []
    cut: set[str] = set()
    for turn in turns:
        room = turn.room
        if room < len(turn.seqs):
            cut.add(turn.bound_by)
        chosen += list(zip(turn.places[:room], turn.seqs[:room], strict=True))
    chosen.sort()
    bound_by = "rate_per_key" if "rate_per_key" in cut else next(iter(cut), None)
    return [seq for _, seq in chosen[:take]], bound_by
