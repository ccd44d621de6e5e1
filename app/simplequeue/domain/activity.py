"""Activity over time: how many items were pushed, completed, failed and died per bucket of time.

The window is bounded so that the cost of counting is: it starts at most MAX_AGE ago and holds at
most MAX_BUCKETS buckets (of a longer one, the latest), each aligned to a multiple of its length
since the epoch (a minute bucket starts on the minute), the last one holding now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MAX_AGE = timedelta(days=7)
MAX_BUCKETS = 1500
MIN_BUCKET_SECONDS = 10
MAX_BUCKET_SECONDS = 86400
DEFAULT_SPAN = timedelta(hours=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class InvalidWindow(ValueError):
    """A window that is not one the activity counts answer for (the API answers 422); `field` is
    the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class ActivityWindow:
    since: datetime  # the first bucket's start, aligned
    bucket_seconds: int
    buckets: int

    @property
    def until(self) -> datetime:
        return self.since + timedelta(seconds=self.bucket_seconds * self.buckets)

    def start_of(self, index: int) -> datetime:
        return self.since + timedelta(seconds=self.bucket_seconds * index)


@dataclass(frozen=True, slots=True)
class ActivityBucket:
    """Counts of one bucket: pushed by the items' created_at, completed and dead by when they
    finished, failed by when each failure was recorded."""

    start: datetime
    pushed: int = 0
    completed: int = 0
    failed: int = 0
    dead: int = 0


def activity_window(now: datetime, since: datetime | None, bucket_seconds: int) -> ActivityWindow:
    """The buckets from the one holding `since` (default: an hour ago) to the one holding `now`,
    bounded: a since more than MAX_AGE ago counts from then, one in the future from now, and of more
    than MAX_BUCKETS buckets only the latest are counted (the window's since says where it starts).
    Raises InvalidWindow for a bucket length out of range."""
    if not MIN_BUCKET_SECONDS <= bucket_seconds <= MAX_BUCKET_SECONDS:
        raise InvalidWindow("bucket", f"bucket must be {MIN_BUCKET_SECONDS} to {MAX_BUCKET_SECONDS} seconds")
    start = now - DEFAULT_SPAN if since is None else min(max(since, now - MAX_AGE), now)
    last = _bucket_of(now, bucket_seconds)
    first = max(_bucket_of(start, bucket_seconds), last - MAX_BUCKETS + 1)
    return ActivityWindow(EPOCH + timedelta(seconds=first * bucket_seconds), bucket_seconds, last - first + 1)


def _bucket_of(moment: datetime, bucket_seconds: int) -> int:
    return int((moment - EPOCH) // timedelta(seconds=bucket_seconds))


def fill(window: ActivityWindow, counted: dict[int, tuple[int, int, int, int]]) -> list[ActivityBucket]:
    """Every bucket of the window, from the counts of those that had any (by bucket index)."""
    return [ActivityBucket(window.start_of(n), *counted.get(n, (0, 0, 0, 0))) for n in range(window.buckets)]
