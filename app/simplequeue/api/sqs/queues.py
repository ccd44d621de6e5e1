"""The actions on queues: CreateQueue, GetQueueUrl, ListQueues, GetQueueAttributes,
SetQueueAttributes, DeleteQueue, PurgeQueue, ListDeadLetterSourceQueues. Which attributes a queue
takes, and where each is kept, is simplequeue.api.sqs.attributes; its tags, simplequeue.api.sqs.tags.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sqs import attributes, params
from simplequeue.api.sqs.addressing import dead_letter_sources, existing, queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, invalid, missing, no_queue, unsupported
from simplequeue.api.sqs.tags import MAX_TAGS, checked_tags, too_many_tags
from simplequeue.api.sqs.urls import checked_name, creatable, is_fifo
from simplequeue.domain import InvalidCursor, QueueNotFound, QueueSettings, QueueStats
from simplequeue.domain.metadata import MetadataChange, QueueMetadata

MAX_ATTEMPTS = 1000
"""SQS redelivers a message whose visibility runs out for as long as it is kept; the service's
items go dead after max_attempts pops, whose highest value this is."""
FIFO_DEDUP_WINDOW_SECONDS = 300  # SQS's deduplication interval

AS_CREATED = {"FifoQueue": "false"}
"""What CreateQueue compares a given attribute with when the queue does not answer it."""
RECREATE_AFTER_SECONDS = 60  # SQS: a deleted queue's name can be used again 60 s after


@dataclass(frozen=True, slots=True)
class DeadLetters:
    """What a RedrivePolicy given makes of the queue: its dead-letter target (None: none) and its
    items' max_attempts (maxReceiveCount; without a policy, MAX_ATTEMPTS)."""

    target: str | None
    max_attempts: int


def _settings(
    name: str,
    attributes: dict[str, str],
    base: QueueSettings | None = None,
    dead_letters: DeadLetters | None = None,
) -> QueueSettings:
    settings = base or (
        QueueSettings(
            max_attempts=MAX_ATTEMPTS,
            dedup_window_seconds=FIFO_DEDUP_WINDOW_SECONDS,
            dedup_window_from="send",  # SQS: the interval runs from the send, delivered or not
        )
        if is_fifo(name)
        else QueueSettings(max_attempts=MAX_ATTEMPTS)
    )
    if "VisibilityTimeout" in attributes:
        settings = replace(settings, lease_seconds=int(attributes["VisibilityTimeout"]))
    if "MessageRetentionPeriod" in attributes:
        settings = replace(settings, message_retention_seconds=int(attributes["MessageRetentionPeriod"]))
    if dead_letters is not None:
        settings = replace(
            settings, max_attempts=dead_letters.max_attempts, dead_letter_queue=dead_letters.target
        )
    return settings


async def _dead_letters(ctx: Context, name: str, given: dict[str, str]) -> DeadLetters | None:
    """The given RedrivePolicy's target, checked as SQS checks it: a queue of this account and
    region that exists, of the source's type (FIFO or standard), not the source itself, whose
    RedriveAllowPolicy lets the source use it. None: no RedrivePolicy given."""
    if "RedrivePolicy" not in given:
        return None
    value = given["RedrivePolicy"]
    policy = attributes.redrive_policy(value)
    if policy is None:
        return DeadLetters(None, MAX_ATTEMPTS)

    def bad(reason: str) -> SqsError:
        return invalid("RedrivePolicy", value, reason)

    target = ctx.place.queue_of_arn(policy.target_arn)
    if target is None or not ctx.grant.covers(target) or not await ctx.service.queue_exists(target):
        raise bad("Dead letter target does not exist.")
    if target == name:
        raise bad("Dead letter target cannot be the queue itself.")
    if is_fifo(target) != is_fifo(name):
        raise bad("Dead-letter queue must be same type of queue as the source.")
    try:
        allow = (await ctx.service.queue_metadata(target)).attributes.get("RedriveAllowPolicy")
    except QueueNotFound:
        raise bad("Dead letter target does not exist.") from None
    if allow:
        rule = json.loads(allow)
        if rule["redrivePermission"] == "denyAll" or (
            rule["redrivePermission"] == "byQueue" and ctx.place.arn(name) not in rule["sourceQueueArns"]
        ):
            raise bad("The dead letter target's RedriveAllowPolicy does not allow this queue to use it.")
    return DeadLetters(target, policy.max_receive_count)


