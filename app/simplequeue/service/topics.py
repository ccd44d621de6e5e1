"""Topics: making them, subscribing queues to them, and publishing, which delivers one item per
matching queue subscription in one transaction (QueueService.push_across).

Every door (the REST API, the SNS door) calls this; each translates its own input into these calls
and the errors back into its own words. Attribute names and values are SNS's, kept as text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from uuid import UUID, uuid4

from simplequeue.domain import (
    Attribute,
    DatabaseUnavailable,
    Draft,
    Failure,
    InvalidAttributes,
    InvalidPayload,
    Page,
    PayloadTooLarge,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    check_attributes,
)
from simplequeue.domain.filter_policies import SCOPES, FilterPolicy, FilterPolicyError, parse_filter_policy
from simplequeue.domain.names import is_queue_name
from simplequeue.domain.notifications import Arns, envelope_texts, signed_fields
from simplequeue.domain.publications import (
    MAX_SUBJECT_CHARS,
    PUBLICATIONS,
    InvalidPublication,
    Publication,
    message_text,
    read_publication,
)
from simplequeue.domain.sns_signing import SigningKey
from simplequeue.domain.time import Clock
from simplequeue.domain.topics import (
    CONTENT_BASED_DEDUPLICATION,
    FIFO_TOPIC,
    FILTER_POLICY,
    FILTER_POLICY_SCOPE,
    PROTOCOLS,
    RAW_MESSAGE_DELIVERY,
    SIGNATURE_VERSION,
    InvalidSubscription,
    InvalidTopic,
    Published,
    Subscription,
    Topic,
    TopicChange,
    TopicExists,
    TopicNotFound,
    delivery_id,
    is_fifo_name,
    is_topic_name,
)
from simplequeue.service.queues import QueueService
from simplequeue.store.protocol import Store

log = logging.getLogger("simplequeue.topics")

TOPIC_ATTRIBUTES = frozenset(
    {
        "DisplayName",
        "Policy",
        "DeliveryPolicy",
        SIGNATURE_VERSION,
        "TracingConfig",
        "KmsMasterKeyId",
        FIFO_TOPIC,
        CONTENT_BASED_DEDUPLICATION,
        "ArchivePolicy",
        "DataProtectionPolicy",
        "FifoThroughputScope",
    }
)
"""The attributes a topic keeps (SNS's settable ones)."""
CREATE_ONLY = frozenset({FIFO_TOPIC})
SUBSCRIPTION_ATTRIBUTES = frozenset(
    {
        "DeliveryPolicy",
        FILTER_POLICY,
        FILTER_POLICY_SCOPE,
        RAW_MESSAGE_DELIVERY,
        "RedrivePolicy",
        "SubscriptionRoleArn",
        "ReplayPolicy",
    }
)
CERTIFICATE_PATH = "/sns/certificate.pem"
"""Where every replica serves the signing key's certificate (SigningCertURL), under its base URL."""


@lru_cache(maxsize=1024)
def _policy(text: str, scope: str) -> FilterPolicy:
    """A stored policy, parsed once per process (stored ones were checked when set)."""
    return parse_filter_policy(text, scope)  # type: ignore[arg-type]


def _flag(name: str, value: str, error: type[InvalidTopic] | type[InvalidSubscription]) -> str:
    if value.lower() not in ("true", "false"):
        raise error(f"Invalid parameter: {name}: must be true or false")
    return value.lower()


def check_topic_attributes(name: str, attributes: Mapping[str, str], *, creating: bool) -> dict[str, str]:
    """The attributes as stored: SNS's rules for each, or InvalidTopic naming what is wrong."""
    checked: dict[str, str] = {}
    for key, value in attributes.items():
        if key not in TOPIC_ATTRIBUTES or (key in CREATE_ONLY and not creating):
            raise InvalidTopic(f"Invalid parameter: AttributeName: {key}")
        if key in (FIFO_TOPIC, CONTENT_BASED_DEDUPLICATION):
            value = _flag(key, value, InvalidTopic)
        if key == SIGNATURE_VERSION and value not in ("1", "2"):
            raise InvalidTopic("Invalid parameter: SignatureVersion: must be 1 or 2")
        checked[key] = value
    # A name ending in .fifo makes a FIFO topic; FifoTopic, when given, must agree with it.
    fifo = checked.get(FIFO_TOPIC, "true" if is_fifo_name(name) else "false") == "true"
    if creating and fifo != is_fifo_name(name):
        raise InvalidTopic(
            "Invalid parameter: Fifo Topic names must end with .fifo and Standard Topic cannot end with .fifo"
        )
    if checked.get(CONTENT_BASED_DEDUPLICATION) == "true" and not is_fifo_name(name):
        raise InvalidTopic("Invalid parameter: ContentBasedDeduplication: can only be set for FIFO topics")
    return checked


def check_subscription_attributes(
    attributes: Mapping[str, str], scope_now: str | None = None
) -> dict[str, str]:
    """The attributes as stored; the filter policy parsed in the scope it will have."""
    checked: dict[str, str] = {}
    for key, value in attributes.items():
        if key not in SUBSCRIPTION_ATTRIBUTES:
            raise InvalidSubscription(f"Invalid parameter: AttributeName: {key}")
        if key == RAW_MESSAGE_DELIVERY:
            value = _flag(key, value, InvalidSubscription)
        if key == FILTER_POLICY_SCOPE and value not in SCOPES:
            raise InvalidSubscription(
                "Invalid parameter: FilterPolicyScope: Invalid value ["
                + value
                + "]. Please use either MessageBody or MessageAttributes"
            )
        if key == "RedrivePolicy" and value:
            try:
                target = json.loads(value).get("deadLetterTargetArn")
            except (ValueError, AttributeError):
                target = None
            if not isinstance(target, str):
                raise InvalidSubscription(
                    "Invalid parameter: RedrivePolicy: deadLetterTargetArn is missing or not a string"
                )
        checked[key] = value
    policy = checked.get(FILTER_POLICY)
    if policy:  # an empty policy removes it, as in SNS
        scope = checked.get(FILTER_POLICY_SCOPE) or scope_now or "MessageAttributes"
        try:
            parse_filter_policy(policy, scope)  # type: ignore[arg-type]
        except FilterPolicyError as exc:
            raise InvalidSubscription(str(exc)) from None
    return checked


class TopicService:
    def __init__(
        self,
        store: Store,
        queues: QueueService,
        clock: Clock,
        arns: Arns,
        signing_key: SigningKey | None = None,
    ) -> None:
        """signing_key: the operator's (a file), else the one kept in the database, made by the
        first replica that needs one."""
        self._store = store
        self._queues = queues
        self._clock = clock
        self.arns = arns
        self._key: SigningKey | None = signing_key
        self._key_lock = asyncio.Lock()

    # --- topics -----------------------------------------------------------------------------------

    async def create_topic(
        self, name: str, attributes: Mapping[str, str], tags: Mapping[str, str]
    ) -> tuple[Topic, bool]:
        """Make the topic, or answer the one there is if it has the same attributes (SNS's
        CreateTopic is idempotent so); raises TopicExists if it has others."""
        if not is_topic_name(name):
            raise InvalidTopic(
                "Invalid parameter: Topic Name: letters, digits, hyphens and underscores, 1 to 256, "
                "and .fifo at the end of a FIFO topic's"
            )
        checked = check_topic_attributes(name, attributes, creating=True)
        if is_fifo_name(name):
            checked[FIFO_TOPIC] = "true"
        topic, made = await self._store.create_topic(name, checked, tags, self._clock())
        if not made and any(topic.attributes.get(k) != v for k, v in checked.items()):
            raise TopicExists(
                "Invalid parameter: Attributes Reason: Topic already exists with different attributes"
            )
        return topic, made

    async def get_topic(self, name: str) -> Topic:
        return await self._store.get_topic(name)

    async def list_topics(self, limit: int, cursor: str | None) -> Page[Topic]:
        return await self._store.list_topics(limit, cursor)

    async def change_topic(self, name: str, change: TopicChange) -> Topic:
        checked = check_topic_attributes(name, change.set_attributes, creating=False)
        return await self._store.change_topic(
            name,
            TopicChange(checked, change.unset_attributes, change.set_tags, change.unset_tags),
            self._clock(),
        )

    async def delete_topic(self, name: str) -> bool:
        return await self._store.delete_topic(name)

    # --- subscriptions ----------------------------------------------------------------------------

    async def subscribe(
        self, topic: str, protocol: str, endpoint: str, attributes: Mapping[str, str]
    ) -> tuple[Subscription, bool]:
        """Subscribe a queue (protocol `sqs`, endpoint its name or ARN) to the topic; answers the
        subscription it already has to that queue, if any. The queue need not exist yet: a
        publish skips a subscription whose queue does not exist."""
        if protocol not in PROTOCOLS:
            raise InvalidSubscription(
                f"Invalid parameter: Protocol: {protocol} is not one of sqs, http, https"
            )
        if protocol != "sqs":
            raise InvalidSubscription(
                "Invalid parameter: Protocol: HTTP and HTTPS endpoints are not delivered to yet; "
                "subscribe a queue (sqs)"
            )
        queue = self.arns.queue_of(endpoint) or endpoint
        if not is_queue_name(queue):
            raise InvalidSubscription("Invalid parameter: SQS endpoint ARN")
        the_topic = await self._store.get_topic(topic)
        if the_topic.fifo and not is_fifo_name(queue):
            raise InvalidSubscription(
                "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SNS Topics currently only "
                "support FIFO SQS Queues as endpoints"
            )
        checked = check_subscription_attributes(attributes)
        made = Subscription(
            id=uuid4(),
            topic=topic,
            protocol="sqs",
            endpoint=queue,
            created_at=self._clock(),
            attributes=checked,
            confirmed=True,
        )
        subscription, created = await self._store.subscribe(made)
        if not created and dict(subscription.attributes) != checked:
            raise InvalidSubscription(
                "Invalid parameter: Attributes Reason: Subscription already exists with different attributes"
            )
        return subscription, created

    async def get_subscription(self, subscription_id: UUID) -> Subscription:
        return await self._store.get_subscription(subscription_id)

    async def list_subscriptions(
        self, topic: str | None, limit: int, cursor: str | None
    ) -> Page[Subscription]:
        if topic is not None:
            await self._store.get_topic(topic)  # TopicNotFound for a topic there is not
        return await self._store.list_subscriptions(topic, limit, cursor)

    async def change_subscription(
        self, subscription_id: UUID, set_attributes: Mapping[str, str], unset: frozenset[str] = frozenset()
    ) -> Subscription:
        now = await self._store.get_subscription(subscription_id)
        checked = check_subscription_attributes(set_attributes, now.attributes.get(FILTER_POLICY_SCOPE))
        # A scope changed under a policy: the policy must hold in its new scope too.
        policy = now.attributes.get(FILTER_POLICY)
        if FILTER_POLICY_SCOPE in checked and FILTER_POLICY not in checked and policy:
            check_subscription_attributes({FILTER_POLICY: policy, **checked})
        return await self._store.change_subscription(subscription_id, checked, unset)

    async def unsubscribe(self, subscription_id: UUID) -> bool:
        return await self._store.unsubscribe(subscription_id)

    # --- publishing ---------------------------------------------------------------------------------

    async def signing_key(self) -> SigningKey:
        """The key every replica signs with, made and stored by the first that needed one."""
        if self._key is None:
            async with self._key_lock:
                if self._key is None:
                    private_pem, certificate_pem = await self._store.signing_key(_new_key, self._clock())
                    self._key = SigningKey.from_pem(private_pem.encode(), certificate_pem.encode())
        return self._key

    async def publish(self, topic: str, publication: Publication, base_url: str) -> Published:
        """Deliver the message to every subscription whose filter it passes, in one transaction.
        `base_url`: where callers reach this service (the envelope's SigningCertURL and
        UnsubscribeURL start with it)."""
        [published] = await self.publish_batch(topic, [publication], base_url)
        return published

    async def publish_batch(
        self, topic: str, publications: Sequence[Publication], base_url: str
    ) -> list[Published]:
        """Several messages, all delivered in one transaction or none (each checked first)."""
        the_topic, subscriptions = await self._store.topic_subscriptions(topic)
        answers: list[Published] = []
        drafts: list[tuple[str, Draft]] = []
        for publication in publications:
            deliveries = await self._deliveries(the_topic, subscriptions, publication, base_url)
            answers.append(Published(deliveries[0], tuple(queue for queue, _ in deliveries[1])))
            drafts += deliveries[1]
        if drafts:
            await self._queues.push_across(drafts, "message")
        return answers

    async def _deliveries(
        self, topic: Topic, subscriptions: Sequence[Subscription], publication: Publication, base_url: str
    ) -> tuple[UUID, list[tuple[str, Draft]]]:
        """The message's id and its items, by queue."""
        group, dedup = self._fifo_fields(topic, publication)
        if publication.subject is not None and not 0 < len(publication.subject) <= MAX_SUBJECT_CHARS:
            raise InvalidTopic("Invalid parameter: Subject: 1 to 100 characters")
        attributes = dict(publication.attributes or {})
        if attributes:
            check_attributes(attributes)
        message_id = publication.id or uuid4()
        text = message_text(publication)
        matching = [s for s in subscriptions if self._delivers(s, text, attributes)]
        if not matching:
            return message_id, []
        version = topic.attributes.get(SIGNATURE_VERSION, "1")
        signed = signed_fields(
            message_id, self.arns.topic(topic.name), text, publication.subject, self._clock()
        )
        signature = ""
        if not all(s.raw for s in matching):  # signed once: the same for every envelope
            key = await self.signing_key()
            signature = key.sign(signed, "2" if version == "2" else "1")
        cooked = [s for s in matching if not s.raw]
        texts = envelope_texts(
            signed,
            [
                f"{base_url}/?Action=Unsubscribe&SubscriptionArn={self.arns.subscription(topic.name, s.id)}"
                for s in cooked
            ],
            signature_version=version,
            signature=signature,
            signing_cert_url=base_url + CERTIFICATE_PATH,
            attributes=attributes,
        )
        bodies = {s.id: text for s, text in zip(cooked, texts, strict=True)}
        drafts: list[tuple[str, Draft]] = []
        for s in matching:
            item_id = delivery_id(message_id, s.id)
            if s.raw:
                draft = Draft(
                    publication.message,
                    id=item_id,
                    group=group,
                    dedup_key=dedup,
                    attributes=attributes or None,
                )
            else:
                draft = Draft(bodies[s.id], id=item_id, group=group, dedup_key=dedup)
            drafts.append((s.endpoint, draft))
        return message_id, drafts

    @staticmethod
    def _fifo_fields(topic: Topic, publication: Publication) -> tuple[str | None, str | None]:
        if not topic.fifo:
            if publication.group is not None or publication.dedup_id is not None:
                raise InvalidTopic(
                    "Invalid parameter: The request includes MessageGroupId or MessageDeduplicationId, "
                    "which are valid only for FIFO topics"
                )
            return None, None
        if publication.group is None:
            raise InvalidTopic("Invalid parameter: The MessageGroupId parameter is required for FIFO topics")
        dedup = publication.dedup_id
        if dedup is None:
            if topic.attributes.get(CONTENT_BASED_DEDUPLICATION) != "true":
                raise InvalidTopic(
                    "Invalid parameter: The topic should either have ContentBasedDeduplication enabled "
                    "or MessageDeduplicationId provided explicitly"
                )
            dedup = hashlib.sha256(message_text(publication).encode()).hexdigest()
        return publication.group, dedup

    @staticmethod
    def _delivers(s: Subscription, text: str, attributes: Mapping[str, Attribute]) -> bool:
        if not (s.protocol == "sqs" and s.confirmed and s.queue_exists):
            return False
        policy = s.attributes.get(FILTER_POLICY)
        if not policy:
            return True
        scope = s.attributes.get(FILTER_POLICY_SCOPE) or "MessageAttributes"
        parsed = _policy(policy, scope)
        if scope == "MessageBody":
            return parsed.matches_body(text)
        return parsed.matches_attributes(
            {name: (a.type, a.value if isinstance(a.value, str) else "") for name, a in attributes.items()}
        )


def _new_key() -> tuple[str, str]:
    key = SigningKey.generate(f"simplequeue SNS {secrets.token_hex(4)}")
    return key.private_pem().decode(), key.certificate_pem().decode()


# --- the relay of publications made in applications' transactions ----------------------------------

RELAY_BATCH = 50
RELAY_LEASE_SECONDS = 60
RELAY_WAIT_SECONDS = 20.0
RELAY_IDLE_SECONDS = 2.0
"""How long the relay sleeps after an error, or while PUBLICATIONS does not exist (no publication yet)."""
UNPUBLISHABLE = (
    TopicNotFound,
    InvalidTopic,
    InvalidSubscription,
    InvalidPayload,
    InvalidAttributes,
    PayloadTooLarge,
)
"""A publication that raises one of these will raise it again: it dies, with the reason."""


class Relay:
    """Publishes what applications published in their own transactions (domain.publications):
    pops PUBLICATIONS with a long-poll, publishes each item to its topic with the item's id as the
    message's id, completes it. Every replica runs one; leases keep two from taking one item, and
    the message id keeps a lease that ran out (a replica killed mid-way) from delivering twice. A
    FIFO topic's publications form one group there, so they are published in order."""

    def __init__(self, topics: TopicService, queues: QueueService, base_url: str) -> None:
        self._topics = topics
        self._queues = queues
        self._base_url = base_url

    async def run_forever(self) -> None:
        said: str | None = None
        while True:
            if not self._queues.ready:  # the service says (once) why its database is not ready yet
                await asyncio.sleep(RELAY_IDLE_SECONDS)
                continue
            try:
                began = time.monotonic()
                taken = await self.run_once(RELAY_WAIT_SECONDS)
                said = None
                # A long-poll answered at once with nothing: the service is stopping (its waits are
                # closed), so no tight loop of pops while it finishes.
                if taken or time.monotonic() - began > RELAY_WAIT_SECONDS / 2:
                    continue
            except QueueNotFound:
                pass  # nothing was ever published from a transaction
            except (DatabaseUnavailable, SchemaNotReady) as exc:
                # An outage: the requests that meet it answer 503, and the service logs its cause
                # (whose detail names the database, for the operator's log only).
                log.debug("the topics' relay waits for the database (%s)", exc.code)
            except QueueError as exc:
                if exc.code != said:  # one line per cause, not one per try
                    log.warning(
                        "the topics' relay could not take publications (%s: %s)", exc.code, exc.detail
                    )
                    said = exc.code
            await asyncio.sleep(RELAY_IDLE_SECONDS)

    async def run_once(self, wait_seconds: float = 0.0) -> int:
        """Publish what is waiting (after up to wait_seconds for something); how many were taken."""
        items = await self._queues.pop(
            PUBLICATIONS, max_items=RELAY_BATCH, wait_seconds=wait_seconds, lease_seconds=RELAY_LEASE_SECONDS
        )
        for item in items:
            try:
                topic, publication = read_publication(item.payload, item.id)
                await self._topics.publish(topic, publication, self._base_url)
            except (*UNPUBLISHABLE, InvalidPublication) as exc:
                reason = (
                    f"{exc.code}: {exc.detail}"
                    if isinstance(exc, QueueError)
                    else f"InvalidPublication: {exc}"
                )
                await self._queues.fail(item.id, Failure(reason, lease_token=item.lease_token, retry=False))
                log.warning("a publication (item %s) cannot be published and is dead: %s", item.id, reason)
                continue
            await self._queues.complete(item.id, item.lease_token)
        return len(items)
