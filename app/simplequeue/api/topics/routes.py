"""The topics' routes: topics, their subscriptions, and publishing. Each parses, makes one
TopicService call, and shapes the answer. A key's queue patterns cover topics by name too:
managing a topic takes `administer` on it, subscribing a queue `administer` on the queue as well
(a producer cannot route messages into a queue it does not cover), publishing `push` on the topic.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request, Response, status
from fastapi.responses import PlainTextResponse

from simplequeue.api.auth import Action, Caller
from simplequeue.api.dependencies import TopicsDep
from simplequeue.api.responses import also, errors
from simplequeue.api.sqs.urls import base_url
from simplequeue.api.topics.schemas import (
    PublishBatchRequest,
    PublishBatchResponse,
    PublishRequest,
    PublishResponse,
    SubscriptionChangeRequest,
    SubscriptionList,
    SubscriptionRequest,
    SubscriptionResponse,
    TopicChangeRequest,
    TopicList,
    TopicRequest,
    TopicResponse,
)
from simplequeue.domain.topics import (
    TOPIC_NAME_PATTERN,
    Subscription,
    SubscriptionNotFound,
    Topic,
    TopicChange,
    TopicNotFound,
)
from simplequeue.service.topics import CERTIFICATE_PATH, TopicService

TopicPath = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN, description="The topic's name.")]
SubscriptionPath = Annotated[UUID, Path(description="The subscription's id.")]
Cursor = Annotated[
    str | None, Query(min_length=1, max_length=400, description="The previous page's next_cursor.")
]
PageLimit = Annotated[int, Query(ge=1, le=1000, description="Per page.")]

router = APIRouter(tags=["topics"])


def _topic(topics: TopicService, topic: Topic) -> TopicResponse:
    return TopicResponse.of(topic, topics.arns.topic(topic.name))


def _base(request: Request) -> str:
    config = request.app.state.sqs
    return base_url(config.public_url, request.url.scheme, request.headers.get("host", request.url.netloc))


@router.get("/topics", operation_id="listTopics", responses=errors(422, 503))
async def list_topics(
    topics: TopicsDep, who: Caller, limit: PageLimit = 100, cursor: Cursor = None
) -> TopicList:
    """The topics (those the API key covers), in name order, a page at a time."""
    who.require(Action.READ_STATS)
    page = await topics.list_topics(limit, cursor)
    found = [_topic(topics, t) for t in page.items if who.covers(t.name)]
    return TopicList(topics=found, next_cursor=page.next_cursor)


@router.put(
    "/topics/{name}",
    operation_id="putTopic",
    responses=also(201, TopicResponse, "The topic was made.") | errors(400, 409, 413, 415, 422, 503),
)
async def put_topic(
    name: TopicPath, body: TopicRequest, topics: TopicsDep, who: Caller, response: Response
) -> TopicResponse:
    """Make a topic, or find it as it is: 409 TopicExists when it has other attributes."""
    who.require(Action.ADMINISTER, name)
    topic, made = await topics.create_topic(name, body.attributes.given(), body.tags)
    if made:
        response.status_code = status.HTTP_201_CREATED
    return _topic(topics, topic)


@router.get("/topics/{name}", operation_id="getTopic", responses=errors(404, 422, 503))
async def get_topic(name: TopicPath, topics: TopicsDep, who: Caller) -> TopicResponse:
    who.require(Action.READ_STATS, name)
    return _topic(topics, await topics.get_topic(name))


@router.patch(
    "/topics/{name}", operation_id="changeTopic", responses=errors(400, 404, 409, 413, 415, 422, 503)
)
async def change_topic(
    name: TopicPath, body: TopicChangeRequest, topics: TopicsDep, who: Caller
) -> TopicResponse:
    """Set or remove attributes and tags, in one change."""
    who.require(Action.ADMINISTER, name)
    change = TopicChange(
        body.set_attributes.given(),
        frozenset(body.unset_attributes),
        body.set_tags,
        frozenset(body.unset_tags),
    )
    return _topic(topics, await topics.change_topic(name, change))


@router.delete(
    "/topics/{name}",
    operation_id="deleteTopic",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=errors(404, 422, 503),
)
async def delete_topic(name: TopicPath, topics: TopicsDep, who: Caller) -> Response:
    """Delete the topic and its subscriptions (items already delivered stay in their queues)."""
    who.require(Action.ADMINISTER, name)
    if not await topics.delete_topic(name):
        raise TopicNotFound()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/topics/{name}/subscriptions",
    operation_id="subscribe",
    responses=also(201, SubscriptionResponse, "The subscription was made.")
    | errors(400, 404, 413, 415, 422, 503),
)
async def subscribe(
    name: TopicPath,
    body: SubscriptionRequest,
    topics: TopicsDep,
    who: Caller,
    request: Request,
    response: Response,
) -> SubscriptionResponse:
    """Subscribe a queue or an HTTP/S endpoint; answers the topic's subscription to it if it has
    one (with the same attributes). A queue need not exist yet: a publish skips it until it does.
    An endpoint is sent a SubscriptionConfirmation and gets nothing else until it confirms
    (`confirmed` says whether it has)."""
    who.require(Action.ADMINISTER, name)
    if body.protocol == "sqs":
        who.require(Action.ADMINISTER, body.endpoint)
    subscription, made = await topics.subscribe(
        name, body.protocol, body.endpoint, body.attributes.given(), _base(request)
    )
    if made:
        response.status_code = status.HTTP_201_CREATED
    return SubscriptionResponse.of(subscription, topics.arns.subscription(name, subscription.id))


@router.get("/topics/{name}/subscriptions", operation_id="listSubscriptions", responses=errors(404, 422, 503))
async def list_subscriptions(
    name: TopicPath,
    topics: TopicsDep,
    who: Caller,
    limit: PageLimit = 100,
    cursor: Annotated[UUID | None, Query(description="The previous page's next_cursor.")] = None,
) -> SubscriptionList:
    """The topic's subscriptions, a page at a time (in id order)."""
    who.require(Action.READ_STATS, name)
    page = await topics.list_subscriptions(name, limit, str(cursor) if cursor else None)
    return SubscriptionList(
        subscriptions=[SubscriptionResponse.of(s, topics.arns.subscription(name, s.id)) for s in page.items],
        next_cursor=page.next_cursor,
    )


