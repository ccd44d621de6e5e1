"""Topics' HTTP/S subscribers, on every reachable engine: the SubscriptionConfirmation handshake,
notifications sent by the deliverer (service.deliveries) to a real endpoint on 127.0.0.1, retries
by the subscription's delivery policy, dead letters. The clock is the test's: a retry waits as a
delayed item, and moving the clock is what makes it due."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit
from uuid import uuid4

import pytest
from pydantic import ValidationError
from simplequeue.domain import DeadFilter, QueueSettings
from simplequeue.domain.deliveries import DELIVERIES
from simplequeue.domain.notifications import Arns
from simplequeue.domain.publications import Publication
from simplequeue.domain.sns_signing import verify
from simplequeue.domain.topics import InvalidSubscription, Subscription, Topic
from simplequeue.main import store_for
from simplequeue.service.deliveries import Deliverer
from simplequeue.service.endpoints import EndpointRules
from simplequeue.service.queues import QueueService
from simplequeue.service.topics import TopicService
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.test_sns_endpoints import read_request

BASE = "http://sq.example"


@dataclass
class Sent:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def message(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.body)
        return found


@dataclass
class Endpoint:
    """An HTTP/1.1 endpoint that records each POST and answers the next of `statuses` (200 when
    none is left)."""

    statuses: list[int] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    port: int = 0
    held: asyncio.Event = field(default_factory=asyncio.Event)
    """Notifications to /held are answered once this is set."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await read_request(reader)
                if request is None:
                    return
                self.sent.append(Sent(request.target, request.headers, request.body))
                if request.target == "/held" and json.loads(request.body)["Type"] == "Notification":
                    await self.held.wait()
                code = self.statuses.pop(0) if self.statuses else 200
                writer.write(f"HTTP/1.1 {code} X\r\ncontent-length: 0\r\n\r\n".encode())
                await writer.drain()
        finally:
            writer.close()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    found = Endpoint()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    yield found
    server.close()
    await server.wait_closed()


@dataclass
class Case:
    queues: QueueService
    topics: TopicService
    deliverer: Deliverer
    clock: FakeClock
    store: Store

    async def certificate(self) -> bytes:
        return (await self.topics.signing_key()).certificate_pem()

    async def send(self) -> int:
        return await self.deliverer.run_once()


@pytest.fixture
async def case(settings: Settings, clock: FakeClock) -> AsyncIterator[Case]:
    store = store_for(settings, clock)  # opened and closed by the service
    queues = QueueService(store, clock)
    await queues.start(migrate=True)
    # The engine's database is shared by the session's tests, DELIVERIES with it: each test
    # starts with none, so that what it sends and counts is its own.
    if await queues.queue_exists(DELIVERIES):
        await queues.delete_queue(DELIVERIES, force=True)
    rules = EndpointRules(["127.0.0.1/32"])
    topics = TopicService(store, queues, clock, Arns("us-east-1", "000000000000"), endpoints=rules)
    deliverer = Deliverer(topics, queues, rules, timeout_seconds=5)
    yield Case(queues, topics, deliverer, clock, store)
    await deliverer.aclose()
    await queues.stop()


@pytest.fixture
def topic() -> str:
    return f"h-{uuid4().hex[:12]}"


async def confirmed(case: Case, topic: str, endpoint: Endpoint, **attributes: str) -> Subscription:
    """Subscribe the endpoint and confirm with the token it was sent."""
    await case.topics.create_topic(topic, {}, {})
    subscription, made = await case.topics.subscribe(topic, "http", endpoint.url(), attributes, BASE)
    assert made
    assert not subscription.confirmed
    assert await case.send() == 1
    confirmation = endpoint.sent.pop().message
    return await case.topics.confirm_subscription(topic, confirmation["Token"])


async def dead_reasons(case: Case) -> list[str]:
    page = await case.queues.list_dead(DELIVERIES, DeadFilter(), 100, None)
    return [item.errors[-1].error for item in page.items]


