"""The deliverer: sends what topics hold for their HTTP/S subscribers (domain.deliveries), as SNS
does, by each subscription's delivery policy.

Every replica runs one. It pops DELIVERIES with a long-poll and sends what it took side by side;
leases keep two replicas from sending one item at once. Each item is one attempt: delivered, it
is completed; refused for good or out of retries, it goes to the subscription's dead-letter queue
(RedrivePolicy), else dies in DELIVERIES with its reason; otherwise it is failed with the policy's
delay before the next attempt, so a retry waits as a delayed item and costs no process anything.
An endpoint's answer is never read beyond its status: a delivery is at least once, and a replica
killed mid-send sends that item again when its lease runs out (the MessageId says so).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import httpx

from simplequeue.domain import (
    Completion,
    DatabaseUnavailable,
    Draft,
    Failure,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    attribute_of,
)
from simplequeue.domain.deliveries import (
    CONFIRMATION,
    DELIVERIES,
    LEASE_SECONDS,
    Delivery,
    InvalidDelivery,
    dead_letter_body,
    read_delivery,
)
from simplequeue.domain.delivery_policy import DeliveryPolicy, delay_before
from simplequeue.domain.items import LeasedItem
from simplequeue.domain.topics import Subscription, SubscriptionNotFound, Topic, TopicNotFound
from simplequeue.service.endpoints import EndpointRules, Outcome, Verdict, endpoint_client, post_message
from simplequeue.service.queues import QueueService
from simplequeue.service.topics import REDRIVE_POLICY, TopicService

log = logging.getLogger("simplequeue.deliveries")

CAPACITY = 32
"""Sends in flight per replica: a slow endpoint holds one of these for its time-out at most."""
REFILL = 8
"""Free slots that make the next pop: fewer, larger pops (each one a lease of many rows)."""
WAIT_SECONDS = 20.0
BUSY_WAIT_SECONDS = 1.0
IDLE_SECONDS = 2.0
TIMEOUT_SECONDS = 15.0
"""One attempt's bound, SNS's: resolving, connecting, sending and reading the status."""
TARGET_SECONDS = 1.0
"""How long a subscription read for one send serves the next ones: an endpoint unsubscribed is
sent nothing more after at most this (a subscription never read as gone or pending is reused)."""
MAX_TARGETS = 10_000


@dataclass(frozen=True, slots=True)
class Target:
    """What one send needs of its subscription, read at `read_at` (monotonic)."""

    subscription: Subscription
    topic: Topic
    policy: DeliveryPolicy
    read_at: float


class Deliverer:
    def __init__(
        self,
        topics: TopicService,
        queues: QueueService,
        rules: EndpointRules,
        *,
        client: Callable[[], httpx.AsyncClient] = endpoint_client,
        timeout_seconds: float = TIMEOUT_SECONDS,
    ) -> None:
        self._topics = topics
        self._queues = queues
        self._rules = rules
        self._make_client = client
        self._timeout = timeout_seconds
        self._client: httpx.AsyncClient | None = None
        self._targets: dict[UUID, Target] = {}

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def run_forever(self) -> None:
        """Keep up to CAPACITY sends in flight: freed slots are filled by the next pop, so an
        endpoint that takes its whole time-out holds up one slot, not the others. What was
        delivered is completed by that pop, in its transaction (complete_and_pop)."""
        said: str | None = None
        sending: set[asyncio.Task[Completion | None]] = set()
        done: list[Completion] = []
        try:
            while True:
                if not self._queues.ready:
                    await asyncio.sleep(IDLE_SECONDS)
                    continue
                free = CAPACITY - len(sending)
                if sending and free < REFILL:
                    await asyncio.wait(
                        sending, timeout=BUSY_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED
                    )
                    continue
                # While sends are in flight, a short wait, so that freed slots are filled soon.
                wait = WAIT_SECONDS if not sending else BUSY_WAIT_SECONDS
                completions, done[:] = list(done), []
                try:
                    began = time.monotonic()
                    _, items = await self._queues.complete_and_pop(
                        completions,
                        DELIVERIES,
                        max_items=free,
                        wait_seconds=wait,
                        lease_seconds=LEASE_SECONDS,
                    )
                    said = None
                    for item in items:
                        task = asyncio.create_task(self._send(item), name=f"simplequeue-delivery-{item.id}")
                        sending.add(task)
                        task.add_done_callback(self._sent(sending, done))
                    if items or time.monotonic() - began > wait / 2:
                        continue
                    # Nothing, at once: the service is stopping (its waits are closed); no tight
                    # loop of pops while the sends in flight finish.
                    if sending:
                        await asyncio.wait(sending, timeout=BUSY_WAIT_SECONDS)
                        continue
                except QueueNotFound:
                    pass  # no HTTP/S endpoint was ever subscribed
                except (DatabaseUnavailable, SchemaNotReady) as exc:
                    # Completed with the next pop: their leases outlast an outage's retries.
                    done[:0] = completions
                    log.debug("the deliverer waits for the database (%s)", exc.code)
                except QueueError as exc:
                    done[:0] = completions
                    if exc.code != said:
                        log.warning("the deliverer could not take deliveries (%s: %s)", exc.code, exc.detail)
                        said = exc.code
                await asyncio.sleep(IDLE_SECONDS)
        finally:
            for task in sending:
                task.cancel()
            await asyncio.gather(*sending, return_exceptions=True)
            if done:  # what was sent is not sent again, if the database takes it now
                with suppress(QueueError):
                    await asyncio.shield(self._queues.complete_many(done))
            await self.aclose()

    @staticmethod
    def _sent(
        sending: set[asyncio.Task[Completion | None]], done: list[Completion]
    ) -> Callable[[asyncio.Task[Completion | None]], None]:
        def settled(task: asyncio.Task[Completion | None]) -> None:
            sending.discard(task)
            if task.cancelled():
                return
            error = task.exception()
            if error is None:
                completion = task.result()
                if completion is not None:
                    done.append(completion)
                return
            # Its lease runs out and it is sent again: nothing is lost, so one line is enough.
            code = error.code if isinstance(error, QueueError) else type(error).__name__
            log.warning("a delivery could not be settled (%s); it is sent again when its lease ends", code)

        return settled

    async def run_once(self, wait_seconds: float = 0.0) -> int:
        """Send what is due (after up to wait_seconds for something), all of it settled before
        answering; how many were taken."""
        items = await self._queues.pop(
            DELIVERIES, max_items=CAPACITY, wait_seconds=wait_seconds, lease_seconds=LEASE_SECONDS
        )
        completions = [c for c in await asyncio.gather(*(self._send(item) for item in items)) if c]
        if completions:
            await self._queues.complete_many(completions)
        return len(items)

    async def _target(self, subscription_id: UUID) -> Target | None:
        """The subscription, its topic and policy; None once it is gone. A recent read serves
        only while it was confirmed: a pending one is read again, since it may have confirmed."""
        now = time.monotonic()
        cached = self._targets.get(subscription_id)
        if cached is not None and now - cached.read_at < TARGET_SECONDS and cached.subscription.confirmed:
            return cached
        try:
            subscription = await self._topics.get_subscription(subscription_id)
            topic = await self._topics.get_topic(subscription.topic)
        except (SubscriptionNotFound, TopicNotFound):
            self._targets.pop(subscription_id, None)
            return None
        if len(self._targets) >= MAX_TARGETS:
            self._targets.clear()
        target = Target(subscription, topic, self._topics.delivery_policy(topic, subscription), now)
        self._targets[subscription_id] = target
        return target

    async def _send(self, item: LeasedItem) -> Completion | None:
        """One attempt; the completion to make if it is done with (delivered, or its endpoint
        left), else None (failed, retried or dead: settled here)."""
        try:
            delivery = read_delivery(item.payload)
        except InvalidDelivery as exc:
            await self._dead(item, f"InvalidDelivery: {exc}")
            return None
        target = await self._target(delivery.subscription)
        # Unsubscribed since, or not confirmed: SNS sends an endpoint nothing else.
        if target is None or (delivery.type != CONFIRMATION and not target.subscription.confirmed):
            return Completion(item.id, item.lease_token)
        subscription, topic = target.subscription, target.topic
        if self._client is None:
            self._client = self._make_client()
        arns = self._topics.arns
        outcome = await post_message(
            self._client,
            subscription.endpoint,
            delivery.message,
            rules=self._rules,
            message_type=delivery.type,
            topic_arn=arns.topic(topic.name),
            subscription_arn=arns.subscription(topic.name, subscription.id),
            raw=delivery.raw,
            timeout_seconds=self._timeout,
            content_type=target.policy.header_content_type,
        )
        if outcome.delivered:
            return Completion(item.id, item.lease_token)
        await self._settle(
            item, delivery, subscription.attributes.get(REDRIVE_POLICY), target.policy, outcome
        )
        return None

    async def _settle(
        self,
        item: LeasedItem,
        delivery: Delivery,
        redrive: str | None,
        policy: DeliveryPolicy,
        outcome: Outcome,
    ) -> None:
        """A send that failed: retried after the policy's delay, or given up."""
        delay = delay_before(item.attempts + 1, policy) if outcome.verdict is Verdict.RETRY else None
        if delay is not None:
            failure = Failure(outcome.reason, lease_token=item.lease_token, retry_after_seconds=delay)
            await self._queues.fail(item.id, failure)
            return
        attempts = f"after {item.attempts} attempt{'s' if item.attempts != 1 else ''}"
        if redrive and delivery.type != CONFIRMATION and await self._dead_letter(delivery, redrive, outcome):
            await self._queues.complete(item.id, item.lease_token)
            log.info(
                "a delivery (item %s) went to its dead-letter queue %s: %s", item.id, attempts, outcome.reason
            )
            return
        await self._dead(item, f"{outcome.reason} ({attempts})")

    async def _dead_letter(self, delivery: Delivery, redrive: str, outcome: Outcome) -> bool:
        """Push the message to the subscription's dead-letter queue; False if that queue is gone."""
        queue = self._topics.arns.queue_of(json.loads(redrive).get("deadLetterTargetArn", ""))
        if queue is None or not await self._queues.queue_exists(queue):
            return False
        # Why it died travels with it, as attributes: the body stays what the endpoint would have got.
        attributes: dict[str, Any] = {
            "ErrorCode": attribute_of("ErrorCode", "String", str(outcome.status or "EndpointUnreachable")),
            "ErrorMessage": attribute_of("ErrorMessage", "String", outcome.reason),
        }
        try:
            await self._queues.push_across(
                [(queue, Draft(dead_letter_body(delivery), attributes=attributes))], "message"
            )
        except (DatabaseUnavailable, SchemaNotReady):
            raise  # an outage: the delivery is settled when its lease ends and it is tried again
        except QueueError as exc:
            # The queue refuses it (gone, a FIFO queue, too large): it dies here instead.
            log.warning("a dead letter could not go to %s (%s)", queue, exc.code)
            return False
        return True

    async def _dead(self, item: LeasedItem, reason: str) -> None:
        await self._queues.fail(item.id, Failure(reason, lease_token=item.lease_token, retry=False))
        log.warning("a delivery (item %s) is dead: %s", item.id, reason)
