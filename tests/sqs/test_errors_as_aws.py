"""Refusals as Amazon SQS answers them, over both protocols: the query protocol's code (the JSON
protocol's x-amzn-query-error), the JSON protocol's `__type`, the status and the message, word for
word. Each expectation is what AWS answered in LocalStack's AWS-validated snapshots
(localstack/localstack, tests/aws/services/sqs/test_sqs.snapshot.json; the test named beside each
case), where botocore reports the `__type` as the error's QueryErrorCode."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.both_protocols import Answer, call
from tests.sqs.test_permissions import add
from tests.sqs.test_queue_attributes_as_aws import created

INVALID = ("InvalidParameterValue", "com.amazon.coral.service#InvalidParameterValueException")
MISSING = ("MissingParameter", "com.amazon.coral.service#MissingRequiredParameterException")
NOWHERE = ("AWS.SimpleQueueService.NonExistentQueue", "com.amazonaws.sqs#QueueDoesNotExist")
BATCH_KINDS = {
    "SendMessageBatch": "SendMessageBatchRequestEntry",
    "DeleteMessageBatch": "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchRequestEntry",
}


def sqs_own(code: str) -> tuple[str, str]:
    """An error of SQS's model: its legacy query code, its JSON type in SQS's namespace."""
    return f"AWS.SimpleQueueService.{code}", f"com.amazonaws.sqs#{code}"


def refused(answer: Answer, protocol: str, codes: tuple[str, str], message: str, status: int = 400) -> None:
    query_code, json_type = codes
    assert (answer.status, answer.code, answer.message) == (status, query_code, message), answer
    if protocol == "json":
        assert answer.json_type == json_type, answer


def batch(base: str, protocol: str, action: str, url: str, entries: list[dict[str, Any]]) -> Answer:
    """A batch action over either protocol (the query protocol's entries are flattened)."""
    if protocol == "json":
        return call(base, protocol, action, QueueUrl=url, Entries=entries)
    form: dict[str, Any] = {}
    for n, entry in enumerate(entries, 1):
        for key, value in entry.items():
            if key == "MessageAttributes":
                for m, (attr, given) in enumerate(value.items(), 1):
                    form[f"{BATCH_KINDS[action]}.{n}.MessageAttribute.{m}.Name"] = attr
                    for part, text in given.items():
                        form[f"{BATCH_KINDS[action]}.{n}.MessageAttribute.{m}.Value.{part}"] = text
            else:
                form[f"{BATCH_KINDS[action]}.{n}.{key}"] = value
    return call(base, protocol, action, QueueUrl=url, **form)


def with_attributes(protocol: str, attributes: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A send's MessageAttributes as each protocol carries them."""
    if protocol == "json":
        return {"MessageAttributes": attributes}
    form = {}
    for n, (attr, given) in enumerate(attributes.items(), 1):
        form[f"MessageAttribute.{n}.Name"] = attr
        form |= {f"MessageAttribute.{n}.Value.{part}": text for part, text in given.items()}
    return form


def test_receive_parameters(sqs_base: str, protocol: str, name: str) -> None:
    """test_send_receive_max_number_of_messages, test_send_receive_wait_time_seconds"""
    url = created(sqs_base, protocol, name)
    many = call(sqs_base, protocol, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=11)
    message = (
        "Value 11 for parameter MaxNumberOfMessages is invalid. "
        "Reason: Must be between 1 and 10, if provided."
    )
    refused(many, protocol, INVALID, message)
    for wait in (21, -1):
        answer = call(sqs_base, protocol, "ReceiveMessage", QueueUrl=url, WaitTimeSeconds=wait)
        message = (
            f"Value {wait} for parameter WaitTimeSeconds is invalid. "
            "Reason: Must be >= 0 and <= 20, if provided."
        )
        refused(answer, protocol, INVALID, message)


def test_sends(sqs_base: str, protocol: str, name: str) -> None:
    """test_send_message_with_updated_maximum_message_size, test_send_empty_message,
    test_send_message_with_empty_string_attribute,
    test_send_message_to_standard_queue_with_invalid_message_group_id"""
    url = created(sqs_base, protocol, name, MaximumMessageSize="1024")
    large = call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="a" * 1025)
    refused(
        large,
        protocol,
        INVALID,
        "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.",
    )
    empty = call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="")
    refused(empty, protocol, MISSING, "The request must contain the parameter MessageBody.")
    blank = {"ErrorDetails": {"DataType": "String", "StringValue": ""}}
    answer = call(
        sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="x", **with_attributes(protocol, blank)
    )
    message = "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."
    refused(answer, protocol, INVALID, message)
    for group in ("group 123", "a" * 129):
        answer = call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="x", MessageGroupId=group)
        message = (
            f"Value {group} for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include "
            "alphanumeric and punctuation characters. 1 to 128 in length."
        )
        refused(answer, protocol, INVALID, message)
    # Not confirmed by a snapshot (moto's words): a delay out of range.
    late = call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="x", DelaySeconds=901)
    refused(
        late,
        protocol,
        INVALID,
        "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.",
    )


