"""Topics and subscriptions as every dialect keeps them: the flow is written here once, over
statements of the same names in each dialect's queries.sql; each dialect binds the values its own
way (`_topic_run`).

A topic's or subscription's attributes and tags are JSON objects stored whole. A change reads
them, merges in Python and writes back only if the text is still what it read (compare-and-set),
retried a few times, so that two concurrent changes never lose one another's part.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from simplequeue.domain import Conflict, InvalidCursor, Page
from simplequeue.domain.topics import (
    Subscription,
    SubscriptionNotFound,
    Topic,
    TopicChange,
    TopicNotFound,
)
from simplequeue.store import rows
from simplequeue.store.cursors import decode_topic_cursor, encode_topic_cursor
from simplequeue.store.rows import Row

Step = tuple[str, Mapping[str, Any]]
CHANGE_TRIES = 8
SIGNING_KEY = "sns"


def _json(values: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(values.items())), ensure_ascii=False, separators=(",", ":"))


def _as_uuid(value: object) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def topic_of(row: Row) -> Topic:
    return Topic(
        name=row["name"],
        created_at=rows.as_utc(row["created_at"]),
        modified_at=rows.as_utc_or_none(row["modified_at"]),
        attributes=json.loads(row["attributes"]),
        tags=json.loads(row["tags"]),
        subscriptions=int(row["subscriptions"]),
    )


def subscription_of(row: Row) -> Subscription:
    return Subscription(
        id=_as_uuid(row["id"]),
        topic=row["topic"],
        protocol=row["protocol"],
        endpoint=row["endpoint"],
        created_at=rows.as_utc(row["created_at"]),
        attributes=json.loads(row["attributes"]),
        confirmed=bool(row["confirmed"]),
        token=row["token"] or None,
        queue_exists=bool(row["queue_exists"]),
    )


class TopicStore:
    """Topics, subscriptions and the signing key, for a dialect that runs the named statements."""

    async def _topic_run(self, steps: Sequence[Step]) -> list[list[Any]]:
        """Run the statements in one transaction; the rows of each. Values as the domain has them
        (datetimes, UUIDs, bools, None), bound as the dialect needs."""
        raise NotImplementedError

    async def _one(self, statement: str, /, **values: object) -> list[Any]:
        [found] = await self._topic_run([(statement, values)])
        return found

    # --- topics -----------------------------------------------------------------------------------

    async def create_topic(
        self, name: str, attributes: Mapping[str, str], tags: Mapping[str, str], now: datetime
    ) -> tuple[Topic, bool]:
        """Make the topic unless it exists; (the topic as it now is, whether this made it)."""
        values = {"name": name, "now": now, "attributes": _json(attributes), "tags": _json(tags)}
        made, found = await self._topic_run([("topic_create", values), ("topic_get", {"name": name})])
        return topic_of(found[0]), bool(made)

    async def get_topic(self, name: str) -> Topic:
        found = await self._one("topic_get", name=name)
        if not found:
            raise TopicNotFound(f"There is no topic named {name!r}.")
        return topic_of(found[0])

    async def list_topics(self, limit: int, cursor: str | None) -> Page[Topic]:
        after = decode_topic_cursor(cursor)
        found = [topic_of(r) for r in await self._one("topic_page", after=after, limit=limit)]
        return Page(found, encode_topic_cursor(found[-1].name) if len(found) == limit else None)

    async def change_topic(self, name: str, change: TopicChange, now: datetime) -> Topic:
        """Apply the change in one compare-and-set; raises TopicNotFound."""
        for _ in range(CHANGE_TRIES):
            topic = await self.get_topic(name)
            attributes = {**topic.attributes, **change.set_attributes}
            tags = {**topic.tags, **change.set_tags}
            for key in change.unset_attributes:
                attributes.pop(key, None)
            for key in change.unset_tags:
                tags.pop(key, None)
            written = await self._one(
                "topic_update",
                name=name,
                now=now,
                attributes=_json(attributes),
                tags=_json(tags),
                old_attributes=_json(topic.attributes),
                old_tags=_json(topic.tags),
            )
            if written:
                return topic_of(written[0])
        raise Conflict("the topic kept changing under this change: try again")

    async def delete_topic(self, name: str) -> bool:
        """Delete the topic and its subscriptions in one transaction; False if there was none."""
        # The topic first: its row's lock makes a subscribe racing this wait, then find no topic.
        deleted, _ = await self._topic_run(
            [("topic_delete", {"name": name}), ("topic_delete_subscriptions", {"name": name})]
        )
        return bool(deleted)

    # --- subscriptions ----------------------------------------------------------------------------

    async def subscribe(self, subscription: Subscription) -> tuple[Subscription, bool]:
        """Add the subscription unless its topic has one to the same endpoint; (the one there now
        is, whether this made it). Raises TopicNotFound."""
        s = subscription
        values = {
            "id": s.id,
            "topic": s.topic,
            "protocol": s.protocol,
            "endpoint": s.endpoint,
            "attributes": _json(s.attributes),
            "confirmed": s.confirmed,
            "token": s.token,
            "now": s.created_at,
        }
        where = {"topic": s.topic, "protocol": s.protocol, "endpoint": s.endpoint}
        made, found = await self._topic_run([("subscription_create", values), ("subscription_find", where)])
        if not found:
            raise TopicNotFound(f"There is no topic named {s.topic!r}.")
        return subscription_of(found[0]), bool(made)

    async def get_subscription(self, subscription_id: UUID) -> Subscription:
        found = await self._one("subscription_get", id=subscription_id)
        if not found:
            raise SubscriptionNotFound()
        return subscription_of(found[0])

    async def list_subscriptions(
        self, topic: str | None, limit: int, cursor: str | None
    ) -> Page[Subscription]:
        """In id order after the cursor's; every topic's, or one topic's."""
        try:
            after = UUID(cursor) if cursor else None
        except ValueError:
            raise InvalidCursor() from None
        found = [
            subscription_of(r)
            for r in await self._one("subscription_page", topic=topic, after=after, limit=limit)
        ]
        return Page(found, str(found[-1].id) if len(found) == limit else None)

    async def change_subscription(
        self,
        subscription_id: UUID,
        set_attributes: Mapping[str, str],
        unset_attributes: frozenset[str] = frozenset(),
        *,
        confirm: bool = False,
    ) -> Subscription:
        """Set or remove attributes (and confirm it) in one compare-and-set."""
        for _ in range(CHANGE_TRIES):
            now = await self.get_subscription(subscription_id)
            attributes = {**now.attributes, **set_attributes}
            for key in unset_attributes:
                attributes.pop(key, None)
            written = await self._one(
                "subscription_update",
                id=subscription_id,
                attributes=_json(attributes),
                old_attributes=_json(now.attributes),
                confirmed=now.confirmed or confirm,
                token=now.token,  # kept: a confirmation repeated is answered, not refused
            )
            if written:
                return subscription_of(written[0])
        raise Conflict("the subscription kept changing under this change: try again")

    async def unsubscribe(self, subscription_id: UUID) -> bool:
        return bool(await self._one("subscription_delete", id=subscription_id))

    async def topic_subscriptions(self, topic: str) -> tuple[Topic, list[Subscription]]:
        """The topic and every subscription of it, read by one statement (a publish's one read);
        each queue subscription says whether its queue exists. Raises TopicNotFound."""
        found = await self._one("topic_fanout", topic=topic)
        if not found:
            raise TopicNotFound(f"There is no topic named {topic!r}.")
        subscriptions = [subscription_of(r) for r in found if r["id"] is not None]
        head = found[0]
        the_topic = Topic(
            name=topic,
            created_at=rows.as_utc(head["topic_created_at"]),
            modified_at=rows.as_utc_or_none(head["topic_modified_at"]),
            attributes=json.loads(head["topic_attributes"]),
            tags=json.loads(head["topic_tags"]),
            subscriptions=len(subscriptions),
        )
        return the_topic, subscriptions

    # --- the signing key ------------------------------------------------------------------------

    async def signing_key(self, make: Callable[[], tuple[str, str]], now: datetime) -> tuple[str, str]:
        """(private key PEM, certificate PEM) that every replica signs with: the stored one, or one
        that `make` makes, stored now (the first of racing replicas wins; the others read its)."""
        found = await self._one("signing_key_get", name=SIGNING_KEY)
        if not found:
            private_pem, certificate_pem = make()
            values = {"name": SIGNING_KEY, "private_pem": private_pem, "certificate_pem": certificate_pem}
            _, found = await self._topic_run(
                [("signing_key_insert", {**values, "now": now}), ("signing_key_get", {"name": SIGNING_KEY})]
            )
        return found[0]["private_pem"], found[0]["certificate_pem"]
