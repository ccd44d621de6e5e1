"""The queue attributes that SQS calls inherit, through boto3 on every engine: DelaySeconds (a send
that names none waits the queue's; a FIFO queue's only delay), ReceiveMessageWaitTimeSeconds (a
receive that names no wait long-polls the queue's) and MaximumMessageSize (body and attributes)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import error_code

LONGEST_DELAY = "900"


def counts(sqs: Any, url: str) -> tuple[str, str]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return got["ApproximateNumberOfMessages"], got["ApproximateNumberOfMessagesDelayed"]


def test_a_send_without_a_delay_waits_the_queues(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": LONGEST_DELAY})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="waits")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "waits too"}])
    sqs.send_message(QueueUrl=url, MessageBody="now", DelaySeconds=0)
    assert counts(sqs, url) == ("1", "2")
    [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert message["Body"] == "now"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    sqs.send_message(QueueUrl=url, MessageBody="at once")
    assert counts(sqs, url) == ("1", "2")


def test_a_fifo_queues_delay_is_the_queues(sqs: Any, name: str) -> None:
    url = sqs.create_queue(
        QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", "DelaySeconds": LONGEST_DELAY}
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="waits", MessageGroupId="g", MessageDeduplicationId="d1")
    assert counts(sqs, url) == ("0", "1")


def test_a_receive_without_a_wait_long_polls_the_queues(sqs: Any, sqs_base: str, name: str) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"ReceiveMessageWaitTimeSeconds": "20"})["QueueUrl"]
    got: list[Any] = []
    receiver = threading.Thread(target=lambda: got.append(sqs.receive_message(QueueUrl=url)))
    receiver.start()
    receiver.join(1.0)
    assert receiver.is_alive(), "an empty queue's receive answered at once: it did not wait the queue's 20 s"
    sqs.send_message(QueueUrl=url, MessageBody="woke it")
    receiver.join(25)
    assert [m["Body"] for m in got[0]["Messages"]] == ["woke it"]
    # A receive that names its wait keeps it: WaitTimeSeconds=0 answers at once, empty.
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_the_queues_largest_message_counts_body_and_attributes(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x" * 1024)
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="é" * 513)  # 1,026 bytes of UTF-8
    assert error_code(e) == "InvalidParameterValue"
    attribute = {"k": {"DataType": "String", "StringValue": "v"}}  # 1 + 6 + 1 bytes
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1020, MessageAttributes=attribute)
    assert error_code(e) == "InvalidParameterValue"
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "fits", "MessageBody": "x" * 1000}, {"Id": "big", "MessageBody": "x" * 1025}],
    )
    assert [s["Id"] for s in answer["Successful"]] == ["fits"]
    assert [(f["Id"], f["Code"]) for f in answer["Failed"]] == [("big", "InvalidParameterValue")]
    assert counts(sqs, url) == ("2", "0")


def test_the_largest_message_is_bounded_by_the_services(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    limit = int(got["MaximumMessageSize"])  # the service's SIMPLEQUEUE_MAX_PAYLOAD_BYTES
    for bad in ("1023", str(limit + 1)):
        with pytest.raises(ClientError) as e:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": bad})
        assert error_code(e) == "InvalidAttributeValue"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": str(limit)})