async def test_an_endpoint_is_sent_a_signed_confirmation_and_nothing_else_until_it_confirms(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    await case.topics.create_topic(topic, {}, {})
    subscription, _ = await case.topics.subscribe(topic, "http", endpoint.url(), {}, BASE)
    assert not subscription.confirmed
    published = await case.topics.publish(topic, Publication("before"), BASE)
    assert published.endpoints == 0  # not confirmed: nothing is queued for it
    assert await case.send() == 1
    [sent] = endpoint.sent
    message = sent.message
    assert sent.path == "/hook"
    assert sent.headers["x-amz-sns-message-type"] == "SubscriptionConfirmation"
    assert sent.headers["x-amz-sns-topic-arn"] == case.topics.arns.topic(topic)
    assert "x-amz-sns-subscription-arn" not in sent.headers
    assert message["Type"] == "SubscriptionConfirmation"
    assert message["SigningCertURL"] == BASE + "/sns/certificate.pem"
    assert verify(message, await case.certificate())
    query = parse_qs(urlsplit(message["SubscribeURL"]).query)
    assert query == {
        "Action": ["ConfirmSubscription"],
        "TopicArn": [case.topics.arns.topic(topic)],
        "Token": [message["Token"]],
    }
    token = message["Token"]
    wrong = token[:-1] + ("1" if token.endswith("0") else "0")  # one digit off
    with pytest.raises(InvalidSubscription):
        await case.topics.confirm_subscription(topic, wrong)
    with pytest.raises(InvalidSubscription):
        await case.topics.confirm_subscription(topic, "0" * 96)
    done = await case.topics.confirm_subscription(topic, message["Token"])
    assert done.confirmed
    assert done.id == subscription.id
    again = await case.topics.confirm_subscription(topic, message["Token"])  # answered, not refused
    assert again.confirmed


async def test_a_confirmed_endpoint_gets_each_notification_signed_with_sns_headers(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    subscription = await confirmed(case, topic, endpoint)
    published = await case.topics.publish(topic, Publication("hello", subject="Greeting"), BASE)
    assert published.endpoints == 1
    assert published.queues == ()
    assert await case.send() == 1
    [sent] = endpoint.sent
    assert sent.headers["x-amz-sns-message-type"] == "Notification"
    assert sent.headers["x-amz-sns-message-id"] == str(published.message_id)
    assert sent.headers["x-amz-sns-subscription-arn"] == case.topics.arns.subscription(topic, subscription.id)
    assert sent.headers["content-type"] == "text/plain; charset=UTF-8"
    message = sent.message
    assert (message["Type"], message["Message"], message["Subject"]) == ("Notification", "hello", "Greeting")
    assert verify(message, await case.certificate())
    assert await case.send() == 0  # completed: sent once


async def test_raw_delivery_posts_the_message_alone(case: Case, topic: str, endpoint: Endpoint) -> None:
    await confirmed(case, topic, endpoint, RawMessageDelivery="true")
    await case.topics.publish(topic, Publication({"order": 7}), BASE)
    await case.send()
    [sent] = endpoint.sent
    assert json.loads(sent.body) == {"order": 7}
    assert sent.headers["x-amz-sns-rawdelivery"] == "true"


async def test_a_failing_endpoint_is_retried_by_the_policy_then_its_delivery_dies_with_the_reason(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    await confirmed(case, topic, endpoint)
    endpoint.statuses = [500, 503, 429, 500]  # SNS's default: 3 retries, 20 s apart
    await case.topics.publish(topic, Publication("m"), BASE)
    assert await case.send() == 1
    for _ in range(3):
        assert await case.send() == 0  # waits 20 s
        case.clock.advance(19)
        assert await case.send() == 0
        case.clock.advance(1)
        assert await case.send() == 1
    assert len(endpoint.sent) == 4
    assert await dead_reasons(case) == ["HTTP 500 (after 4 attempts)"]


async def test_a_client_error_is_not_retried(case: Case, topic: str, endpoint: Endpoint) -> None:
    await confirmed(case, topic, endpoint)
    endpoint.statuses = [404]
    await case.topics.publish(topic, Publication("m"), BASE)
    await case.send()
    case.clock.advance(3600)
    assert await case.send() == 0
    assert await dead_reasons(case) == ["HTTP 404 (after 1 attempt)"]


async def test_the_subscriptions_delivery_policy_decides_the_retries(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    policy = {"healthyRetryPolicy": {"numRetries": 1, "minDelayTarget": 5, "maxDelayTarget": 5}}
    await confirmed(case, topic, endpoint, DeliveryPolicy=json.dumps(policy))
    endpoint.statuses = [500, 500]
    await case.topics.publish(topic, Publication("m"), BASE)
    await case.send()
    case.clock.advance(5)
    assert await case.send() == 1
    assert await dead_reasons(case) == ["HTTP 500 (after 2 attempts)"]
    with pytest.raises(InvalidSubscription, match="DeliveryPolicy"):
        await case.topics.subscribe(
            topic, "http", endpoint.url("/other"), {"DeliveryPolicy": '{"healthyRetryPolicy": 1}'}, BASE
        )


async def test_what_gives_up_goes_to_the_subscriptions_dead_letter_queue(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    dlq = f"dlq-{uuid4().hex[:12]}"
    await case.queues.put_queue(dlq, QueueSettings())
    redrive = json.dumps({"deadLetterTargetArn": case.topics.arns.queue(dlq)})
    await confirmed(case, topic, endpoint, RedrivePolicy=redrive)
    endpoint.statuses = [400]
    published = await case.topics.publish(topic, Publication("lost"), BASE)
    await case.send()
    [item] = await case.queues.pop(dlq, max_items=10, wait_seconds=0, lease_seconds=30)
    message = json.loads(item.payload)
    assert (message["MessageId"], message["Message"]) == (str(published.message_id), "lost")
    attributes = json.loads(item.attributes_json or "{}")
    assert attributes["ErrorCode"]["value"] == "400"
    assert await dead_reasons(case) == []  # moved, not dead here
    bad = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:111111111111:elsewhere"})
    with pytest.raises(InvalidSubscription, match="RedrivePolicy"):
        await case.topics.subscribe(topic, "http", endpoint.url("/x"), {"RedrivePolicy": bad}, BASE)


async def test_an_endpoint_unsubscribed_before_its_send_gets_nothing(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    subscription = await confirmed(case, topic, endpoint)
    await case.topics.publish(topic, Publication("m"), BASE)
    await case.topics.unsubscribe(subscription.id)
    assert await case.send() == 1
    assert endpoint.sent == []
    assert await case.send() == 0


async def test_a_retried_publish_sends_nothing_twice(case: Case, topic: str, endpoint: Endpoint) -> None:
    await confirmed(case, topic, endpoint)
    message_id = uuid4()
    await case.topics.publish(topic, Publication("once", id=message_id), BASE)
    await case.topics.publish(topic, Publication("once", id=message_id), BASE)
    assert await case.send() == 1
    assert len(endpoint.sent) == 1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "not allowed"),  # whatever the list: test_sns_endpoints
        ("http://10.0.0.8/hook", "not allowed"),
        ("ftp://127.0.0.1/hook", "scheme"),
        ("http://user:pw@127.0.0.1/hook", "user name"),
        ("https://127.0.0.1/hook", "must be http for protocol http"),
    ],
)
async def test_endpoints_the_rules_refuse_are_refused_at_subscribe(
    case: Case, topic: str, url: str, why: str
) -> None:
    await case.topics.create_topic(topic, {}, {})
    with pytest.raises(InvalidSubscription, match=why):
        await case.topics.subscribe(topic, "http", url, {}, BASE)
    assert (await case.topics.list_subscriptions(topic, 10, None)).items == []


async def test_a_fifo_topic_takes_no_http_endpoint(case: Case, endpoint: Endpoint) -> None:
    topic = f"h-{uuid4().hex[:12]}.fifo"
    await case.topics.create_topic(topic, {}, {})
    with pytest.raises(InvalidSubscription, match="FIFO"):
        await case.topics.subscribe(topic, "http", endpoint.url(), {}, BASE)


async def test_without_rules_no_http_endpoint_may_subscribe(
    case: Case, topic: str, endpoint: Endpoint
) -> None:
    closed = TopicService(case.store, case.queues, case.clock, case.topics.arns)
    await closed.create_topic(topic, {}, {})
    with pytest.raises(InvalidSubscription, match="SIMPLEQUEUE_SNS_ENDPOINTS"):
        await closed.subscribe(topic, "http", endpoint.url(), {}, BASE)


async def until(check: Any, seconds: float = 10) -> None:
    async with asyncio.timeout(seconds):
        while not check():  # noqa: ASYNC110 (what it waits for is the endpoint's, set by no event)
            await asyncio.sleep(0.02)


async def test_a_slow_endpoint_holds_up_no_other(case: Case, topic: str, endpoint: Endpoint) -> None:
    await confirmed(case, topic, endpoint)
    await case.topics.subscribe(topic, "http", endpoint.url("/held"), {}, BASE)
    assert await case.send() == 1
    await case.topics.confirm_subscription(topic, endpoint.sent.pop().message["Token"])
    running = asyncio.create_task(case.deliverer.run_forever())
    try:
        await case.topics.publish(topic, Publication("first"), BASE)
        await until(lambda: {s.path for s in endpoint.sent} == {"/hook", "/held"})
        await case.topics.publish(topic, Publication("second"), BASE)  # /held still holds "first"
        await until(
            lambda: [s.message["Message"] for s in endpoint.sent if s.path == "/hook"] == ["first", "second"]
        )
        endpoint.held.set()
        await until(
            lambda: [s.message["Message"] for s in endpoint.sent if s.path == "/held"] == ["first", "second"]
        )
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert await case.send() == 0  # everything was settled


def test_a_bad_endpoint_list_stops_the_settings_in_one_line() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(sns_endpoints="hooks.example.com, 10.0.0.0/33")
    assert "sns_endpoints: not an IP address or network: '10.0.0.0/33'" in str(refused.value)


def test_a_policy_kept_unchecked_by_an_older_version_counts_as_none() -> None:
    topics = TopicService(cast(Any, None), cast(Any, None), FakeClock(), Arns("us-east-1", "000000000000"))
    now = FakeClock()()
    topic = Topic("t", now, attributes={"DeliveryPolicy": "not json"})
    own = '{"healthyRetryPolicy": {"numRetries": 1}}'
    s = Subscription(uuid4(), "t", "http", "http://h/", now, attributes={"DeliveryPolicy": own})
    assert topics.delivery_policy(topic, s).retry.num_retries == 1
    broken = Subscription(uuid4(), "t", "http", "http://h/", now, attributes={"DeliveryPolicy": "{"})
    assert topics.delivery_policy(topic, broken).retry.num_retries == 3  # SNS's default
