"""What a topic sends to its HTTP/S subscribers, as items of one queue, DELIVERIES: a notification
(a publish's) or a SubscriptionConfirmation (a subscribe's). Each item is pushed in the
transaction that made it, so a publish rolled back sends nothing; every replica's deliverer
(service.deliveries) pops them, POSTs each, and retries or gives up by the subscription's delivery
policy. One that gives up goes to the subscription's dead-letter queue (RedrivePolicy) or dies in
DELIVERIES with its reason, where the dashboard and `GET /queues/simplequeue.deliveries/dead` show it.

A delivery's payload: {"subscription": its id, "type": "Notification" or
"SubscriptionConfirmation", "raw": whether only Message is sent, "message": the JSON message}.
The endpoint's URL is read from the subscription when it is sent, so a subscription deleted in
the meantime receives nothing more.

Confirmation tokens: the subscription's id in hex, then 64 random hex digits. The id lets an
anonymous ConfirmSubscription (an endpoint visiting its SubscribeURL) find the subscription in one
lookup; the random part is what proves the caller received the confirmation.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from simplequeue.domain.delivery_policy import MAX_RETRIES
from simplequeue.domain.notifications import timestamp

DELIVERIES = "simplequeue.deliveries"
MAX_ATTEMPTS = MAX_RETRIES + 1
"""The queue's own limit never ends a delivery before its policy does: the policy decides."""
LEASE_SECONDS = 30
"""Longer than one attempt can take (its time-out is bounded well below this)."""

MessageType = Literal["Notification", "SubscriptionConfirmation"]
NOTIFICATION: MessageType = "Notification"
CONFIRMATION: MessageType = "SubscriptionConfirmation"


@dataclass(frozen=True, slots=True)
class Delivery:
    subscription: UUID
    type: MessageType
    message: Mapping[str, Any]
    raw: bool = False


class InvalidDelivery(ValueError):
    """An item of DELIVERIES that is not a delivery (pushed by hand): it dies with this reason."""


def delivery_payload(delivery: Delivery) -> dict[str, Any]:
    return {
        "subscription": str(delivery.subscription),
        "type": delivery.type,
        "raw": delivery.raw,
        "message": dict(delivery.message),
    }


def read_delivery(payload: object) -> Delivery:
    if not isinstance(payload, dict):
        raise InvalidDelivery("a delivery is a JSON object")
    kind = payload.get("type")
    if kind not in (NOTIFICATION, CONFIRMATION):
        raise InvalidDelivery("type must be Notification or SubscriptionConfirmation")
    message = payload.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("MessageId"), str):
        raise InvalidDelivery("message must be an SNS message with its MessageId")
    try:
        subscription = UUID(str(payload.get("subscription")))
    except ValueError:
        raise InvalidDelivery("subscription must be a subscription's id") from None
    return Delivery(subscription, kind, message, bool(payload.get("raw", False)))


def new_token(subscription_id: UUID) -> str:
    return subscription_id.hex + secrets.token_hex(32)


def token_subscription(token: str) -> UUID | None:
    """The subscription a token names (None: not one of ours)."""
    if len(token) != 96:
        return None
    try:
        return UUID(hex=token[:32])
    except ValueError:
        return None


def token_matches(given: str, kept: str | None) -> bool:
    return kept is not None and hmac.compare_digest(given.encode(), kept.encode())


def confirmation_fields(
    message_id: UUID, topic_arn: str, token: str, subscribe_url: str, moment: datetime
) -> dict[str, str]:
    """A SubscriptionConfirmation's signed fields, in SNS's order (the signature and the
    certificate's URL are added beside them)."""
    return {
        "Type": CONFIRMATION,
        "MessageId": str(message_id),
        "Token": token,
        "TopicArn": topic_arn,
        "Message": f"You have chosen to subscribe to the topic {topic_arn}.\n"
        f"To confirm the subscription, visit the SubscribeURL included in this message.",
        "SubscribeURL": subscribe_url,
        "Timestamp": timestamp(moment),
    }


def dead_letter_body(delivery: Delivery) -> str:
    """What a subscription's dead-letter queue receives: what the endpoint would have (the JSON
    message, or with raw delivery its Message)."""
    if delivery.raw:
        return str(delivery.message.get("Message", ""))
    return json.dumps(delivery.message, ensure_ascii=False, separators=(",", ":"))
