"""The SQS door with API keys: each key with an access_key_id is an AWS access key whose secret is the
key; boto3 signs with SigV4 and the door checks the signature, then the key's role and queues.
Also the door's settings: public URL, account id and region. SQLite (no engine is what is tested)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import error_code, sqs_client
from tests.test_e2e import serving

ADMIN = ("AKIDADMIN0000000001", "admin-secret-" + "a" * 32)
CONSUMER = ("AKIDCONSUMER000001", "consumer-secret-" + "c" * 32)
JOBS_PRODUCER = ("AKIDJOBSPRODUCER01", "producer-secret-" + "p" * 32)
JOBS_CONSUMER = ("AKIDJOBSCONSUMER01", "consumer-secret-" + "j" * 32)
KEYS = [
    {"key": ADMIN[1], "role": "admin", "access_key_id": ADMIN[0]},
    {"key": CONSUMER[1], "role": "consumer", "access_key_id": CONSUMER[0]},
    {"key": JOBS_PRODUCER[1], "role": "producer", "queues": ["jobs-*"], "access_key_id": JOBS_PRODUCER[0]},
    {"key": JOBS_CONSUMER[1], "role": "consumer", "queues": ["jobs-*"], "access_key_id": JOBS_CONSUMER[0]},
]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("sqs-keys")) / "keys.db"
    with serving(f"sqlite:///{db}", env={"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}) as base:
        yield base


def client(base: str, key: tuple[str, str], **kwargs: Any) -> Any:
    return sqs_client(base, aws_access_key_id=key[0], aws_secret_access_key=key[1], **kwargs)


def test_a_good_signature_is_the_key_s_role(keyed: str) -> None:
    admin = client(keyed, ADMIN)
    url = admin.create_queue(QueueName="signed")["QueueUrl"]
    admin.send_message(QueueUrl=url, MessageBody="signed body")
    consumer = client(keyed, CONSUMER)
    [message] = consumer.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert message["Body"] == "signed body"
    consumer.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_a_bad_signature(keyed: str) -> None:
    with pytest.raises(ClientError) as e:
        client(keyed, (ADMIN[0], "not-the-secret")).list_queues()
    assert error_code(e) == "SignatureDoesNotMatch"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_an_unknown_key(keyed: str) -> None:
    with pytest.raises(ClientError) as e:
        client(keyed, ("AKIDNOBODY00000000", "whatever")).list_queues()
    assert error_code(e) == "InvalidClientTokenId"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_no_signature_at_all(keyed: str) -> None:
    answer = httpx.post(keyed + "/", data={"Action": "ListQueues"})
    assert answer.status_code == 403
    assert "<Code>MissingAuthenticationToken</Code>" in answer.text


def test_roles_and_queues(keyed: str) -> None:
    admin = client(keyed, ADMIN)
    jobs = admin.create_queue(QueueName="jobs-mail")["QueueUrl"]
    other = admin.create_queue(QueueName="reports")["QueueUrl"]
    consumer = client(keyed, CONSUMER)
    producer = client(keyed, JOBS_PRODUCER)
    refused = [
        lambda: consumer.send_message(QueueUrl=jobs, MessageBody="x"),
        lambda: consumer.create_queue(QueueName="mine"),
        lambda: consumer.delete_queue(QueueUrl=jobs),
        lambda: producer.send_message(QueueUrl=other, MessageBody="x"),
        lambda: producer.receive_message(QueueUrl=jobs),
        lambda: producer.get_queue_url(QueueName="reports"),
    ]
    for call in refused:
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "AccessDenied"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    producer.send_message(QueueUrl=jobs, MessageBody="allowed")
    assert producer.get_queue_url(QueueName="jobs-mail")["QueueUrl"] == jobs
    listed = producer.list_queues()["QueueUrls"]
    assert jobs in listed
    assert all("/jobs-" in u for u in listed)  # only the queues its globs cover
    assert consumer.get_queue_attributes(QueueUrl=jobs, AttributeNames=["All"])["Attributes"]


def test_the_rest_api_still_wants_its_bearer_key(keyed: str) -> None:
    assert httpx.get(keyed + "/queues").status_code == 401
    assert httpx.post(keyed + "/push", json={"queue": "q", "payload": 1}).status_code == 401
    ok = httpx.get(keyed + "/queues", headers={"Authorization": f"Bearer {ADMIN[1]}"})
    assert ok.status_code == 200


def test_the_door_settings(tmp_path: Path) -> None:
    env = {
        "SIMPLEQUEUE_PUBLIC_URL": "https://queues.example.com/",
        "SIMPLEQUEUE_SQS_ACCOUNT_ID": "123456789012",
        "SIMPLEQUEUE_SQS_REGION": "eu-west-1",
    }
    with serving(f"sqlite:///{tmp_path / 'door.db'}", env=env) as base:
        sqs = sqs_client(base)
        url = sqs.create_queue(QueueName="placed")["QueueUrl"]
        assert url == "https://queues.example.com/123456789012/placed"
        sqs.send_message(QueueUrl=url, MessageBody="here")  # the path decides, not the host
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        assert arn == "arn:aws:sqs:eu-west-1:123456789012:placed"
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=f"{base}/000000000000/placed", MessageBody="x")
        assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_key_limited_to_some_queues_touches_their_messages_only(keyed: str) -> None:
    admin = client(keyed, ADMIN)
    jobs = admin.create_queue(QueueName="jobs-own")["QueueUrl"]
    other = admin.create_queue(QueueName="not-jobs")["QueueUrl"]
    admin.send_message(QueueUrl=other, MessageBody="not yours")
    [message] = admin.receive_message(QueueUrl=other)["Messages"]
    handle = message["ReceiptHandle"]
    limited = client(keyed, JOBS_CONSUMER)
    for call in (
        lambda: limited.delete_message(QueueUrl=jobs, ReceiptHandle=handle),
        lambda: limited.change_message_visibility(QueueUrl=jobs, ReceiptHandle=handle, VisibilityTimeout=0),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "ReceiptHandleIsInvalid"
    batch = limited.delete_message_batch(QueueUrl=jobs, Entries=[{"Id": "m", "ReceiptHandle": handle}])
    assert [(f["Id"], f["Code"]) for f in batch["Failed"]] == [("m", "ReceiptHandleIsInvalid")]
    counts = admin.get_queue_attributes(
        QueueUrl=other, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )
    assert counts["Attributes"] == {"ApproximateNumberOfMessagesNotVisible": "1"}  # still there, still leased
    admin.delete_message(QueueUrl=other, ReceiptHandle=handle)


@pytest.mark.parametrize("target", [None, "AmazonSQS.ListQueues"])
def test_a_date_past_the_calendar_with_a_made_up_key(keyed: str, target: str | None) -> None:
    """Year 9999 west of UTC is year 10000: refused as SQS refuses a date it cannot read (400
    IncompleteSignature, in the caller's protocol) before any key is looked up, never a 500."""
    headers = {
        "Date": "Fri, 31 Dec 9999 23:59:59 -0100",
        "Authorization": "AWS4-HMAC-SHA256 "
        "Credential=AKIDMADEUP000000001/99991231/us-east-1/sqs/aws4_request, "
        f"SignedHeaders=date;host, Signature={'0' * 64}",
    }
    if target is None:
        answer = httpx.post(keyed + "/", data={"Action": "ListQueues"}, headers=headers)
        assert "<Code>IncompleteSignature</Code>" in answer.text
    else:
        headers |= {"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0"}
        answer = httpx.post(keyed + "/", content=b"{}", headers=headers)
        assert answer.json()["__type"] == "com.amazonaws.sqs#IncompleteSignature"
    assert answer.status_code == 400
    assert "Date header" in answer.text


def test_sts_get_caller_identity_names_the_signing_key(keyed: str) -> None:
    sts = boto3.client(
        "sts",
        endpoint_url=keyed,
        region_name="us-east-1",
        aws_access_key_id=ADMIN[0],
        aws_secret_access_key=ADMIN[1],
    )
    who = sts.get_caller_identity()
    assert (who["Account"], who["UserId"], who["Arn"]) == (
        "000000000000",
        "admin key #1",
        "arn:aws:iam::000000000000:user/admin-key--1",
    )
    wrong = boto3.client(
        "sts",
        endpoint_url=keyed,
        region_name="us-east-1",
        aws_access_key_id=ADMIN[0],
        aws_secret_access_key="x",
    )
    with pytest.raises(ClientError) as e:
        wrong.get_caller_identity()
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
