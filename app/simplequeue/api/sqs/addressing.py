"""Which queue a call names, whether it exists, and its kept attributes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from simplequeue.api.sqs import attributes, params
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import no_queue
from simplequeue.api.sqs.urls import queue_of_url
from simplequeue.domain import QueueNotFound


def queue_param(ctx: Context, p: dict[str, Any]) -> str:
    """The queue a call names: its QueueUrl, else the URL the request was posted to."""
    url = params.text(p, "QueueUrl", required=ctx.path_queue is None)
    if url is None:
        assert ctx.path_queue is not None
        return ctx.path_queue
    return queue_of_url(url, ctx.place.account_id)


async def existing(ctx: Context, name: str) -> str:
    if not await ctx.service.queue_exists(name):
        raise no_queue()
    return name


async def kept_attributes(ctx: Context, name: str) -> dict[str, str]:
    """The queue's DelaySeconds, MaximumMessageSize, ReceiveMessageWaitTimeSeconds (as set, else
    their defaults) and other kept attributes; QueueDoesNotExist for no queue. One read, as the
    existence check it replaces on the paths that need both."""
    try:
        metadata = await ctx.service.queue_metadata(name)
    except QueueNotFound:
        raise no_queue() from None
    return attributes.kept_of(metadata, ctx.service.max_payload_bytes)


async def dead_letter_sources(
    ctx: Context, dlq: str, wanted: Callable[[str], bool] = lambda name: True
) -> AsyncIterator[str]:
    """The queues whose RedrivePolicy names `dlq` (their dead_letter_queue setting), by name, of
    those `wanted` says to look at."""
    async for queue in ctx.service.every_queue():
        if wanted(queue.name) and queue.settings.dead_letter_queue == dlq:
            yield queue.name
