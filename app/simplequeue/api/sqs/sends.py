"""SendMessage and SendMessageBatch: an SQS message is an item whose payload is a JSON string, its
body, with its message attributes and the system attributes SQS keeps (SenderId, a FIFO message's
deduplication id, AWSTraceHeader)."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any
from uuid import UUID

from simplequeue.api.auth import OPEN, Action
from simplequeue.api.sqs import message_attributes, params
from simplequeue.api.sqs.addressing import kept_attributes, queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, invalid, missing
from simplequeue.api.sqs.urls import is_fifo
from simplequeue.domain import Draft, QueueError

MAX_DELAY_SECONDS = 900
MAX_BATCH_BODY_BYTES = 1_048_576  # SQS: a batch's bodies and attributes together, 1 MiB
NOT_FOR_THIS_QUEUE = "The request include parameter that is not valid for this queue type."


def _draft(queue: str, p: dict[str, Any], kept: dict[str, str], sender: str, *, entry: bool = False) -> Draft:
    """The item one SendMessage (or a batch's entry, `entry`) asks for, of the queue whose kept
    attributes are `kept` (its DelaySeconds when the message gives none, its MaximumMessageSize),
    sent by `sender` (its SenderId)."""
    body = params.body(p)
    system = {"SenderId": sender, **message_attributes.sent_system(p)}
    attributes = message_attributes.sent(p)
    largest = int(kept["MaximumMessageSize"])
    if len(body.encode()) + message_attributes.size_of(p) > largest:
        # SQS's words differ between a send and a batch's entry.
        problem = "cannot be validated" if entry else "are invalid"
        raise SqsError(
            "InvalidParameterValue",
            f"One or more parameters {problem}. Reason: Message must be shorter than {largest} bytes.",
        )
    queue_delay = int(kept["DelaySeconds"])
    delay = params.integer(
        p,
        "DelaySeconds",
        0,
        MAX_DELAY_SECONDS,
        None,
        f"DelaySeconds must be >= 0 and <= {MAX_DELAY_SECONDS}.",
    )
    group = params.fifo_key(p, "MessageGroupId")
    dedup = params.fifo_key(p, "MessageDeduplicationId")
    if not is_fifo(queue):
        if dedup is not None:
            raise invalid("MessageDeduplicationId", dedup, NOT_FOR_THIS_QUEUE)
        if group is not None:  # SQS's fair queues: the tenant, kept and answered; no order among a group's
            system["MessageGroupId"] = group
        delay = queue_delay if delay is None else delay
        return Draft(
            payload=body,
            delay_seconds=float(delay),
            attributes=attributes,
            system_attributes=system,
            fairness_key=group,
        )
    if delay:  # a FIFO queue's messages wait out the queue's delay only (0 is no delay of its own)
        raise invalid("DelaySeconds", delay, NOT_FOR_THIS_QUEUE)
    if group is None:
        raise missing("MessageGroupId")
    if dedup is None and kept.get("ContentBasedDeduplication") == "true":
        dedup = hashlib.sha256(body.encode("utf-8")).hexdigest()
    if dedup is None:
        raise _no_dedup_id()
    system["MessageDeduplicationId"] = dedup
    if kept.get("DeduplicationScope") == "messageGroup":
        dedup = group_scoped(group, dedup)
    return Draft(
        payload=body,
        group=group,
        dedup_key=dedup,
        attributes=attributes,
        delay_seconds=float(queue_delay),
        system_attributes=system,
    )


def _sender(ctx: Context) -> str:
    """A message's SenderId: the key that sent it, by its name; without keys, the account (as SQS
    names an account's root)."""
    return ctx.place.account_id if ctx.grant is OPEN else ctx.grant.name


def _no_dedup_id() -> SqsError:
    return SqsError(
        "InvalidParameterValue",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
        "provided explicitly",
    )


def _fifo_ids_given(entries: list[dict[str, Any]], kept: dict[str, str]) -> None:
    """SQS fails a whole FIFO batch, not the entry, when an entry lacks its group or its
    deduplication id (the queue has no content-based deduplication): InvalidParameterValue both,
    where a single send without a group is MissingParameter."""
    for entry in entries:
        if entry.get("MessageGroupId") is None:
            raise SqsError("InvalidParameterValue", "The request must contain the parameter MessageGroupId.")
        if entry.get("MessageDeduplicationId") is None and kept.get("ContentBasedDeduplication") != "true":
            raise _no_dedup_id()


def group_scoped(group: str, dedup: str) -> str:
    """The store's key for a deduplication id that matches within its message group only
    (DeduplicationScope messageGroup): both in one digest, since together they may pass the
    128 characters a key holds. Neither holds a space, so the pair is unambiguous."""
    return "g:" + hashlib.sha256(f"{group} {dedup}".encode()).hexdigest()


async def send_message(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    ctx.authorize(Action.PUSH, queue)
    draft = _draft(queue, p, await kept_attributes(ctx, queue), _sender(ctx))
    try:
        pushed = await ctx.service.push(queue, draft)
    except QueueError as exc:
        raise from_domain(exc) from None
    answer = _sent(draft, {"MessageId": str(pushed.id)})
    return (await _numbered(ctx, queue, [answer]))[0]


def _sent(draft: Draft, answer: dict[str, Any]) -> dict[str, Any]:
    """A send's answer: its MD5s beside what `answer` holds."""
    answer["MD5OfMessageBody"] = message_attributes.md5(draft.payload)
    if draft.attributes:
        answer["MD5OfMessageAttributes"] = message_attributes.md5_of(draft.attributes)
    system = draft.system_attributes or {}
    if sent := {k: system[k] for k in message_attributes.SENT_SYSTEM if k in system}:
        answer["MD5OfMessageSystemAttributes"] = message_attributes.system_md5(sent)
    return answer


async def send_message_batch(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    queue = queue_param(ctx, p)
    entries = params.entries(p, "SendMessageBatchRequestEntry")
    sizes = (len(str(e.get("MessageBody", "")).encode()) + message_attributes.size_of(e) for e in entries)
    if (size := sum(sizes)) > MAX_BATCH_BODY_BYTES:
        raise SqsError(
            "BatchRequestTooLong",
            f"Batch requests cannot be longer than {MAX_BATCH_BODY_BYTES} bytes. You have sent {size} bytes.",
        )
    ctx.authorize(Action.PUSH, queue)
    kept = await kept_attributes(ctx, queue)

    async def send(entry: dict[str, Any]) -> dict[str, Any]:
        try:
            draft = _draft(queue, entry, kept, _sender(ctx), entry=True)
            pushed = await ctx.service.push(queue, draft)
        except SqsError as exc:
            return params.failed(entry["Id"], exc)
        except QueueError as exc:
            return params.failed(entry["Id"], from_domain(exc))
        return _sent(draft, {"Id": entry["Id"], "MessageId": str(pushed.id)})

    if is_fifo(queue):
        _fifo_ids_given(entries, kept)
        # A FIFO batch is sent in its order: each entry (it has a deduplication id) commits on its
        # own, so they go one after another.
        return params.answer(await _numbered(ctx, queue, [await send(e) for e in entries]))
    # Each entry is a push of its own (its own outcome); the service shares their commits.
    return params.answer(await asyncio.gather(*(send(e) for e in entries)))


async def _numbered(ctx: Context, queue: str, answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """FIFO sends' answers with their messages' SequenceNumber (a duplicate's is its original's),
    read after the sends committed: one look-up for the answers that sent a message. A message
    already received and deleted in between is answered without one."""
    sent = [a for a in answers if "MessageId" in a]
    if not is_fifo(queue) or not sent:
        return answers
    numbers = await ctx.service.sequence_numbers([UUID(a["MessageId"]) for a in sent])
    for answer in sent:
        if (seq := numbers.get(UUID(answer["MessageId"]))) is not None:
            answer["SequenceNumber"] = message_attributes.sequence_number(seq)
    return answers
