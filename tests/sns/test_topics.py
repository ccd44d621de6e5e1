"""Topics, subscriptions and tags through the SNS door: attributes as SNS answers them, CreateTopic's
idempotence, ListTopics' pages of 100, subscriptions listed and changed, tags and their limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sns.conftest import ACCOUNT, error_of, queue_arn, topic_arn


def test_create_topic_is_idempotent_and_answers_sns_attributes(sns: Any, name: str) -> None:
    arn = sns.create_topic(Name=name, Attributes={"DisplayName": "Orders"})["TopicArn"]
    assert arn == topic_arn(name)
    assert sns.create_topic(Name=name, Attributes={"DisplayName": "Orders"})["TopicArn"] == arn
    with pytest.raises(ClientError) as e:
        sns.create_topic(Name=name, Attributes={"DisplayName": "Other"})
    assert error_of(e) == ("InvalidParameter", 400)
    assert "already exists with different attributes" in e.value.response["Error"]["Message"]

    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["TopicArn"] == arn
    assert attributes["Owner"] == ACCOUNT
    assert attributes["DisplayName"] == "Orders"
    assert (attributes["SubscriptionsConfirmed"], attributes["SubscriptionsPending"]) == ("0", "0")
    assert attributes["SubscriptionsDeleted"] == "0"
    assert "FifoTopic" not in attributes
    policy = json.loads(attributes["Policy"])
    assert policy["Statement"][0]["Resource"] == arn
    assert policy["Statement"][0]["Condition"] == {"StringEquals": {"AWS:SourceOwner": ACCOUNT}}
    assert (
        json.loads(attributes["EffectiveDeliveryPolicy"])["http"]["defaultHealthyRetryPolicy"]["numRetries"]
        == 3
    )

    sns.set_topic_attributes(TopicArn=arn, AttributeName="DisplayName", AttributeValue="Renamed")
    sns.set_topic_attributes(TopicArn=arn, AttributeName="SignatureVersion", AttributeValue="2")
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert (attributes["DisplayName"], attributes["SignatureVersion"]) == ("Renamed", "2")

    sns.delete_topic(TopicArn=arn)
    sns.delete_topic(TopicArn=arn)  # again: no error, as on SNS
    with pytest.raises(ClientError) as e:
        sns.get_topic_attributes(TopicArn=arn)
    assert error_of(e) == ("NotFound", 404)
    assert e.value.response["Error"]["Message"] == "Topic does not exist"


def test_list_topics_pages_by_100(sns: Any, name: str) -> None:
    made = {sns.create_topic(Name=f"{name}-{n:03d}")["TopicArn"] for n in range(105)}
    first = sns.list_topics()
    assert len(first["Topics"]) == 100
    assert "NextToken" in first
    seen = [t["TopicArn"] for t in first["Topics"]]
    token = first["NextToken"]
    while token:
        page = sns.list_topics(NextToken=token)
        seen += [t["TopicArn"] for t in page["Topics"]]
        token = page.get("NextToken")
    assert made <= set(seen)
    assert len(seen) == len(set(seen))
    paginated = [t["TopicArn"] for p in sns.get_paginator("list_topics").paginate() for t in p["Topics"]]
    assert paginated == seen


def test_subscriptions_listed_read_changed_and_removed(sns: Any, sqs: Any, name: str) -> None:
    arn = sns.create_topic(Name=name)["TopicArn"]
    sqs.create_queue(QueueName=name)
    subscription = sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn(name))["SubscriptionArn"]
    # Subscribing the same queue again answers the same subscription.
    assert (
        sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn(name))["SubscriptionArn"]
        == subscription
    )
    listed = {
        "SubscriptionArn": subscription,
        "Owner": ACCOUNT,
        "Protocol": "sqs",
        "Endpoint": queue_arn(name),
        "TopicArn": arn,
    }
    assert sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"] == [listed]
    everyone = [s for p in sns.get_paginator("list_subscriptions").paginate() for s in p["Subscriptions"]]
    assert listed in everyone
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["SubscriptionsConfirmed"] == "1"

    attributes = sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]
    assert {k: attributes[k] for k in ("TopicArn", "Endpoint", "Protocol", "Owner")} == {
        "TopicArn": arn,
        "Endpoint": queue_arn(name),
        "Protocol": "sqs",
        "Owner": ACCOUNT,
    }
    assert attributes["PendingConfirmation"] == "false"
    assert attributes["ConfirmationWasAuthenticated"] == "true"
    assert attributes["RawMessageDelivery"] == "false"
    assert "FilterPolicy" not in attributes
    assert "EffectiveDeliveryPolicy" in attributes

    policy = json.dumps({"price": [{"numeric": [">", 10]}]})
    sns.set_subscription_attributes(
        SubscriptionArn=subscription, AttributeName="FilterPolicy", AttributeValue=policy
    )
    sns.set_subscription_attributes(
        SubscriptionArn=subscription, AttributeName="RawMessageDelivery", AttributeValue="true"
    )
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]
    assert (attributes["FilterPolicy"], attributes["FilterPolicyScope"]) == (policy, "MessageAttributes")
    assert attributes["RawMessageDelivery"] == "true"
    sns.set_subscription_attributes(
        SubscriptionArn=subscription, AttributeName="FilterPolicy", AttributeValue=""
    )
    assert "FilterPolicy" not in sns.get_subscription_attributes(SubscriptionArn=subscription)["Attributes"]

    sns.unsubscribe(SubscriptionArn=subscription)
    sns.unsubscribe(SubscriptionArn=subscription)  # again: no error, as on SNS
    assert sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"] == []
    with pytest.raises(ClientError) as e:
        sns.get_subscription_attributes(SubscriptionArn=subscription)
    assert error_of(e) == ("NotFound", 404)


def test_tags_of_a_topic(sns: Any, name: str) -> None:
    arn = sns.create_topic(Name=name, Tags=[{"Key": "team", "Value": "payments"}])["TopicArn"]
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "team", "Value": "payments"}]
    sns.tag_resource(
        ResourceArn=arn, Tags=[{"Key": "env", "Value": "test"}, {"Key": "team", "Value": "billing"}]
    )
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [
        {"Key": "env", "Value": "test"},
        {"Key": "team", "Value": "billing"},
    ]
    sns.untag_resource(ResourceArn=arn, TagKeys=["team", "never-set"])
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "env", "Value": "test"}]

    sns.tag_resource(ResourceArn=arn, Tags=[{"Key": f"k{n}", "Value": "v"} for n in range(49)])
    with pytest.raises(ClientError) as e:
        sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "one-too-many", "Value": "v"}])
    assert error_of(e) == ("TagLimitExceeded", 400)
    assert len(sns.list_tags_for_resource(ResourceArn=arn)["Tags"]) == 50

    with pytest.raises(ClientError) as e:
        sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "aws:reserved", "Value": "v"}])
    assert error_of(e) == ("InvalidParameter", 400)
    gone = topic_arn(name + "-gone")
    for call in (
        lambda: sns.list_tags_for_resource(ResourceArn=gone),
        lambda: sns.tag_resource(ResourceArn=gone, Tags=[{"Key": "a", "Value": "b"}]),
        lambda: sns.untag_resource(ResourceArn=gone, TagKeys=["a"]),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e) == ("ResourceNotFound", 404)
