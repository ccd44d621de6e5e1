"""The SQS door's message actions through boto3, on every engine: send, receive, delete, change
visibility (single and batch), FIFO groups and deduplication, one queue through both doors."""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import error_code, sqs_client
from tests.test_e2e import serving


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])
    return messages


def test_send_receive_delete(sqs: Any, url: str) -> None:
    body = 'héllo, "world" \r\n\t✓ 🎉'
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5(body)
    [message] = receive(sqs, url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == body
    assert message["MD5OfBody"] == md5(body)
    attributes = message["Attributes"]
    assert attributes["ApproximateReceiveCount"] == "1"
    assert abs(int(attributes["SentTimestamp"]) - time.time() * 1000) < 60_000
    assert int(attributes["ApproximateFirstReceiveTimestamp"]) >= int(attributes["SentTimestamp"])
    assert receive(sqs, url) == []  # in flight
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])  # stale: success, as SQS
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (
        attributes["ApproximateNumberOfMessages"]
        == attributes["ApproximateNumberOfMessagesNotVisible"]
        == "0"
    )


def test_send_refusals(sqs: Any, url: str) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"MessageBody": ""}, "MissingParameter"),
        ({"MessageBody": "x", "DelaySeconds": 901}, "InvalidParameterValue"),
        ({"MessageBody": "bad \x01 char"}, "InvalidMessageContents"),
        ({"MessageBody": "x", "MessageDeduplicationId": "d"}, "InvalidParameterValue"),
        ({"MessageBody": "x", "MessageGroupId": "has space"}, "InvalidParameterValue"),
        (
            {"MessageBody": "x", "MessageAttributes": {"k": {"DataType": "String", "StringValue": ""}}},
            "InvalidParameterValue",
        ),
    ]
    for kwargs, code in cases:
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=url, **kwargs)
        assert error_code(e) == code, kwargs
    assert "must contain a non-empty value of type 'String'" in e.value.response["Error"]["Message"]
    assert receive(sqs, url) == []


def test_delay_seconds(sqs: Any, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    assert receive(sqs, url) == []
    [message] = receive(sqs, url, WaitTimeSeconds=5)
    assert message["Body"] == "later"


def test_long_poll_wakes_on_a_send(sqs: Any, sqs_base: str, url: str) -> None:
    with ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(receive, sqs_client(sqs_base), url, WaitTimeSeconds=10)
        time.sleep(0.5)
        sqs.send_message(QueueUrl=url, MessageBody="wake")
        [message] = waiting.result(timeout=15)
    assert message["Body"] == "wake"
    assert time.monotonic() - started < 8


def test_receive_limits(sqs: Any, url: str) -> None:
    for kwargs in (
        {"MaxNumberOfMessages": 11},
        {"MaxNumberOfMessages": 0},
        {"WaitTimeSeconds": 21},
        {"VisibilityTimeout": 43201},
    ):
        with pytest.raises(ClientError) as e:
            receive(sqs, url, **kwargs)
        assert error_code(e) == "InvalidParameterValue", kwargs


def test_batches(sqs: Any, url: str) -> None:
    sent = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "one"},
            {"Id": "b", "MessageBody": "two"},
            {
                "Id": "c",
                "MessageBody": "x",
                "MessageAttributes": {"k": {"DataType": "Number", "StringValue": "one"}},
            },
            {"Id": "d", "MessageBody": "x", "DelaySeconds": 1000},
        ],
    )
    assert {s["Id"]: s["MD5OfMessageBody"] for s in sent["Successful"]} == {"a": md5("one"), "b": md5("two")}
    assert {f["Id"]: (f["Code"], f["SenderFault"]) for f in sent["Failed"]} == {
        "c": ("InvalidParameterValue", True),
        "d": ("InvalidParameterValue", True),
    }
    messages = receive(sqs, url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert sorted(m["Body"] for m in messages) == ["one", "two"]
    changed = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "m0", "ReceiptHandle": messages[0]["ReceiptHandle"], "VisibilityTimeout": 100},
            {"Id": "bad", "ReceiptHandle": "nope", "VisibilityTimeout": 100},
        ],
    )
    assert [s["Id"] for s in changed["Successful"]] == ["m0"]
    assert [(f["Id"], f["Code"]) for f in changed["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": f"m{n}", "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)]
        + [{"Id": "bad", "ReceiptHandle": "garbage"}],
    )
    assert sorted(s["Id"] for s in deleted["Successful"]) == ["m0", "m1"]
    assert [(f["Id"], f["Code"]) for f in deleted["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])[
        "Attributes"
    ] == {"ApproximateNumberOfMessagesNotVisible": "0"}


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        ([], "AWS.SimpleQueueService.EmptyBatchRequest"),
        (
            [{"Id": str(n), "MessageBody": "x"} for n in range(11)],
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        ),
        (
            [{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}],
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        ),
        ([{"Id": "not ok!", "MessageBody": "x"}], "AWS.SimpleQueueService.InvalidBatchEntryId"),
        (
            [{"Id": "a", "MessageBody": "x" * 700_000}, {"Id": "b", "MessageBody": "x" * 400_000}],
            "AWS.SimpleQueueService.BatchRequestTooLong",
        ),
    ],
)
def test_batch_refusals(sqs: Any, url: str, entries: list[dict[str, Any]], code: str) -> None:
    with pytest.raises(ClientError) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert error_code(e) == code
    if entries and not code.endswith("BatchRequestTooLong"):  # the other batches' limits are alike
        with pytest.raises(ClientError) as e:
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": x["Id"], "ReceiptHandle": "h"} for x in entries]
            )
        assert error_code(e) == code


