"""The topics' request and response bodies. Generated clients depend on these shapes.

Attributes are Amazon SNS's, by their SNS names, typed here so that the spec says which names and
values a topic or a subscription takes; what only the service can judge (a FIFO attribute on a
topic whose name is not FIFO's, a filter policy's grammar) is its 422 InvalidTopic or
InvalidSubscription, in SNS's words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from simplequeue.api.fields import Body, Key
from simplequeue.api.items.schemas import ATTRIBUTES_SCHEMA, MessageAttributeRequest
from simplequeue.domain import attribute_of
from simplequeue.domain.names import QUEUE_NAME_PATTERN
from simplequeue.domain.publications import Publication
from simplequeue.domain.topics import Published, Subscription, Topic

Flag = Literal["true", "false"]


class _Attributes(Body):
    """Only the attributes given are set (null: as if not given)."""

    model_config = ConfigDict(extra="forbid")

    def given(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump(by_alias=True).items() if v is not None}


class TopicAttributeChanges(_Attributes):
    """A topic's Amazon SNS attributes that may change."""

    DisplayName: str | None = Field(None, max_length=100, description="A display name.")
    Policy: str | None = Field(None, max_length=30_000, description="An access policy, kept (not enforced).")
    DeliveryPolicy: str | None = Field(
        None,
        max_length=30_000,
        description="SNS's {\"http\": {...}}: the defaults of the topic's HTTP/S subscriptions (JSON text).",
    )
    SignatureVersion: Literal["1", "2"] | None = Field(
        None, description="How notifications are signed: 1 SHA1withRSA (the default), 2 SHA256withRSA."
    )
    TracingConfig: Literal["PassThrough", "Active"] | None = None
    KmsMasterKeyId: str | None = Field(None, max_length=2048)
    ContentBasedDeduplication: Flag | None = Field(
        None, description="FIFO topics only: a message without a dedup_key is deduplicated by its SHA-256."
    )
    ArchivePolicy: str | None = Field(None, max_length=30_000)
    DataProtectionPolicy: str | None = Field(None, max_length=30_000)
    FifoThroughputScope: Literal["Topic", "MessageGroup"] | None = None


class TopicAttributes(TopicAttributeChanges):
    """A topic's Amazon SNS attributes, as it is made."""

    FifoTopic: Flag | None = Field(
        None,
        description="Whether it is a FIFO topic: a name ending in .fifo makes one (true, if given).",
    )


TopicAttributeName = Literal[
    "DisplayName",
    "Policy",
    "DeliveryPolicy",
    "SignatureVersion",
    "TracingConfig",
    "KmsMasterKeyId",
    "ContentBasedDeduplication",
    "ArchivePolicy",
    "DataProtectionPolicy",
    "FifoThroughputScope",
]


class SubscriptionAttributes(_Attributes):
    """A subscription's Amazon SNS attributes."""

    RawMessageDelivery: Flag | None = Field(
        None,
        description="true: the queue gets the message itself, its attributes as the item's; false (the "
        "default): SNS's JSON notification.",
    )
    FilterPolicy: str | None = Field(
        None,
        max_length=256 * 1024,
        description="An SNS filter policy (JSON text); the empty text removes it.",
    )
    FilterPolicyScope: Literal["MessageAttributes", "MessageBody"] | None = Field(
        None, description="What the filter policy reads: the message's attributes (the default) or its body."
    )
    RedrivePolicy: str | None = Field(
        None,
        max_length=2048,
        description='{"deadLetterTargetArn": "<a queue\'s SQS ARN>"}: where an HTTP/S delivery goes once '
        "its policy gives up on it.",
    )
    DeliveryPolicy: str | None = Field(
        None,
        max_length=30_000,
        description="HTTP/S retries, throttle and Content-Type: SNS's healthyRetryPolicy, throttlePolicy "
        "and requestPolicy (JSON text).",
    )
    SubscriptionRoleArn: str | None = Field(None, max_length=2048)
    ReplayPolicy: str | None = Field(None, max_length=30_000)


SubscriptionAttributeName = Literal[
    "RawMessageDelivery",
    "FilterPolicy",
    "FilterPolicyScope",
    "RedrivePolicy",
    "DeliveryPolicy",
    "SubscriptionRoleArn",
    "ReplayPolicy",
]


class TopicRequest(Body):
    """A topic to make, or to find as it is (the same attributes)."""

    attributes: TopicAttributes = Field(default_factory=TopicAttributes)
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

    set_attributes: TopicAttributeChanges = Field(default_factory=TopicAttributeChanges)
    unset_attributes: list[TopicAttributeName] = Field(default_factory=list, max_length=20)
    set_tags: dict[str, str] = Field(default_factory=dict, max_length=50)
    unset_tags: list[str] = Field(default_factory=list, max_length=50)


ENDPOINT_URL_PATTERN = r"^https?://[A-Za-z0-9._-]+(:[0-9]{1,5})?(/[!-~]*)?$"


class SubscriptionRequest(Body):
    """A queue, or an HTTP/S endpoint, to deliver the topic's messages to."""

    protocol: Literal["sqs", "http", "https"] = Field(
        "sqs",
        description="sqs: one of this service's queues; http, https: a URL, sent SNS's messages by POST "
        "once it confirms the subscription (it is sent a SubscriptionConfirmation).",
    )
    endpoint: str = Field(
        ...,
        max_length=2048,
        pattern=f"{QUEUE_NAME_PATTERN}|{ENDPOINT_URL_PATTERN}",
        description="The queue's name for sqs; the URL for http and https (its host a name or an IPv4 "
        "address; an IPv6 literal is not taken).",
    )
    attributes: SubscriptionAttributes = Field(default_factory=SubscriptionAttributes)


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
    set_attributes: SubscriptionAttributes = Field(default_factory=SubscriptionAttributes)
    unset_attributes: list[SubscriptionAttributeName] = Field(default_factory=list, max_length=10)


class PublishRequest(Body):
    """One message for every subscription whose filter it passes."""

    message: Any = Field(
        ...,
        description="Any JSON value. A raw subscription's item carries it as given; an SNS notification "
        "carries it as Message (a string as it is, anything else as its JSON text).",
    )
    subject: str | None = Field(None, min_length=1, max_length=100)
    attributes: dict[str, MessageAttributeRequest] | None = Field(
        None,
        max_length=10,
        description="Message attributes, matched by filter policies (named as a push's are).",
        json_schema_extra=ATTRIBUTES_SCHEMA,
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
    endpoints: int = Field(
        description="HTTP/S endpoints it is queued for (simplequeue.deliveries), sent after this answer.",
    )

    @classmethod
    def of(cls, published: Published) -> PublishResponse:
        return cls(
            message_id=published.message_id,
            delivered_to=list(published.queues),
            endpoints=published.endpoints,
        )


class PublishBatchRequest(Body):
    messages: list[PublishRequest] = Field(..., min_length=1, max_length=10)


class PublishBatchResponse(BaseModel):
    results: list[PublishResponse]
