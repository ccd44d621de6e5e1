"""Topics through the SNS door, delivered to queues read through the SQS door: one service, boto3's
`sns` and `sqs` clients unchanged, on every engine. The envelope is SNS's and verifies with the
certificate at its SigningCertURL; raw delivery hands the message on; filter policies choose."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from simplequeue.domain.sns_signing import verify

from tests.sns.conftest import queue_arn


def _queue(sqs: Any, name: str, **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url


def _receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
    ).get("Messages", [])
    return messages


def test_a_publish_reaches_a_raw_queue_and_a_filtered_one(sns: Any, sqs: Any, name: str) -> None:
    arn = sns.create_topic(Name=name)["TopicArn"]
    raw_url = _queue(sqs, f"{name}-raw")
    kept_url = _queue(sqs, f"{name}-kept")
    raw = sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn(f"{name}-raw"),
        Attributes={"RawMessageDelivery": "true"},
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    filtered = sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn(f"{name}-kept"),
        Attributes={"FilterPolicy": json.dumps({"colour": ["red"]})},
    )["SubscriptionArn"]
    assert raw.startswith(arn + ":")
    assert filtered.startswith(arn + ":")
    assert raw != filtered

    attributes = {
        "colour": {"DataType": "String", "StringValue": "red"},
        "size": {"DataType": "Number", "StringValue": "3"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }
    message_id = sns.publish(TopicArn=arn, Message="hello", Subject="greeting", MessageAttributes=attributes)[
        "MessageId"
    ]
    sns.publish(
        TopicArn=arn,
        Message="blue one",
        MessageAttributes={"colour": {"DataType": "String", "StringValue": "blue"}},
    )

    # Raw: the message itself, its attributes as SQS message attributes; both publishes.
    raw_messages = _receive(sqs, raw_url)
    assert sorted(m["Body"] for m in raw_messages) == ["blue one", "hello"]
    [hello] = [m for m in raw_messages if m["Body"] == "hello"]
    assert hello["MessageAttributes"]["colour"] == {"StringValue": "red", "DataType": "String"}
    assert hello["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\x01"

    # Filtered: only the red one, in SNS's envelope, signed.
    [kept] = _receive(sqs, kept_url)
    envelope = json.loads(kept["Body"])
    assert envelope["Type"] == "Notification"
    assert envelope["MessageId"] == message_id
    assert envelope["TopicArn"] == arn
    assert envelope["Subject"] == "greeting"
    assert envelope["Message"] == "hello"
    assert envelope["MessageAttributes"]["colour"] == {"Type": "String", "Value": "red"}
    assert envelope["MessageAttributes"]["blob"] == {
        "Type": "Binary",
        "Value": base64.b64encode(b"\x00\x01").decode(),
    }
    assert envelope["UnsubscribeURL"].endswith(f"/?Action=Unsubscribe&SubscriptionArn={filtered}")
    certificate = httpx.get(envelope["SigningCertURL"]).content
    assert verify(envelope, certificate)
    assert not verify({**envelope, "Message": "hellO"}, certificate)

    # The UnsubscribeURL (no keys here) unsubscribes: the next publish reaches the raw queue only.
    assert httpx.get(envelope["UnsubscribeURL"]).status_code == 200
    sns.publish(
        TopicArn=arn,
        Message="after",
        MessageAttributes={"colour": {"DataType": "String", "StringValue": "red"}},
    )
    assert _receive(sqs, kept_url) == []
    assert [m["Body"] for m in _receive(sqs, raw_url)] == ["after"]


def test_message_structure_json_delivers_the_sqs_message_else_the_default(
    sns: Any, sqs: Any, name: str
) -> None:
    arn = sns.create_topic(Name=name)["TopicArn"]
    url = _queue(sqs, name)
    sns.subscribe(
        TopicArn=arn, Protocol="sqs", Endpoint=queue_arn(name), Attributes={"RawMessageDelivery": "true"}
    )
    sns.publish(TopicArn=arn, MessageStructure="json", Message=json.dumps({"default": "d", "email": "e"}))
    sns.publish(
        TopicArn=arn, MessageStructure="json", Message=json.dumps({"default": "d", "sqs": "for queues"})
    )
    sns.publish(TargetArn=arn, Message="by TargetArn")
    assert sorted(m["Body"] for m in _receive(sqs, url)) == ["by TargetArn", "d", "for queues"]


def test_a_fifo_topic_to_a_fifo_queue(sns: Any, sqs: Any, name: str) -> None:
    arn = sns.create_topic(Name=f"{name}.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["FifoTopic"] == "true"
    assert attributes["ContentBasedDeduplication"] == "false"
    url = _queue(sqs, f"{name}.fifo", FifoQueue="true")
    sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn(f"{name}.fifo"),
        Attributes={"RawMessageDelivery": "true"},
    )
    first = sns.publish(TopicArn=arn, Message="one", MessageGroupId="g", MessageDeduplicationId="d1")
    second = sns.publish(TopicArn=arn, Message="two", MessageGroupId="g", MessageDeduplicationId="d2")
    assert len(first["SequenceNumber"]) == 20
    assert first["SequenceNumber"] < second["SequenceNumber"]
    batch = sns.publish_batch(
        TopicArn=arn,
        PublishBatchRequestEntries=[
            {"Id": "three", "Message": "three", "MessageGroupId": "g", "MessageDeduplicationId": "d3"},
            {"Id": "four", "Message": "four", "MessageGroupId": "g", "MessageDeduplicationId": "d4"},
        ],
    )
    assert [s["Id"] for s in batch["Successful"]] == ["three", "four"]
    assert batch["Failed"] == []
    assert all(len(s["SequenceNumber"]) == 20 for s in batch["Successful"])
    bodies = []
    for _ in range(4):
        [message] = sqs.receive_message(QueueUrl=url, AttributeNames=["MessageGroupId"])["Messages"]
        assert message["Attributes"]["MessageGroupId"] == "g"
        bodies.append(message["Body"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert bodies == ["one", "two", "three", "four"]


def test_publish_batch_with_a_failing_entry(sns: Any, sqs: Any, name: str) -> None:
    arn = sns.create_topic(Name=name)["TopicArn"]
    url = _queue(sqs, name)
    sns.subscribe(
        TopicArn=arn, Protocol="sqs", Endpoint=queue_arn(name), Attributes={"RawMessageDelivery": "true"}
    )
    answer = sns.publish_batch(
        TopicArn=arn,
        PublishBatchRequestEntries=[
            {"Id": "good-1", "Message": "one"},
            {"Id": "bad", "Message": "two", "Subject": "line\nbreak"},
            {"Id": "group-on-standard", "Message": "three", "MessageGroupId": "g"},
            {
                "Id": "good-2",
                "Message": "four",
                "MessageAttributes": {"a": {"DataType": "String", "StringValue": "x"}},
            },
        ],
    )
    assert [s["Id"] for s in answer["Successful"]] == ["good-1", "good-2"]
    assert all("SequenceNumber" not in s for s in answer["Successful"])
    failed = {f["Id"]: f for f in answer["Failed"]}
    assert set(failed) == {"bad", "group-on-standard"}
    assert failed["bad"]["Code"] == "InvalidParameter"
    assert failed["bad"]["SenderFault"] is True
    assert "MessageGroupId" in failed["group-on-standard"]["Message"]
    assert sorted(m["Body"] for m in _receive(sqs, url)) == ["four", "one"]
