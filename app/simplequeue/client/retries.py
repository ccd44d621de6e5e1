"""Bounded retries of the client's calls.

Retries (RetryPolicy) cover what cannot change anything twice:

- a 503 (DatabaseUnavailable, SchemaNotReady: the service answered without doing the work), on
  every operation, after Retry-After when the answer gives one;
- a request that never reached the service (connection refused, connect or pool timeout), on every
  operation;
- any other transport failure (reset, read timeout: the request may have been served), only on the
  operations whose repetition is harmless: reads, pop (an item leased by a lost answer comes back
  when its lease runs out), extend (it sets the lease's end again), and pushes. A single push
  always carries an id (the caller's, or one the client makes), and so does every item of a batch.
  The service remembers such an id while its item lives and for the queue's dedup window after it
  finished (completed, or dead and purged): a retry whose earlier attempt committed inserts nothing
  and hears that item (created false), even if a worker has completed it meanwhile, and the client
  reports it as created by this call. A retry after the window would push it anew; the window is
  an hour by default, retries take seconds. Complete and fail are not repeated after such a
  failure: the caller sees Unavailable and the lease decides (the item comes back once it runs out).

Delays grow exponentially with jitter, are bounded in number (`attempts`) and in total time
(`total_seconds`); when they run out, the last error is raised (Unavailable for no answer).
"""

from __future__ import annotations

import email.utils
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

import httpx


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 5
    """Tries in all, the first included (1: never retry)."""
    base_seconds: float = 0.2
    cap_seconds: float = 5.0
    total_seconds: float = 30.0
    """No retry starts later than this after the first try."""
    jitter: float = 0.5
    """Up to this share of a computed delay is taken off at random (and up to a fifth of it is
    added to a Retry-After), so that many clients do not retry in step."""

    def delay(self, retry: int, retry_after: float | None) -> float:
        """The pause before retry number `retry` (1 for the first)."""
        if retry_after is not None:
            return float(retry_after * (1 + random.uniform(0, self.jitter / 5)))
        computed = min(self.cap_seconds, self.base_seconds * 2 ** (retry - 1))
        return float(computed * (1 - random.uniform(0, self.jitter)))


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(attempts=1)


class Repeat(Enum):
    """Which failures an operation may be repeated after (besides a 503)."""

    UNSENT = "unsent"  # only requests that never reached the service
    ANY = "any"  # any transport failure: repeating it is harmless


UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport failures of a request that never reached the service. When one is the cause
(`__cause__`) of an Unavailable, the request did nothing (the worker sends such completions again)."""


def asked_delay(response: httpx.Response) -> float | None:
    """The pause an answer's Retry-After asks for (seconds or an HTTP date), if any."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
