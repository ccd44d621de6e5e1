"""Topics and their subscriptions: one published message, one delivery per matching subscription
(Amazon SNS's topic → queues fan-out).

A topic is a name and the attributes and tags its callers set. A subscription joins a topic to an
endpoint: one of our queues (protocol `sqs`, the queue's name kept beside its ARN) or an HTTP(S)
URL. A publish writes one item per matching queue subscription in one transaction; each item's
id is derived from the message's id and the subscription's (`delivery_id`), so that a publish
retried with the same message id delivers nothing twice: the queue remembers the id.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from simplequeue.domain.errors import Conflict, NotFound, QueueError

TOPIC_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,256}$|^[A-Za-z0-9_-]{1,251}\.fifo$"
"""SNS's rule: letters, digits, hyphens and underscores, 1 to 256 characters, and `.fifo` at the
end of a FIFO topic's name (counted in the 256)."""
_TOPIC_NAME = re.compile(r"\A(?:[A-Za-z0-9_-]{1,256}|[A-Za-z0-9_-]{1,251}\.fifo)\Z")

Protocol = Literal["sqs", "http", "https"]
PROTOCOLS: tuple[Protocol, ...] = ("sqs", "http", "https")

RAW_MESSAGE_DELIVERY = "RawMessageDelivery"
FILTER_POLICY = "FilterPolicy"
FILTER_POLICY_SCOPE = "FilterPolicyScope"
FIFO_TOPIC = "FifoTopic"
CONTENT_BASED_DEDUPLICATION = "ContentBasedDeduplication"
SIGNATURE_VERSION = "SignatureVersion"

_DELIVERIES = uuid.UUID("6a1d0c4e-58f3-4c8e-9a55-3f0b8d2e7c11")
"""The namespace of delivery ids (uuid5): any fixed value serves, it must only never change."""


class TopicNotFound(NotFound):
    """There is no topic with this name."""


class SubscriptionNotFound(NotFound):
    """There is no subscription with this id."""


class TopicExists(Conflict):
    """A topic of this name exists with other attributes."""


class InvalidTopic(QueueError):
    """The topic's name or attributes are not valid."""


class InvalidSubscription(QueueError):
    """The subscription's protocol, endpoint or attributes are not valid."""


def is_topic_name(value: object) -> bool:
    return isinstance(value, str) and _TOPIC_NAME.fullmatch(value) is not None


def is_fifo_name(name: str) -> bool:
    return name.endswith(".fifo")


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    created_at: datetime
    modified_at: datetime | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    subscriptions: int = 0
    """How many subscriptions it has (confirmed or not), as counted when it was read."""

    @property
    def fifo(self) -> bool:
        return self.attributes.get(FIFO_TOPIC, "false") == "true"


@dataclass(frozen=True, slots=True)
class Subscription:
    id: uuid.UUID
    topic: str
    protocol: Protocol
    endpoint: str
    """The queue's name for `sqs` (the ARN it was given is the door's, not ours), the URL otherwise."""
    created_at: datetime
    attributes: Mapping[str, str] = field(default_factory=dict)
    confirmed: bool = True
    """Queue subscriptions are confirmed when made; HTTP ones once their endpoint confirms."""
    token: str | None = None
    """The confirmation token sent to an HTTP/S endpoint (domain.deliveries.new_token)."""
    queue_exists: bool = True
    """For `sqs`: whether the queue exists as this was read (a publish skips one that does not)."""

    @property
    def raw(self) -> bool:
        return self.attributes.get(RAW_MESSAGE_DELIVERY, "false").lower() == "true"

    @property
    def queue(self) -> str | None:
        return self.endpoint if self.protocol == "sqs" else None


@dataclass(frozen=True, slots=True)
class TopicChange:
    """Attributes and tags to set or remove, applied in one transaction."""

    set_attributes: Mapping[str, str] = field(default_factory=dict)
    unset_attributes: frozenset[str] = frozenset()
    set_tags: Mapping[str, str] = field(default_factory=dict)
    unset_tags: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Published:
    """What a publish did: its message id and the queues it delivered to (a retried publish whose
    deliveries were made before answers them as delivered)."""

    message_id: uuid.UUID
    queues: tuple[str, ...]
    endpoints: int = 0
    """HTTP(S) deliveries queued."""


def delivery_id(message_id: uuid.UUID, subscription_id: uuid.UUID) -> uuid.UUID:
    """The id of the item that delivers a message to a subscription: the same for a retried publish."""
    return uuid.uuid5(_DELIVERIES, f"{message_id}/{subscription_id}")
