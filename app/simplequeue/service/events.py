"""What happened to items, told to whoever counts (simplequeue.api.metrics): the service knows
when items are pushed, popped, failed or die failing, and by which queue, and nothing of
Prometheus. Completions, and leases the sweep finds dead, are told by the store (FinishedHook),
which alone knows their queues."""

from __future__ import annotations

from typing import Protocol


class Events(Protocol):
    def pushed(self, queue: str, count: int) -> None: ...

    def popped(self, queue: str, count: int) -> None: ...

    def failed(self, queue: str, count: int) -> None: ...

    def dead(self, queue: str, count: int) -> None: ...

    def throttled(self, queue: str, limit: str) -> None:
        """A pop of the queue handed out fewer items than it asked for, cut short by `limit`
        (max_leased, max_leased_per_key, rate) while more were ready."""


class NoEvents:
    """Nobody counts."""

    def pushed(self, queue: str, count: int) -> None:
        pass

    def popped(self, queue: str, count: int) -> None:
        pass

    def failed(self, queue: str, count: int) -> None:
        pass

    def dead(self, queue: str, count: int) -> None:
        pass

    def throttled(self, queue: str, limit: str) -> None:
        pass
