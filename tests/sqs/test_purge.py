"""PurgeQueue through unchanged boto3 (and a query-protocol form): every live message goes, the dead
and the history stay, one purge of a queue per 60 seconds, admin keys only."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import ACCOUNT, error_code, sqs_client
from tests.test_e2e import serving

IN_PROGRESS = "AWS.SimpleQueueService.PurgeQueueInProgress"


def counts(sqs: Any, url: str) -> tuple[str, str, str]:
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return (
        a["ApproximateNumberOfMessages"],
        a["ApproximateNumberOfMessagesNotVisible"],
        a["ApproximateNumberOfMessagesDelayed"],
    )


def test_purge_deletes_every_live_message_and_keeps_dead_items_and_history(
    sqs: Any, sqs_base: str, url: str, name: str
) -> None:
    # A dead item (through the HTTP API) and a completed one: neither is a live message.
    dead = httpx.post(f"{sqs_base}/push", json={"queue": name, "payload": "poison"}).json()
    popped = httpx.post(f"{sqs_base}/pop", json={"queue": name, "max_items": 1}).json()["items"][0]
    assert popped["id"] == dead["id"]
    failed = httpx.post(
        f"{sqs_base}/items/{dead['id']}/fail",
        json={"error": "poison", "lease_token": popped["lease_token"], "retry": False},
    )
    assert failed.status_code == 200, failed.text
    sqs.send_message(QueueUrl=url, MessageBody="done")
    [done] = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=done["ReceiptHandle"])
    # Live ones: in flight, visible, delayed.
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    [in_flight] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"]
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=900)
    assert counts(sqs, url) == ("1", "1", "1")

    assert sqs.purge_queue(QueueUrl=url)["ResponseMetadata"]["HTTPStatusCode"] == 200

    assert counts(sqs, url) == ("0", "0", "0")
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    # The purged message's receipt handle is stale now: deleting with it succeeds, as on SQS.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=in_flight["ReceiptHandle"])
    queue = httpx.get(f"{sqs_base}/queues/{name}").json()
    assert (queue["dead"], queue["history"]) == (1, {"completed": 1, "dead": 1})


def test_a_second_purge_within_60_seconds_is_in_progress(sqs: Any, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="one")
    sqs.purge_queue(QueueUrl=url)
    sqs.send_message(QueueUrl=url, MessageBody="sent after the purge")
    with pytest.raises(ClientError) as e:
        sqs.purge_queue(QueueUrl=url)
    assert error_code(e) == IN_PROGRESS
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "60 seconds" in e.value.response["Error"]["Message"]
    [message] = sqs.receive_message(QueueUrl=url)["Messages"]
    assert message["Body"] == "sent after the purge"  # the refused purge deleted nothing


def test_purging_one_queue_leaves_the_others(sqs: Any, url: str, name: str) -> None:
    other = sqs.create_queue(QueueName=f"{name}-other")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="mine")
    sqs.send_message(QueueUrl=other, MessageBody="theirs")
    sqs.purge_queue(QueueUrl=url)
    sqs.purge_queue(QueueUrl=other)  # another queue's purge is not in progress
    assert counts(sqs, url) == ("0", "0", "0")
    assert counts(sqs, other) == ("0", "0", "0")


def test_purging_a_queue_that_does_not_exist(sqs: Any, sqs_base: str, name: str) -> None:
    with pytest.raises(ClientError) as e:
        sqs.purge_queue(QueueUrl=f"{sqs_base}/{ACCOUNT}/no-{name}")
    assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_fifo_deduplication_id_still_matches_after_a_purge(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="d")
    sqs.purge_queue(QueueUrl=url)
    again = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="d")
    assert again["MessageId"] == first["MessageId"]  # within the 5-minute interval: a duplicate
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    fresh = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g", MessageDeduplicationId="e")
    [message] = sqs.receive_message(QueueUrl=url)["Messages"]
    assert message["MessageId"] == fresh["MessageId"]


def test_the_query_protocol_purges_at_the_queue_url(sqs: Any, url: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="x")
    answer = httpx.post(url, data={"Action": "PurgeQueue", "Version": "2012-11-05"})
    assert answer.status_code == 200, answer.text
    assert "<PurgeQueueResponse" in answer.text
    assert "PurgeQueueResult" not in answer.text
    assert counts(sqs, url) == ("0", "0", "0")


# --- with API keys: an admin's action --------------------------------------------------------

ADMIN = ("AKIDPURGEADMIN00001", "admin-secret-" + "a" * 32)
CONSUMER = ("AKIDPURGECONSUMER01", "consumer-secret-" + "c" * 32)
KEYS = [
    {"key": ADMIN[1], "role": "admin", "access_key_id": ADMIN[0]},
    {"key": CONSUMER[1], "role": "consumer", "access_key_id": CONSUMER[0]},
]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Path(tmp_path_factory.mktemp("sqs-purge-keys")) / "keys.db"
    with serving(f"sqlite:///{db}", env={"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}) as base:
        yield base


def test_only_an_admin_key_purges(keyed: str) -> None:
    admin = sqs_client(keyed, aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1])
    consumer = sqs_client(keyed, aws_access_key_id=CONSUMER[0], aws_secret_access_key=CONSUMER[1])
    url = admin.create_queue(QueueName="purged-by-admins")["QueueUrl"]
    admin.send_message(QueueUrl=url, MessageBody="kept")
    with pytest.raises(ClientError) as e:
        consumer.purge_queue(QueueUrl=url)
    assert error_code(e) == "AccessDenied"
    assert counts(admin, url)[0] == "1"
    admin.purge_queue(QueueUrl=url)
    assert counts(admin, url)[0] == "0"


# --- GetQueueAttributes: CreatedTimestamp, LastModifiedTimestamp --------------------------------


def test_created_and_last_modified_timestamps_are_the_creation_time(sqs: Any, name: str) -> None:
    before = int(time.time())
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    after = int(time.time())
    every = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert before - 1 <= int(every["CreatedTimestamp"]) <= after + 1
    assert every["LastModifiedTimestamp"] == every["CreatedTimestamp"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "45"})
    named = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["CreatedTimestamp"])["Attributes"]
    assert named == {"CreatedTimestamp": every["CreatedTimestamp"]}
    modified = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["LastModifiedTimestamp"])
    # The set's time, in whole seconds: the creation's, or a later one if a second began between.
    changed = int(modified["Attributes"]["LastModifiedTimestamp"])
    assert int(every["CreatedTimestamp"]) <= changed <= int(time.time()) + 1
