"""Empty answers as Amazon SQS gives them: an empty list is left out, not answered as `[]`, in the
JSON protocol (`{}`: boto3 then has no `Messages`, `QueueUrls`, `Tags` or `Failed` key, as against
AWS, recorded by LocalStack's AWS-validated snapshots: test_receive_empty_queue,
test_tag_untag_queue's get-tag-after-untag, a batch's `Successful` without `Failed`), and an
empty result element in the query protocol."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import httpx

from tests.sqs.both_protocols import NS, call
from tests.sqs.test_queue_attributes_as_aws import created


def query(base: str, action: str, **form: str) -> ET.Element:
    answer = httpx.post(base + "/", data={"Action": action, "Version": "2012-11-05", **form}, timeout=30)
    assert answer.status_code == 200, answer.text
    result = ET.fromstring(answer.content).find(f"{NS}{action}Result")
    assert result is not None, answer.text
    return result


def test_the_json_protocol_leaves_empty_lists_out(sqs_base: str, name: str) -> None:
    url = created(sqs_base, "json", name)
    for action, params in (
        ("ListQueues", {"QueueNamePrefix": f"{name}-none"}),
        ("ReceiveMessage", {"QueueUrl": url}),
        ("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 1}),
        ("ListQueueTags", {"QueueUrl": url}),
    ):
        answer = call(sqs_base, "json", action, **params)
        assert (answer.status, answer.result) == (200, {}), (action, answer)
    # queueUrls is a required member of SQS's model: answered even when empty.
    sources = call(sqs_base, "json", "ListDeadLetterSourceQueues", QueueUrl=url)
    assert sources.result == {"queueUrls": []}, sources
    sent = call(sqs_base, "json", "SendMessageBatch", QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}])
    assert set(sent.result) == {"Successful"}, sent
    failed = call(
        sqs_base, "json", "DeleteMessageBatch", QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": "x"}]
    )
    assert set(failed.result) == {"Failed"}, failed


def test_the_query_protocol_answers_an_empty_result(sqs_base: str, name: str) -> None:
    url = created(sqs_base, "query", name)
    assert list(query(sqs_base, "ListQueues", QueueNamePrefix=f"{name}-none")) == []
    assert list(query(sqs_base, "ReceiveMessage", QueueUrl=url)) == []
    assert list(query(sqs_base, "ListQueueTags", QueueUrl=url)) == []
    assert list(query(sqs_base, "ListDeadLetterSourceQueues", QueueUrl=url)) == []
    form = {"SendMessageBatchRequestEntry.1.Id": "a", "SendMessageBatchRequestEntry.1.MessageBody": "x"}
    sent = query(sqs_base, "SendMessageBatch", QueueUrl=url, **form)
    assert [child.tag.removeprefix(NS) for child in sent] == ["SendMessageBatchResultEntry"]
