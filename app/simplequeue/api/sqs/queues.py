"""The actions on queues: CreateQueue, GetQueueUrl, ListQueues, GetQueueAttributes,
SetQueueAttributes, DeleteQueue, PurgeQueue.

A queue's SQS attributes map onto its settings where the service has a field for them
(VisibilityTimeout is the lease); those it does not hold yet are taken at SQS's default value only,
and refused otherwise, never accepted and then ignored.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace
from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sqs import params
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, missing, no_queue
from simplequeue.api.sqs.urls import checked_name, creatable, is_fifo, queue_of_url
from simplequeue.domain import QueueNotFound, QueueSettings, QueueStats

MAX_ATTEMPTS = 1000
"""SQS redelivers a message whose visibility runs out for as long as it is kept; the service's
items go dead after max_attempts pops, whose highest value this is."""
FIFO_DEDUP_WINDOW_SECONDS = 300  # SQS's deduplication interval
PURGE_INTERVAL_SECONDS = 60
"""SQS allows one PurgeQueue of a queue in 60 seconds; another is PurgeQueueInProgress. Counted by
the process that answers (QueueService.purge_live): replicas do not share it."""

SETTABLE = frozenset({"VisibilityTimeout"})
DEFAULT_ONLY = {"DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "0"}
"""Attributes taken at the one value the service behaves by (no queue-wide delay, no wait unless
asked): any other is refused as not supported yet."""
NOT_YET = frozenset(
    {
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "Policy",
        "RedrivePolicy",
        "RedriveAllowPolicy",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "SqsManagedSseEnabled",
        "DeduplicationScope",
        "FifoThroughputLimit",
    }
)
AS_CREATED = {**DEFAULT_ONLY, "FifoQueue": "false"}
"""What a queue's attributes are when GetQueueAttributes does not name them."""
READABLE = (
    "QueueArn",
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "VisibilityTimeout",
    "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
)
TIMESTAMPS = ("CreatedTimestamp", "LastModifiedTimestamp")
"""Epoch seconds, as text, of sq_queues.created_at: the service keeps no time of a settings change,
so LastModifiedTimestamp is the creation time too."""
KNOWN = frozenset({*READABLE, *NOT_YET, *TIMESTAMPS, "All"})


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


def _checked(name: str, attributes: dict[str, Any]) -> dict[str, str]:
    """The attributes given, each known and of a value the service can hold."""
    checked: dict[str, str] = {}
    for key, value in attributes.items():
        if not isinstance(value, str):
            raise SqsError("InvalidAttributeValue", f"Invalid value for the parameter {key}.")
        if key == "VisibilityTimeout":
            number = params.integer({key: value}, key, 0, 43200, 0)
            if number == 0:
                raise SqsError(
                    "InvalidAttributeValue", "VisibilityTimeout 0 is not supported yet: 1 to 43200."
                )
        elif key in DEFAULT_ONLY:
            if value != DEFAULT_ONLY[key]:
                raise SqsError(
                    "InvalidAttributeValue", f"{key} other than {DEFAULT_ONLY[key]} is not supported yet."
                )
        elif key == "FifoQueue":
            if value not in ("true", "false") or (value == "true") != is_fifo(name):
                raise SqsError(
                    "InvalidAttributeValue", "FifoQueue is true exactly for a queue whose name ends in .fifo."
                )
        elif key == "ContentBasedDeduplication":
            if not is_fifo(name):
                raise SqsError("InvalidAttributeName", "Unknown Attribute ContentBasedDeduplication.")
            if value != "false":
                raise SqsError("InvalidAttributeValue", "ContentBasedDeduplication is not supported yet.")
        elif key in NOT_YET:
            raise SqsError(
                "InvalidAttributeValue", f"The attribute {key} is not supported yet by simplequeue."
            )
        else:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {key}.")
        checked[key] = value
    return checked


def _settings(name: str, attributes: dict[str, str], base: QueueSettings | None = None) -> QueueSettings:
    settings = base or QueueSettings(
        max_attempts=MAX_ATTEMPTS,
        dedup_window_seconds=FIFO_DEDUP_WINDOW_SECONDS
        if is_fifo(name)
        else QueueSettings().dedup_window_seconds,
    )
    if "VisibilityTimeout" in attributes:
        settings = replace(settings, lease_seconds=int(attributes["VisibilityTimeout"]))
    return settings