def test_fifo_sends(sqs_base: str, protocol: str, name: str) -> None:
    """test_fifo_queue_send_message_with_delay_seconds_fails,
    test_posting_to_fifo_requires_deduplicationid_group_id,
    test_send_batch_missing_message_group_id_for_fifo_queue, test_message_deduplication_id_invalid"""
    url = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="true")
    ids = {"MessageGroupId": "g", "MessageDeduplicationId": "d"}
    delayed = call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="x", DelaySeconds=2, **ids)
    message = (
        "Value 2 for parameter DelaySeconds is invalid. "
        "Reason: The request include parameter that is not valid for this queue type."
    )
    refused(delayed, protocol, INVALID, message)
    no_group = call(
        sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="x", MessageDeduplicationId="d"
    )
    refused(no_group, protocol, MISSING, "The request must contain the parameter MessageGroupId.")
    no_dedup = call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="x", MessageGroupId="g")
    message = (
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
        "provided explicitly"
    )
    refused(no_dedup, protocol, INVALID, message)
    entries = [{"Id": "a", "MessageBody": "x", "MessageDeduplicationId": "d"}]
    whole = batch(sqs_base, protocol, "SendMessageBatch", url, entries)
    refused(whole, protocol, INVALID, "The request must contain the parameter MessageGroupId.")
    spaced = call(
        sqs_base,
        protocol,
        "SendMessage",
        QueueUrl=url,
        MessageBody="x",
        MessageGroupId="g",
        MessageDeduplicationId="group 123",
    )
    message = (
        "Value group 123 for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can "
        "only include alphanumeric and punctuation characters. 1 to 128 in length."
    )
    refused(spaced, protocol, INVALID, message)


