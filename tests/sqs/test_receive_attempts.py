"""ReceiveRequestAttemptId on FIFO queues: a receive retried with the same attempt id within 5
minutes answers the same messages and receipt handles (their visibility started again), as SQS
does, so that a lost answer does not leave a group in flight for nobody; once a message of it was
deleted, or after 5 minutes, the retry receives anew."""

from __future__ import annotations

from typing import Any

import httpx

from tests.engines import FakeClock
from tests.http import Client
from tests.sqs.both_protocols import call


def test_a_retried_receive_answers_the_same_messages(sqs_base: str, name: str, protocol: str) -> None:
    queue = f"{name}.fifo"
    url = call(sqs_base, protocol, "CreateQueue", QueueName=queue, Attributes={"FifoQueue": "true"})
    url = url.result["QueueUrl"]
    for n in range(2):
        sent = call(
            sqs_base,
            protocol,
            "SendMessage",
            QueueUrl=url,
            MessageBody=f"m{n}",
            MessageGroupId="g",
            MessageDeduplicationId=str(n),
        )
        assert sent.status == 200, sent

    def receive(attempt: str) -> Any:
        answer = call(
            sqs_base,
            protocol,
            "ReceiveMessage",
            QueueUrl=url,
            MaxNumberOfMessages=1,
            VisibilityTimeout=600,
            ReceiveRequestAttemptId=attempt,
        )
        assert answer.status == 200, answer
        return answer.result

    first = receive("attempt-1")
    assert first  # one message of the group
    assert receive("attempt-1") == first  # the same message, the same receipt handle
    assert receive("attempt-2") == {}  # a new attempt: the group is in flight
    bad = call(sqs_base, protocol, "ReceiveMessage", QueueUrl=url, ReceiveRequestAttemptId="has space")
    assert (bad.status, bad.code) == (400, "InvalidParameterValue")


async def test_the_retry_holds_for_5_minutes_while_its_messages_are_held(
    lite: Client, clock: FakeClock
) -> None:
    async def sqs(action: str, **params: Any) -> dict[str, Any]:
        headers = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"}
        answer = await lite.post("/", json=params, headers=headers)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    url = (await sqs("CreateQueue", QueueName="r.fifo", Attributes={"FifoQueue": "true"}))["QueueUrl"]
    for n in range(4):
        await sqs(
            "SendMessage",
            QueueUrl=url,
            MessageBody=f"m{n}",
            MessageGroupId=f"g{n}",
            MessageDeduplicationId=str(n),
        )

    async def receive(attempt: str) -> list[str]:
        answer = await sqs(
            "ReceiveMessage",
            QueueUrl=url,
            MaxNumberOfMessages=1,
            VisibilityTimeout=900,
            ReceiveRequestAttemptId=attempt,
        )
        return [m["ReceiptHandle"] for m in answer.get("Messages", [])]

    first = await receive("a")
    clock.advance(299)
    assert await receive("a") == first
    clock.advance(299)  # within 5 minutes of the retry, which restarted nothing but the visibility
    assert await receive("a") != first  # 598 s after the first receive: a new receive (the next group)

    second = await receive("b")
    await sqs("DeleteMessage", QueueUrl=url, ReceiptHandle=second[0])
    third = await receive("b")  # its message was deleted: the retry receives anew
    assert len(third) == 1
    assert third != second


def test_a_standard_queue_ignores_the_attempt_id(sqs_base: str, name: str) -> None:
    url = call(sqs_base, "json", "CreateQueue", QueueName=name).result["QueueUrl"]
    for n in range(2):
        call(sqs_base, "json", "SendMessage", QueueUrl=url, MessageBody=f"m{n}")
    bodies = set()
    for _ in range(2):
        answer = call(
            sqs_base,
            "json",
            "ReceiveMessage",
            QueueUrl=url,
            ReceiveRequestAttemptId="same",
            VisibilityTimeout=600,
        )
        bodies |= {m["Body"] for m in answer.result["Messages"]}
    assert bodies == {"m0", "m1"}
    assert httpx.get(f"{sqs_base}/queues/{name}").json()["leased"] == 2
