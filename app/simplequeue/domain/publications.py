"""Publishes made inside an application's own transaction (simplequeue.outbox.publish, sq_publish):
each is an item of one queue, PUBLICATIONS, pushed in that transaction, so that it exists if and only
if the transaction commits; every replica's relay (service.topics) pops them and publishes each to
its topic, with the item's id as the message's id, so that a relay retried after a crash
delivers nothing twice.

A publication's payload is {"topic", "message", and optionally "subject", "attributes" (the HTTP
API's shape: {name: {"type", "value"}}), "group", "dedup_key"}. One that cannot be published (its
topic is gone, a FIFO rule broken) dies in PUBLICATIONS with the reason, where the dashboard and
`GET /queues/simplequeue.publications/dead` show it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simplequeue.domain.attributes import Attribute, attribute_of, check_attributes
from simplequeue.domain.topics import is_fifo_name, is_topic_name

PUBLICATIONS = "simplequeue.publications"
MAX_SUBJECT_CHARS = 100
MAX_GROUP_CHARS = 128


@dataclass(frozen=True, slots=True)
class Publication:
    """A message as its publisher gives it. `message`: text for SNS; any JSON value through the
    REST API and the outbox (then a notification's Message is its JSON text, and raw delivery
    hands the value on)."""

    message: Any
    subject: str | None = None
    attributes: Mapping[str, Attribute] | None = None
    id: Any = None
    """The publisher's message id (a UUID): a publish retried with it delivers nothing twice."""
    group: str | None = None
    """MessageGroupId: required by a FIFO topic, refused by another."""
    dedup_id: str | None = None
    """MessageDeduplicationId, of a FIFO topic."""


class InvalidPublication(ValueError):
    """The publication is not one a topic can take. (Not a QueueError: the HTTP API never answers
    it; the outbox raises it before the database is touched, and the relay names it in the dead
    publication's error.)"""


def relay_group(topic: str) -> str | None:
    """The group a FIFO topic's publications take in PUBLICATIONS, so that the relay publishes
    them in order: the topic's name, or its digest when the name is longer than a group may be."""
    if not is_fifo_name(topic):
        return None
    return topic if len(topic) <= MAX_GROUP_CHARS else hashlib.sha256(topic.encode()).hexdigest()


def publication_payload(topic: str, publication: Publication) -> dict[str, Any]:
    """The PUBLICATIONS item's payload, checked by the rules a publish checks that need no
    database (the topic's name, the subject, attributes, FIFO's group)."""
    if not is_topic_name(topic):
        raise InvalidPublication(f"{topic!r} is not a topic's name")
    p = publication
    if p.subject is not None and not (isinstance(p.subject, str) and 0 < len(p.subject) <= MAX_SUBJECT_CHARS):
        raise InvalidPublication(f"a subject is 1 to {MAX_SUBJECT_CHARS} characters")
    if is_fifo_name(topic) and p.group is None:
        raise InvalidPublication("a FIFO topic's messages need a group (MessageGroupId)")
    if not is_fifo_name(topic) and (p.group is not None or p.dedup_id is not None):
        raise InvalidPublication("group and dedup_key are for FIFO topics (names ending in .fifo)")
    payload: dict[str, Any] = {"topic": topic, "message": p.message}
    if p.subject is not None:
        payload["subject"] = p.subject
    if p.attributes:
        check_attributes(p.attributes)
        payload["attributes"] = {
            name: {"type": a.type, "value": a.value if isinstance(a.value, str) else _b64(a.value)}
            for name, a in sorted(p.attributes.items())
        }
    if p.group is not None:
        payload["group"] = p.group
    if p.dedup_id is not None:
        payload["dedup_key"] = p.dedup_id
    return payload


def read_publication(payload: object, item_id: Any) -> tuple[str, Publication]:
    """(topic, publication) of a PUBLICATIONS item; InvalidPublication for one no publisher of
    ours wrote (sq_publish from SQL is checked only here)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("topic"), str) or "message" not in payload:
        raise InvalidPublication("a publication is a JSON object with a topic and a message")
    given = payload.get("attributes") or {}
    if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
        raise InvalidPublication("a publication's attributes are {name: {type, value}}")
    attributes = {n: attribute_of(n, a.get("type"), a.get("value")) for n, a in given.items()}
    publication = Publication(
        payload["message"],
        payload.get("subject"),
        attributes or None,
        item_id,
        payload.get("group"),
        payload.get("dedup_key"),
    )
    topic: str = payload["topic"]
    publication_payload(topic, publication)  # the same rules as when it was written
    return topic, publication


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def message_text(publication: Publication) -> str:
    """The message as a notification's Message carries it: a string as it is, anything else as its
    compact JSON text."""
    if isinstance(publication.message, str):
        return publication.message
    return json.dumps(publication.message, ensure_ascii=False, separators=(",", ":"))