def test_receipt_handles(sqs: Any, url: str) -> None:
    for call in (
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage"),
        lambda: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="garbage", VisibilityTimeout=5),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "ReceiptHandleIsInvalid"


def test_change_visibility_to_zero_makes_it_visible_now(sqs: Any, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="again")
    [first] = receive(sqs, url, VisibilityTimeout=300)
    assert receive(sqs, url) == []
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    [second] = receive(sqs, url, WaitTimeSeconds=2, AttributeNames=["ApproximateReceiveCount"])
    assert second["MessageId"] == first["MessageId"]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    # The first handle is stale now: its visibility can no longer change, and deleting it is a no-op.
    with pytest.raises(ClientError) as e:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=5)
    assert error_code(e) == "InvalidParameterValue"
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=600)
    with pytest.raises(ClientError) as e:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=43201
        )
    assert error_code(e) == "InvalidParameterValue"


def test_visibility_timeout_runs_out(sqs: Any, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="retry me")
    [first] = receive(sqs, url, VisibilityTimeout=1)
    [again] = receive(sqs, url, WaitTimeSeconds=5, MessageSystemAttributeNames=["ApproximateReceiveCount"])
    assert again["MessageId"] == first["MessageId"]
    assert again["Attributes"] == {"ApproximateReceiveCount": "2"}


def test_a_queue_whose_visibility_timeout_is_zero_hands_a_message_out_again_at_once(
    sqs: Any, sqs_base: str, name: str
) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    assert got == {"VisibilityTimeout": "0"}
    assert httpx.get(f"{sqs_base}/queues/{name}").json()["settings"]["lease_seconds"] == 0
    sent = sqs.send_message(QueueUrl=url, MessageBody="again and again")
    [first] = receive(sqs, url)
    [second] = receive(sqs, url, MessageSystemAttributeNames=["ApproximateReceiveCount"])
    assert first["MessageId"] == second["MessageId"] == sent["MessageId"]
    assert second["Attributes"] == {"ApproximateReceiveCount": "2"}
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    assert receive(sqs, url) == []


def test_fifo_groups_and_deduplication(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="1", MessageGroupId="g", MessageDeduplicationId="d1")
    again = sqs.send_message(QueueUrl=url, MessageBody="1", MessageGroupId="g", MessageDeduplicationId="d1")
    assert again["MessageId"] == first["MessageId"]
    sqs.send_message(QueueUrl=url, MessageBody="2", MessageGroupId="g", MessageDeduplicationId="d2")
    for kwargs, code in (
        ({"MessageDeduplicationId": "d3"}, "MissingParameter"),
        ({"MessageGroupId": "g"}, "InvalidParameterValue"),
        ({"MessageGroupId": "g", "MessageDeduplicationId": "d4", "DelaySeconds": 1}, "InvalidParameterValue"),
    ):
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=url, MessageBody="x", **kwargs)
        assert error_code(e) == code, kwargs
    # One group: a receive of one takes its head only; nothing more of the group goes out until
    # the head is deleted.
    [head] = receive(sqs, url, MaxNumberOfMessages=1, AttributeNames=["All"])
    assert (head["Body"], head["Attributes"]["MessageGroupId"]) == ("1", "g")
    assert receive(sqs, url, MaxNumberOfMessages=10) == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=head["ReceiptHandle"])
    assert [m["Body"] for m in receive(sqs, url)] == ["2"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])["Attributes"]
    assert attributes == {"FifoQueue": "true"}


