"""The SNS door's dispatch: a request's form decoded, its action called with the caller's key, and
the answer or the error written as SNS's XML. Every error is SNS's (never the REST API's
envelope): SNS's clients read no other. simplequeue.api.aws hands requests here."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from simplequeue.api.auth import Grant, Role
from simplequeue.api.request_ids import REQUEST_ID
from simplequeue.api.sns import publish, subscriptions, tags, topics
from simplequeue.api.sns.context import Context
from simplequeue.api.sns.errors import SnsError, from_domain, from_sqs, response, unsupported
from simplequeue.api.sns.protocol import decode, to_xml
from simplequeue.api.sqs.errors import SqsError
from simplequeue.api.sqs.routes import Named, SqsConfig, caller
from simplequeue.api.sqs.sigv4 import SNS_SERVICES
from simplequeue.api.sqs.urls import base_url
from simplequeue.domain import QueueError
from simplequeue.service.topics import TopicService

log = logging.getLogger("simplequeue.sns")

Handler = Callable[[Context, dict[str, Any]], Awaitable[dict[str, Any]]]

ACTIONS: dict[str, Handler] = {
    "CreateTopic": topics.create_topic,
    "DeleteTopic": topics.delete_topic,
    "ListTopics": topics.list_topics,
    "GetTopicAttributes": topics.get_topic_attributes,
    "SetTopicAttributes": topics.set_topic_attributes,
    "Subscribe": subscriptions.subscribe,
    "ConfirmSubscription": subscriptions.confirm_subscription,
    "Unsubscribe": subscriptions.unsubscribe,
    "ListSubscriptions": subscriptions.list_subscriptions,
    "ListSubscriptionsByTopic": subscriptions.list_subscriptions_by_topic,
    "GetSubscriptionAttributes": subscriptions.get_subscription_attributes,
    "SetSubscriptionAttributes": subscriptions.set_subscription_attributes,
    "Publish": publish.publish,
    "PublishBatch": publish.publish_batch,
    "TagResource": tags.tag_resource,
    "UntagResource": tags.untag_resource,
    "ListTagsForResource": tags.list_tags_for_resource,
}
TOKEN_HOLDER = Grant(name="an endpoint with a confirmation token", role=Role.PRODUCER, queues=())
"""Who calls ConfirmSubscription unsigned: may do nothing but what the token allows."""
NAMED = {action: Named(f"/ (SNS {action})") for action in ACTIONS}
UNNAMED = Named("/ (SNS)")


def _confirming(request: Request, body: bytes) -> bool:
    try:
        call = decode(request.url.query, body, request.headers.get("content-type"))
    except SnsError:
        return False
    return call.action == "ConfirmSubscription"


async def serve(request: Request) -> Response:
    request_id = REQUEST_ID.get()
    action = "?"
    request.scope["route"] = UNNAMED
    try:
        body = await request.body()
        try:
            grant = caller(request, body, SNS_SERVICES)
        except SqsError as exc:  # SigV4's refusals, in the words both doors answer
            # An endpoint confirms by visiting its SubscribeURL, unsigned: the token it was sent
            # is what it proves itself by (the action checks it), so it needs no key.
            if not (exc.code == "MissingAuthenticationToken" and _confirming(request, body)):
                raise from_sqs(exc) from None
            grant = TOKEN_HOLDER
        call = decode(request.url.query, body, request.headers.get("content-type"))
        action = call.action
        request.scope["route"] = NAMED.get(action, UNNAMED)
        handler = ACTIONS.get(action)
        if handler is None:
            raise unsupported(action)
        request.app.state.service.require_ready()
        topics_: TopicService = request.app.state.topics
        config: SqsConfig = getattr(request.app.state, "sqs", None) or SqsConfig()
        base = base_url(
            config.public_url, request.url.scheme, request.headers.get("host", request.url.netloc)
        )
        result = await handler(Context(topics_, grant, base, action), call.params)
    except SnsError as exc:
        return response(exc, request_id)
    except QueueError as exc:
        error = from_domain(exc)
        if error.status >= 500:
            log.warning("request %s: SNS %r failed: %s: %s", request_id, action[:80], exc.code, exc.detail)
        return response(error, request_id)
    except Exception:
        log.exception("request %s: SNS %r failed unexpectedly", request_id, action[:80])
        return response(from_domain(QueueError()), request_id)
    answer = to_xml(action, {k: v for k, v in result.items() if v is not None}, request_id)
    return Response(answer, 200, {"x-amzn-requestid": request_id}, media_type="text/xml")
