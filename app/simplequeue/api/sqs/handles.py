"""Receipt handles and what they are for: DeleteMessage(Batch), ChangeMessageVisibility(Batch).

A receipt handle is the item's id and lease token (opaque to callers: base64url), and a visibility
timeout is a lease.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any
from uuid import UUID

from simplequeue.api.auth import Action
from simplequeue.api.sqs import params
from simplequeue.api.sqs.addressing import existing, queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, invalid, missing
from simplequeue.api.sqs.urls import is_fifo
from simplequeue.domain import (
    Completion,
    ItemDead,
    ItemNotFound,
    ItemStatus,
    LeasedItem,
    LeaseExpired,
    LeaseMismatch,
    QueueError,
)

MAX_VISIBILITY_SECONDS = 43200

HANDLE_PREFIX = "Q"
"""Every receipt handle starts with this letter: base64url may start with "-", which a command line
(aws-cli's `--receipt-handle <handle>`) takes for an option. A handle of the releases before, the
same digits without it, is taken too, so that messages in flight across an upgrade can be deleted."""


def receipt_handle(item: LeasedItem) -> str:
    digits = base64.urlsafe_b64encode(item.id.bytes + item.lease_token.bytes).decode().rstrip("=")
    return HANDLE_PREFIX + digits


def lease_of(handle: str) -> tuple[UUID, UUID]:
    """(item id, lease token) of a receipt handle this door gave; ReceiptHandleIsInvalid otherwise."""
    digits = (
        handle[len(HANDLE_PREFIX) :] if handle.startswith(HANDLE_PREFIX) and len(handle) == 44 else handle
    )
    try:
        raw = base64.urlsafe_b64decode(digits + "=" * (-len(digits) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32 or len(digits) != 43:
        raise SqsError(
            "ReceiptHandleIsInvalid", f'The input receipt handle "{handle}" is not a valid receipt handle.'
        )
    return UUID(bytes=raw[:16]), UUID(bytes=raw[16:])


async def _lease_in(ctx: Context, queue: str, handle: str) -> tuple[UUID, UUID]:
    """The lease a receipt handle holds, of an item of the queue the call names. Checked for keys
    limited to some queues only (as the HTTP API checks them): an id says nothing of its queue, so
    this costs a read. A gone item is left to the call (a stale handle)."""
    item_id, token = lease_of(handle)
    if ctx.grant.queues is not None:
        try:
            view = await ctx.service.get_item(item_id)
        except ItemNotFound:
            return item_id, token
        if view.queue != queue:
            raise SqsError(
                "ReceiptHandleIsInvalid", f'The input receipt handle "{handle}" is not one of this queue.'
            )
    return item_id, token


async def delete_message(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    handle = params.required_text(p, "ReceiptHandle")
    lease_of(handle)
    ctx.authorize(Action.CONSUME, queue)
    await existing(ctx, queue)
    item_id, token = await _lease_in(ctx, queue, handle)
    if is_fifo(queue):
        await _unexpired(ctx, handle, item_id, token)
    try:
        await ctx.service.complete(item_id, token)
    except (ItemNotFound, LeaseMismatch, ItemDead):
        pass  # a stale handle: SQS answers success (the message was deleted, or is another's now)
    except QueueError as exc:
        raise from_domain(exc) from None
    return {}


async def delete_message_batch(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    entries = params.entries(p, "DeleteMessageBatchRequestEntry")
    ctx.authorize(Action.CONSUME, queue)
    await existing(ctx, queue)
    outcomes: list[dict[str, Any]] = []
    completions: list[Completion] = []
    for entry in entries:
        try:
            handle = params.required_text(entry, "ReceiptHandle")
            item_id, token = await _lease_in(ctx, queue, handle)
            if is_fifo(queue):
                await _unexpired(ctx, handle, item_id, token)
        except SqsError as exc:
            outcomes.append(params.failed(entry["Id"], exc))
            continue
        completions.append(Completion(item_id, token))
        outcomes.append({"Id": entry["Id"]})
    if completions:
        try:
            await ctx.service.complete_many(completions)  # every outcome is a success to SQS
        except QueueError as exc:
            raise from_domain(exc) from None
    return params.answer(outcomes)


async def _unexpired(ctx: Context, handle: str, item_id: UUID, token: UUID) -> None:
    """On a FIFO queue, SQS refuses a receipt handle whose visibility ran out (or that a later
    receive replaced), so that a late worker cannot delete what another may hold in order. A
    message already gone is left to the call, as a standard queue's."""
    try:
        view = await ctx.service.get_item(item_id)
    except ItemNotFound:
        return
    lapsed = view.lease_expires_at is None or view.lease_expires_at <= ctx.service.now()
    if view.status != ItemStatus.LEASED or view.lease_token != token or lapsed:
        raise invalid("ReceiptHandle", handle, "The receipt handle has expired.")


async def _change(ctx: Context, queue: str, handle: str, seconds: int) -> None:
    item_id, token = await _lease_in(ctx, queue, handle)
    if is_fifo(queue):
        await _unexpired(ctx, handle, item_id, token)
    try:
        await ctx.service.extend(item_id, token, seconds)
    except (ItemNotFound, LeaseMismatch):
        raise invalid(
            "ReceiptHandle",
            handle,
            "Message does not exist or is not available for visibility timeout change.",
        ) from None
    except (LeaseExpired, ItemDead):
        raise SqsError("MessageNotInflight", "The message referred to isn't in flight.") from None
    except QueueError as exc:
        raise from_domain(exc) from None


def _visibility(p: dict[str, Any]) -> int:
    seconds = params.integer(p, "VisibilityTimeout", 0, MAX_VISIBILITY_SECONDS, None)
    if seconds is None:
        raise missing("VisibilityTimeout")
    return seconds


async def change_message_visibility(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    handle = params.required_text(p, "ReceiptHandle")
    lease_of(handle)
    seconds = _visibility(p)
    ctx.authorize(Action.CONSUME, queue)
    await existing(ctx, queue)
    await _change(ctx, queue, handle, seconds)
    return {}


async def change_message_visibility_batch(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    entries = params.entries(p, "ChangeMessageVisibilityBatchRequestEntry")
    ctx.authorize(Action.CONSUME, queue)
    await existing(ctx, queue)

    async def change(entry: dict[str, Any]) -> dict[str, Any]:
        try:
            await _change(ctx, queue, params.required_text(entry, "ReceiptHandle"), _visibility(entry))
        except SqsError as exc:
            return params.failed(entry["Id"], exc)
        return {"Id": entry["Id"]}

    return params.answer(await asyncio.gather(*(change(e) for e in entries)))
