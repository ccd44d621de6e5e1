"""SQS's fair queues: on a standard queue a message's MessageGroupId is its tenant (the item's
fairness_key), so receives take the tenants' messages round-robin and a noisy tenant's backlog
cannot starve a quiet one; ReceiveMessage answers it as MessageGroupId. FIFO queues keep it as the
ordered group."""

from __future__ import annotations

from typing import Any

import httpx


def receive_bodies(sqs: Any, url: str, count: int) -> list[str]:
    bodies: list[str] = []
    for _ in range(count):
        [message] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=60)["Messages"]
        bodies.append(message["Body"])
    return bodies


def test_a_quiet_tenant_is_served_between_a_noisy_ones_messages(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    for start in range(0, 30, 10):
        entries = [
            {"Id": str(n), "MessageBody": f"noisy-{n}", "MessageGroupId": "noisy"}
            for n in range(start, start + 10)
        ]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"quiet-{n}", MessageGroupId="quiet")

    first = receive_bodies(sqs, url, 6)
    assert sorted(b for b in first if b.startswith("quiet")) == ["quiet-0", "quiet-1", "quiet-2"], first


def test_the_tenant_is_the_items_fairness_key_and_comes_back_as_the_group(
    sqs: Any, sqs_base: str, name: str
) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="tenant-7")
    item = httpx.get(f"{sqs_base}/items/{sent['MessageId']}").json()
    assert (item["fairness_key"], item["group"]) == ("tenant-7", None)
    [message] = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["MessageGroupId"])["Messages"]
    assert message["Attributes"] == {"MessageGroupId": "tenant-7"}


def test_a_fifo_queue_keeps_the_group_as_its_order(sqs: Any, sqs_base: str, name: str) -> None:
    url = sqs.create_queue(
        QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    item = httpx.get(f"{sqs_base}/items/{sent['MessageId']}").json()
    assert (item["fairness_key"], item["group"]) == (None, "g")
