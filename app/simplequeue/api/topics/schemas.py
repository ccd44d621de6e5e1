"""The topics' request and response bodies. Generated clients depend on these shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from simplequeue.api.fields import Body, Key
from simplequeue.api.items.schemas import MessageAttributeRequest
from simplequeue.domain import attribute_of
from simplequeue.domain.publications import Publication
from simplequeue.domain.topics import Published, Subscription, Topic

_ATTRIBUTES_TEXT = (
    "Amazon SNS's attributes by name, as text (DisplayName, Policy, DeliveryPolicy, SignatureVersion "
    "1 or 2, ContentBasedDeduplication for a FIFO topic...). A topic whose name ends in .fifo is a "
    "FIFO topic."
)


class TopicRequest(Body):
    """A topic to make, or to find as it is (the same attributes)."""

    attributes: dict[str, str] = Field(default_factory=dict, description=_ATTRIBUTES_TEXT)
    tags: dict[str, str] = Field(default_factory=dict, max_length=50, description="Tags, key to value.")


class TopicResponse(BaseModel):
    name: str
    arn: str = Field(description="Its Amazon SNS ARN, as the SNS door names it.")
    created_at: datetime
    modified_at: datetime | None
    attributes: dict[str, str]
    tags: dict[str, str]
    subscriptions: int = Field(description="How many subscriptions it has.")

    @classmethod
    def of(cls, topic: Topic, arn: str) -> TopicResponse:
        return cls(
            name=topic.name,
            arn=arn,
            created_at=topic.created_at,
            modified_at=topic.modified_at,
            attributes=dict(topic.attributes),
            tags=dict(topic.tags),
            subscriptions=topic.subscriptions,
        )


class TopicList(BaseModel):
    topics: list[TopicResponse]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class TopicChangeRequest(Body):
    """Attributes and tags to set or remove, in one change."""

    set_attributes: dict[str, str] = Field(default_factory=dict, description=_ATTRIBUTES_TEXT)
    unset_attributes: list[str] = Field(default_factory=list, max_length=50)
    set_tags: dict[str, str] = Field(default_factory=dict, max_length=50)
    unset_tags: list[str] = Field(default_factory=list, max_length=50)


class SubscriptionRequest(Body):
    """A queue to deliver the topic's messages to."""

    protocol: Literal["sqs"] = Field(
        "sqs", description="sqs: one of this service's queues (HTTP endpoints come later)."
    )
    endpoint: str = Field(..., min_length=1, max_length=2048, description="The queue's name, or its SQS ARN.")
    attributes: dict[str, str] = Field(
        default_factory=dict,
        description="Amazon SNS's subscription attributes: RawMessageDelivery (true: the message itself, "
        "its attributes as the item's; false, the default: SNS's JSON notification), FilterPolicy (a JSON "
        "policy), FilterPolicyScope (MessageAttributes or MessageBody), RedrivePolicy, DeliveryPolicy.",
    )


class SubscriptionResponse(BaseModel):
    id: UUID
    arn: str
    topic: str
    protocol: str
    endpoint: str
    attributes: dict[str, str]
    confirmed: bool
    created_at: datetime

    @classmethod
    def of(cls, s: Subscription, arn: str) -> SubscriptionResponse:
        return cls(
            id=s.id,
            arn=arn,
            topic=s.topic,
            protocol=s.protocol,
            endpoint=s.endpoint,
            attributes=dict(s.attributes),
            confirmed=s.confirmed,
            created_at=s.created_at,
        )


class SubscriptionList(BaseModel):
    subscriptions: list[SubscriptionResponse]
    next_cursor: str | None


class SubscriptionChangeRequest(Body):
    set_attributes: dict[str, str] = Field(default_factory=dict)
    unset_attributes: list[str] = Field(default_factory=list, max_length=20)


class PublishRequest(Body):
    """One message for every subscription whose filter it passes."""

    message: Any = Field(
        ...,
        description="Any JSON value. A raw subscription's item carries it as given; an SNS notification "
        "carries it as Message (a string as it is, anything else as its JSON text).",
    )
    subject: str | None = Field(None, min_length=1, max_length=100)
    attributes: dict[str, MessageAttributeRequest] | None = Field(
        None, max_length=10, description="Message attributes, matched by filter policies."
    )
    id: UUID | None = Field(
        None, description="The message's id: a publish retried with it delivers nothing twice."
    )
    group: Key | None = Field(None, description="MessageGroupId: required by a FIFO topic.")
    dedup_key: Key | None = Field(
        None,
        description="MessageDeduplicationId of a FIFO topic (else its ContentBasedDeduplication must be on).",
    )

    def publication(self) -> Publication:
        attributes = {n: attribute_of(n, a.type, a.value) for n, a in (self.attributes or {}).items()}
        return Publication(
            self.message, self.subject, attributes or None, self.id, self.group, self.dedup_key
        )


class PublishResponse(BaseModel):
    message_id: UUID
    delivered_to: list[str] = Field(description="The queues that received it, in subscription order.")

    @classmethod
    def of(cls, published: Published) -> PublishResponse:
        return cls(message_id=published.message_id, delivered_to=list(published.queues))


class PublishBatchRequest(Body):
    messages: list[PublishRequest] = Field(..., min_length=1, max_length=10)


class PublishBatchResponse(BaseModel):
    results: list[PublishResponse]
