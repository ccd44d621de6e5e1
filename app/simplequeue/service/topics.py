"""Topics: making them, subscribing queues and HTTP/S endpoints to them, and publishing, which
writes one item per matching subscription in one transaction (QueueService.push_across): into the
subscribed queue, or for an HTTP/S endpoint into DELIVERIES, which service.deliveries sends.

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

import httpx

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
from simplequeue.domain.deliveries import (
    CONFIRMATION,
    DELIVERIES,
    LEASE_SECONDS,
    MAX_ATTEMPTS,
    NOTIFICATION,
    Delivery,
    confirmation_fields,
    delivery_payload,
    new_token,
    token_matches,
    token_subscription,
)
from simplequeue.domain.delivery_policy import (
    DeliveryPolicy,
    DeliveryPolicyError,
    effective_policy,
    parse_subscription_policy,
    parse_topic_policy,
)
from simplequeue.domain.filter_policies import SCOPES, FilterPolicy, FilterPolicyError, parse_filter_policy
from simplequeue.domain.names import is_queue_name
from simplequeue.domain.notifications import Arns, envelope, envelope_texts, signed_fields
from simplequeue.domain.publications import (
    MAX_SUBJECT_CHARS,
    PUBLICATIONS,
    InvalidPublication,
    Publication,
    message_text,
    read_publication,
)
from simplequeue.domain.queues import QueueSettings
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
    SubscriptionNotFound,
    Topic,
    TopicChange,
    TopicExists,
    TopicNotFound,
    delivery_id,
    is_fifo_name,
    is_topic_name,
)
from simplequeue.service.endpoints import EndpointRefused, EndpointRules, EndpointUnresolved
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
DELIVERY_POLICY = "DeliveryPolicy"
REDRIVE_POLICY = "RedrivePolicy"
FIFO_ENDPOINTS_ONLY = (
    "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SNS Topics currently only "
    "support FIFO SQS Queues as endpoints"
)
"""SNS's words, for a FIFO topic's subscription to anything but a FIFO queue."""
RESOLVE_SECONDS = 3.0
"""How long a subscribe waits for its endpoint's name to resolve before taking it unchecked (each
send checks it again)."""
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
        if key == DELIVERY_POLICY and value:
            try:
                parse_topic_policy(value)
            except DeliveryPolicyError as exc:
                raise InvalidTopic(str(exc)) from None
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
        if key == DELIVERY_POLICY and value:
            try:
                parse_subscription_policy(value)
            except DeliveryPolicyError as exc:
                raise InvalidSubscription(str(exc)) from None
        if key == REDRIVE_POLICY and value:
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
        endpoints: EndpointRules | None = None,
    ) -> None:
        """signing_key: the operator's (a file), else the one kept in the database, made by the
        first replica that needs one. endpoints: where HTTP/S subscriptions may point (None: no
        HTTP/S subscription may be made)."""
        self._store = store
        self._queues = queues
        self._clock = clock
        self.arns = arns
        self.endpoints = endpoints
        self._key: SigningKey | None = signing_key
        self._key_lock = asyncio.Lock()
        self._deliveries_made = False

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
        self,
        topic: str,
        protocol: str,
        endpoint: str,
        attributes: Mapping[str, str],
        base_url: str = "",
    ) -> tuple[Subscription, bool]:
        """Subscribe a queue (protocol `sqs`, endpoint its name or ARN) or an HTTP/S endpoint (its
        URL) to the topic; answers the subscription it already has to that endpoint, if any. A
        queue need not exist yet: a publish skips a subscription whose queue does not exist. An
        HTTP/S subscription waits for its endpoint to confirm: a SubscriptionConfirmation is sent
        (again, while it waits) whose SubscribeURL, under `base_url`, confirms it."""
        if protocol not in PROTOCOLS:
            raise InvalidSubscription(
                f"Invalid parameter: Protocol: {protocol} is not one of sqs, http, https"
            )
        if protocol != "sqs":
            return await self._subscribe_endpoint(topic, protocol, endpoint, attributes, base_url)
        queue = self.arns.queue_of(endpoint) or endpoint
        if not is_queue_name(queue):
            raise InvalidSubscription("Invalid parameter: SQS endpoint ARN")
        the_topic = await self._store.get_topic(topic)
        if the_topic.fifo and not is_fifo_name(queue):
            raise InvalidSubscription(FIFO_ENDPOINTS_ONLY)
        checked = self._checked_attributes(attributes)
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
        self._same_attributes(subscription, created, checked)
        return subscription, created

    async def _subscribe_endpoint(
        self, topic: str, protocol: str, url: str, attributes: Mapping[str, str], base_url: str
    ) -> tuple[Subscription, bool]:
        if self.endpoints is None:
            raise InvalidSubscription(
                "Invalid parameter: Protocol: this service delivers to no HTTP/S endpoint "
                "(SIMPLEQUEUE_SNS_ENDPOINTS is empty)"
            )
        try:
            parsed, _, _ = self.endpoints.parse(url)
            if parsed.scheme != protocol:
                raise EndpointRefused(f"the endpoint's scheme must be {protocol} for protocol {protocol}")
            # Checked now so that a refusal is the subscriber's answer, and again at each send
            # (names may resolve elsewhere later). A name that does not resolve yet may later.
            async with asyncio.timeout(RESOLVE_SECONDS):
                await self.endpoints.destination(url)
        except (EndpointUnresolved, TimeoutError):
            pass
        except EndpointRefused as exc:
            raise InvalidSubscription(f"Invalid parameter: Endpoint: {exc.reason}") from None
        the_topic = await self._store.get_topic(topic)
        if the_topic.fifo:
            raise InvalidSubscription(FIFO_ENDPOINTS_ONLY)
        checked = self._checked_attributes(attributes)
        subscription_id = uuid4()
        made = Subscription(
            id=subscription_id,
            topic=topic,
            protocol=protocol,  # type: ignore[arg-type]
            endpoint=url,
            created_at=self._clock(),
            attributes=checked,
            confirmed=False,
            token=new_token(subscription_id),
        )
        subscription, created = await self._store.subscribe(made)
        self._same_attributes(subscription, created, checked)
        if not subscription.confirmed and subscription.token:
            await self._ensure_deliveries()
            delivery = await self._confirmation(the_topic, subscription, base_url)
            await self._queues.push_across([(DELIVERIES, Draft(delivery_payload(delivery)))], "message")
        return subscription, created

    async def _confirmation(self, topic: Topic, s: Subscription, base_url: str) -> Delivery:
        topic_arn = self.arns.topic(topic.name)
        assert s.token is not None
        subscribe_url = str(
            httpx.URL(
                base_url + "/",
                params={"Action": "ConfirmSubscription", "TopicArn": topic_arn, "Token": s.token},
            )
        )
        fields = confirmation_fields(uuid4(), topic_arn, s.token, subscribe_url, self._clock())
        version = topic.attributes.get(SIGNATURE_VERSION, "1")
        key = await self.signing_key()
        message = {
            **fields,
            "SignatureVersion": version,
            "Signature": key.sign(fields, "2" if version == "2" else "1"),
            "SigningCertURL": base_url + CERTIFICATE_PATH,
        }
        return Delivery(s.id, CONFIRMATION, message)

    async def confirm_subscription(self, topic: str, token: str) -> Subscription:
        """Confirm the HTTP/S subscription the token was sent for (answers it as it is if it was
        confirmed before). InvalidSubscription for a token this topic did not send."""
        await self._store.get_topic(topic)  # TopicNotFound first, as SNS
        subscription_id = token_subscription(token)
        try:
            subscription = await self._store.get_subscription(subscription_id) if subscription_id else None
        except SubscriptionNotFound:
            subscription = None
        if (
            subscription is None
            or subscription.topic != topic
            or not token_matches(token, subscription.token)
        ):
            raise InvalidSubscription("Invalid token")
        if subscription.confirmed:
            return subscription
        return await self._store.change_subscription(subscription.id, {}, confirm=True)

    async def _ensure_deliveries(self) -> None:
        """DELIVERIES exists, with a lease and an attempt limit that leave the policy to decide."""
        if self._deliveries_made:
            return
        if not await self._queues.queue_exists(DELIVERIES):
            await self._queues.put_queue(
                DELIVERIES, QueueSettings(max_attempts=MAX_ATTEMPTS, lease_seconds=LEASE_SECONDS)
            )
        self._deliveries_made = True

    def _checked_attributes(
        self, attributes: Mapping[str, str], scope_now: str | None = None
    ) -> dict[str, str]:
        checked = check_subscription_attributes(attributes, scope_now)
        redrive = checked.get(REDRIVE_POLICY)
        if redrive and self.arns.queue_of(json.loads(redrive)["deadLetterTargetArn"]) is None:
            raise InvalidSubscription(
                "Invalid parameter: RedrivePolicy: deadLetterTargetArn: an SQS queue's ARN of this "
                f"service ({self.arns.queue('name')})"
            )
        return checked

    @staticmethod
    def _same_attributes(subscription: Subscription, created: bool, checked: Mapping[str, str]) -> None:
        if not created and dict(subscription.attributes) != checked:
            raise InvalidSubscription(
                "Invalid parameter: Attributes Reason: Subscription already exists with different attributes"
            )

    def delivery_policy(self, topic: Topic, s: Subscription) -> DeliveryPolicy:
        """What the subscription's HTTP/S deliveries follow (its EffectiveDeliveryPolicy)."""
        topic_text = topic.attributes.get(DELIVERY_POLICY)
        own_text = s.attributes.get(DELIVERY_POLICY)
        # Policies are checked when set; one kept before they were (by an older version, which
        # kept them unchecked) counts as none rather than stopping the subscription's deliveries.
        try:
            topic_policy = parse_topic_policy(topic_text) if topic_text else None
        except DeliveryPolicyError:
            topic_policy = None
        try:
            own = parse_subscription_policy(own_text) if own_text else None
        except DeliveryPolicyError:
            own = None
        return effective_policy(topic_policy, own)

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
        checked = self._checked_attributes(set_attributes, now.attributes.get(FILTER_POLICY_SCOPE))
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
            queues = tuple(queue for queue, _ in deliveries[1] if queue != DELIVERIES)
            answers.append(Published(deliveries[0], queues, len(deliveries[1]) - len(queues)))
            drafts += deliveries[1]
        if any(queue == DELIVERIES for queue, _ in drafts):
            await self._ensure_deliveries()
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
        cert_url = base_url + CERTIFICATE_PATH

        def unsubscribe_url(s: Subscription) -> str:
            return (
                f"{base_url}/?Action=Unsubscribe&SubscriptionArn={self.arns.subscription(topic.name, s.id)}"
            )

        # A queue's notification is an item's text, serialised for every queue at once; an
        # endpoint's is an object inside its delivery's payload, which the push serialises.
        cooked = [s for s in matching if not s.raw and s.protocol == "sqs"]
        texts = envelope_texts(
            signed,
            [unsubscribe_url(s) for s in cooked],
            signature_version=version,
            signature=signature,
            signing_cert_url=cert_url,
            attributes=attributes,
        )
        bodies = {s.id: text for s, text in zip(cooked, texts, strict=True)}
        drafts: list[tuple[str, Draft]] = []
        for s in matching:
            item_id = delivery_id(message_id, s.id)
            if s.protocol != "sqs":  # an HTTP/S endpoint's: DELIVERIES holds it until it is sent
                if s.raw:
                    message: Mapping[str, object] = {**signed, "Message": text}
                else:
                    message = envelope(
                        signed,
                        signature_version=version,
                        signature=signature,
                        signing_cert_url=cert_url,
                        unsubscribe_url=unsubscribe_url(s),
                        attributes=attributes,
                    )
                delivery = Delivery(s.id, NOTIFICATION, message, raw=s.raw)
                drafts.append((DELIVERIES, Draft(delivery_payload(delivery), id=item_id)))
                continue
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
        if not s.confirmed or (s.protocol == "sqs" and not s.queue_exists):
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