def _attributes_of(ctx: Context, stats: QueueStats, metadata: QueueMetadata | None) -> dict[str, str]:
    """Every attribute the queue answers for `All`, but its timestamps."""
    values = {
        "QueueArn": ctx.place.arn(stats.name),
        "ApproximateNumberOfMessages": str(stats.ready),
        "ApproximateNumberOfMessagesNotVisible": str(stats.leased),
        "ApproximateNumberOfMessagesDelayed": str(stats.delayed + stats.retrying),
        "VisibilityTimeout": str(stats.settings.lease_seconds),
        **attributes.kept_of(metadata, ctx.service.max_payload_bytes),
    }
    settings = stats.settings
    if settings.message_retention_seconds is not None:
        values["MessageRetentionPeriod"] = str(settings.message_retention_seconds)
    if settings.dead_letter_queue is not None:
        target = ctx.place.arn(settings.dead_letter_queue)
        policy = {"deadLetterTargetArn": target, "maxReceiveCount": settings.max_attempts}
        values["RedrivePolicy"] = json.dumps(policy, separators=(",", ":"))
    if is_fifo(stats.name):
        values["FifoQueue"] = "true"
        values = attributes.FIFO_DEFAULTS | values
    return values


def _change(given: dict[str, str], tags: dict[str, str] | None = None) -> MetadataChange:
    """The metadata change that keeps `given`'s attributes (an empty policy removes it), but those
    that are the queue's settings (attributes.SETTINGS)."""
    kept = {k: v for k, v in given.items() if k in attributes.KEPT and k not in attributes.SETTINGS}
    set_attributes = {k: v for k, v in kept.items() if not (v == "" and k in attributes.EMPTY_REMOVES)}
    unset_attributes = {k for k, v in kept.items() if v == "" and k in attributes.EMPTY_REMOVES}
    return MetadataChange(
        set_attributes=set_attributes,
        unset_attributes=frozenset(unset_attributes),
        set_tags=tags or {},
        max_tags=MAX_TAGS,
    )


def _fifo_as_named(name: str, given: dict[str, str]) -> None:
    """SQS's answers when FifoQueue and the name disagree: a FIFO queue is asked for by both."""
    fifo = given.get("FifoQueue")
    if is_fifo(name) and fifo != "true":
        raise SqsError(
            "InvalidParameterValue",
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
        )
    if fifo == "true" and not is_fifo(name):
        raise SqsError(
            "InvalidParameterValue",
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
            "underscores, must end with .fifo suffix and be 1 to 80 in length.",
        )
    if fifo == "false":  # on a standard queue SQS knows no such attribute
        raise SqsError("InvalidAttributeName", "Unknown Attribute FifoQueue.")