def test_a_fifo_queues_deduplication_interval_is_five_minutes_from_the_send(
    sqs: Any, sqs_base: str, name: str
) -> None:
    # The interval itself runs on the store's clock (tests/conformance/test_dedup.py holds it with a
    # clock moved by hand); here, that a FIFO queue made through SQS counts it from the send.
    sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})
    settings = httpx.get(f"{sqs_base}/queues/{name}.fifo").json()["settings"]
    assert (settings["dedup_window_seconds"], settings["dedup_window_from"]) == (300, "send")
    sqs.create_queue(QueueName=name)
    settings = httpx.get(f"{sqs_base}/queues/{name}").json()["settings"]
    assert settings["dedup_window_from"] == "finish"  # no deduplication ids on a standard queue


def test_content_based_deduplication_and_sequence_numbers(sqs: Any, name: str) -> None:
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes=attributes)["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    # The same body is the same message (its SHA-256 is the deduplication id), in any group; a
    # duplicate is answered with the original's id and sequence number.
    again = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="h")
    assert again["MessageId"] == first["MessageId"]
    assert again["SequenceNumber"] == first["SequenceNumber"]
    # An explicit deduplication id wins over the body's.
    explicit = sqs.send_message(
        QueueUrl=url, MessageBody="same body", MessageGroupId="g", MessageDeduplicationId="own"
    )
    assert explicit["MessageId"] != first["MessageId"]
    other = sqs.send_message(QueueUrl=url, MessageBody="other body", MessageGroupId="g")
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["ContentBasedDeduplication"] == "true"

    numbers: list[str] = []
    for expected in (first, explicit, other):  # group g, in send order
        [message] = receive(sqs, url, MessageSystemAttributeNames=["SequenceNumber", "MessageGroupId"])
        assert message["MessageId"] == expected["MessageId"]
        assert message["Attributes"]["SequenceNumber"] == expected["SequenceNumber"], "as the send answered"
        numbers.append(message["Attributes"]["SequenceNumber"])
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert all(len(n) == 20 and n.isdigit() for n in numbers)
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == 3

    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "false"})
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="no id now", MessageGroupId="g")
    assert error_code(e) == "InvalidParameterValue"
    standard = sqs.create_queue(QueueName=f"{name}-std")["QueueUrl"]
    for bad, code in (
        ({"ContentBasedDeduplication": "maybe"}, "InvalidAttributeValue"),
        ({"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),
    ):
        target = url if code == "InvalidAttributeValue" else standard
        with pytest.raises(ClientError) as e:
            sqs.set_queue_attributes(QueueUrl=target, Attributes=bad)
        assert error_code(e) == code
    [plain] = [sqs.send_message(QueueUrl=standard, MessageBody="x")]
    assert "SequenceNumber" not in plain
    [message] = receive(sqs, standard, MessageSystemAttributeNames=["All"])
    assert message["MessageId"] == plain["MessageId"]
    assert "SequenceNumber" not in message["Attributes"]  # standard queues have none, as on SQS


def test_sent_through_sqs_popped_through_rest(sqs: Any, sqs_base: str, url: str, name: str) -> None:
    sent = sqs.send_message(QueueUrl=url, MessageBody='{"not": "parsed"}')
    popped = httpx.post(f"{sqs_base}/pop", json={"queue": name, "max_items": 1}).json()
    [item] = popped["items"]
    assert item["id"] == sent["MessageId"]
    assert item["payload"] == '{"not": "parsed"}'  # the body, as the string it is


def test_pushed_through_rest_received_through_sqs(sqs: Any, sqs_base: str, url: str, name: str) -> None:
    for payload in ("plain text", {"b": [1, 2.5, None, True], "a": "é"}):
        pushed = httpx.post(f"{sqs_base}/push", json={"queue": name, "payload": payload}).json()
        [message] = receive(sqs, url)
        assert message["MessageId"] == pushed["id"]
        expected = payload if isinstance(payload, str) else '{"b":[1,2.5,null,true],"a":"é"}'
        assert message["Body"] == expected
        assert message["MD5OfBody"] == md5(expected)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert httpx.get(f"{sqs_base}/queues/{name}").json()["history"]["completed"] == 2


def test_receive_with_visibility_zero_leaves_it_visible(sqs: Any, url: str) -> None:
    sent = sqs.send_message(QueueUrl=url, MessageBody="peek")
    [first] = receive(sqs, url, VisibilityTimeout=0)
    [second] = receive(sqs, url, WaitTimeSeconds=2, VisibilityTimeout=30)
    assert first["MessageId"] == second["MessageId"] == sent["MessageId"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])


def test_a_fifo_batch_keeps_its_order(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    entries = [
        {"Id": f"e{n}", "MessageBody": str(n), "MessageGroupId": "g", "MessageDeduplicationId": f"d{n}"}
        for n in range(10)
    ]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]
    assert len(sent) == 10
    numbers = [entry["SequenceNumber"] for entry in sorted(sent, key=lambda e: int(e["Id"][1:]))]
    assert numbers == sorted(numbers), "in the batch's order"
    assert len(set(numbers)) == 10
    bodies: list[str] = []
    for _ in range(10):  # bounded: one message a receive at the least
        messages = receive(sqs, url, MaxNumberOfMessages=3, WaitTimeSeconds=1)
        bodies += [m["Body"] for m in messages]
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) == 10:
            break
    assert bodies == [str(n) for n in range(10)]


