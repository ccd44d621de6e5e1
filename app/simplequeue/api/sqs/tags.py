"""A queue's tags: TagQueue, UntagQueue, ListQueueTags (and CreateQueue's tags), with SQS's limits.

Tags are kept in the queue's metadata (sq_queue_tags) and go with the queue. They are labels only:
the door's access is the service's keys and roles, not tag-based policies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sqs import params
from simplequeue.api.sqs.addressing import queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, missing
from simplequeue.domain import QueueNotFound
from simplequeue.domain.metadata import MetadataChange

MAX_TAGS = 50
MAX_KEY = 128
MAX_VALUE = 256
RESERVED_PREFIX = "aws:"
# Letters, digits, white space and _ . : / = + - @, as AWS's tagging rules allow (\s also holds
# U+001C to U+001F, which XML cannot carry: refused apart).
_ALLOWED = re.compile(r"[\w\s.:/=+\-@]*")


def too_many_tags(queue: str) -> SqsError:
    return SqsError("InvalidParameterValue", f"Too many tags added for queue {queue}.")


def _key(key: Any) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY:
        raise SqsError(
            "InvalidParameterValue", f"Tag keys must be between 1 and {MAX_KEY} characters in length."
        )
    if key.lower().startswith(RESERVED_PREFIX):
        raise SqsError("InvalidParameterValue", f"Tag keys may not begin with {RESERVED_PREFIX}: {key!r}.")
    if not _ALLOWED.fullmatch(key) or not params.carried_by_xml(key):
        raise SqsError("InvalidParameterValue", f"Tag key {key!r} holds a character tags may not hold.")
    return key


def checked_tags(tags: Mapping[str, Any]) -> dict[str, str]:
    checked: dict[str, str] = {}
    for key, value in tags.items():
        if not isinstance(value, str) or len(value) > MAX_VALUE:
            raise SqsError(
                "InvalidParameterValue", f"Tag values must be at most {MAX_VALUE} characters: key {key!r}."
            )
        if not _ALLOWED.fullmatch(value) or not params.carried_by_xml(value):
            raise SqsError(
                "InvalidParameterValue", f"The value of tag {key!r} holds a character tags may not hold."
            )
        checked[_key(key)] = value
    return checked


async def tag_queue(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    tags = checked_tags(params.mapping(p, "Tags"))
    if not tags:
        raise missing("Tags")
    if len(tags) > MAX_TAGS:
        raise too_many_tags(name)
    ctx.authorize(Action.ADMINISTER, name)
    await _change(ctx, name, MetadataChange(set_tags=tags, max_tags=MAX_TAGS))
    return {}


async def untag_queue(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    keys = params.names(p, "TagKeys")
    if not keys:
        raise missing("TagKeys")
    # Removing a key the queue lacks is no error; a key no tag could have is.
    unset = frozenset(_key(k) if not k.lower().startswith(RESERVED_PREFIX) else k for k in keys)
    ctx.authorize(Action.ADMINISTER, name)
    await _change(ctx, name, MetadataChange(unset_tags=unset, max_tags=MAX_TAGS))
    return {}


async def list_queue_tags(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    ctx.authorize(Action.READ_STATS, name)
    try:
        tags = (await ctx.service.queue_metadata(name)).tags
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    return {"Tags": dict(sorted(tags.items()))} if tags else {}


async def _change(ctx: Context, name: str, change: MetadataChange) -> None:
    try:
        count = await ctx.service.change_queue_metadata(name, change)
    except QueueNotFound as exc:
        raise from_domain(exc) from None
    if count > change.max_tags:
        raise too_many_tags(name)
