"""Single pushes that arrive together share one transaction (group commit).

Each caller waits for the commit that holds its row; its `201` means that commit happened. A
caller whose id another queue's item holds gets ItemExists alone, and the rest of its batch still
commits (the store leaves taken ids out rather than failing the batch); a retry of an item that
holds its id hears that item, uninserted, as a dedup hit does. There is no timer: while one
commit is in flight the next batch gathers, so a lone push is never delayed, and under load a
commit carries everything that arrived during the previous one.

A push with a dedup_key commits on its own: the store's all-or-nothing path decides it.
"""

from __future__ import annotations

import asyncio

from simplequeue.domain import DatabaseUnavailable, ItemExists, NewItem, Pushed
from simplequeue.store.protocol import Store

Pending = tuple[NewItem, asyncio.Future[Pushed | None]]


class PushCoalescer:
    def __init__(self, store: Store, *, max_batch: int = 1000) -> None:
        self._store = store
        self._max_batch = max_batch
        self._pending: list[Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    async def push(self, item: NewItem) -> Pushed:
        """Return once `item` is committed. Raises ItemExists, or the store's error for its batch."""
        if item.dedup_key is not None:
            [result] = await self._store.push_batch([item], skip_existing=False)
            assert result is not None
            return result
        settled: asyncio.Future[Pushed | None] = asyncio.get_running_loop().create_future()
        self._pending.append((item, settled))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="simplequeue-push")
        # shield: a caller that goes away must not cancel the commit its neighbours wait for.
        result = await asyncio.shield(settled)
        if result is None:
            raise ItemExists()
        return result

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
            try:
                inserted = await self._store.push_batch([item for item, _ in batch], skip_existing=True)
            except DatabaseUnavailable as exc:
                # The database did not answer within the timeout. Those queued behind this batch
                # have waited for it already; another batch would only make them wait out a second
                # timeout. They hear the same answer now, and later pushes start afresh.
                batch, self._pending = batch + self._pending, []
                for _, future in batch:
                    future.set_exception(exc)
                continue
            except Exception as exc:  # nothing of this batch committed: each of its callers hears why
                for _, future in batch:
                    future.set_exception(exc)
                continue
            _settle(batch, inserted)


def _settle(batch: list[Pending], results: list[Pushed | None]) -> None:
    """Tell each caller what became of its item: inserted, a retry of the item holding its id (of
    two callers with one id and queue, the second is the first's retry), or refused (None)."""
    for (_, future), result in zip(batch, results, strict=True):
        future.set_result(result)
