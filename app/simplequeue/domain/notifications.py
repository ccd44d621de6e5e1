"""What a topic delivers to a subscription: SNS's JSON notification (its envelope), or with raw
delivery the message itself.

The envelope's fields and their order are SNS's. The signature covers fields that are the same
for every subscription of one publish (Message, MessageId, Subject, Timestamp, TopicArn, Type), so
a publish signs once and every envelope carries that signature; only UnsubscribeURL differs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from simplequeue.domain.attributes import Attribute


@dataclass(frozen=True, slots=True)
class Arns:
    """The account and region that topic and subscription ARNs name."""

    region: str
    account_id: str

    def topic(self, name: str) -> str:
        return f"arn:aws:sns:{self.region}:{self.account_id}:{name}"

    def subscription(self, topic: str, subscription_id: UUID) -> str:
        return f"{self.topic(topic)}:{subscription_id}"

    def queue(self, name: str) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account_id}:{name}"

    def topic_of(self, arn: str) -> str | None:
        """The topic an ARN of this account and region names (None: another's, or no topic ARN)."""
        prefix = self.topic("")
        name = arn.removeprefix(prefix)
        return name if name != arn and name and ":" not in name else None

    def queue_of(self, arn: str) -> str | None:
        prefix = self.queue("")
        name = arn.removeprefix(prefix)
        return name if name != arn and name and ":" not in name else None

    def subscription_of(self, arn: str) -> tuple[str, UUID] | None:
        """(topic, subscription id) of a subscription ARN of this account and region."""
        head, _, tail = arn.rpartition(":")
        topic = self.topic_of(head)
        try:
            return (topic, UUID(tail)) if topic else None
        except ValueError:
            return None


def timestamp(moment: datetime) -> str:
    """SNS's Timestamp: UTC, milliseconds, Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def envelope_attributes(attributes: Mapping[str, Attribute]) -> dict[str, dict[str, str]]:
    """Message attributes as the envelope carries them: {name: {Type, Value}}, Binary in base64."""
    return {
        name: {
            "Type": a.type,
            "Value": base64.b64encode(a.value).decode() if isinstance(a.value, bytes) else a.value,
        }
        for name, a in sorted(attributes.items())
    }


def signed_fields(
    message_id: UUID, topic_arn: str, message: str, subject: str | None, moment: datetime
) -> dict[str, str]:
    """The fields a notification's signature covers, in the envelope's order."""
    fields = {"Type": "Notification", "MessageId": str(message_id), "TopicArn": topic_arn}
    if subject is not None:
        fields["Subject"] = subject
    fields |= {"Message": message, "Timestamp": timestamp(moment)}
    return fields


def envelope(
    signed: Mapping[str, str],
    *,
    signature_version: str,
    signature: str,
    signing_cert_url: str,
    unsubscribe_url: str,
    attributes: Mapping[str, Attribute],
    sequence_number: str | None = None,
) -> dict[str, object]:
    """One subscription's notification: the signed fields, the signature, and its own URLs."""
    body: dict[str, object] = dict(signed)
    if sequence_number is not None:
        body["SequenceNumber"] = sequence_number
    body |= {
        "SignatureVersion": signature_version,
        "Signature": signature,
        "SigningCertURL": signing_cert_url,
        "UnsubscribeURL": unsubscribe_url,
    }
    if attributes:
        body["MessageAttributes"] = envelope_attributes(attributes)
    return body


def envelope_texts(
    signed: Mapping[str, str],
    unsubscribe_urls: list[str],
    *,
    signature_version: str,
    signature: str,
    signing_cert_url: str,
    attributes: Mapping[str, Attribute],
) -> list[str]:
    """The JSON text of each subscription's notification (envelope() for each URL, serialised):
    what they share is serialised once and each URL spliced in, since a publish to many
    subscriptions spent most of its time serialising the same fields again."""
    common = envelope(
        signed,
        signature_version=signature_version,
        signature=signature,
        signing_cert_url=signing_cert_url,
        unsubscribe_url="",
        attributes=attributes,
    )
    text = _dumps(common)
    marker = '"UnsubscribeURL":""'
    head, tail = text.split(marker, 1)
    return [f'{head}"UnsubscribeURL":{_dumps(url)}{tail}' for url in unsubscribe_urls]


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
