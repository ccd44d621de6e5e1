"""TagResource, UntagResource, ListTagsForResource, on topics: SNS's limits (50 tags, keys of 1
to 128 characters, values of up to 256, no `aws:` prefix), checked by the SQS door's rules."""

from __future__ import annotations

from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sns.context import Context, members, required, topic_name
from simplequeue.api.sns.errors import SnsError, invalid, missing
from simplequeue.api.sqs import tags as sqs_tags
from simplequeue.api.sqs.errors import SqsError
from simplequeue.domain.topics import TopicChange, TopicNotFound

MAX_TAGS = sqs_tags.MAX_TAGS


def checked_tags(given: Any) -> dict[str, str]:
    """`Tags.member.N.Key` / `.Value`, as a map, each checked."""
    if given is None or given == "":
        return {}
    if not isinstance(given, list) or not all(isinstance(t, dict) for t in given):
        raise invalid("Tags")
    tags: dict[str, Any] = {}
    for tag in given:
        key = tag.get("Key")
        if key is None:
            raise missing("Tags.member.N.Key")
        tags[key] = tag.get("Value", "")
    try:
        checked = sqs_tags.checked_tags(tags)
    except SqsError as exc:
        raise SnsError("InvalidParameter", exc.message) from None
    if len(checked) > MAX_TAGS:
        raise too_many()
    return checked


def too_many() -> SnsError:
    return SnsError("TagLimitExceeded", "Could not complete request: tag quota of per resource exceeded")


def _resource(ctx: Context, p: dict[str, Any]) -> str:
    """The topic ResourceArn names: one there is not is ResourceNotFound, as SNS's tagging says."""
    try:
        return topic_name(ctx, required(p, "ResourceArn"), "ResourceArn")
    except SnsError as exc:
        if exc.code == "NotFound":
            raise no_resource() from None
        raise


def no_resource() -> SnsError:
    return SnsError("ResourceNotFound", "Resource does not exist")


async def tag_resource(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = _resource(ctx, p)
    tags = checked_tags(p.get("Tags"))
    ctx.authorize(Action.ADMINISTER, name)
    try:
        topic = await ctx.topics.get_topic(name)
        # Counted before the change: two callers tagging at once may pass 50 between them.
        if len(set(topic.tags) | set(tags)) > MAX_TAGS:
            raise too_many()
        await ctx.topics.change_topic(name, TopicChange(set_tags=tags))
    except TopicNotFound:
        raise no_resource() from None
    return {}


async def untag_resource(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = _resource(ctx, p)
    keys = members(p, "TagKeys")
    if not all(isinstance(k, str) for k in keys):
        raise invalid("TagKeys")
    ctx.authorize(Action.ADMINISTER, name)
    try:
        await ctx.topics.change_topic(name, TopicChange(unset_tags=frozenset(keys)))
    except TopicNotFound:
        raise no_resource() from None
    return {}


async def list_tags_for_resource(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = _resource(ctx, p)
    ctx.authorize(Action.READ_STATS, name)
    try:
        topic = await ctx.topics.get_topic(name)
    except TopicNotFound:
        raise no_resource() from None
    return {"Tags": [{"Key": k, "Value": v} for k, v in sorted(topic.tags.items())]}
