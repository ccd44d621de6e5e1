"""The SNS door with API keys (SQLite: no engine is what is tested): a request signed for `sns`
reaches the SNS door and one signed for `sqs` the SQS door, on one port; the signature is checked
as the SQS door checks it; a key's role and queue patterns (which cover topic names too) decide
what it may do. And `aws sns`, unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sns.conftest import error_of, queue_arn, sns_client, topic_arn
from tests.sqs.conftest import sqs_client
from tests.sqs.test_keys import ADMIN, CONSUMER, JOBS_PRODUCER, KEYS
from tests.test_e2e import serving


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("sns-keys")) / "keys.db"
    with serving(f"sqlite:///{db}", env={"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}) as base:
        yield base


def sns_as(base: str, key: tuple[str, str]) -> Any:
    return sns_client(base, aws_access_key_id=key[0], aws_secret_access_key=key[1])


def test_each_door_by_its_signature_s_scope(keyed: str) -> None:
    sns = sns_as(keyed, ADMIN)
    sqs = sqs_client(keyed, aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1])
    arn = sns.create_topic(Name="jobs-signed")["TopicArn"]
    url = sqs.create_queue(QueueName="jobs-signed-q")["QueueUrl"]
    sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn("jobs-signed-q"),
        Attributes={"RawMessageDelivery": "true"},
    )
    sns_as(keyed, JOBS_PRODUCER).publish(TopicArn=arn, Message="signed")
    [message] = sqs.receive_message(QueueUrl=url)["Messages"]
    assert message["Body"] == "signed"


def test_signatures_refused(keyed: str) -> None:
    with pytest.raises(ClientError) as e:
        sns_as(keyed, (ADMIN[0], "not-the-secret")).list_topics()
    assert error_of(e) == ("SignatureDoesNotMatch", 403)
    with pytest.raises(ClientError) as e:
        sns_as(keyed, ("AKIDNOBODY00000000", "whatever")).list_topics()
    assert error_of(e) == ("InvalidClientTokenId", 403)
    # Unsigned, SNS's action: the SNS door, which wants a signature once keys exist.
    answer = httpx.post(keyed + "/", data={"Action": "ListTopics"})
    assert answer.status_code == 403
    assert b"<Code>MissingAuthenticationToken</Code>" in answer.content
    assert b"http://sns.amazonaws.com/doc/2010-03-31/" in answer.content


def test_what_each_key_may_do(keyed: str) -> None:
    admin = sns_as(keyed, ADMIN)
    jobs = admin.create_topic(Name="jobs-may")["TopicArn"]
    other = admin.create_topic(Name="other-may")["TopicArn"]
    producer = sns_as(keyed, JOBS_PRODUCER)
    consumer = sns_as(keyed, CONSUMER)

    producer.publish(TopicArn=jobs, Message="allowed")
    refusals = [
        lambda: producer.publish(TopicArn=other, Message="not my topic"),
        lambda: producer.create_topic(Name="jobs-new"),
        lambda: producer.delete_topic(TopicArn=jobs),
        lambda: producer.set_topic_attributes(TopicArn=jobs, AttributeName="DisplayName", AttributeValue="x"),
        lambda: producer.subscribe(TopicArn=jobs, Protocol="sqs", Endpoint=queue_arn("jobs-q")),
        lambda: producer.tag_resource(ResourceArn=jobs, Tags=[{"Key": "a", "Value": "b"}]),
        lambda: consumer.publish(TopicArn=jobs, Message="consumers do not push"),
    ]
    for call in refusals:
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e) == ("AuthorizationError", 403)
    # Reading is every role's, of the topics its key covers.
    assert consumer.get_topic_attributes(TopicArn=jobs)["Attributes"]["TopicArn"] == jobs
    listed = {t["TopicArn"] for t in producer.list_topics()["Topics"]}
    assert jobs in listed
    assert other not in listed
    with pytest.raises(ClientError) as e:
        producer.get_topic_attributes(TopicArn=other)
    assert error_of(e) == ("AuthorizationError", 403)
    assert "SNS:GetTopicAttributes" in e.value.response["Error"]["Message"]


def test_aws_cli(keyed: str, tmp_path: Path) -> None:
    pytest.importorskip("awscli")
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": ADMIN[0],
        "AWS_SECRET_ACCESS_KEY": ADMIN[1],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }

    def aws(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "awscli", "--endpoint-url", keyed, "--output", "json", "sns", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return json.loads(done.stdout) if done.stdout.strip() else None

    made = aws("create-topic", "--name", "cli-topic", "--attributes", "DisplayName=From the CLI")
    assert made == {"TopicArn": topic_arn("cli-topic")}
    shown = aws("get-topic-attributes", "--topic-arn", made["TopicArn"])
    assert shown["Attributes"]["DisplayName"] == "From the CLI"
    assert made in aws("list-topics")["Topics"]
    assert "MessageId" in aws("publish", "--topic-arn", made["TopicArn"], "--message", "hello")
    aws("delete-topic", "--topic-arn", made["TopicArn"])
    assert made not in aws("list-topics")["Topics"]