def _attributes_of(ctx: Context, stats: QueueStats) -> dict[str, str]:
    values = {
        "QueueArn": ctx.place.arn(stats.name),
        "ApproximateNumberOfMessages": str(stats.ready),
        "ApproximateNumberOfMessagesNotVisible": str(stats.leased),
        "ApproximateNumberOfMessagesDelayed": str(stats.delayed + stats.retrying),
        "VisibilityTimeout": str(stats.settings.lease_seconds),
        "DelaySeconds": "0",
        "ReceiveMessageWaitTimeSeconds": "0",
    }
    if is_fifo(stats.name):
        values |= {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    return values


async def create_queue(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = creatable(params.required_text(p, "QueueName"))
    if params.mapping(p, "tags") or params.mapping(p, "Tags"):
        raise SqsError("InvalidParameterValue", "Queue tags are not supported yet by simplequeue's SQS door.")
    attributes = _checked(name, params.mapping(p, "Attributes"))
    ctx.authorize(Action.ADMINISTER, name)
    try:
        stats = await ctx.service.get_queue(name)
    except QueueNotFound:
        await ctx.service.put_queue(name, _settings(name, attributes))
        return {"QueueUrl": ctx.place.queue_url(name)}
    now = _attributes_of(ctx, stats)
    for key, value in attributes.items():
        if now.get(key, AS_CREATED.get(key)) != value:
            raise SqsError(
                "QueueNameExists",
                f"A queue already exists with the same name and a different value for attribute {key}",
            )
    return {"QueueUrl": ctx.place.queue_url(name)}


async def get_queue_url(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = params.required_text(p, "QueueName")
    owner = params.text(p, "QueueOwnerAWSAccountId", required=False)
    if owner is not None and owner != ctx.place.account_id:
        raise no_queue()
    ctx.authorize(Action.READ_STATS, checked_name(name))
    return {"QueueUrl": ctx.place.queue_url(await existing(ctx, name))}


async def list_queues(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    prefix = params.text(p, "QueueNamePrefix", required=False) or ""
    limit = params.integer(p, "MaxResults", 1, 1000, None)
    token = params.text(p, "NextToken", required=False)
    ctx.authorize(Action.READ_STATS)
    after = _after(token) if token else None
    found = sorted(
        q.name
        for q in await ctx.service.list_queues()
        if q.name.startswith(prefix) and ctx.grant.covers(q.name) and (after is None or q.name > after)
    )
    page = found[: limit or 1000]
    result: dict[str, Any] = {"QueueUrls": [ctx.place.queue_url(n) for n in page]} if page else {}
    if limit is not None and len(found) > limit:
        result["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
    return result


def _after(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise SqsError("InvalidParameterValue", "Invalid NextToken value.") from None


async def get_queue_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    wanted = params.names(p, "AttributeNames")
    for key in wanted:
        if key not in KNOWN:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {key}.")
    ctx.authorize(Action.READ_STATS, name)
    try:
        stats = await ctx.service.get_queue(name)
        values = _attributes_of(ctx, stats)
        if "All" in wanted or any(key in wanted for key in TIMESTAMPS):
            created = str(int((await ctx.service.queue_created_at(name)).timestamp()))
            values |= dict.fromkeys(TIMESTAMPS, created)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    if "All" not in wanted:
        values = {k: v for k, v in values.items() if k in wanted}
    return {"Attributes": values} if values else {}


async def set_queue_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    attributes = params.mapping(p, "Attributes")
    if "Attributes" not in p:
        raise missing("Attributes")
    checked = _checked(name, attributes)
    ctx.authorize(Action.ADMINISTER, name)
    try:
        stats = await ctx.service.get_queue(name)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    if "FifoQueue" in checked:
        raise SqsError("InvalidAttributeName", "FifoQueue can be set only when the queue is created.")
    if any(k in SETTABLE for k in checked):
        await ctx.service.put_queue(name, _settings(name, checked, stats.settings))
    return {}


async def delete_queue(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    ctx.authorize(Action.ADMINISTER, name)
    try:
        await ctx.service.delete_queue(name, force=True)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    return {}


async def purge_queue(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    """Every live message of the queue goes (received or not, delayed or not), with no history:
    a purge is not a completion. Dead items stay (the HTTP API's dead letters)."""
    name = queue_param(ctx, p)
    ctx.authorize(Action.ADMINISTER, name)
    try:
        purged = await ctx.service.purge_live(name, once_in_seconds=PURGE_INTERVAL_SECONDS)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    if purged is None:
        raise SqsError(
            "PurgeQueueInProgress",
            f"Only one PurgeQueue operation on {name} is allowed every {PURGE_INTERVAL_SECONDS} seconds.",
        )
    return {}