def test_a_fifo_receive_takes_a_groups_run_in_order_and_holds_the_group(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for n, group in enumerate("aabab"):
        sqs.send_message(
            QueueUrl=url, MessageBody=f"{group}{n}", MessageGroupId=group, MessageDeduplicationId=str(n)
        )
    first = receive(sqs, url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    # Every message of both groups, one group's run at a time, each in the order sent, as SQS
    # hands them out (not interleaved in send order across groups).
    assert [m["Body"] for m in first] == ["a0", "a1", "a3", "b2", "b4"]
    assert receive(sqs, url, MaxNumberOfMessages=10) == []  # both groups are in flight
    sqs.send_message(QueueUrl=url, MessageBody="a5", MessageGroupId="a", MessageDeduplicationId="5")
    assert receive(sqs, url, MaxNumberOfMessages=10) == []  # a new message waits behind its group
    for message in first:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["a5"]


def test_visibility_zero_wakes_a_long_poll_at_once(tmp_path: Path) -> None:
    # The watcher rechecks every 30 s here: only the door's own signal can wake the waiting receive.
    env = {"SIMPLEQUEUE_WAIT_RECHECK_SECONDS": "30"}
    with serving(f"sqlite:///{tmp_path / 'wake.db'}", env=env) as base, ThreadPoolExecutor(1) as pool:
        sqs = sqs_client(base)
        url = sqs.create_queue(QueueName="wake")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="back")
        [held] = receive(sqs, url, VisibilityTimeout=600)
        waiting = pool.submit(receive, sqs_client(base), url, WaitTimeSeconds=10)
        time.sleep(1)
        started = time.monotonic()
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=held["ReceiptHandle"], VisibilityTimeout=0)
        [message] = waiting.result(timeout=15)
        assert message["MessageId"] == held["MessageId"]
        assert time.monotonic() - started < 5


def test_a_fifo_run_whose_visibility_ran_out_is_received_whole_again(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"a{n}", MessageGroupId="a", MessageDeduplicationId=str(n))
    first = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert [m["Body"] for m in first] == ["a0", "a1", "a2"]
    # Visible again at once (VisibilityTimeout 0): SQS hands out the group's whole run, not its head.
    again = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=30, AttributeNames=["All"])
    assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in again] == [
        ("a0", "2"),
        ("a1", "2"),
        ("a2", "2"),
    ]
