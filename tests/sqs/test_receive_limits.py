"""What a receive finds past a queue's limits, acted on at that receive as SQS does, not later by
the sweep: a message older than the queue's MessageRetentionPeriod is never handed out (the sweep
deletes it afterwards); a message received maxReceiveCount times whose visibility ran out moves to
the RedrivePolicy's dead-letter queue at the receive that finds it. Each on an injected clock, on
SQLite and PostgreSQL, over both of SQS's protocols."""

from __future__ import annotations

import json
from typing import Any

from tests.engines import FakeClock
from tests.http import Client
from tests.sqs.both_protocols import acall


async def ok(client: Client, protocol: str, action: str, **params: Any) -> dict[str, Any]:
    answer = await acall(client, protocol, action, **params)
    assert answer.status == 200, answer
    return answer.result


async def bodies(client: Client, protocol: str, url: str, **params: Any) -> list[str]:
    got = await ok(client, protocol, "ReceiveMessage", QueueUrl=url, **{"MaxNumberOfMessages": 10, **params})
    return sorted(m["Body"] for m in got.get("Messages", []))


async def test_a_receive_never_hands_out_a_message_past_the_retention_period(
    client: Client, clock: FakeClock, protocol: str, queue: str
) -> None:
    created = await ok(
        client, protocol, "CreateQueue", QueueName=queue, Attributes={"MessageRetentionPeriod": "60"}
    )
    url = created["QueueUrl"]
    await ok(client, protocol, "SendMessage", QueueUrl=url, MessageBody="received")
    await ok(client, protocol, "SendMessage", QueueUrl=url, MessageBody="waiting")
    assert await bodies(client, protocol, url, MaxNumberOfMessages=1, VisibilityTimeout=5) in (
        ["received"],
        ["waiting"],
    )
    clock.advance(30)
    await ok(client, protocol, "SendMessage", QueueUrl=url, MessageBody="young")
    clock.advance(30)
    assert await bodies(client, protocol, url, VisibilityTimeout=0) == [
        "received",
        "waiting",
        "young",
    ]  # 60 s
    clock.advance(1)
    # Past the period: neither the one waiting nor the one whose visibility ran out is handed out.
    assert await bodies(client, protocol, url) == ["young"]


async def test_a_message_over_its_receive_count_moves_at_the_receive_that_finds_it(
    client: Client, clock: FakeClock, protocol: str, queue: str
) -> None:
    dlq = (await ok(client, protocol, "CreateQueue", QueueName=f"{queue}-dlq"))["QueueUrl"]
    arn = (await ok(client, protocol, "GetQueueAttributes", QueueUrl=dlq, AttributeNames=["QueueArn"]))[
        "Attributes"
    ]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 2})
    url = (await ok(client, protocol, "CreateQueue", QueueName=queue, Attributes={"RedrivePolicy": policy}))[
        "QueueUrl"
    ]
    await ok(client, protocol, "SendMessage", QueueUrl=url, MessageBody="poison")
    for _ in range(2):
        assert await bodies(client, protocol, url, VisibilityTimeout=5) == ["poison"]
        clock.advance(6)
    # The third receive finds it over the count: it moves there and then, with no sweep running.
    assert await bodies(client, protocol, url) == []
    assert await bodies(client, protocol, dlq) == ["poison"]
