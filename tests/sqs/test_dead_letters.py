"""Dead-letter queues through the SQS door with boto3 (the JSON protocol), on every engine: a
RedrivePolicy set by CreateQueue or SetQueueAttributes, a message received maxReceiveCount times
moving to its target with its MessageId, body and attributes, the policies SQS refuses, and
ListDeadLetterSourceQueues."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import ACCOUNT, error_code
from tests.sqs.test_message_attributes import ATTRIBUTES, MD5_ALL


def arn(name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:sqs:us-east-1:{account}:{name}"


def policy(target: str, count: int | str = 2) -> str:
    return json.dumps({"deadLetterTargetArn": arn(target), "maxReceiveCount": count})


def receive_once(sqs: Any, url: str) -> dict[str, Any]:
    [message] = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
    )["Messages"]
    return message  # type: ignore[no-any-return]


def test_a_message_received_max_receive_count_times_moves_to_the_target(sqs: Any, name: str) -> None:
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy(f"{name}-dlq", 2)})["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison ✓", MessageAttributes=ATTRIBUTES)

    for count in (1, 2):
        message = receive_once(sqs, url)
        assert (message["MessageId"], message["Attributes"]["ApproximateReceiveCount"]) == (
            sent["MessageId"],
            str(count),
        )
        # Back at once, as a consumer that gave up on it: no sleeping for a visibility timeout.
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )

    moved = receive_once(sqs, dlq)
    assert (moved["MessageId"], moved["Body"]) == (sent["MessageId"], "poison ✓")
    assert (moved["MessageAttributes"], moved["MD5OfMessageAttributes"]) == (ATTRIBUTES, MD5_ALL)
    assert moved["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=moved["ReceiptHandle"])
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesNotVisible"]) == (
        "0",
        "0",
    )


def test_set_queue_attributes_sets_answers_and_removes_the_policy(sqs: Any, sqs_base: str, name: str) -> None:
    sqs.create_queue(QueueName=f"{name}-dlq")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    given = policy(f"{name}-dlq", "5")

    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": given})

    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]
    # As SQS answers it: compact JSON, maxReceiveCount a number (it was given as the string "5").
    target = arn(f"{name}-dlq")
    assert attributes == {"RedrivePolicy": f'{{"deadLetterTargetArn":"{target}","maxReceiveCount":5}}'}
    assert httpx.get(f"{sqs_base}/queues/{name}").json()["settings"]["max_attempts"] == 5
    # The same attributes again: CreateQueue answers the queue's URL.
    assert sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": given})["QueueUrl"] == url

    for removal in ("", "{}"):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": given})
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": removal})
        assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
        assert httpx.get(f"{sqs_base}/queues/{name}").json()["settings"]["max_attempts"] == 1000
        assert sqs.list_dead_letter_source_queues(QueueUrl=f"{url}-dlq")["queueUrls"] == []


def test_without_a_policy_a_message_is_received_again_and_again(sqs: Any, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="x")
    for count in (1, 2, 3):
        message = receive_once(sqs, url)
        assert message["Attributes"]["ApproximateReceiveCount"] == str(count)
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )


@pytest.mark.parametrize(
    "given",
    [
        lambda name: policy(f"no-{name}"),  # no such queue
        lambda name: json.dumps(
            {"deadLetterTargetArn": arn(f"{name}-dlq", "123456789012"), "maxReceiveCount": 2}
        ),
        lambda name: policy(f"{name}-dlq", 0),
        lambda name: policy(f"{name}-dlq", 1001),
        lambda name: policy(f"{name}-dlq", "many"),
        lambda name: json.dumps({"deadLetterTargetArn": arn(f"{name}-dlq")}),
        lambda name: json.dumps({"maxReceiveCount": 2}),
        lambda name: json.dumps({"deadLetterTargetArn": arn(f"{name}-dlq"), "maxReceiveCount": 2, "x": 1}),
        lambda name: "not json",
        lambda name: policy(name),  # the queue itself
        lambda name: policy(f"{name}-dlq.fifo"),  # a FIFO target for a standard queue
    ],
)
def test_policies_sqs_refuses(sqs: Any, name: str, given: Any) -> None:
    sqs.create_queue(QueueName=f"{name}-dlq")
    sqs.create_queue(QueueName=f"{name}-dlq.fifo", Attributes={"FifoQueue": "true"})
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": given(name)})
    assert error_code(e) == "InvalidParameterValue"
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
    if given(name) == policy(name):
        return  # another queue may name this one
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName=f"{name}-new", Attributes={"RedrivePolicy": given(name)})
    assert error_code(e) == "InvalidParameterValue"
    with pytest.raises(ClientError) as e:
        sqs.get_queue_url(QueueName=f"{name}-new")
    assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_fifo_queue_needs_a_fifo_target(sqs: Any, name: str) -> None:
    sqs.create_queue(QueueName=f"{name}-dlq")
    sqs.create_queue(QueueName=f"{name}-dlq.fifo", Attributes={"FifoQueue": "true"})
    fifo = {"FifoQueue": "true"}
    with pytest.raises(ClientError) as e:
        sqs.create_queue(
            QueueName=f"{name}.fifo", Attributes={**fifo, "RedrivePolicy": policy(f"{name}-dlq")}
        )
    assert error_code(e) == "InvalidParameterValue"
    good = {**fifo, "RedrivePolicy": policy(f"{name}-dlq.fifo")}
    assert sqs.create_queue(QueueName=f"{name}.fifo", Attributes=good)["QueueUrl"].endswith(f"{name}.fifo")


def test_the_targets_redrive_allow_policy_decides_who_may_use_it(sqs: Any, name: str) -> None:
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    refusing = [
        {"redrivePermission": "denyAll"},
        {"redrivePermission": "byQueue", "sourceQueueArns": [arn(f"{name}-other")]},
    ]
    for allow in refusing:
        sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": json.dumps(allow)})
        with pytest.raises(ClientError) as e:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy(f"{name}-dlq")})
        assert error_code(e) == "InvalidParameterValue"
    allowing = {"redrivePermission": "byQueue", "sourceQueueArns": [arn(name)]}
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": json.dumps(allowing)})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy(f"{name}-dlq")})


def test_list_dead_letter_source_queues(sqs: Any, name: str) -> None:
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    sources = [
        sqs.create_queue(QueueName=f"{name}-{k}", Attributes={"RedrivePolicy": policy(f"{name}-dlq")})[
            "QueueUrl"
        ]
        for k in "abc"
    ]
    sqs.create_queue(QueueName=f"{name}-other")

    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == sources
    first = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2)
    assert first["queueUrls"] == sources[:2]
    rest = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2, NextToken=first["NextToken"])
    assert (rest["queueUrls"], "NextToken" in rest) == (sources[2:], False)
    assert sqs.list_dead_letter_source_queues(QueueUrl=sources[0])["queueUrls"] == []
    with pytest.raises(ClientError) as e:
        sqs.list_dead_letter_source_queues(QueueUrl=f"{dlq}-gone")
    assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_deleted_target_leaves_dead_messages_in_place(sqs: Any, sqs_base: str, name: str) -> None:
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy(f"{name}-dlq", 1)})["QueueUrl"]
    sqs.delete_queue(QueueUrl=dlq)
    sent = sqs.send_message(QueueUrl=url, MessageBody="x")
    message = receive_once(sqs, url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)

    # The sweep (every 0.2 s here) records it dead in its own queue: the REST API's dead letters.
    for _ in range(100):
        dead = httpx.get(f"{sqs_base}/queues/{name}/dead").json()["items"]
        if dead:
            break
        time.sleep(0.1)
    assert [item["id"] for item in dead] == [sent["MessageId"]]
