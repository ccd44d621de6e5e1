"""ReceiveMessage: a pop (a FIFO queue's takes runs of a group's messages, in order), each item
answered as an SQS message with the system and message attributes the call asks for.

An item pushed through the REST API with a payload other than a JSON string is received as its
compact JSON text.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from simplequeue.api.auth import Action
from simplequeue.api.sqs import message_attributes, params
from simplequeue.api.sqs.addressing import existing, kept_attributes, queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import from_domain
from simplequeue.api.sqs.handles import MAX_VISIBILITY_SECONDS, receipt_handle
from simplequeue.api.sqs.urls import is_fifo
from simplequeue.domain import (
    Failure,
    ItemDead,
    ItemNotFound,
    ItemStatus,
    ItemView,
    LeasedItem,
    LeaseExpired,
    LeaseMismatch,
    QueueError,
)
from simplequeue.domain.xml_chars import first_not_xml, xml_safe_json

log = logging.getLogger("simplequeue.sqs")

MAX_WAIT_SECONDS = 20
SYSTEM_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "ApproximateFirstReceiveTimestamp",
    "MessageGroupId",
    "SequenceNumber",
    "SenderId",
    "MessageDeduplicationId",
    "AWSTraceHeader",
)
KEPT_SYSTEM = frozenset({"SenderId", "MessageDeduplicationId", "AWSTraceHeader"})
"""System attributes kept with the message at its send (domain.Draft.system_attributes)."""


async def receive_message(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    count = params.integer(p, "MaxNumberOfMessages", 1, 10, 1)
    wait = params.integer(
        p,
        "WaitTimeSeconds",
        0,
        MAX_WAIT_SECONDS,
        None,
        f"Must be >= 0 and <= {MAX_WAIT_SECONDS}, if provided.",
    )
    lease = params.integer(p, "VisibilityTimeout", 0, MAX_VISIBILITY_SECONDS, None)
    wanted = {*params.names(p, "AttributeNames"), *params.names(p, "MessageSystemAttributeNames")}
    asked = message_attributes.wanted(params.names(p, "MessageAttributeNames"))
    attempt_id = _attempt_id(p) if is_fifo(queue) else None  # SQS ignores it on standard queues
    ctx.authorize(Action.CONSUME, queue)
    if attempt_id is not None and (same := await _same_again(ctx, queue, attempt_id, lease)) is not None:
        return {"Messages": same} if same else {}
    try:
        # A pop that finds messages shows the queue exists: the look-up (SQS answers an unknown
        # queue with QueueDoesNotExist, where a pop finds nothing) runs only when it found none,
        # before any wait, so a busy worker's receive is one round trip. A receive that names no
        # WaitTimeSeconds waits the queue's ReceiveMessageWaitTimeSeconds, read by that look-up.
        # A FIFO receive takes a group's run of messages, each group's in order, as SQS hands
        # them out; other receivers get none of the group until they are gone.
        runs = is_fifo(queue)
        items = await ctx.service.pop(
            queue, max_items=count, wait_seconds=0.0, lease_seconds=lease, group_runs=runs
        )
        if not items:
            if wait is None:
                wait = int((await kept_attributes(ctx, queue))["ReceiveMessageWaitTimeSeconds"])
            else:
                await existing(ctx, queue)
            if wait:
                items = await ctx.service.pop(
                    queue,
                    max_items=count,
                    wait_seconds=float(wait),
                    lease_seconds=lease,
                    gone=ctx.gone,
                    group_runs=runs,
                )
        if runs:
            items = _runs_in_order(items)
        messages = [await _message(ctx, item, wanted, asked) for item in items]
        if ctx.xml:
            messages = await _carried_in_xml(ctx, items, messages)
    except QueueError as exc:
        raise from_domain(exc) from None
    if attempt_id is not None and ctx.attempts is not None:
        held = {m["MessageId"] for m in messages}
        leases = [(i.id, i.lease_token) for i in items if str(i.id) in held]
        ctx.attempts.remember(queue, attempt_id, messages, leases)
    return {"Messages": messages} if messages else {}


def _attempt_id(p: dict[str, Any]) -> str | None:
    attempt_id = params.text(p, "ReceiveRequestAttemptId", required=False)
    if attempt_id is not None:
        params.check_fifo_key("ReceiveRequestAttemptId", attempt_id)
    return attempt_id


async def _same_again(
    ctx: Context, queue: str, attempt_id: str, lease: int | None
) -> list[dict[str, Any]] | None:
    """A retried receive's answer: the first one's messages, their visibility started again, while
    every one is still held by that receive (none deleted, changed or received since); else None,
    and the retry receives anew."""
    if ctx.attempts is None or (attempt := ctx.attempts.recall(queue, attempt_id)) is None:
        return None
    try:
        views = [await ctx.service.get_item(item_id) for item_id, _ in attempt.leases]
        if not all(_held(view, token) for view, (_, token) in zip(views, attempt.leases, strict=True)):
            ctx.attempts.forget(queue, attempt_id)
            return None
        seconds = lease if lease is not None else (await ctx.service.get_queue(queue)).settings.lease_seconds
        for item_id, token in attempt.leases:
            await ctx.service.extend(item_id, token, seconds)
    except (ItemNotFound, ItemDead, LeaseExpired, LeaseMismatch):
        ctx.attempts.forget(queue, attempt_id)
        return None
    except QueueError as exc:
        raise from_domain(exc) from None
    return attempt.messages


def _held(view: ItemView, token: UUID) -> bool:
    return view.status == ItemStatus.LEASED and view.lease_token == token


def _runs_in_order(items: list[LeasedItem]) -> list[LeasedItem]:
    """A FIFO receive's messages as SQS hands them out: each group's run together, in the order
    its messages were sent (whatever their created_at), the group of the oldest message first."""
    by_seq = sorted(items, key=lambda item: item.seq or 0)
    first: dict[str | None, int] = {}
    for place, item in enumerate(by_seq):
        first.setdefault(item.group, place)
    return sorted(by_seq, key=lambda item: first[item.group])  # stable: each run stays in order


async def _message(
    ctx: Context, item: LeasedItem, wanted: set[str], asked: message_attributes.Asked
) -> dict[str, Any]:
    payload = json.loads(item.payload_json)
    body = (
        payload
        if isinstance(payload, str)
        else xml_safe_json(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
    )
    message: dict[str, Any] = {
        "MessageId": str(item.id),
        "ReceiptHandle": receipt_handle(item),
        "MD5OfBody": message_attributes.md5(body),
        "Body": body,
    }
    names = set(SYSTEM_ATTRIBUTES) if ("All" in wanted) else wanted & set(SYSTEM_ATTRIBUTES)
    attributes: dict[str, str] = {}
    if "ApproximateReceiveCount" in names:
        attributes["ApproximateReceiveCount"] = str(item.attempts)
    if "SentTimestamp" in names:
        attributes["SentTimestamp"] = _ms(item.created_at)
    if "ApproximateFirstReceiveTimestamp" in names:
        first = datetime.now(UTC) if item.attempts <= 1 else None
        if first is None:
            first = (await ctx.service.get_item(item.id)).first_popped_at or datetime.now(UTC)
        attributes["ApproximateFirstReceiveTimestamp"] = _ms(first)
    # The kept system attributes are decoded only when one is asked for: most receives ask none.
    kept = names & KEPT_SYSTEM
    if "MessageGroupId" in names and item.group is None:
        kept.add("MessageGroupId")  # a standard queue's, kept with the message
    system = message_attributes.system_of(item.attributes_json) if kept else {}
    group = item.group if item.group is not None else system.get("MessageGroupId")
    if "MessageGroupId" in names and group is not None:
        attributes["MessageGroupId"] = group
    attributes |= {name: system[name] for name in KEPT_SYSTEM if name in names and name in system}
    if "SequenceNumber" in names and is_fifo(item.queue) and item.seq is not None:
        # The store's insertion order, which a group's messages keep: larger for a later send.
        attributes["SequenceNumber"] = message_attributes.sequence_number(item.seq)
    if attributes:
        message["Attributes"] = attributes
    message.update(message_attributes.received(item.attributes_json, asked))
    return message


async def _carried_in_xml(
    ctx: Context, items: list[LeasedItem], messages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages XML can carry. Another (a string payload or a group pushed through the REST
    API or SQL, which take any JSON text) would make the whole answer ill-formed and every message
    in it come back until its last attempt: it goes to its dead letters now, with the reason as its
    error, where the REST API and SQS's JSON protocol can still read and redrive it."""
    carried = []
    for item, message in zip(items, messages, strict=True):
        problem = _not_in_xml(message)
        if problem is None:
            carried.append(message)
        else:
            await _dead_letter(ctx, item, problem)
    return carried


def _not_in_xml(message: dict[str, Any]) -> str | None:
    fields = {"body": message["Body"], **message.get("Attributes", {})}
    for field, value in fields.items():
        found = first_not_xml(value)
        if found is not None:
            index, code = found
            return (
                f"SQS's query protocol cannot hand it out: its {field} holds {code} (character "
                f"{index + 1}), which XML 1.0 cannot carry; read it over the REST API or SQS's JSON protocol"
            )
    return None


async def _dead_letter(ctx: Context, item: LeasedItem, problem: str) -> None:
    failure = Failure(problem, lease_token=item.lease_token, retry=False)
    try:
        await ctx.service.fail(item.id, failure)
    except (ItemNotFound, ItemDead, LeaseExpired, LeaseMismatch):
        return  # taken or finished meanwhile (a zero visibility timeout): its next receive decides
    log.warning("SQS receive: item %s of queue %s is dead: %s", item.id, item.queue, problem)


def _ms(at: datetime) -> str:
    return str(int(at.timestamp() * 1000))
