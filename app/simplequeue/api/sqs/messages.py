"""The actions on messages: SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch),
ChangeMessageVisibility(Batch).

An SQS message is an item whose payload is a JSON string, its body: the REST API pops it as that
string. An item pushed through the REST API with any other payload is received as its compact JSON
text. A receipt handle is the item's id and lease token (opaque to callers: base64url), and a
visibility timeout is a lease.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from simplequeue.api.auth import OPEN, Action
from simplequeue.api.sqs import message_attributes, params
from simplequeue.api.sqs.addressing import existing, kept_attributes, queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, invalid, missing
from simplequeue.api.sqs.urls import is_fifo
from simplequeue.domain import (
    Completion,
    Draft,
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

MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 43200
MAX_WAIT_SECONDS = 20
MAX_BATCH_BODY_BYTES = 1_048_576  # SQS: a batch's bodies and attributes together, 1 MiB
FIFO_KEY = re.compile(r"[\x21-\x7e]{1,128}")  # alphanumerics and punctuation, as SQS allows
NOT_FOR_THIS_QUEUE = "The request include parameter that is not valid for this queue type."
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
SEQUENCE_DIGITS = 20  # SQS's sequence numbers are decimal strings this long


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


# --- receipt handles ---------------------------------------------------------------------------


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


# --- sending -----------------------------------------------------------------------------------


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
    group = _fifo_key(p, "MessageGroupId")
    dedup = _fifo_key(p, "MessageDeduplicationId")
    if not is_fifo(queue):
        if dedup is not None:
            raise invalid("MessageDeduplicationId", dedup, NOT_FOR_THIS_QUEUE)
        if group is not None:  # SQS's fair queues: kept and answered; no order among a group's
            system["MessageGroupId"] = group
        delay = queue_delay if delay is None else delay
        return Draft(
            payload=body, delay_seconds=float(delay), attributes=attributes, system_attributes=system
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


def _fifo_key(p: dict[str, Any], name: str) -> str | None:
    value = params.text(p, name, required=False)
    if value is not None and not FIFO_KEY.fullmatch(value):
        raise invalid(name, value, _fifo_key_reason(name))
    return value


def _fifo_key_reason(name: str) -> str:
    return f"{name} can only include alphanumeric and punctuation characters. 1 to 128 in length."


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
    answer["MD5OfMessageBody"] = md5(draft.payload)
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
        return _batch(await _numbered(ctx, queue, [await send(e) for e in entries]))
    # Each entry is a push of its own (its own outcome); the service shares their commits.
    return _batch(await asyncio.gather(*(send(e) for e in entries)))


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
            answer["SequenceNumber"] = str(seq).zfill(SEQUENCE_DIGITS)
    return answers


def _batch(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's answer. An empty list is left out, as SQS leaves it out (a batch without failures
    has no `Failed`: code written against SQS reads it with a default)."""
    answer = {
        "Successful": [o for o in outcomes if "Code" not in o],
        "Failed": [o for o in outcomes if "Code" in o],
    }
    return {key: entries for key, entries in answer.items() if entries}


# --- receiving ---------------------------------------------------------------------------------


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
    if attempt_id is not None and not FIFO_KEY.fullmatch(attempt_id):
        raise invalid("ReceiveRequestAttemptId", attempt_id, _fifo_key_reason("ReceiveRequestAttemptId"))
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
        "MD5OfBody": md5(body),
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
        attributes["SequenceNumber"] = str(item.seq).zfill(SEQUENCE_DIGITS)
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


# --- deleting and changing visibility ----------------------------------------------------------


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
    return _batch(outcomes)


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
        view = await ctx.service.extend(item_id, token, seconds)
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
    if seconds == 0:
        ctx.service.made_visible(view.queue)


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

    return _batch(await asyncio.gather(*(change(e) for e in entries)))
