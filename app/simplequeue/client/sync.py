"""A blocking client for synchronous code: each method runs AsyncClient's on a private event loop
(asyncio.Runner). No logic of its own, so both behave alike (retries, errors, values).

Not for use inside a running event loop (use AsyncClient there), nor from several threads at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from simplequeue.client.core import AsyncClient

P = ParamSpec("P")
R = TypeVar("R")


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Awaitable[R]],
) -> Callable[Concatenate[Client, P], R]:
    name = method.__name__

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, Awaitable[R]] = getattr(self._client, name)
        return self._runner.run(_awaited(bound(*args, **kwargs)))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = method.__doc__
    return call


async def _awaited(awaitable: Awaitable[R]) -> R:
    return await awaitable


class Client:
    """The blocking twin of AsyncClient; takes the same arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._runner = asyncio.Runner()
        self._client = self._runner.run(_make(*args, **kwargs))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._runner.run(self._client.aclose())
        finally:
            self._runner.close()

    push = _blocking(AsyncClient.push)
    push_batch = _blocking(AsyncClient.push_batch)
    pop = _blocking(AsyncClient.pop)
    complete = _blocking(AsyncClient.complete)
    complete_many = _blocking(AsyncClient.complete_many)
    fail = _blocking(AsyncClient.fail)
    extend = _blocking(AsyncClient.extend)
    get_item = _blocking(AsyncClient.get_item)
    release = _blocking(AsyncClient.release)
    stats = _blocking(AsyncClient.stats)
    queues = _blocking(AsyncClient.queues)
    queue_page = _blocking(AsyncClient.queue_page)
    put_queue = _blocking(AsyncClient.put_queue)
    put_key = _blocking(AsyncClient.put_key)
    get_key = _blocking(AsyncClient.get_key)
    reset_key = _blocking(AsyncClient.reset_key)
    key_page = _blocking(AsyncClient.key_page)
    dead = _blocking(AsyncClient.dead)
    history = _blocking(AsyncClient.history)
    redrive = _blocking(AsyncClient.redrive)
    purge_dead = _blocking(AsyncClient.purge_dead)
    pause = _blocking(AsyncClient.pause)
    resume = _blocking(AsyncClient.resume)
    peek = _blocking(AsyncClient.peek)
    group_items = _blocking(AsyncClient.group_items)
    find_by_dedup_key = _blocking(AsyncClient.find_by_dedup_key)
    delete_queue = _blocking(AsyncClient.delete_queue)
    put_topic = _blocking(AsyncClient.put_topic)
    get_topic = _blocking(AsyncClient.get_topic)
    topics = _blocking(AsyncClient.topics)
    delete_topic = _blocking(AsyncClient.delete_topic)
    put_schedule = _blocking(AsyncClient.put_schedule)
    get_schedule = _blocking(AsyncClient.get_schedule)
    schedules = _blocking(AsyncClient.schedules)
    delete_schedule = _blocking(AsyncClient.delete_schedule)
    pause_schedule = _blocking(AsyncClient.pause_schedule)
    resume_schedule = _blocking(AsyncClient.resume_schedule)
    trigger_schedule = _blocking(AsyncClient.trigger_schedule)
    subscribe = _blocking(AsyncClient.subscribe)
    subscriptions = _blocking(AsyncClient.subscriptions)
    unsubscribe = _blocking(AsyncClient.unsubscribe)
    publish = _blocking(AsyncClient.publish)
    publish_batch = _blocking(AsyncClient.publish_batch)


async def _make(*args: Any, **kwargs: Any) -> AsyncClient:
    return AsyncClient(*args, **kwargs)  # made on the runner's loop, where it will be used
