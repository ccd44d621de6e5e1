"""Flow limits: how many of a queue's items may be leased at once, and how fast pops may hand
them out. Enforced inside the pop's own transaction (the stores), so every replica and every
worker, in any language, obeys them; this module holds the arithmetic they share.

The rate is a token bucket kept on the queue's row: it fills at `rate_per_second` up to
`rate_burst` tokens, and every item a pop hands out takes one. Its state is (tokens, the time
they were counted); a bucket never counted is full.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class FlowLimits:
    """A queue's limits; None: no such limit."""

    max_leased: int | None = None
    """Items of the queue leased at once, across replicas (unexpired leases)."""
    rate_per_second: float | None = None
    """Items handed out per second, across replicas, on average."""
    rate_burst: int | None = None
    """Items that may be handed out at once after a quiet spell (the bucket's size). None with a
    rate: one second's worth, at least 1."""
    max_leased_per_key: int | None = None
    """Items of one fairness key leased at once, unless the key's own max_leased says otherwise."""
    rate_per_key_per_second: float | None = None
    """Items of one fairness key handed out per second, across replicas, unless the key's own
    rate_per_second says otherwise: a bucket per key (key_bucket), of one second's worth, at least 1."""
    keys_limited: bool = False
    """Whether some key of the queue has limits of its own (domain/keys.py): known to a careful pop
    only, never a setting of the queue."""

    @property
    def limited(self) -> bool:
        """Whether a pop must count leases or take tokens: such a queue pops the careful way."""
        return (
            self.max_leased is not None
            or self.rate_per_second is not None
            or self.max_leased_per_key is not None
            or self.rate_per_key_per_second is not None
            or self.keys_limited
        )

    @property
    def per_key(self) -> bool:
        """Whether a pop must count each key's leases."""
        return (
            self.max_leased_per_key is not None
            or self.rate_per_key_per_second is not None
            or self.keys_limited
        )

    @property
    def burst(self) -> float:
        """The bucket's size."""
        if self.rate_burst is not None:
            return float(self.rate_burst)
        return float(max(1, math.ceil(self.rate_per_second or 0)))


NO_LIMITS = FlowLimits()

LIMIT_NAMES = ("max_leased", "max_leased_per_key", "rate", "rate_per_key")
"""The limits that may cut a pop short (Room.bound_by)."""


@dataclass(frozen=True, slots=True)
class Binding:
    """A limit that cut pops of a queue short in this process: how many pops, and when the last."""

    limit: str
    pops: int
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class Bucket:
    """A rate bucket's state as stored: tokens as counted at `at`; (None, None) when never counted."""

    tokens: float | None
    at: datetime | None

    def tokens_at(self, limits: FlowLimits, now: datetime) -> float:
        """The tokens there are at `now`. Time never runs backwards here: a pop whose clock reads
        earlier than the last count (it waited for the queue's lock) finds what was counted, and the
        time between is credited to the next pop, so no token is made twice or lost."""
        if self.tokens is None or self.at is None:
            return limits.burst
        elapsed = max(0.0, (now - self.at).total_seconds())
        return min(limits.burst, self.tokens + elapsed * (limits.rate_per_second or 0.0))


@dataclass(frozen=True, slots=True)
class Room:
    """What a pop of a limited queue may take now, and how its bucket stands after."""

    items: int
    """How many items the pop may hand out (up to what it asked for)."""
    tokens: float | None
    """The bucket's tokens at `at`, before the pop takes its items (None: no rate)."""
    at: datetime | None
    bound_by: str | None
    """Which limit cut the pop short (one of LIMIT_NAMES), None when none did."""

    def refill_seconds(self, limits: FlowLimits, taken: int) -> float | None:
        """After `taken` items: how long until the bucket holds a whole token again (None: it
        does, or there is no rate)."""
        if self.tokens is None or not limits.rate_per_second:
            return None
        left = self.tokens - taken
        return None if left >= 1 - 1e-9 else (1 - left) / limits.rate_per_second


def room(limits: FlowLimits, asked: int, leased: int, bucket: Bucket, now: datetime) -> Room:
    """How many of `asked` items a pop may take, with `leased` unexpired leases held now."""
    items, bound_by = asked, None
    if limits.max_leased is not None and limits.max_leased - leased < items:
        items, bound_by = max(0, limits.max_leased - leased), "max_leased"
    tokens: float | None = None
    at: datetime | None = None
    if limits.rate_per_second is not None:
        tokens = bucket.tokens_at(limits, now)
        at = max(now, bucket.at) if bucket.at is not None else now
        whole = int(tokens + 1e-9)  # 0.9999999 tokens, from float seconds, is the whole token it means
        if whole < items:
            items, bound_by = max(0, whole), "rate"
    return Room(items, tokens, at, bound_by)


@dataclass(frozen=True, slots=True)
class KeyBucket:
    """A key's rate bucket as a pop finds it: `tokens` at `at`, filling at `rate` per second up to
    one second's worth, at least 1 (as a queue's bucket with no rate_burst: a key's burst is not a
    setting of its own)."""

    rate: float
    tokens: float
    at: datetime

    @property
    def whole(self) -> int:
        """The items it lets a pop take now."""
        return max(0, int(self.tokens + 1e-9))

    def refill_seconds(self, taken: int) -> float | None:
        """After `taken` items: how long until it holds a whole token again (None: it does)."""
        left = self.tokens - taken
        return None if left >= 1 - 1e-9 else (1 - left) / self.rate


def key_bucket(rate: float, stored: Bucket, now: datetime) -> KeyBucket:
    """A key's bucket at `now` from its stored state (never counted: full)."""
    tokens = stored.tokens_at(FlowLimits(rate_per_second=rate), now)
    return KeyBucket(rate, tokens, max(now, stored.at) if stored.at is not None else now)


def key_refill(buckets: Mapping[str, KeyBucket], taken: Mapping[str, int]) -> float | None:
    """After a pop took `taken` items of each key: how long until the first of the keys' buckets
    that ran dry holds a token again (None: none ran dry)."""
    waits = [w for key, b in buckets.items() if (w := b.refill_seconds(taken.get(key, 0))) is not None]
    return min(waits, default=None)
