"""Subscribe, ConfirmSubscription, Unsubscribe, ListSubscriptions, ListSubscriptionsByTopic,
GetSubscriptionAttributes, SetSubscriptionAttributes. A queue's subscription (protocol `sqs`) is
confirmed when made; an HTTP/S endpoint's waits until the endpoint confirms it, by visiting the
SubscribeURL it was sent (an anonymous ConfirmSubscription: the token is the proof) or by a
ConfirmSubscription signed with a key that may manage the topic."""

from __future__ import annotations

from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sns.context import (
    PAGE,
    Context,
    required,
    string_map,
    subscription_param,
    text,
    topic_param,
)
from simplequeue.api.sns.errors import invalid, no_subscription
from simplequeue.api.sns.protocol import Entries
from simplequeue.api.sns.topics import DEFAULT_EFFECTIVE_DELIVERY_POLICY
from simplequeue.domain.delivery_policy import effective_policy_json
from simplequeue.domain.topics import (
    FILTER_POLICY,
    FILTER_POLICY_SCOPE,
    RAW_MESSAGE_DELIVERY,
    Subscription,
    SubscriptionNotFound,
)


async def subscribe(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = topic_param(ctx, p)
    protocol = required(p, "Protocol")
    endpoint = text(p, "Endpoint", required=False) or ""
    attributes = string_map(p, "Attributes")
    ctx.authorize(Action.ADMINISTER, name)
    if protocol == "sqs":
        # SNS takes a queue's ARN only; the REST API's bare names are its own.
        queue = ctx.arns.queue_of(endpoint)
        if queue is None:
            raise invalid("SQS endpoint ARN")
        # A producer cannot route messages into a queue its key does not cover.
        ctx.authorize(Action.ADMINISTER, queue, arn=endpoint)
    subscription, _ = await ctx.topics.subscribe(name, protocol, endpoint, attributes, ctx.base_url)
    if not subscription.confirmed and text(p, "ReturnSubscriptionArn", required=False) != "true":
        return {"SubscriptionArn": PENDING}
    return {"SubscriptionArn": ctx.arns.subscription(name, subscription.id)}


async def confirm_subscription(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    """Anyone holding the token may confirm (SNS's SubscribeURL is visited unsigned); the
    token is checked in constant time against the one sent."""
    name = topic_param(ctx, p)
    token = required(p, "Token")
    if not 0 < len(token) <= 256:
        raise invalid("Token")
    subscription = await ctx.topics.confirm_subscription(name, token)
    return {"SubscriptionArn": ctx.arns.subscription(name, subscription.id)}


async def unsubscribe(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    topic, subscription_id = subscription_param(ctx, p)
    ctx.authorize(Action.ADMINISTER, topic)
    try:
        subscription = await ctx.topics.get_subscription(subscription_id)
    except SubscriptionNotFound:
        return {}  # already gone: SNS's Unsubscribe is idempotent
    if subscription.topic == topic:
        await ctx.topics.unsubscribe(subscription_id)
    return {}


PENDING = "pending confirmation"
"""What Subscribe answers for a subscription that waits for its endpoint (unless asked for its ARN)."""


def _listed(ctx: Context, s: Subscription) -> dict[str, str]:
    return {
        "SubscriptionArn": ctx.arns.subscription(s.topic, s.id) if s.confirmed else "PendingConfirmation",
        "Owner": ctx.account_id,
        "Protocol": s.protocol,
        "Endpoint": _endpoint(ctx, s),
        "TopicArn": ctx.arns.topic(s.topic),
    }


def _endpoint(ctx: Context, s: Subscription) -> str:
    return ctx.arns.queue(s.endpoint) if s.protocol == "sqs" else s.endpoint


async def list_subscriptions(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    cursor = text(p, "NextToken", required=False) or None
    ctx.authorize(Action.READ_STATS)
    page = await ctx.topics.list_subscriptions(None, PAGE, cursor)
    found = [_listed(ctx, s) for s in page.items if ctx.grant.covers(s.topic)]
    return {"Subscriptions": found, "NextToken": page.next_cursor}


async def list_subscriptions_by_topic(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = topic_param(ctx, p)
    cursor = text(p, "NextToken", required=False) or None
    ctx.authorize(Action.READ_STATS, name)
    page = await ctx.topics.list_subscriptions(name, PAGE, cursor)
    return {"Subscriptions": [_listed(ctx, s) for s in page.items], "NextToken": page.next_cursor}


async def _subscription(ctx: Context, p: dict[str, Any], action: Action) -> Subscription:
    topic, subscription_id = subscription_param(ctx, p)
    ctx.authorize(action, topic)
    subscription = await ctx.topics.get_subscription(subscription_id)
    if subscription.topic != topic:
        raise no_subscription()
    return subscription


async def get_subscription_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    s = await _subscription(ctx, p, Action.READ_STATS)
    kept = {k: v for k, v in s.attributes.items() if v or k not in (FILTER_POLICY, FILTER_POLICY_SCOPE)}
    answer = {
        "Owner": ctx.account_id,
        "SubscriptionArn": ctx.arns.subscription(s.topic, s.id),
        "TopicArn": ctx.arns.topic(s.topic),
        "Protocol": s.protocol,
        "Endpoint": _endpoint(ctx, s),
        "PendingConfirmation": "false" if s.confirmed else "true",
        "ConfirmationWasAuthenticated": "true",
        RAW_MESSAGE_DELIVERY: kept.pop(RAW_MESSAGE_DELIVERY, "false"),
        "EffectiveDeliveryPolicy": await _effective_policy(ctx, s),
    }
    if kept.get(FILTER_POLICY):
        answer[FILTER_POLICY] = kept.pop(FILTER_POLICY)
        answer[FILTER_POLICY_SCOPE] = kept.pop(FILTER_POLICY_SCOPE, "MessageAttributes")
    else:
        kept.pop(FILTER_POLICY_SCOPE, None)
    return {"Attributes": Entries(answer | kept)}


async def _effective_policy(ctx: Context, s: Subscription) -> str:
    if s.protocol == "sqs":
        return s.attributes.get("DeliveryPolicy") or DEFAULT_EFFECTIVE_DELIVERY_POLICY
    topic = await ctx.topics.get_topic(s.topic)
    return effective_policy_json(ctx.topics.delivery_policy(topic, s))


async def set_subscription_attributes(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    attribute = required(p, "AttributeName")
    value = string_map({"v": {attribute: text(p, "AttributeValue", required=False)}}, "v")[attribute]
    s = await _subscription(ctx, p, Action.ADMINISTER)
    if attribute == FILTER_POLICY and not value:  # an empty policy removes it, as on SNS
        await ctx.topics.change_subscription(s.id, {}, frozenset({FILTER_POLICY}))
    else:
        await ctx.topics.change_subscription(s.id, {attribute: value})
    return {}
