"""What the conformance tests share: pushing, popping one item, configuring a queue, finishing an
item."""

from __future__ import annotations

from simplequeue.domain import Backoff, LeasedItem, NewItem, Pushed, QueueSettings
from simplequeue.store.protocol import Store

# The backoff `configure` gives a queue unless told otherwise: its delays exact.
NO_JITTER = Backoff(base_seconds=10, factor=2, cap_seconds=25, jitter=0)


async def push(store: Store, *items: NewItem) -> list[Pushed | None]:
    """Pushes the items as one all-or-nothing batch."""
    return await store.push_batch(items, skip_existing=False)


async def pop_one(store: Store, queue: str, lease_seconds: int | None = 30) -> LeasedItem:
    """Pops exactly one item (None: for the queue's lease)."""
    items = await store.pop(queue, 1, lease_seconds)
    assert len(items) == 1, items
    return items[0]


async def configure(store: Store, queue: str, **changes: object) -> QueueSettings:
    """Gives a queue the domain's default settings but a backoff without jitter, and the changes."""
    settings = QueueSettings(**{"backoff": NO_JITTER, **changes})  # type: ignore[arg-type]
    await store.put_queue(queue, settings)
    return settings


async def finish(store: Store, queue: str) -> LeasedItem:
    """Pops the queue's next item and completes it."""
    [popped] = await store.pop(queue, 1, 30)
    await store.complete(popped.id, popped.lease_token)
    return popped
