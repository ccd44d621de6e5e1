"""Publish and PublishBatch: a message checked as SNS checks it, then TopicService's publish,
which delivers it to every matching queue subscription in one transaction."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any
from uuid import uuid4

from simplequeue.api.auth import Action
from simplequeue.api.sns.context import Context, members, text, topic_name
from simplequeue.api.sns.errors import SnsError, from_domain, invalid, missing
from simplequeue.api.sqs import message_attributes, params
from simplequeue.api.sqs.errors import SqsError
from simplequeue.domain import Attribute, InvalidAttributes, InvalidPayload, PayloadTooLarge
from simplequeue.domain.publications import Publication
from simplequeue.domain.topics import InvalidTopic, is_fifo_name

MAX_BYTES = 256 * 1024
"""A message and its attributes, as SNS counts them (and a batch's messages, all told)."""
MAX_BATCH = 10
BATCH_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_SUBJECT = re.compile(r"[\x20-\x7e]{1,100}")  # printable ASCII, no line break, as SNS's rule
PER_ENTRY = (InvalidTopic, InvalidAttributes, InvalidPayload, PayloadTooLarge)
"""The service's refusals of one message of a batch (the rest are the whole call's)."""


class _Sequence:
    """FIFO topics' SequenceNumber: 20 digits, rising in this process (from the clock in
    nanoseconds, one more than the last when the clock has not moved)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return f"{self._last:020d}"


SEQUENCE = _Sequence()


def _target(ctx: Context, p: dict[str, Any]) -> str:
    topic_arn = text(p, "TopicArn", required=False)
    target_arn = text(p, "TargetArn", required=False)
    if text(p, "PhoneNumber", required=False) is not None:
        raise invalid("PhoneNumber", "SMS is not delivered by simplequeue; publish to a topic")
    if topic_arn and target_arn:
        raise invalid("TopicArn or TargetArn Reason", "Only one of them may be specified")
    arn = topic_arn or target_arn
    if not arn:
        raise invalid("TopicArn or TargetArn Reason", "No endpoint found for the target arn specified")
    return topic_name(ctx, arn, "TopicArn" if topic_arn else "TargetArn")


def publication(p: dict[str, Any]) -> Publication:
    """The message a Publish (or a batch entry) gives, checked; SnsError naming what is wrong."""
    message = text(p, "Message", required=False)
    if message is None:
        raise missing("Message")
    if not message:
        raise invalid("Empty message")
    if not params.carried_by_xml(message):
        raise invalid("Message", "it holds a character SNS does not carry")
    if text(p, "MessageStructure", required=False) == "json":
        message = _structured(message)
    elif p.get("MessageStructure") is not None:
        raise invalid("MessageStructure", "only json is taken")
    subject = text(p, "Subject", required=False)
    if subject is not None and not _SUBJECT.fullmatch(subject):
        raise invalid("Subject", "1 to 100 printable ASCII characters, no line breaks")
    attributes = _attributes(p)
    size = len(message.encode()) + sum(
        len(n.encode()) + len(a.type.encode()) + len(a.value_bytes) for n, a in (attributes or {}).items()
    )
    if size > MAX_BYTES:
        raise invalid("Message too long")
    try:
        group = params.fifo_key(p, "MessageGroupId")
        dedup = params.fifo_key(p, "MessageDeduplicationId")
    except SqsError as exc:
        raise SnsError("InvalidParameter", f"Invalid parameter: {exc.message}") from None
    return Publication(message, subject, attributes, id=uuid4(), group=group, dedup_id=dedup)


def _structured(message: str) -> str:
    """MessageStructure=json: a JSON object of messages by protocol. Every subscription is a
    queue's, so its `sqs` message, else its `default` (which SNS requires)."""
    try:
        document = json.loads(message)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise invalid("Message Structure - JSON message body failed to parse")
    default = document.get("default")
    if not isinstance(default, str):
        raise invalid("Message Structure - No default entry in JSON message body")
    chosen = document.get("sqs", default)
    if not isinstance(chosen, str) or not chosen:
        raise invalid("Message Structure - The sqs entry must be a non-empty string")
    return chosen


def _attributes(p: dict[str, Any]) -> dict[str, Attribute] | None:
    try:
        attributes = message_attributes.sent({"MessageAttributes": p.get("MessageAttributes") or None})
    except SqsError as exc:
        raise SnsError("ParameterValueInvalid", exc.message) from None
    for name, attribute in (attributes or {}).items():
        # SNS's own type (filter policies match its elements); to SQS it is a String's label.
        if attribute.type == "String.Array" and not _json_array(attribute.value):
            raise SnsError(
                "ParameterValueInvalid",
                f"The message attribute '{name}' with type 'String.Array' must be a JSON array.",
            )
    return attributes


def _json_array(value: str | bytes) -> bool:
    try:
        return isinstance(json.loads(value), list)
    except (ValueError, RecursionError):
        return False


def _answer(message_id: str, fifo: bool) -> dict[str, str]:
    answer = {"MessageId": message_id}
    if fifo:
        answer["SequenceNumber"] = SEQUENCE.next()
    return answer


async def publish(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = _target(ctx, p)
    message = publication(p)
    ctx.authorize(Action.PUSH, name)
    published = await ctx.topics.publish(name, message, ctx.base_url)
    return _answer(str(published.message_id), is_fifo_name(name))


async def publish_batch(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = topic_name(ctx, text(p, "TopicArn") or "")
    entries = _entries(p)
    ctx.authorize(Action.PUSH, name)
    failed: dict[str, dict[str, Any]] = {}
    ready: list[tuple[str, Publication]] = []
    for entry in entries:
        try:
            ready.append((entry["Id"], publication(entry)))
        except SnsError as exc:
            failed[entry["Id"]] = _failure(entry["Id"], exc)
    done: dict[str, str] = {}
    if ready:
        try:
            # One transaction for every good entry; ...
            published = await ctx.topics.publish_batch(name, [m for _, m in ready], ctx.base_url)
            done = {entry_id: str(p.message_id) for (entry_id, _), p in zip(ready, published, strict=True)}
        except PER_ENTRY:
            # ... one the service refuses (its FIFO rules, its limits) fails alone, as on SNS: the
            # rest go one by one (the refused call delivered nothing; their ids make a retry safe).
            for entry_id, message in ready:
                try:
                    done[entry_id] = str((await ctx.topics.publish(name, message, ctx.base_url)).message_id)
                except PER_ENTRY as exc:
                    failed[entry_id] = _failure(entry_id, from_domain(exc))
    fifo = is_fifo_name(name)
    order = [e["Id"] for e in entries]
    return {
        "Successful": [{"Id": i, **_answer(done[i], fifo)} for i in order if i in done],
        "Failed": [failed[i] for i in order if i in failed],
    }


def _failure(entry_id: str, error: SnsError) -> dict[str, Any]:
    return {"Id": entry_id, "Code": error.code, "Message": error.message, "SenderFault": error.sender}


def _entries(p: dict[str, Any]) -> list[dict[str, Any]]:
    entries = members(p, "PublishBatchRequestEntries")
    if not entries:
        raise SnsError("EmptyBatchRequest", "The batch request doesn't contain any entries.")
    if len(entries) > MAX_BATCH:
        raise SnsError(
            "TooManyEntriesInBatchRequest", "The batch request contains more entries than permissible."
        )
    if not all(isinstance(e, dict) for e in entries):
        raise invalid("PublishBatchRequestEntries")
    ids: set[str] = set()
    for entry in entries:
        entry_id = entry.get("Id")
        if not isinstance(entry_id, str) or not BATCH_ENTRY_ID.fullmatch(entry_id):
            raise SnsError(
                "InvalidBatchEntryId",
                "The Id of a batch entry in a batch request doesn't abide by the specification.",
            )
        if entry_id in ids:
            raise SnsError(
                "BatchEntryIdsNotDistinct", "Two or more batch entries in the request have the same Id."
            )
        ids.add(entry_id)
    total = sum(len(str(e.get("Message", "")).encode()) for e in entries)
    if total > MAX_BYTES:
        raise SnsError(
            "BatchRequestTooLong", "The length of all the messages put together is more than the limit."
        )
    return entries
