"""CreateTopic, DeleteTopic, ListTopics, GetTopicAttributes, SetTopicAttributes."""

from __future__ import annotations

import json
from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sns.context import PAGE, Context, required, string_map, text, topic_param
from simplequeue.api.sns.errors import invalid
from simplequeue.api.sns.protocol import Entries
from simplequeue.api.sns.tags import checked_tags
from simplequeue.domain.topics import (
    CONTENT_BASED_DEDUPLICATION,
    FIFO_TOPIC,
    Topic,
    TopicChange,
)

DEFAULT_EFFECTIVE_DELIVERY_POLICY = json.dumps(
    {
        "http": {
            "defaultHealthyRetryPolicy": {
                "minDelayTarget": 20,
                "maxDelayTarget": 20,
                "numRetries": 3,
                "numMaxDelayRetries": 0,
                "numNoDelayRetries": 0,
                "numMinDelayRetries": 0,
                "backoffFunction": "linear",
            },
            "disableSubscriptionOverrides": False,
            "defaultRequestPolicy": {"headerContentType": "text/plain; charset=UTF-8"},
        }
    },
    separators=(",", ":"),
)
"""What SNS answers as a topic's (and a subscription's) EffectiveDeliveryPolicy with none set."""
POLICY_ACTIONS = [
    "SNS:GetTopicAttributes",
    "SNS:SetTopicAttributes",
    "SNS:AddPermission",
    "SNS:RemovePermission",
    "SNS:DeleteTopic",
    "SNS:Subscribe",
    "SNS:ListSubscriptionsByTopic",
    "SNS:Publish",
]


def default_policy(arn: str, account_id: str) -> str:
    """SNS's default topic Policy (kept and answered, never enforced: keys decide who may)."""
    statement = {
        "Sid": "__default_statement_ID",
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": POLICY_ACTIONS,
        "Resource": arn,
        "Condition": {"StringEquals": {"AWS:SourceOwner": account_id}},
    }
    document = {"Version": "2008-10-17", "Id": "__default_policy_ID", "Statement": [statement]}
    return json.dumps(document, separators=(",", ":"))


async def create_topic(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = required(p, "Name")
    attributes = string_map(p, "Attributes")
    protection = text(p, "DataProtectionPolicy", required=False)
    if protection:
        attributes["DataProtectionPolicy"] = protection
    tags = checked_tags(p.get("Tags"))
    ctx.authorize(Action.ADMINISTER, name)
    topic, _ = await ctx.topics.create_topic(name, attributes, tags)
    return {"TopicArn": ctx.arns.topic(topic.name)}


async def delete_topic(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = topic_param(ctx, p)
    ctx.authorize(Action.ADMINISTER, name)
    await ctx.topics.delete_topic(name)  # one there is not is no error, as on SNS
    return {}


async def list_topics(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    cursor = text(p, "NextToken", required=False) or None
    ctx.authorize(Action.READ_STATS)
    page = await ctx.topics.list_topics(PAGE, cursor)
    found = [{"TopicArn": ctx.arns.topic(t.name)} for t in page.items if ctx.grant.covers(t.name)]
    return {"Topics": found, "NextToken": page.next_cursor}


async def get_topic_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = topic_param(ctx, p)
    ctx.authorize(Action.READ_STATS, name)
    return {"Attributes": Entries(topic_attributes(ctx, await ctx.topics.get_topic(name)))}


def topic_attributes(ctx: Context, topic: Topic) -> dict[str, str]:
    arn = ctx.arns.topic(topic.name)
    kept = dict(topic.attributes)
    answer = {
        "Policy": kept.pop("Policy", None) or default_policy(arn, ctx.account_id),
        "Owner": ctx.account_id,
        "TopicArn": arn,
        "DisplayName": kept.pop("DisplayName", ""),
        # Every subscription is to a queue, confirmed when made: none waits, none lingers deleted.
        "SubscriptionsConfirmed": str(topic.subscriptions),
        "SubscriptionsPending": "0",
        "SubscriptionsDeleted": "0",
        "EffectiveDeliveryPolicy": kept.get("DeliveryPolicy") or DEFAULT_EFFECTIVE_DELIVERY_POLICY,
    }
    if topic.fifo:
        answer[FIFO_TOPIC] = "true"
        answer[CONTENT_BASED_DEDUPLICATION] = kept.pop(CONTENT_BASED_DEDUPLICATION, "false")
    return answer | kept


async def set_topic_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = topic_param(ctx, p)
    attribute = required(p, "AttributeName")
    value = string_map({"v": {attribute: text(p, "AttributeValue", required=False)}}, "v")
    if not attribute:
        raise invalid("AttributeName")
    ctx.authorize(Action.ADMINISTER, name)
    await ctx.topics.change_topic(name, TopicChange(set_attributes=value))
    return {}
