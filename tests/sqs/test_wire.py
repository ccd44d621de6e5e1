"""The SQS door's wire: the query protocol's forms and XML (as /work/shared/sqs/wire-examples.txt
shows them), the exact shape of errors in both protocols, and aws-cli from PyPI, on every engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.sqs.conftest import ACCOUNT

NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
JSON_10 = "application/x-amz-json-1.0"


def tag(name: str) -> str:
    return "{" + NS["sqs"] + "}" + name


def query(base: str, body: str, path: str = "/") -> httpx.Response:
    return httpx.post(base + path, content=body.encode(), headers=FORM, timeout=30)


def xml(answer: httpx.Response) -> ET.Element:
    assert answer.headers["content-type"].startswith("text/xml"), answer.text
    return ET.fromstring(answer.content)


def test_the_query_protocol_as_botocore_1_31_sends_it(sqs_base: str, name: str) -> None:
    created = query(sqs_base, f"Action=CreateQueue&Version=2012-11-05&QueueName={name}")
    assert created.status_code == 200
    root = xml(created)
    assert root.tag == tag("CreateQueueResponse")
    url = root.findtext("sqs:CreateQueueResult/sqs:QueueUrl", namespaces=NS)
    assert url == f"{sqs_base}/{ACCOUNT}/{name}"
    assert (
        root.findtext("sqs:ResponseMetadata/sqs:RequestId", namespaces=NS)
        == created.headers["x-amzn-requestid"]
    )
    q = quote(url, safe="")

    sent = xml(query(sqs_base, f"Action=SendMessage&Version=2012-11-05&QueueUrl={q}&MessageBody=hello"))
    assert sent.findtext("sqs:SendMessageResult/sqs:MD5OfMessageBody", namespaces=NS) == (
        "5d41402abc4b2a76b9719d911017c592"
    )
    message_id = sent.findtext("sqs:SendMessageResult/sqs:MessageId", namespaces=NS)

    received = xml(
        query(
            sqs_base,
            f"Action=ReceiveMessage&Version=2012-11-05&QueueUrl={q}&MessageAttributeName.1=All&AttributeName.1=All",
        )
    )
    [message] = received.findall("sqs:ReceiveMessageResult/sqs:Message", NS)
    assert message.findtext("sqs:MessageId", namespaces=NS) == message_id
    assert message.findtext("sqs:Body", namespaces=NS) == "hello"
    attributes = {
        a.findtext("sqs:Name", namespaces=NS): a.findtext("sqs:Value", namespaces=NS)
        for a in message.findall("sqs:Attribute", NS)
    }
    assert attributes["ApproximateReceiveCount"] == "1"
    handle = message.findtext("sqs:ReceiptHandle", namespaces=NS)
    assert handle

    deleted = query(
        sqs_base,
        f"Action=DeleteMessage&Version=2012-11-05&QueueUrl={q}&ReceiptHandle={quote(handle, safe='')}",
    )
    assert deleted.status_code == 200
    root = xml(deleted)
    assert root.tag == tag("DeleteMessageResponse")
    assert [child.tag.split("}")[1] for child in root] == ["ResponseMetadata"]


def test_query_errors_are_an_error_response(sqs_base: str) -> None:
    answer = query(sqs_base, "Action=GetQueueUrl&Version=2012-11-05&QueueName=nope")
    assert answer.status_code == 400
    root = xml(answer)
    assert root.tag == tag("ErrorResponse")
    assert root.findtext("sqs:Error/sqs:Type", namespaces=NS) == "Sender"
    assert root.findtext("sqs:Error/sqs:Code", namespaces=NS) == "AWS.SimpleQueueService.NonExistentQueue"
    assert root.findtext("sqs:Error/sqs:Message", namespaces=NS)
    assert root.findtext("sqs:RequestId", namespaces=NS) == answer.headers["x-amzn-requestid"]
    unknown = xml(query(sqs_base, "Action=FlyAway&Version=2012-11-05"))
    assert (
        unknown.findtext("sqs:Error/sqs:Code", namespaces=NS) == "AWS.SimpleQueueService.UnsupportedOperation"
    )
    assert "FlyAway" in (unknown.findtext("sqs:Error/sqs:Message", namespaces=NS) or "")
    no_action = xml(query(sqs_base, "Version=2012-11-05"))
    assert no_action.findtext("sqs:Error/sqs:Code", namespaces=NS) == "MissingParameter"


def test_the_query_protocol_posted_to_the_queue_url(sqs_base: str, url: str, name: str) -> None:
    path = f"/{ACCOUNT}/{name}"
    batch = (
        "Action=SendMessageBatch&Version=2012-11-05"
        "&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=one"
        "&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=two%0D%0A"
    )
    sent = xml(query(sqs_base, batch, path))
    assert [e.findtext("sqs:Id", namespaces=NS) for e in sent.iter(tag("SendMessageBatchResultEntry"))] == [
        "a",
        "b",
    ]
    received = xml(query(sqs_base, "Action=ReceiveMessage&MaxNumberOfMessages=10&WaitTimeSeconds=1", path))
    bodies = sorted(m.findtext("sqs:Body", namespaces=NS) or "" for m in received.iter(tag("Message")))
    assert bodies == ["one", "two\r\n"]  # a CR arrives as itself
    attributes = xml(query(sqs_base, "Action=GetQueueAttributes&AttributeName.1=VisibilityTimeout", path))
    [attribute] = attributes.iter(tag("Attribute"))
    assert attribute.findtext("sqs:Value", namespaces=NS) == "30"
    created = xml(
        query(
            sqs_base,
            f"Action=CreateQueue&QueueName={name}-2&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=99",
        )
    )
    assert created.findtext("sqs:CreateQueueResult/sqs:QueueUrl", namespaces=NS)
    assert httpx.get(f"{sqs_base}/queues/{name}-2").json()["settings"]["lease_seconds"] == 99
    other = xml(query(sqs_base, "Action=ReceiveMessage", f"/123456789012/{name}"))
    assert other.findtext("sqs:Error/sqs:Code", namespaces=NS) == "AWS.SimpleQueueService.NonExistentQueue"


def json_call(base: str, action: str, body: bytes | str | Iterator[bytes]) -> httpx.Response:
    headers = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": JSON_10}
    return httpx.post(base + "/", content=body, headers=headers, timeout=30)


def test_json_errors_exactly(sqs_base: str) -> None:
    answer = json_call(sqs_base, "GetQueueUrl", '{"QueueName": "nope"}')
    assert answer.status_code == 400
    assert answer.headers["content-type"] == JSON_10
    assert answer.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert answer.headers["x-amzn-errortype"] == "com.amazonaws.sqs#QueueDoesNotExist"
    assert answer.headers["x-amzn-requestid"]
    assert answer.json() == {
        "__type": "com.amazonaws.sqs#QueueDoesNotExist",
        "message": answer.json()["message"],
    }
    # The JSON names of the errors common to AWS's services are AWS's (LocalStack's AWS-validated
    # snapshots record them as botocore's QueryErrorCode): not the query protocol's codes.
    invalid = "com.amazon.coral.service#InvalidParameterValueException"
    cases = [
        (
            "Nonsense",
            "{}",
            "AWS.SimpleQueueService.UnsupportedOperation;Sender",
            "com.amazonaws.sqs#UnsupportedOperation",
        ),
        ("ListQueues", "{not json", "InvalidParameterValue;Sender", invalid),
        ("ListQueues", "[1]", "InvalidParameterValue;Sender", invalid),
        (
            "SendMessage",
            '{"MessageBody": "x"}',
            "MissingParameter;Sender",
            "com.amazon.coral.service#MissingRequiredParameterException",
        ),
        ("ListQueues", '{"MaxResults": "many"}', "InvalidParameterValue;Sender", invalid),
        (
            "ReceiveMessage",
            '{"QueueUrl": "q", "MaxNumberOfMessages": 11}',
            "InvalidParameterValue;Sender",
            invalid,
        ),
        (
            "SendMessageBatch",
            '{"QueueUrl": "q", "Entries": []}',
            "AWS.SimpleQueueService.EmptyBatchRequest;Sender",
            "com.amazonaws.sqs#EmptyBatchRequest",
        ),
    ]
    for action, body, header, type_ in cases:
        answer = json_call(sqs_base, action, body)
        assert (answer.status_code, answer.headers["x-amzn-query-error"]) == (400, header), (action, body)
        assert answer.json()["__type"] == answer.headers["x-amzn-errortype"] == type_, (action, body)


TEN_MIB = 10 * 1024 * 1024  # past SIMPLEQUEUE_MAX_REQUEST_BYTES (8 MiB by default)


def _ten_mib_in_chunks(head: bytes) -> Iterator[bytes]:
    yield head
    for _ in range(10):
        yield b"x" * (1024 * 1024)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_request_too_large_is_refused_in_the_caller_s_protocol(sqs_base: str, chunked: bool) -> None:
    """413 (SQS's front answers a bare 413 Request Entity Too Large) with SQS's error shape, not the
    REST API's envelope: declared too large up front, or found so while read."""
    json_head, form_head = b'{"QueueUrl": "q", "MessageBody": "', b"Action=SendMessage&MessageBody="
    json_body: bytes | Iterator[bytes] = (
        _ten_mib_in_chunks(json_head) if chunked else json_head + b"x" * TEN_MIB
    )
    form_body: bytes | Iterator[bytes] = (
        _ten_mib_in_chunks(form_head) if chunked else form_head + b"x" * TEN_MIB
    )
    answer = json_call(sqs_base, "SendMessage", json_body)
    assert answer.status_code == 413
    assert answer.headers["content-type"] == JSON_10
    assert answer.headers["x-amzn-query-error"] == "RequestEntityTooLarge;Sender"
    assert answer.json()["__type"] == "com.amazonaws.sqs#RequestEntityTooLarge"
    assert "bytes" in answer.json()["message"]
    answer = httpx.post(sqs_base + "/", content=form_body, headers=FORM, timeout=30)
    assert answer.status_code == 413
    root = xml(answer)
    assert root.tag == tag("ErrorResponse")
    assert root.findtext("sqs:Error/sqs:Code", namespaces=NS) == "RequestEntityTooLarge"
    assert root.findtext("sqs:RequestId", namespaces=NS) == answer.headers["x-amzn-requestid"]
    rest = httpx.post(
        sqs_base + "/push", content=json_head + b"x" * TEN_MIB, headers={"content-type": "application/json"}
    )
    assert (rest.status_code, rest.json()["error"]) == (413, "PayloadTooLarge")  # the REST API's, as it was


def test_the_rest_api_is_as_it_was(sqs_base: str) -> None:
    assert httpx.get(sqs_base + "/").headers["Location"] == "/ui/"  # a person's way to the dashboard
    assert httpx.post(sqs_base + "/queues/x").status_code == 405
    spec = httpx.get(sqs_base + "/openapi.json").json()
    assert "/" not in spec["paths"]
    assert not any(p.startswith("/{account") for p in spec["paths"])


def aws(base: str, *args: str) -> Any:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "AKIDANYTHING",
        "AWS_SECRET_ACCESS_KEY": "anything",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    done = subprocess.run(
        [sys.executable, "-m", "awscli", "--endpoint-url", base, "--output", "json", "sqs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def test_aws_cli(sqs_base: str, name: str) -> None:
    pytest.importorskip("awscli")
    url = aws(sqs_base, "create-queue", "--queue-name", name)["QueueUrl"]
    assert url == f"{sqs_base}/{ACCOUNT}/{name}"
    sent = aws(sqs_base, "send-message", "--queue-url", url, "--message-body", "from the cli")
    received = aws(sqs_base, "receive-message", "--queue-url", url, "--wait-time-seconds", "1")
    [message] = received["Messages"]
    assert (message["MessageId"], message["Body"]) == (sent["MessageId"], "from the cli")
    aws(sqs_base, "delete-message", "--queue-url", url, "--receipt-handle", message["ReceiptHandle"])
    assert aws(sqs_base, "receive-message", "--queue-url", url) is None


def test_the_boto3_example_of_the_docs(sqs_base: str, capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "sqs.md").read_text(encoding="utf-8")
    example = page.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(example.replace("http://127.0.0.1:8000", sqs_base), "docs/sqs.md", "exec"), {})
    assert '{"to": "ada@example.com"}' in capsys.readouterr().out


def test_metrics_name_each_action(sqs: Any, sqs_base: str, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="counted")
    json_call(sqs_base, "NoSuchAction", "{}")
    metrics = httpx.get(sqs_base + "/metrics").text
    assert 'route="/ (SQS SendMessage)",status="200"' in metrics
    assert 'route="/ (SQS)",status="400"' in metrics  # an action it does not know: no label of its own
