"""Receipt handles whose visibility ran out, as SQS treats them: on a FIFO queue a delete or a
visibility change with one is refused ("The receipt handle has expired."), so that a late worker
cannot delete what another may hold in order; on a standard queue a delete with one succeeds."""

from __future__ import annotations

from tests.sqs.both_protocols import call


def lapsed_handle(base: str, protocol: str, queue: str, **attributes: str) -> tuple[str, str]:
    """A queue's URL and the receipt handle of a message received with visibility 0."""
    url = call(base, protocol, "CreateQueue", QueueName=queue, Attributes=attributes).result["QueueUrl"]
    ids = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if queue.endswith(".fifo") else {}
    assert call(base, protocol, "SendMessage", QueueUrl=url, MessageBody="late", **ids).status == 200
    received = call(base, protocol, "ReceiveMessage", QueueUrl=url, VisibilityTimeout=0)
    handle: str = received.result["Messages"][0]["ReceiptHandle"]
    return url, handle


def test_a_fifo_queue_refuses_an_expired_handle(sqs_base: str, protocol: str, name: str) -> None:
    url, handle = lapsed_handle(sqs_base, protocol, f"{name}.fifo", FifoQueue="true")
    for action, extra in (("DeleteMessage", {}), ("ChangeMessageVisibility", {"VisibilityTimeout": 30})):
        answer = call(sqs_base, protocol, action, QueueUrl=url, ReceiptHandle=handle, **extra)
        assert (answer.status, answer.code) == (400, "InvalidParameterValue"), (action, answer)
        assert answer.message.endswith("Reason: The receipt handle has expired.")
    waiting = call(sqs_base, protocol, "GetQueueAttributes", QueueUrl=url, AttributeNames=["All"])
    assert waiting.result["Attributes"]["ApproximateNumberOfMessages"] == "1"  # not deleted


def test_a_fifo_batch_delete_fails_the_expired_entry(sqs_base: str, name: str) -> None:
    url, handle = lapsed_handle(sqs_base, "json", f"{name}.fifo", FifoQueue="true")
    entries = [{"Id": "late", "ReceiptHandle": handle}]
    answer = call(sqs_base, "json", "DeleteMessageBatch", QueueUrl=url, Entries=entries)
    assert answer.status == 200, answer
    assert [(f["Id"], f["Code"]) for f in answer.result["Failed"]] == [("late", "InvalidParameterValue")]


def test_a_standard_queue_deletes_with_an_expired_handle(sqs_base: str, protocol: str, name: str) -> None:
    url, handle = lapsed_handle(sqs_base, protocol, name)
    assert call(sqs_base, protocol, "DeleteMessage", QueueUrl=url, ReceiptHandle=handle).status == 200
