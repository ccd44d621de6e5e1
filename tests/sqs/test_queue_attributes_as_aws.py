"""Queue attributes as Amazon SQS takes and answers them, on both protocols and every engine:
booleans in any case, MessageRetentionPeriod's range, FifoQueue against the name, a name made again
too soon after its deletion, and the attributes Terraform, CloudFormation and the CDK send
(encryption, high-throughput FIFO)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import boto3
import httpx
import pytest

from tests.engines import FakeClock
from tests.http import Client
from tests.sqs.both_protocols import NS, Answer, call
from tests.sqs.conftest import ACCOUNT


def create(base: str, protocol: str, name: str, **attributes: str) -> Answer:
    return call(base, protocol, "CreateQueue", QueueName=name, Attributes=attributes)


def created(base: str, protocol: str, name: str, **attributes: str) -> str:
    answer = create(base, protocol, name, **attributes)
    assert answer.status == 200, answer
    url: str = answer.result["QueueUrl"]
    return url


def attributes_of(base: str, protocol: str, url: str) -> dict[str, Any]:
    answer = call(base, protocol, "GetQueueAttributes", QueueUrl=url, AttributeNames=["All"])
    assert answer.status == 200, answer
    values: dict[str, Any] = answer.result["Attributes"]
    return values


def test_booleans_are_taken_in_any_case(sqs_base: str, protocol: str, name: str) -> None:
    url = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="True", ContentBasedDeduplication="TRUE")
    values = attributes_of(sqs_base, protocol, url)
    assert (values["FifoQueue"], values["ContentBasedDeduplication"]) == ("true", "true")


@pytest.mark.parametrize(("value", "code"), [("60", None), ("1209600", None), ("59", "x"), ("1209601", "x")])
def test_message_retention_period_is_60_to_1209600(
    sqs_base: str, protocol: str, name: str, value: str, code: str | None
) -> None:
    answer = create(sqs_base, protocol, name, MessageRetentionPeriod=value)
    if code is None:
        assert answer.status == 200, answer
        assert attributes_of(sqs_base, protocol, answer.result["QueueUrl"])["MessageRetentionPeriod"] == value
    else:
        assert (answer.status, answer.code) == (400, "InvalidAttributeValue")


def test_fifo_queue_and_the_name_must_agree(sqs_base: str, protocol: str, name: str) -> None:
    cases = [
        (f"{name}.fifo", {}, "InvalidParameterValue", "1 to 80 in length"),
        (f"{name}.fifo", {"FifoQueue": "false"}, "InvalidParameterValue", "1 to 80 in length"),
        (name, {"FifoQueue": "true"}, "InvalidParameterValue", "must end with .fifo suffix"),
        (name, {"FifoQueue": "false"}, "InvalidAttributeName", "Unknown Attribute FifoQueue."),
        (name, {"FifoQueue": "maybe"}, "InvalidAttributeValue", "FifoQueue"),
    ]
    for queue, given, code, words in cases:
        answer = create(sqs_base, protocol, queue, **given)
        assert (answer.status, answer.code) == (400, code), (queue, given, answer)
        assert words in answer.message
    assert call(sqs_base, protocol, "GetQueueUrl", QueueName=f"{name}.fifo").status == 400  # none made


def test_a_name_cannot_be_made_again_within_60_seconds_of_its_deletion(
    sqs_base: str, protocol: str, name: str
) -> None:
    url = created(sqs_base, protocol, name)
    assert call(sqs_base, protocol, "DeleteQueue", QueueUrl=url).status == 200
    again = create(sqs_base, protocol, name)
    assert (again.status, again.code) == (400, "AWS.SimpleQueueService.QueueDeletedRecently")
    assert "60 seconds" in again.message


def test_a_bare_queue_name_is_taken_as_the_queue_url(sqs_base: str, protocol: str, name: str) -> None:
    created(sqs_base, protocol, name)
    sent = call(sqs_base, protocol, "SendMessage", QueueUrl=name, MessageBody="by name")
    assert sent.status == 200, sent
    assert attributes_of(sqs_base, protocol, name)["ApproximateNumberOfMessages"] == "1"
    missing = call(sqs_base, protocol, "SendMessage", QueueUrl=f"no-{name}", MessageBody="x")
    assert (missing.status, missing.code) == (400, "AWS.SimpleQueueService.NonExistentQueue")


def test_encryption_attributes_are_kept_and_answered(sqs_base: str, protocol: str, name: str) -> None:
    plain = created(sqs_base, protocol, name)
    assert attributes_of(sqs_base, protocol, plain)["SqsManagedSseEnabled"] == "true"  # SQS's default

    kms = created(sqs_base, protocol, f"{name}-kms", KmsMasterKeyId="alias/aws/sqs")
    values = attributes_of(sqs_base, protocol, kms)
    assert (values["KmsMasterKeyId"], values["KmsDataKeyReusePeriodSeconds"]) == ("alias/aws/sqs", "300")
    assert values["SqsManagedSseEnabled"] == "false"

    changed = call(
        sqs_base,
        protocol,
        "SetQueueAttributes",
        QueueUrl=kms,
        Attributes={"KmsDataKeyReusePeriodSeconds": "600"},
    )
    assert changed.status == 200, changed
    assert attributes_of(sqs_base, protocol, kms)["KmsDataKeyReusePeriodSeconds"] == "600"
    too_short = call(
        sqs_base,
        protocol,
        "SetQueueAttributes",
        QueueUrl=kms,
        Attributes={"KmsDataKeyReusePeriodSeconds": "59"},
    )
    assert (too_short.status, too_short.code) == (400, "InvalidAttributeValue")
    off = created(sqs_base, protocol, f"{name}-off", SqsManagedSseEnabled="False")
    assert attributes_of(sqs_base, protocol, off)["SqsManagedSseEnabled"] == "false"


def test_high_throughput_fifo_attributes(sqs_base: str, protocol: str, name: str) -> None:
    fifo = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="true")
    values = attributes_of(sqs_base, protocol, fifo)
    assert (values["DeduplicationScope"], values["FifoThroughputLimit"]) == ("queue", "perQueue")

    alone = create(
        sqs_base, protocol, f"{name}-2.fifo", FifoQueue="true", FifoThroughputLimit="perMessageGroupId"
    )
    assert (alone.status, alone.code) == (400, "InvalidAttributeValue")
    standard = create(sqs_base, protocol, name, DeduplicationScope="queue")
    assert (standard.status, standard.code) == (400, "InvalidAttributeName")

    high = created(
        sqs_base,
        protocol,
        f"{name}-3.fifo",
        FifoQueue="true",
        DeduplicationScope="messageGroup",
        FifoThroughputLimit="perMessageGroupId",
    )
    values = attributes_of(sqs_base, protocol, high)
    assert (values["DeduplicationScope"], values["FifoThroughputLimit"]) == (
        "messageGroup",
        "perMessageGroupId",
    )


@pytest.mark.parametrize(("scope", "messages"), [("queue", 1), ("messageGroup", 2)])
def test_deduplication_scope_decides_whether_groups_share_ids(
    sqs_base: str, protocol: str, name: str, scope: str, messages: int
) -> None:
    url = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="true", DeduplicationScope=scope)
    for group in ("a", "b", "a"):
        sent = call(
            sqs_base,
            protocol,
            "SendMessage",
            QueueUrl=url,
            MessageBody=f"to {group}",
            MessageGroupId=group,
            MessageDeduplicationId="same-id",
            DelaySeconds=0,  # allowed on a FIFO queue: no delay of its own
        )
        assert sent.status == 200, sent
    assert attributes_of(sqs_base, protocol, url)["ApproximateNumberOfMessages"] == str(messages)


async def test_the_name_is_free_again_60_seconds_after_its_deletion(lite: Client, clock: FakeClock) -> None:
    async def sqs(action: str, **params: str) -> httpx.Response:
        headers = {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"}
        return await lite.post("/", json=params, headers=headers)

    url = (await sqs("CreateQueue", QueueName="again")).json()["QueueUrl"]
    assert (await sqs("DeleteQueue", QueueUrl=url)).status_code == 200
    clock.advance(59)
    refused = await sqs("CreateQueue", QueueName="again")
    assert refused.json()["__type"] == "com.amazonaws.sqs#QueueDeletedRecently"
    clock.advance(1)
    assert (await sqs("CreateQueue", QueueName="again")).json()["QueueUrl"] == url


@pytest.mark.parametrize(
    ("missing", "code"),
    # Both InvalidParameterValue in a batch (a single send without its group is MissingParameter).
    [("MessageGroupId", "InvalidParameterValue"), ("MessageDeduplicationId", "InvalidParameterValue")],
)
def test_a_fifo_batch_missing_an_id_fails_whole(
    sqs_base: str, protocol: str, name: str, missing: str, code: str
) -> None:
    url = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="true")
    entries = [
        {"Id": f"e{n}", "MessageBody": str(n), "MessageGroupId": "g", "MessageDeduplicationId": str(n)}
        for n in range(2)
    ]
    del entries[1][missing]
    if protocol == "query":
        form = {
            f"SendMessageBatchRequestEntry.{n}.{key}": value
            for n, entry in enumerate(entries, 1)
            for key, value in entry.items()
        }
        answer = call(sqs_base, protocol, "SendMessageBatch", QueueUrl=url, **form)
    else:
        answer = call(sqs_base, protocol, "SendMessageBatch", QueueUrl=url, Entries=entries)
    assert (answer.status, answer.code) == (400, code), answer
    assert attributes_of(sqs_base, protocol, url)["ApproximateNumberOfMessages"] == "0"  # none sent


def test_refusals_are_worded_as_sqs_words_them(sqs_base: str, protocol: str, name: str) -> None:
    url = created(sqs_base, protocol, name)
    many = call(sqs_base, protocol, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=11)
    assert (many.status, many.code) == (400, "InvalidParameterValue")
    assert many.message == (
        "Value 11 for parameter MaxNumberOfMessages is invalid. "
        "Reason: Must be between 1 and 10, if provided."
    )
    for action, kind in (
        ("SendMessageBatch", "SendMessageBatchRequestEntry"),
        ("DeleteMessageBatch", "DeleteMessageBatchRequestEntry"),
        ("ChangeMessageVisibilityBatch", "ChangeMessageVisibilityBatchRequestEntry"),
    ):
        empty = call(
            sqs_base, protocol, action, QueueUrl=url, **({"Entries": []} if protocol == "json" else {})
        )
        assert (empty.status, empty.code) == (400, "AWS.SimpleQueueService.EmptyBatchRequest"), action
        assert empty.message == f"There should be at least one {kind} in the request."
    handle = call(sqs_base, protocol, "DeleteMessage", QueueUrl=url, ReceiptHandle="not-a-handle")
    assert (handle.status, handle.code) == (400, "ReceiptHandleIsInvalid")
    assert handle.message == 'The input receipt handle "not-a-handle" is not a valid receipt handle.'


def test_the_query_protocol_may_be_sent_as_a_get(sqs_base: str, name: str) -> None:
    created(sqs_base, "query", name, VisibilityTimeout="45")
    listed = httpx.get(f"{sqs_base}/", params={"Action": "ListQueues", "QueueNamePrefix": name}, timeout=30)
    assert listed.status_code == 200, listed.text
    root = ET.fromstring(listed.content)
    assert [u.text for u in root.iter(f"{NS}QueueUrl")] == [f"{sqs_base}/{ACCOUNT}/{name}"]
    form = {"Action": "GetQueueAttributes", "AttributeName.1": "VisibilityTimeout"}
    got = httpx.get(f"{sqs_base}/{ACCOUNT}/{name}", params=form, timeout=30)
    assert got.status_code == 200, got.text
    assert ET.fromstring(got.content).findtext(f".//{NS}Value") == "45"
    assert httpx.get(f"{sqs_base}/", timeout=30).status_code == 307  # a person's GET: the dashboard


def test_sts_get_caller_identity_without_keys_is_the_account(sqs_base: str) -> None:
    sts = boto3.client(
        "sts",
        endpoint_url=sqs_base,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    who = sts.get_caller_identity()
    assert (who["Account"], who["UserId"], who["Arn"]) == (ACCOUNT, ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root")
