"""SNS's errors through the door, with SNS's codes and statuses: through boto3 where it lets a call
through, by hand-made forms where it does not (those also show the dispatch by Action and the
ErrorResponse's shape)."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sns.conftest import error_of, queue_arn, topic_arn

NS = "{http://sns.amazonaws.com/doc/2010-03-31/}"


def refused(call: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as e:
        call()
    code, status = error_of(e)
    return code, status, e.value.response["Error"]["Message"]


def form(base: str, **params: str) -> tuple[int, ElementTree.Element]:
    """A hand-made unsigned query-protocol request (the service has no keys)."""
    answer = httpx.post(base + "/", data=params)
    return answer.status_code, ElementTree.fromstring(answer.content)


def test_not_found_and_invalid_parameter(sns: Any, sqs: Any, name: str) -> None:
    gone = topic_arn(name + "-gone")
    for call in (
        lambda: sns.get_topic_attributes(TopicArn=gone),
        lambda: sns.set_topic_attributes(TopicArn=gone, AttributeName="DisplayName", AttributeValue="x"),
        lambda: sns.publish(TopicArn=gone, Message="m"),
        lambda: sns.subscribe(TopicArn=gone, Protocol="sqs", Endpoint=queue_arn(name)),
        lambda: sns.list_subscriptions_by_topic(TopicArn=gone),
        # Another account's topic is none of ours.
        lambda: sns.get_topic_attributes(TopicArn=f"arn:aws:sns:us-east-1:123456789012:{name}"),
    ):
        assert refused(call) == ("NotFound", 404, "Topic does not exist")
    assert refused(lambda: sns.get_topic_attributes(TopicArn="not-an-arn"))[:2] == ("InvalidParameter", 400)
    assert refused(lambda: sns.create_topic(Name="bad name!"))[:2] == ("InvalidParameter", 400)

    arn = sns.create_topic(Name=name)["TopicArn"]
    code, _, message = refused(
        lambda: sns.subscribe(TopicArn=arn, Protocol="email", Endpoint="a@example.com")
    )
    assert code == "InvalidParameter"
    assert message.startswith("Invalid parameter: Protocol")
    code, _, message = refused(
        lambda: sns.subscribe(TopicArn=arn, Protocol="http", Endpoint="http://169.254.169.254/latest/")
    )
    assert code == "InvalidParameter"
    assert message.startswith("Invalid parameter: Endpoint")
    assert refused(lambda: sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint="queue-name"))[:2] == (
        "InvalidParameter",
        400,
    )
    bad_policy = {"FilterPolicy": json.dumps({"a": "not a list"})}
    assert (
        refused(
            lambda: sns.subscribe(
                TopicArn=arn, Protocol="sqs", Endpoint=queue_arn(name), Attributes=bad_policy
            )
        )[0]
        == "InvalidParameter"
    )
    assert refused(
        lambda: sns.set_topic_attributes(TopicArn=arn, AttributeName="Nope", AttributeValue="x")
    ) == (
        "InvalidParameter",
        400,
        "Invalid parameter: AttributeName: Nope",
    )
    # What the XML answers could not carry is refused, not kept.
    control = refused(
        lambda: sns.set_topic_attributes(TopicArn=arn, AttributeName="DisplayName", AttributeValue="\x01")
    )
    assert control[0] == "InvalidParameter"
    code, _, message = refused(lambda: sns.publish(TopicArn=arn, Message="m", MessageGroupId="g"))
    assert code == "InvalidParameter"
    assert "valid only for FIFO topics" in message
    assert (
        refused(lambda: sns.publish(TopicArn=arn, Message="m", Subject="two\nlines"))[0] == "InvalidParameter"
    )
    assert refused(lambda: sns.publish(TopicArn=arn, Message="x" * (256 * 1024 + 1)))[0] == "InvalidParameter"
    assert refused(lambda: sns.publish(TopicArn=arn, MessageStructure="json", Message='{"email": "e"}'))[
        2
    ] == ("Invalid parameter: Message Structure - No default entry in JSON message body")
    bad_attribute = {"a": {"DataType": "Colour", "StringValue": "red"}}
    assert refused(lambda: sns.publish(TopicArn=arn, Message="m", MessageAttributes=bad_attribute))[:2] == (
        "ParameterValueInvalid",
        400,
    )
    not_an_array = {"tags": {"DataType": "String.Array", "StringValue": '"red"'}}
    code, _, message = refused(lambda: sns.publish(TopicArn=arn, Message="m", MessageAttributes=not_an_array))
    assert code == "ParameterValueInvalid"
    assert "must be a JSON array" in message
    # A token this topic never sent.
    assert refused(lambda: sns.confirm_subscription(TopicArn=arn, Token="abc"))[:2] == (
        "InvalidParameter",
        400,
    )
    assert refused(lambda: sns.confirm_subscription(TopicArn=gone, Token="abc"))[0] == "NotFound"
    assert (
        refused(lambda: sns.get_subscription_attributes(SubscriptionArn=arn + ":nope"))[0]
        == "InvalidParameter"
    )
    assert refused(
        lambda: sns.get_subscription_attributes(SubscriptionArn=arn + ":00000000-0000-4000-8000-000000000000")
    ) == ("NotFound", 404, "Subscription does not exist")


def test_batch_errors(sns: Any, sqs_base: str, name: str) -> None:
    arn = sns.create_topic(Name=name)["TopicArn"]
    eleven = [{"Id": f"e{n}", "Message": "m"} for n in range(11)]
    assert refused(lambda: sns.publish_batch(TopicArn=arn, PublishBatchRequestEntries=eleven))[:2] == (
        "TooManyEntriesInBatchRequest",
        400,
    )
    twice = [{"Id": "same", "Message": "m"}, {"Id": "same", "Message": "n"}]
    assert refused(lambda: sns.publish_batch(TopicArn=arn, PublishBatchRequestEntries=twice))[:2] == (
        "BatchEntryIdsNotDistinct",
        400,
    )
    bad_id = [{"Id": "not ok!", "Message": "m"}]
    assert (
        refused(lambda: sns.publish_batch(TopicArn=arn, PublishBatchRequestEntries=bad_id))[0]
        == "InvalidBatchEntryId"
    )
    status, root = form(sqs_base, Action="PublishBatch", TopicArn=arn, PublishBatchRequestEntries="")
    assert status == 400
    assert root.findtext(f"{NS}Error/{NS}Code") == "EmptyBatchRequest"


def test_the_error_response_and_an_unknown_action(sqs_base: str, name: str) -> None:
    status, root = form(sqs_base, Action="GetTopicAttributes", TopicArn=topic_arn(name), Version="2010-03-31")
    assert status == 404
    assert root.tag == f"{NS}ErrorResponse"
    assert root.findtext(f"{NS}Error/{NS}Type") == "Sender"
    assert root.findtext(f"{NS}Error/{NS}Code") == "NotFound"
    assert root.findtext(f"{NS}Error/{NS}Message") == "Topic does not exist"
    assert root.findtext(f"{NS}RequestId")
    status, root = form(sqs_base, Action="CreateTopic")
    assert (status, root.findtext(f"{NS}Error/{NS}Code")) == (400, "ValidationError")


def test_an_action_sns_has_and_the_door_does_not(sns: Any) -> None:
    code, status, message = refused(lambda: sns.list_platform_applications())
    assert (code, status) == ("InvalidAction", 400)
    assert message == "The action ListPlatformApplications is not valid for this web service."


def test_a_body_too_large_is_refused_in_sns_s_shape(sqs_base: str) -> None:
    """The front door refuses it before any door reads it; a request signed for `sns` is answered as
    the SNS door answers (its XML namespace), one signed for `sqs` as the SQS door does."""
    body = b"Action=Publish&Message=" + b"x" * (11 * 1024 * 1024)
    for service, namespace in (
        ("sns", "http://sns.amazonaws.com/doc/2010-03-31/"),
        ("sqs", "http://queue.amazonaws.com/doc/2012-11-05/"),
    ):
        signed = {
            "content-type": "application/x-www-form-urlencoded",
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIDANYTHING/20261128/us-east-1/"
            f"{service}/aws4_request, SignedHeaders=host, Signature=00",
        }
        answer = httpx.post(sqs_base + "/", content=body, headers=signed, timeout=30)
        assert answer.status_code == 413
        root = ElementTree.fromstring(answer.content)
        assert root.tag == f"{{{namespace}}}ErrorResponse", answer.text
        assert root.findtext(f"{{{namespace}}}Error/{{{namespace}}}Code") == "RequestEntityTooLarge"