def test_batches(sqs_base: str, protocol: str, name: str) -> None:
    """test_too_many_entries_in_batch_request, test_invalid_batch_id, test_send_batch_message_size,
    test_send_message_batch_with_oversized_contents, and SQS's documented EmptyBatchRequest"""
    url = created(sqs_base, protocol, name, MaximumMessageSize="1024")
    for action, kind in BATCH_KINDS.items():
        empty = call(
            sqs_base, protocol, action, QueueUrl=url, **({"Entries": []} if protocol == "json" else {})
        )
        refused(
            empty,
            protocol,
            sqs_own("EmptyBatchRequest"),
            f"There should be at least one {kind} in the request.",
        )
        many = [
            {"Id": str(n), "MessageBody": "x", "ReceiptHandle": "h", "VisibilityTimeout": 1}
            for n in range(20)
        ]
        fields = {"SendMessageBatch": ("Id", "MessageBody")}.get(
            action, ("Id", "ReceiptHandle", "VisibilityTimeout")
        )
        if action == "DeleteMessageBatch":
            fields = ("Id", "ReceiptHandle")
        many = [{k: v for k, v in e.items() if k in fields} for e in many]
        answer = batch(sqs_base, protocol, action, url, many)
        message = "Maximum number of entries per request are 10. You have sent 20."
        refused(answer, protocol, sqs_own("TooManyEntriesInBatchRequest"), message)
        answer = batch(sqs_base, protocol, action, url, [{**many[0], "Id": "invalid:id"}])
        message = (
            "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
            "It can be at most 80 letters long."
        )
        refused(answer, protocol, sqs_own("InvalidBatchEntryId"), message)
    entries = [{"Id": "big", "MessageBody": "a" * 1025}, {"Id": "small", "MessageBody": "a"}]
    answer = batch(sqs_base, protocol, "SendMessageBatch", url, entries)
    assert answer.status == 200, answer
    assert [e["Id"] for e in answer.result["Successful"]] == ["small"]
    [failed] = answer.result["Failed"]
    assert (failed["Id"], failed["Code"], str(failed["SenderFault"]).lower()) == ("big", INVALID[0], "true")
    # A batch entry's words differ from a send's ("are invalid").
    message = "One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes."
    assert failed["Message"] == message
    set_large = call(
        sqs_base, protocol, "SetQueueAttributes", QueueUrl=url, Attributes={"MaximumMessageSize": "1048576"}
    )
    assert set_large.status == 200, set_large
    # 1,048,577 bytes in all, each message within the queue's limit: the whole batch is refused.
    entries = [{"Id": "a", "MessageBody": "a" * 1_048_576}, {"Id": "b", "MessageBody": "b"}]
    answer = batch(sqs_base, protocol, "SendMessageBatch", url, entries)
    message = "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes."
    refused(answer, protocol, sqs_own("BatchRequestTooLong"), message)


def test_receipt_handles(sqs_base: str, protocol: str, name: str) -> None:
    """LocalStack's AWS-validated test_delete_message_with_illegal_receipt_handle and
    test_change_visibility_on_deleted_message_raises_invalid_parameter_value"""
    url = created(sqs_base, protocol, name)
    garbage = call(sqs_base, protocol, "DeleteMessage", QueueUrl=url, ReceiptHandle="garbage")
    message = 'The input receipt handle "garbage" is not a valid receipt handle.'
    refused(
        garbage, protocol, ("ReceiptHandleIsInvalid", "com.amazonaws.sqs#ReceiptHandleIsInvalid"), message
    )
    assert call(sqs_base, protocol, "SendMessage", QueueUrl=url, MessageBody="foo").status == 200
    got = call(sqs_base, protocol, "ReceiveMessage", QueueUrl=url, WaitTimeSeconds=5)
    handle = got.result["Messages"][0]["ReceiptHandle"]
    assert call(sqs_base, protocol, "DeleteMessage", QueueUrl=url, ReceiptHandle=handle).status == 200
    changed = call(
        sqs_base,
        protocol,
        "ChangeMessageVisibility",
        QueueUrl=url,
        ReceiptHandle=handle,
        VisibilityTimeout=42,
    )
    message = (
        f"Value {handle} for parameter ReceiptHandle is invalid. "
        "Reason: Message does not exist or is not available for visibility timeout change."
    )
    refused(changed, protocol, INVALID, message)


def test_queue_attributes(sqs_base: str, protocol: str, name: str) -> None:
    """test_create_standard_queue_with_fifo_attribute_raises_error, test_set_unsupported_attribute_fifo,
    test_set_unsupported_attribute_standard, test_create_queue_with_different_attributes_raises_exception"""
    name_error = ("InvalidAttributeName", "com.amazonaws.sqs#InvalidAttributeName")
    for attributes, message in (
        ({"FifoQueue": "false"}, "Unknown Attribute FifoQueue."),
        ({"ContentBasedDeduplication": "false"}, "Unknown Attribute ContentBasedDeduplication."),
        (
            {"DeduplicationScope": "queue"},
            "You can specify the DeduplicationScope only when FifoQueue is set to true.",
        ),
        (
            {"FifoThroughputLimit": "perQueue"},
            "You can specify the FifoThroughputLimit only when FifoQueue is set to true.",
        ),
    ):
        answer = call(sqs_base, protocol, "CreateQueue", QueueName=name, Attributes=attributes)
        refused(answer, protocol, name_error, message)
    url = created(sqs_base, protocol, name, DelaySeconds="1")
    again = call(sqs_base, protocol, "CreateQueue", QueueName=name, Attributes={"DelaySeconds": "2"})
    message = "A queue already exists with the same name and a different value for attribute DelaySeconds"
    refused(again, protocol, ("QueueAlreadyExists", "com.amazonaws.sqs#QueueNameExists"), message)
    for value in ("true", "false"):
        answer = call(sqs_base, protocol, "SetQueueAttributes", QueueUrl=url, Attributes={"FifoQueue": value})
        refused(answer, protocol, name_error, "Unknown Attribute FifoQueue.")
    fifo = created(sqs_base, protocol, f"{name}.fifo", FifoQueue="true")
    same = call(sqs_base, protocol, "SetQueueAttributes", QueueUrl=fifo, Attributes={"FifoQueue": "true"})
    assert same.status == 200, same
    other = call(sqs_base, protocol, "SetQueueAttributes", QueueUrl=fifo, Attributes={"FifoQueue": "false"})
    message = "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
    refused(other, protocol, ("InvalidAttributeValue", "com.amazonaws.sqs#InvalidAttributeValue"), message)


