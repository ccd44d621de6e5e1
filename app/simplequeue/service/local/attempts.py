"""ReceiveRequestAttemptId: a FIFO receive retried with the same attempt id within 5 minutes gets
the same messages and receipt handles, as SQS answers it, so that a client whose answer was lost
(a timeout, a dropped connection) does not leave those messages in flight for nobody. Kept by the
process that answered, as PurgeQueue's window: a retry that reaches another replica receives anew.
The answers kept are the door's (SQS's messages as they were written); this only keeps them."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from simplequeue.domain import Clock

WINDOW_SECONDS = 300  # SQS's deduplication interval for receive attempts
MAX_KEPT = 10_000
"""Attempts remembered at most: past it the oldest go first (a retry of one then receives anew)."""


@dataclass(frozen=True, slots=True)
class Attempt:
    at: datetime
    messages: list[dict[str, Any]]
    """The answer's messages, as they were answered."""
    leases: list[tuple[UUID, UUID]]
    """Each message's item id and lease token: the retry holds while every one is still held."""


class ReceiveAttempts:
    def __init__(self, clock: Clock, max_kept: int = MAX_KEPT) -> None:
        self._clock = clock
        self._max_kept = max_kept
        self._kept: OrderedDict[tuple[str, str], Attempt] = OrderedDict()

    def recall(self, queue: str, attempt_id: str) -> Attempt | None:
        self._forget_old()
        return self._kept.get((queue, attempt_id))

    def remember(
        self, queue: str, attempt_id: str, messages: list[dict[str, Any]], leases: list[tuple[UUID, UUID]]
    ) -> None:
        self._forget_old()
        self._kept[(queue, attempt_id)] = Attempt(self._clock(), messages, leases)
        self._kept.move_to_end((queue, attempt_id))
        while len(self._kept) > self._max_kept:
            self._kept.popitem(last=False)

    def forget(self, queue: str, attempt_id: str) -> None:
        self._kept.pop((queue, attempt_id), None)

    def _forget_old(self) -> None:
        now = self._clock()
        while self._kept:
            oldest = next(iter(self._kept.values()))
            if (now - oldest.at).total_seconds() < WINDOW_SECONDS:
                break
            self._kept.popitem(last=False)
