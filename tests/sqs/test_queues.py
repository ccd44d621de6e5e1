"""The SQS door's queue actions through boto3, on every engine: CreateQueue, GetQueueUrl, ListQueues,
GetQueueAttributes, SetQueueAttributes, DeleteQueue, and the errors SQS answers for each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.conftest import ACCOUNT, error_code, sqs_client
from tests.test_e2e import serving


def test_create_queue_answers_its_url_and_the_same_url_again(sqs: Any, sqs_base: str, name: str) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    assert url == f"{sqs_base}/{ACCOUNT}/{name}"
    assert sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"] == url
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    same = {"DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "0", "SqsManagedSseEnabled": "true"}
    assert sqs.create_queue(QueueName=name, Attributes=same)["QueueUrl"] == url
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "46"})
    assert error_code(e) == "QueueAlreadyExists"
    # The REST door sees the same queue, its lease the visibility timeout.
    settings = httpx.get(f"{sqs_base}/queues/{name}").json()["settings"]
    assert settings["lease_seconds"] == 45


@pytest.mark.parametrize(
    ("queue_name", "attributes", "code"),
    [
        ("bad.name", {}, "InvalidParameterValue"),
        ("x" * 81, {}, "InvalidParameterValue"),
        ("ok", {"VisibilityTimeout": "43201"}, "InvalidAttributeValue"),
        ("ok", {"NoSuchAttribute": "1"}, "InvalidAttributeName"),
        ("ok", {"KmsDataKeyReusePeriodSeconds": "86401"}, "InvalidAttributeValue"),
        ("ok", {"DelaySeconds": "901"}, "InvalidAttributeValue"),
        ("ok", {"Policy": "not json"}, "InvalidAttributeValue"),
        ("ok", {"RedriveAllowPolicy": '{"redrivePermission": "some"}'}, "InvalidAttributeValue"),
        ("ok", {"RedriveAllowPolicy": '{"redrivePermission": "byQueue"}'}, "InvalidAttributeValue"),
        ("ok", {"MaximumMessageSize": "1023"}, "InvalidAttributeValue"),
        ("ok", {"FifoQueue": "true"}, "InvalidParameterValue"),  # SQS: the name must end in .fifo
    ],
)
def test_create_queue_refusals(sqs: Any, queue_name: str, attributes: dict[str, str], code: str) -> None:
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName=queue_name, Attributes=attributes)
    assert error_code(e) == code
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_create_queue_without_a_name_is_missing_parameter(sqs_base: str) -> None:
    answer = httpx.post(
        sqs_base + "/",
        content=b"{}",
        headers={"X-Amz-Target": "AmazonSQS.CreateQueue", "Content-Type": "application/x-amz-json-1.0"},
    )
    assert answer.status_code == 400
    assert answer.headers["x-amzn-query-error"] == "MissingParameter;Sender"


def test_get_queue_url(sqs: Any, url: str, name: str) -> None:
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=ACCOUNT)["QueueUrl"] == url
    for kwargs in (
        {"QueueName": "nope-" + name},
        {"QueueName": name, "QueueOwnerAWSAccountId": "123456789012"},
    ):
        with pytest.raises(ClientError) as e:
            sqs.get_queue_url(**kwargs)
        assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"
        assert e.value.response["Error"]["QueryErrorCode"] == "QueueDoesNotExist"


def test_a_queue_made_through_the_rest_door_is_found(sqs: Any, sqs_base: str, name: str) -> None:
    dotted = f"rest.{name}"
    assert httpx.post(f"{sqs_base}/push", json={"queue": dotted, "payload": 1}).status_code == 201
    assert sqs.get_queue_url(QueueName=dotted)["QueueUrl"].endswith(f"/{ACCOUNT}/{dotted}")


def test_list_queues_by_prefix_and_pages(sqs: Any, name: str) -> None:
    urls = [sqs.create_queue(QueueName=f"{name}-{n}")["QueueUrl"] for n in range(5)]
    assert sqs.list_queues(QueueNamePrefix=name)["QueueUrls"] == urls
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=f"none-{name}")
    seen: list[str] = []
    kwargs: dict[str, Any] = {"QueueNamePrefix": name, "MaxResults": 2}
    while True:
        page = sqs.list_queues(**kwargs)
        seen += page["QueueUrls"]
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
    assert seen == urls
    with pytest.raises(ClientError) as e:
        sqs.list_queues(MaxResults=1001)
    assert error_code(e) == "InvalidParameterValue"


def test_list_queues_gives_a_next_token_only_when_more_follow(sqs: Any, name: str) -> None:
    urls = [sqs.create_queue(QueueName=f"{name}-{n}")["QueueUrl"] for n in range(4)]
    first = sqs.list_queues(QueueNamePrefix=name, MaxResults=2)
    last = sqs.list_queues(QueueNamePrefix=name, MaxResults=2, NextToken=first["NextToken"])
    assert (first["QueueUrls"], last["QueueUrls"]) == (urls[:2], urls[2:])
    assert "NextToken" not in last
    # Without MaxResults: up to 1000 of them, and no token (as SQS answers).
    assert "NextToken" not in sqs.list_queues(QueueNamePrefix=name, NextToken=first["NextToken"])
    for token in ("not-a-token", first["NextToken"] + "x"):
        with pytest.raises(ClientError) as e:
            sqs.list_queues(QueueNamePrefix=name, MaxResults=2, NextToken=token)
        assert error_code(e) == "InvalidParameterValue"


def test_create_queue_past_the_most_queues_is_over_limit(tmp_path: Path) -> None:
    env = {"SIMPLEQUEUE_MAX_QUEUES": "2"}
    with serving(f"sqlite:///{tmp_path / 'few.db'}", env=env) as base:
        sqs = sqs_client(base)
        urls = [sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("a", "b")]
        with pytest.raises(ClientError) as e:
            sqs.create_queue(QueueName="c")
        assert error_code(e) == "OverLimit"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert "SIMPLEQUEUE_MAX_QUEUES" in e.value.response["Error"]["Message"]
        assert sqs.list_queues()["QueueUrls"] == urls  # c was not made
        assert sqs.create_queue(QueueName="a")["QueueUrl"] == urls[0]  # a queue there is: its url


def test_get_queue_attributes_counts_and_settings(sqs: Any, url: str, name: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="a")
    sqs.send_message(QueueUrl=url, MessageBody="b")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    assert attributes["ApproximateNumberOfMessages"] == "1"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attributes["VisibilityTimeout"] == "30"
    some = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    assert some == {"VisibilityTimeout": "30"}
    with pytest.raises(ClientError) as e:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Nonsense"])
    assert error_code(e) == "InvalidAttributeName"


def test_set_queue_attributes_changes_the_lease(sqs: Any, url: str) -> None:
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "120"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    assert got == {"VisibilityTimeout": "120"}
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "43201"})
    assert error_code(e) == "InvalidAttributeValue"


def test_delete_queue(sqs: Any, url: str, name: str) -> None:
    sqs.send_message(QueueUrl=url, MessageBody="going")
    sqs.receive_message(QueueUrl=url)  # one in flight: SQS deletes the queue anyway
    sqs.delete_queue(QueueUrl=url)
    for call in (lambda: sqs.get_queue_url(QueueName=name), lambda: sqs.delete_queue(QueueUrl=url)):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_another_account_or_a_url_of_no_queue_is_no_queue(
    sqs: Any, sqs_base: str, url: str, name: str
) -> None:
    for other in (f"{sqs_base}/123456789012/{name}", f"{sqs_base}/{name}", f"{sqs_base}/{ACCOUNT}/no-{name}"):
        with pytest.raises(ClientError) as e:
            sqs.send_message(QueueUrl=other, MessageBody="x")
        assert error_code(e) == "AWS.SimpleQueueService.NonExistentQueue"


POLICY = (
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage",'
    '"Resource":"arn:aws:sqs:us-east-1:000000000000:q"}]}'
)
ALLOW = '{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:000000000000:orders"]}'


def test_policies_are_kept_answered_and_removed(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"Policy": POLICY})["QueueUrl"]
    assert sqs.create_queue(QueueName=name, Attributes={"Policy": POLICY})["QueueUrl"] == url
    with pytest.raises(ClientError) as e:
        sqs.create_queue(QueueName=name, Attributes={"Policy": POLICY.replace("Allow", "Deny")})
    assert error_code(e) == "QueueAlreadyExists"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedriveAllowPolicy": ALLOW})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (got["Policy"], got["RedriveAllowPolicy"]) == (POLICY, ALLOW)
    assert (got["DelaySeconds"], got["ReceiveMessageWaitTimeSeconds"]) == ("0", "0")
    assert int(got["MaximumMessageSize"]) >= 1024
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": "", "RedriveAllowPolicy": ""})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in got
    assert "RedriveAllowPolicy" not in got


def test_timestamps_are_when_the_queue_was_made_and_last_changed(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    names = ["CreatedTimestamp", "LastModifiedTimestamp"]
    made = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert made["CreatedTimestamp"] == made["LastModifiedTimestamp"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": POLICY})
    changed = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert changed["CreatedTimestamp"] == made["CreatedTimestamp"]
    assert int(changed["LastModifiedTimestamp"]) >= int(made["LastModifiedTimestamp"])


def test_a_failed_set_changes_nothing(sqs: Any, url: str) -> None:
    with pytest.raises(ClientError) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": POLICY, "VisibilityTimeout": "43201"})
    assert error_code(e) == "InvalidAttributeValue"
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "Policy" not in got
    assert got["VisibilityTimeout"] == "30"


def test_retention_is_four_days_unless_set_and_bounded(sqs: Any, sqs_base: str, name: str) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])["Attributes"]
    assert got == {"MessageRetentionPeriod": "345600"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])["Attributes"]
    assert got == {"MessageRetentionPeriod": "60"}
    for bad in ("59", "1209601", "soon"):
        with pytest.raises(ClientError) as e:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": bad})
        assert error_code(e) == "InvalidAttributeValue"
    # A queue made through the REST API keeps its items until they finish: no period to answer.
    httpx.put(f"{sqs_base}/queues/{name}-rest", json={}).raise_for_status()
    rest = sqs.get_queue_url(QueueName=f"{name}-rest")["QueueUrl"]
    assert (
        "MessageRetentionPeriod"
        not in sqs.get_queue_attributes(QueueUrl=rest, AttributeNames=["All"])["Attributes"]
    )
