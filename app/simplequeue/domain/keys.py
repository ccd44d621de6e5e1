"""A fair queue's keys (its tenants, domain/fairness.py) and their own settings: a weight, and
limits that replace the queue's per-key defaults (max_leased_per_key, rate_per_key_per_second)
for a tenant who pays for more, or less."""

from __future__ import annotations

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
