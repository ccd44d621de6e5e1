"""Items that finish inside a store, out of the service's sight: completions (the store alone
knows the queue of an item completed by id) and leases that died in the sweep."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from simplequeue.domain.items import Outcome

FinishedHook = Callable[[str, Outcome, int], None]
"""(queue, outcome, how many): called after the transaction that finished them committed."""


def ignore_finished(queue: str, outcome: Outcome, count: int) -> None:
    """The hook of a store that nobody counts."""


def tell(hook: FinishedHook, outcome: Outcome, queues: Iterable[str]) -> None:
    """One call per queue, with how many of the items finished in it."""
    for queue, count in Counter(queues).items():
        hook(queue, outcome, count)
