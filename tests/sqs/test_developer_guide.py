"""A boto3 program as AWS's developer guide and boto3's SQS guide write it (the resource API:
queues by name, messages as objects, batches, attributes, dead-letter queues), run unchanged but
for the endpoint against the service, on every engine."""

from __future__ import annotations

import json
from typing import Any

import boto3

from tests.sqs.conftest import DUMMY_CREDENTIALS


def test_the_boto3_guides_program_runs_unchanged(sqs_base: str, name: str) -> None:
    sqs: Any = boto3.resource("sqs", endpoint_url=sqs_base, region_name="us-east-1", **DUMMY_CREDENTIALS)

    # Creating a queue, and finding it by name.
    queue = sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "0"})
    assert queue.attributes.get("DelaySeconds") == "0"
    queue = sqs.get_queue_by_name(QueueName=name)
    assert queue.url.endswith(f"/{name}")
    assert any(q.url == queue.url for q in sqs.queues.filter(QueueNamePrefix=name))

    # Sending messages: one, with attributes, then a batch.
    response = queue.send_message(
        MessageBody="boto3",
        MessageAttributes={"Author": {"StringValue": "Daniel", "DataType": "String"}},
    )
    assert response.get("MD5OfMessageBody") == "6686853da3491a56c98917cc5c4ddea2"  # MD5 of "boto3"
    response = queue.send_messages(
        Entries=[
            {"Id": "1", "MessageBody": "world"},
            {
                "Id": "2",
                "MessageBody": "boto3",
                "MessageAttributes": {"Author": {"StringValue": "Daniel", "DataType": "String"}},
            },
        ]
    )
    assert not response.get("Failed")  # the guide prints it: none failed
    assert sorted(e["Id"] for e in response["Successful"]) == ["1", "2"]

    # Processing messages, as the guide does: read the attribute, print, delete.
    seen = []
    for _ in range(10):  # bounded: the guide loops until the queue is drained
        messages = queue.receive_messages(
            MessageAttributeNames=["Author"], MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        for message in messages:
            author = (message.message_attributes or {}).get("Author", {}).get("StringValue")
            seen.append((message.body, author))
            message.delete()
        if len(seen) == 3:
            break
    assert sorted(seen, key=str) == sorted(
        [("boto3", "Daniel"), ("world", None), ("boto3", "Daniel")], key=str
    )

    # A dead-letter queue, configured as the developer guide shows.
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")
    redrive = {"deadLetterTargetArn": dlq.attributes["QueueArn"], "maxReceiveCount": "10"}
    queue.set_attributes(Attributes={"RedrivePolicy": json.dumps(redrive)})
    queue.reload()
    assert json.loads(queue.attributes["RedrivePolicy"])["maxReceiveCount"] == 10
    assert [q.url for q in dlq.dead_letter_source_queues.all()] == [queue.url]

    # Visibility and purge.
    queue.send_message(MessageBody="later")
    [message] = queue.receive_messages(VisibilityTimeout=60)
    message.change_visibility(VisibilityTimeout=0)
    queue.purge()
    assert queue.receive_messages(WaitTimeSeconds=0) == []
    queue.delete()
    dlq.delete()