async def _subscription_of(topics: TopicService, name: str, subscription_id: UUID) -> Subscription:
    """The subscription, if it is the named topic's: another topic's is not found under this one."""
    subscription = await topics.get_subscription(subscription_id)
    if subscription.topic != name:
        raise SubscriptionNotFound()
    return subscription


@router.get(
    "/topics/{name}/subscriptions/{subscription_id}",
    operation_id="getSubscription",
    responses=errors(404, 422, 503),
)
async def get_subscription(
    name: TopicPath, subscription_id: SubscriptionPath, topics: TopicsDep, who: Caller
) -> SubscriptionResponse:
    who.require(Action.READ_STATS, name)
    subscription = await _subscription_of(topics, name, subscription_id)
    return SubscriptionResponse.of(subscription, topics.arns.subscription(name, subscription.id))


@router.patch(
    "/topics/{name}/subscriptions/{subscription_id}",
    operation_id="changeSubscription",
    responses=errors(400, 404, 409, 413, 415, 422, 503),
)
async def change_subscription(
    name: TopicPath,
    subscription_id: SubscriptionPath,
    body: SubscriptionChangeRequest,
    topics: TopicsDep,
    who: Caller,
) -> SubscriptionResponse:
    who.require(Action.ADMINISTER, name)
    await _subscription_of(topics, name, subscription_id)
    changed = await topics.change_subscription(
        subscription_id, body.set_attributes.given(), frozenset(body.unset_attributes)
    )
    return SubscriptionResponse.of(changed, topics.arns.subscription(name, changed.id))


@router.delete(
    "/topics/{name}/subscriptions/{subscription_id}",
    operation_id="unsubscribe",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=errors(404, 422, 503),
)
async def unsubscribe(
    name: TopicPath, subscription_id: SubscriptionPath, topics: TopicsDep, who: Caller
) -> Response:
    who.require(Action.ADMINISTER, name)
    await _subscription_of(topics, name, subscription_id)
    if not await topics.unsubscribe(subscription_id):
        raise SubscriptionNotFound()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/topics/{name}/publish", operation_id="publish", responses=errors(400, 404, 413, 415, 422, 503))
async def publish(
    name: TopicPath, body: PublishRequest, topics: TopicsDep, who: Caller, request: Request
) -> PublishResponse:
    """Deliver the message to every subscription whose filter policy it passes, in one transaction:
    when this answers, every matching queue holds it."""
    who.require(Action.PUSH, name)
    return PublishResponse.of(await topics.publish(name, body.publication(), _base(request)))


@router.post(
    "/topics/{name}/publish/batch",
    operation_id="publishBatch",
    responses=errors(400, 404, 413, 415, 422, 503),
)
async def publish_batch(
    name: TopicPath, body: PublishBatchRequest, topics: TopicsDep, who: Caller, request: Request
) -> PublishBatchResponse:
    """Up to 10 messages, all delivered in one transaction or none."""
    who.require(Action.PUSH, name)
    published = await topics.publish_batch(name, [m.publication() for m in body.messages], _base(request))
    return PublishBatchResponse(results=[PublishResponse.of(p) for p in published])


@router.get(CERTIFICATE_PATH, response_class=PlainTextResponse, include_in_schema=False)
async def signing_certificate(topics: TopicsDep) -> PlainTextResponse:
    """The certificate of the key that signs notifications (their SigningCertURL): public, as
    subscribers fetch it to check signatures. Outside the spec, like the SQS door: SNS's
    subscribers fetch it, not generated clients."""
    key = await topics.signing_key()
    return PlainTextResponse(key.certificate_pem().decode(), media_type="application/x-pem-file")
