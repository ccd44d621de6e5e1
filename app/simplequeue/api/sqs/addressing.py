"""Which queue a call names, and whether it exists."""

from __future__ import annotations

from typing import Any

from simplequeue.api.sqs import params
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import no_queue
from simplequeue.api.sqs.urls import queue_of_url


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
