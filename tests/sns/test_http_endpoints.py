"""An HTTP subscriber, end to end, on SQLite and PostgreSQL: `simplequeue serve` with API keys,
boto3's `sns` client unchanged, and a subscriber on 127.0.0.1 that does what SNS's subscribers do:
checks each message's signature the standard way (aws-sns-message-validator, which fetches the
SigningCertURL; AWS's certificate hosts replaced by ours, as the docs show), confirms by GETting
the SubscribeURL (unsigned: the token is the proof), and takes notifications."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.http import on_loopback
from tests.sns.conftest import error_of, sns_client
from tests.sqs.conftest import SQS_ENGINES
from tests.sqs.test_keys import ADMIN, KEYS
from tests.test_e2e import serving

validator_module = pytest.importorskip("sns_message_validator")


@pytest.fixture(scope="module", params=SQS_ENGINES)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('sns-http')) / 'sns.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    env = {
        "SIMPLEQUEUE_API_KEYS": json.dumps(KEYS),
        "SIMPLEQUEUE_SNS_ENDPOINTS": "127.0.0.1/32",
        "SIMPLEQUEUE_WAIT_RECHECK_SECONDS": "0.2",
    }
    with serving(url, env=env) as base:
        yield base


@dataclass
class Subscriber:
    """Validates every message it is sent; confirms its subscriptions; keeps notifications."""

    validator: Any
    notifications: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    confirmed: threading.Event = field(default_factory=threading.Event)


def subscriber_handler(subscriber: Subscriber) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            message = json.loads(body)
            try:
                subscriber.validator.validate_message(message)
            except Exception as exc:  # what a subscriber does: refuses what does not validate
                subscriber.refused.append(f"{type(exc).__name__}: {exc}")
                self.send_response(403)
                self.end_headers()
                return
            if message["Type"] == "SubscriptionConfirmation":
                with urllib.request.urlopen(message["SubscribeURL"], timeout=10) as answer:
                    assert answer.status == 200
                subscriber.confirmed.set()
            else:
                subscriber.notifications.append({"headers": dict(self.headers), "message": message})
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def subscriber(served: str) -> Iterator[tuple[Subscriber, str]]:
    validator = validator_module.SNSMessageValidator(cert_url_regex="^" + re.escape(served) + "/sns/")
    found = Subscriber(validator)
    with on_loopback(subscriber_handler(found)) as base:
        yield found, f"{base}/sns"


def until(check: Any, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.05)


def test_an_http_subscriber_confirms_and_accepts_signed_notifications(
    served: str, subscriber: tuple[Subscriber, str]
) -> None:
    found, url = subscriber
    sns = sns_client(served, aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1])
    topic = sns.create_topic(Name=f"hooks-{time.monotonic_ns()}")["TopicArn"]
    answer = sns.subscribe(TopicArn=topic, Protocol="http", Endpoint=url)
    assert answer["SubscriptionArn"] == "pending confirmation"
    [listed] = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
    assert listed["SubscriptionArn"] == "PendingConfirmation"
    assert found.confirmed.wait(20), found.refused
    [listed] = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
    arn = listed["SubscriptionArn"]
    attributes = sns.get_subscription_attributes(SubscriptionArn=arn)["Attributes"]
    assert attributes["PendingConfirmation"] == "false"
    assert json.loads(attributes["EffectiveDeliveryPolicy"])["healthyRetryPolicy"]["numRetries"] == 3

    message_id = sns.publish(TopicArn=topic, Message="order 7 shipped", Subject="Orders")["MessageId"]
    until(lambda: found.notifications)
    [got] = found.notifications
    assert got["message"]["MessageId"] == message_id
    assert got["message"]["Message"] == "order 7 shipped"
    assert got["headers"]["x-amz-sns-message-type"] == "Notification"
    assert got["headers"]["x-amz-sns-subscription-arn"] == arn
    assert found.refused == []


def test_a_wrong_token_confirms_nothing_and_refused_endpoints_are_named(served: str) -> None:
    sns = sns_client(served, aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1])
    topic = sns.create_topic(Name=f"hooks-{time.monotonic_ns()}")["TopicArn"]
    refused = httpx.get(f"{served}/?Action=ConfirmSubscription&TopicArn={topic}&Token={'0' * 96}")
    assert refused.status_code == 400
    assert b"InvalidParameter" in refused.content
    # Unsigned, any other action is refused as before.
    assert httpx.get(f"{served}/?Action=ListTopics").status_code in (401, 403)
    with pytest.raises(ClientError) as metadata:
        sns.subscribe(TopicArn=topic, Protocol="http", Endpoint="http://169.254.169.254/latest/meta-data/")
    assert error_of(metadata) == ("InvalidParameter", 400)
