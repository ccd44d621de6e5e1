"""Message system attributes as SQS answers them, on both protocols: AWSTraceHeader kept from the
send (MD5OfMessageSystemAttributes answered) and answered on receive; SenderId; a FIFO message's
MessageDeduplicationId; MessageGroupId on a standard queue (SQS's fair queues) kept and answered.
Each only when asked for, by name or by All, and never among the message attributes."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx

from tests.sqs.both_protocols import call
from tests.sqs.conftest import ACCOUNT, sqs_client

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def queue(base: str, protocol: str, name: str, **attributes: str) -> str:
    url: str = call(base, protocol, "CreateQueue", QueueName=name, Attributes=attributes).result["QueueUrl"]
    return url


def send(base: str, protocol: str, url: str, **params: Any) -> dict[str, Any]:
    if protocol == "query" and "MessageSystemAttributes" in params:
        [(name, value)] = params.pop("MessageSystemAttributes").items()
        params |= {
            "MessageSystemAttribute.1.Name": name,
            "MessageSystemAttribute.1.Value.DataType": value["DataType"],
            "MessageSystemAttribute.1.Value.StringValue": value["StringValue"],
        }
    answer = call(base, protocol, "SendMessage", QueueUrl=url, **params)
    assert answer.status == 200, answer
    return answer.result


def receive_one(base: str, protocol: str, url: str, *names: str, visibility: int = 0) -> dict[str, Any]:
    params: dict[str, Any] = {"AttributeNames": list(names)} if names else {}
    answer = call(base, protocol, "ReceiveMessage", QueueUrl=url, VisibilityTimeout=visibility, **params)
    assert answer.status == 200, answer
    [message] = answer.result["Messages"]
    return message


def test_the_trace_header_is_kept_and_answered_when_asked(sqs_base: str, protocol: str, name: str) -> None:
    url = queue(sqs_base, protocol, name)
    header = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}
    sent = send(sqs_base, protocol, url, MessageBody="traced", MessageSystemAttributes=header)
    assert len(sent["MD5OfMessageSystemAttributes"]) == 32

    assert receive_one(sqs_base, protocol, url, "AWSTraceHeader")["Attributes"] == {"AWSTraceHeader": TRACE}
    everything = receive_one(sqs_base, protocol, url, "All")
    assert everything["Attributes"]["AWSTraceHeader"] == TRACE
    assert everything["Attributes"]["SenderId"] == ACCOUNT  # no keys: the account, as SQS names its root
    plain = receive_one(sqs_base, protocol, url)
    assert "Attributes" not in plain
    assert "MessageAttributes" not in plain  # a system attribute is no message attribute


def test_boto3_sends_a_trace_header_and_checks_its_md5(sqs_base: str, name: str) -> None:
    sqs = sqs_client(sqs_base)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    header = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="x", MessageSystemAttributes=header)
    # As SQS computes it: the MD5OfMessageAttributes encoding over the system attributes.
    name_, type_, value = b"AWSTraceHeader", b"String", TRACE.encode()
    encoded = b"".join(len(p).to_bytes(4, "big") + p for p in (name_, type_)) + b"\x01"
    encoded += len(value).to_bytes(4, "big") + value
    assert sent["MD5OfMessageSystemAttributes"] == hashlib.md5(encoded).hexdigest()
    [message] = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["AWSTraceHeader"])["Messages"]
    assert message["Attributes"] == {"AWSTraceHeader": TRACE}


def test_a_fifo_message_answers_its_deduplication_id(sqs_base: str, protocol: str, name: str) -> None:
    url = queue(sqs_base, protocol, f"{name}.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    send(sqs_base, protocol, url, MessageBody="given", MessageGroupId="g", MessageDeduplicationId="mine-1")
    first = receive_one(sqs_base, protocol, url, "MessageDeduplicationId", "MessageGroupId", visibility=30)
    assert first["Attributes"] == {"MessageDeduplicationId": "mine-1", "MessageGroupId": "g"}
    call(sqs_base, protocol, "DeleteMessage", QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])

    send(sqs_base, protocol, url, MessageBody="by content", MessageGroupId="g")
    second = receive_one(sqs_base, protocol, url, "MessageDeduplicationId")
    assert second["Attributes"] == {"MessageDeduplicationId": hashlib.sha256(b"by content").hexdigest()}


def test_a_standard_queue_keeps_a_message_group_id(sqs_base: str, protocol: str, name: str) -> None:
    url = queue(sqs_base, protocol, name)
    send(sqs_base, protocol, url, MessageBody="fair", MessageGroupId="tenant-7")
    send(sqs_base, protocol, url, MessageBody="fair too", MessageGroupId="tenant-7")
    both = call(
        sqs_base, protocol, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).result["Messages"]
    # No order among a standard queue's group: both are handed out at once.
    assert sorted(m["Body"] for m in both) == ["fair", "fair too"]
    assert {m["Attributes"]["MessageGroupId"] for m in both} == {"tenant-7"}


def test_the_http_api_answers_the_message_attributes_alone(sqs_base: str, name: str) -> None:
    sqs = sqs_client(sqs_base)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    header = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}
    own = {"kind": {"DataType": "String", "StringValue": "report"}}
    sent = sqs.send_message(
        QueueUrl=url, MessageBody="x", MessageAttributes=own, MessageSystemAttributes=header
    )
    item = httpx.get(f"{sqs_base}/items/{sent['MessageId']}").json()
    assert item["attributes"] == {"kind": {"type": "String", "value": "report"}}  # pushable as they are
    popped = httpx.post(f"{sqs_base}/pop", json={"queue": name}).json()["items"]
    assert [p["attributes"] for p in popped] == [item["attributes"]]
    bare = sqs.send_message(QueueUrl=url, MessageBody="no attributes")
    assert httpx.get(f"{sqs_base}/items/{bare['MessageId']}").json()["attributes"] is None