async def create_queue(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = creatable(params.required_text(p, "QueueName"))
    given = attributes.checked(name, params.mapping(p, "Attributes"), ctx.service.max_payload_bytes)
    _fifo_as_named(name, given)
    attributes.check_throughput(given)
    # The JSON protocol names them tags, the query protocol Tag.N.Key/Value.
    tags = checked_tags(params.mapping(p, "tags") or params.mapping(p, "Tags"))
    if len(tags) > MAX_TAGS:
        raise too_many_tags(name)
    ctx.authorize(Action.ADMINISTER, name)
    try:
        stats = await ctx.service.get_queue(name)
    except QueueNotFound:
        if ctx.service.deleted_within(name, RECREATE_AFTER_SECONDS):
            raise SqsError(
                "QueueDeletedRecently",
                f"You must wait {RECREATE_AFTER_SECONDS} seconds after deleting a queue before you can "
                "create another with the same name.",
            ) from None
        dead_letters = await _dead_letters(ctx, name, given)
        retention = {"MessageRetentionPeriod": attributes.DEFAULT_RETENTION_SECONDS}
        await ctx.service.put_queue(name, _settings(name, retention | given, dead_letters=dead_letters))
        change = _change(given, tags)
        if change.set_attributes or change.set_tags:
            await ctx.service.change_queue_metadata(name, change)
        return {"QueueUrl": ctx.place.queue_url(name)}
    now = _attributes_of(ctx, stats, await ctx.service.queue_metadata(name))
    for key, value in given.items():
        if now.get(key, AS_CREATED.get(key, "")) != value:
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
    """SQS's ListQueues: in name order, those of the key's queues whose names start with the prefix;
    MaxResults of them (up to 1000 without it), and a NextToken with MaxResults when more follow."""
    prefix = params.text(p, "QueueNamePrefix", required=False) or None
    limit = params.integer(p, "MaxResults", 1, 1000, None)
    token = params.text(p, "NextToken", required=False) or None
    ctx.authorize(Action.READ_STATS)
    try:
        page = await ctx.service.list_queues(limit or 1000, token, prefix=prefix, wanted=ctx.grant.covers)
    except InvalidCursor:
        raise SqsError("InvalidParameterValue", "Invalid NextToken value.") from None
    urls = [ctx.place.queue_url(q.name) for q in page.items]
    result: dict[str, Any] = {"QueueUrls": urls} if urls else {}
    if limit is not None and page.next_cursor is not None:
        result["NextToken"] = page.next_cursor
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
        if key not in attributes.KNOWN:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {key}.")
    ctx.authorize(Action.READ_STATS, name)
    try:
        stats = await ctx.service.get_queue(name)
        metadata = await ctx.service.queue_metadata(name)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    values = _attributes_of(ctx, stats, metadata)
    values |= {
        "CreatedTimestamp": str(int(metadata.created_at.timestamp())),
        "LastModifiedTimestamp": str(int(metadata.last_modified.timestamp())),
    }
    if "All" not in wanted:
        values = {k: v for k, v in values.items() if k in wanted}
    return {"Attributes": values} if values else {}


async def set_queue_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    if "Attributes" not in p:
        raise missing("Attributes")
    given = attributes.checked(name, params.mapping(p, "Attributes"), ctx.service.max_payload_bytes)
    ctx.authorize(Action.ADMINISTER, name)
    # As SQS: a FIFO queue may be told it is one (nothing changes), never that it is not; a
    # standard queue does not know the attribute.
    if "FifoQueue" in given and not is_fifo(name):
        raise SqsError("InvalidAttributeName", "Unknown Attribute FifoQueue.")
    if given.pop("FifoQueue", "true") != "true":
        raise SqsError(
            "InvalidAttributeValue",
            "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
        )
    try:
        stats = await ctx.service.get_queue(name)
        kept = attributes.kept_of(await ctx.service.queue_metadata(name), ctx.service.max_payload_bytes)
        attributes.check_throughput(kept | given)
        dead_letters = await _dead_letters(ctx, name, given)
        if dead_letters is not None or given.keys() & attributes.SETTINGS:
            await ctx.service.put_queue(name, _settings(name, given, stats.settings, dead_letters))
        # Also when only settings changed: the queue's LastModifiedTimestamp moves.
        await ctx.service.change_queue_metadata(name, _change(given))
    except QueueNotFound as exc:
        raise from_domain(exc) from None
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
    a purge is not a completion. Dead items stay (the HTTP API's dead letters). One purge of a
    queue per 60 seconds, counted by the process that answers (simplequeue.service.local.purges):
    replicas do not share it."""
    name = queue_param(ctx, p)
    ctx.authorize(Action.ADMINISTER, name)
    if ctx.purges is None:  # an app built without its lifespan's purges
        raise unsupported("PurgeQueue")
    try:
        purged = await ctx.purges.purge_live(name)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    if purged is None:
        raise SqsError(
            "PurgeQueueInProgress",
            f"Only one PurgeQueue operation on {name} is allowed every {ctx.purges.once_in_seconds} seconds.",
        )
    return {}


async def list_dead_letter_source_queues(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    """The queues whose RedrivePolicy names this one, by name, paged as ListQueues is."""
    name = queue_param(ctx, p)
    limit = params.integer(p, "MaxResults", 1, 1000, None)
    token = params.text(p, "NextToken", required=False)
    ctx.authorize(Action.READ_STATS, name)
    await existing(ctx, name)
    after = _after(token) if token else None
    found: list[str] = []

    def wanted(queue: str) -> bool:  # this key's queues, past the page before
        return ctx.grant.covers(queue) and (after is None or queue > after)

    async for queue in dead_letter_sources(ctx, name, wanted):
        found.append(queue)
        if limit is not None and len(found) > limit:
            break
    page = found[: limit or 1000]
    result: dict[str, Any] = {"queueUrls": [ctx.place.queue_url(n) for n in page]}
    if limit is not None and len(found) > limit:
        result["NextToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode()
    return result