def test_queues(sqs_base: str, protocol: str, name: str) -> None:
    """test_non_existent_queue (the query protocol words it otherwise), test_successive_purge_calls_fail,
    test_sqs_permission_lifecycle"""
    url = created(sqs_base, protocol, name)
    words = {
        "json": "The specified queue does not exist.",
        "query": "The specified queue does not exist for this wsdl version.",
    }
    for action, given in (
        ("GetQueueUrl", {"QueueName": f"{name}-not"}),
        ("GetQueueAttributes", {"QueueUrl": f"{url}-not"}),
    ):
        refused(call(sqs_base, protocol, action, **given), protocol, NOWHERE, words[protocol])
    assert call(sqs_base, protocol, "PurgeQueue", QueueUrl=url).status == 200
    again = call(sqs_base, protocol, "PurgeQueue", QueueUrl=url)
    message = f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."
    refused(again, protocol, sqs_own("PurgeQueueInProgress"), message, status=403)
    grant = (sqs_base, protocol, url, "crossaccountpermission", ["123456789012"], ["SendMessage"])
    assert add(*grant).status == 200
    twice = add(*grant)
    refused(
        twice,
        protocol,
        INVALID,
        "Value crossaccountpermission for parameter Label is invalid. Reason: Already exists.",
    )
    gone = call(sqs_base, protocol, "RemovePermission", QueueUrl=url, Label="crossaccountpermission2")
    refused(
        gone,
        protocol,
        INVALID,
        "Value crossaccountpermission2 for parameter Label is invalid. Reason: can't find label.",
    )


@pytest.mark.parametrize("count", [51])
def test_tags(sqs_base: str, protocol: str, name: str, count: int) -> None:
    """Not in LocalStack's snapshots: moto's words (Too many tags added for queue NAME.)."""
    url = created(sqs_base, protocol, name)
    tags = {f"k{n}": "v" for n in range(count)}
    answer = call(sqs_base, protocol, "TagQueue", QueueUrl=url, Tags=tags)
    refused(answer, protocol, INVALID, f"Too many tags added for queue {name}.")


def test_boto3_reads_them_as_against_aws(sqs: Any, url: str) -> None:
    """boto3 (the JSON protocol) reports Code from x-amzn-query-error and QueryErrorCode from
    `__type`, as LocalStack's snapshots record them from AWS."""
    for call_, code, query_code in (
        (lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11), *INVALID),
        (lambda: sqs.send_message(QueueUrl=url, MessageBody=""), *MISSING),
        (lambda: sqs.get_queue_url(QueueName="nope-" + url.rsplit("/", 1)[1]), *NOWHERE),
        (lambda: sqs.delete_message_batch(QueueUrl=url, Entries=[]), *sqs_own("EmptyBatchRequest")),
    ):
        with pytest.raises(ClientError) as e:
            call_()
        error = e.value.response["Error"]
        assert (error["Code"], error["QueryErrorCode"]) == (code, query_code.rsplit("#", 1)[1])
