"""Message attributes through the SQS door with boto3 (the JSON protocol), on every engine: sent
and received with their MD5, chosen by MessageAttributeNames, refused as SQS refuses them, and seen
by both doors of one queue."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import error_code

ATTRIBUTES = {
    "trace": {"DataType": "String", "StringValue": "ünïcødé ✓ 🚀"},
    "count": {"DataType": "Number.int", "StringValue": "-1.50e+3"},
    "blob": {"DataType": "Binary.raw", "BinaryValue": bytes(range(256))},
}
# What moto 5.2.5's Message.attribute_md5 answers for ATTRIBUTES, and for "trace" alone: an
# implementation of MD5OfMessageAttributes that is not ours.
MD5_ALL = "293875ef046620aa0cda47e5e788ca90"
MD5_TRACE = "4fd2b086d94bf8255bb31c9fcc759133"


def receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **kwargs).get(
        "Messages", []
    )
    return messages


def test_send_and_receive_with_their_md5(sqs: Any, url: str) -> None:
    sent = sqs.send_message(QueueUrl=url, MessageBody="body", MessageAttributes=ATTRIBUTES)
    assert sent["MD5OfMessageAttributes"] == MD5_ALL

    [message] = receive(sqs, url, MessageAttributeNames=["All"])

    assert message["MessageAttributes"] == ATTRIBUTES
    assert message["MD5OfMessageAttributes"] == MD5_ALL


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([], set()),
        (["All"], {"trace", "count", "blob", "app.id", "app.kind"}),
        ([".*"], {"trace", "count", "blob", "app.id", "app.kind"}),
        (["*"], {"trace", "count", "blob", "app.id", "app.kind"}),
        (["trace"], {"trace"}),
        (["app.*"], {"app.id", "app.kind"}),
        (["app.*", "count", "missing"], {"app.id", "app.kind", "count"}),
        (["missing"], set()),
        (["Trace"], set()),
    ],
)
def test_receive_answers_the_names_asked_for(
    sqs: Any, url: str, names: list[str], expected: set[str]
) -> None:
    extra = {n: {"DataType": "String", "StringValue": n} for n in ("app.id", "app.kind")}
    sqs.send_message(QueueUrl=url, MessageBody="body", MessageAttributes={**ATTRIBUTES, **extra})

    [message] = receive(sqs, url, MessageAttributeNames=names, VisibilityTimeout=0)

    assert set(message.get("MessageAttributes", {})) == expected
    assert ("MD5OfMessageAttributes" in message) == bool(expected)
    if expected == {"trace"}:
        assert message["MD5OfMessageAttributes"] == MD5_TRACE


def test_a_batch_sends_each_entrys_attributes(sqs: Any, url: str) -> None:
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "with", "MessageBody": "a", "MessageAttributes": ATTRIBUTES},
            {"Id": "without", "MessageBody": "b"},
            {"Id": "bad", "MessageBody": "c", "MessageAttributes": {"AWS.x": ATTRIBUTES["trace"]}},
        ],
    )

    by_id = {s["Id"]: s for s in answer["Successful"]}
    assert by_id["with"]["MD5OfMessageAttributes"] == MD5_ALL
    assert "MD5OfMessageAttributes" not in by_id["without"]
    [failed] = answer["Failed"]
    assert (failed["Id"], failed["Code"], failed["SenderFault"]) == ("bad", "InvalidParameterValue", True)
    received = {
        m["Body"]: m.get("MessageAttributes") for m in receive(sqs, url, MessageAttributeNames=["All"])
    }
    assert received == {"a": ATTRIBUTES, "b": None}


@pytest.mark.parametrize(
    "attributes",
    [
        {f"a{n}": {"DataType": "String", "StringValue": "x"} for n in range(11)},
        {"AWS.trace": {"DataType": "String", "StringValue": "x"}},
        {"a..b": {"DataType": "String", "StringValue": "x"}},
        {"a": {"DataType": "Text", "StringValue": "x"}},
        {"a": {"DataType": "", "StringValue": "x"}},
        {"a": {"DataType": "String", "StringValue": ""}},
        {"a": {"DataType": "String"}},
        {"a": {"DataType": "Number", "StringValue": "twelve"}},
        {"a": {"DataType": "Number", "StringValue": "1" * 39}},
        {"a": {"DataType": "Binary", "StringValue": "x"}},
        {"a": {"DataType": "String", "StringValue": "bad \x01 char"}},
    ],
)
def test_send_refuses_what_sqs_refuses_and_queues_nothing(
    sqs: Any, url: str, attributes: dict[str, Any]
) -> None:
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="body", MessageAttributes=attributes)
    assert error_code(e) == "InvalidParameterValue"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert receive(sqs, url) == []


def test_system_attributes_other_than_the_trace_header_are_refused_not_dropped(sqs: Any, url: str) -> None:
    for name, value in (
        ("SenderId", {"DataType": "String", "StringValue": "someone"}),
        ("AWSTraceHeader", {"DataType": "Number", "StringValue": "5"}),
    ):
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=url, MessageBody="body", MessageSystemAttributes={name: value})
        assert error_code(e) == "InvalidParameterValue"
    assert receive(sqs, url) == []


def test_body_and_attributes_share_the_size_limit(sqs: Any, url: str) -> None:
    # The service's limit (SIMPLEQUEUE_MAX_PAYLOAD_BYTES, 1 MiB by default, as SQS's) counts the
    # body as a JSON string (its quotes too) and the attributes' names, types and values.
    body = "x" * (1_048_576 - 2 - 1_000)
    fits = {"a": {"DataType": "String", "StringValue": "v" * (1_000 - 7)}}  # 1 + 6 + 993 bytes
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=fits)
    over = {"a": {"DataType": "String", "StringValue": "v" * (1_000 - 6)}}
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=over)
    assert error_code(e) == "InvalidParameterValue"
    assert len(receive(sqs, url)) == 1


def test_one_queue_two_doors(sqs: Any, sqs_base: str, url: str, name: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="from sqs", MessageAttributes=ATTRIBUTES)
    [item] = httpx.post(f"{sqs_base}/pop", json={"queue": name}).json()["items"]
    assert item["attributes"] == {
        "blob": {"type": "Binary.raw", "value": base64.b64encode(bytes(range(256))).decode()},
        "count": {"type": "Number.int", "value": "-1.50e+3"},
        "trace": {"type": "String", "value": "ünïcødé ✓ 🚀"},
    }

    pushed = httpx.post(
        f"{sqs_base}/push", json={"queue": name, "payload": "from rest", "attributes": item["attributes"]}
    )
    assert pushed.status_code == 201, pushed.text
    [message] = receive(sqs, url, MessageAttributeNames=["All"])
    assert (message["Body"], message["MessageAttributes"]) == ("from rest", ATTRIBUTES)
    assert message["MD5OfMessageAttributes"] == MD5_ALL


def test_a_batchs_attributes_count_toward_its_size(sqs: Any, url: str) -> None:
    # Bodies of 1,040,000 bytes fit in a batch's 1,048,576; with 2 x 12,000 bytes of attributes
    # they do not.
    attributes = {"a": {"DataType": "String", "StringValue": "v" * 11_993}}  # 1 + 6 + 11,993 bytes
    entries = [
        {"Id": str(n), "MessageBody": "x" * 520_000, "MessageAttributes": attributes} for n in range(2)
    ]
    with pytest.raises(ClientError) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert error_code(e) == "AWS.SimpleQueueService.BatchRequestTooLong"
    assert receive(sqs, url) == []
