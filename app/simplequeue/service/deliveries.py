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
from typing import Any

import httpx

from simplequeue.domain import (
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
from simplequeue.domain.topics import SubscriptionNotFound, TopicNotFound
from simplequeue.service.endpoints import EndpointRules, Outcome, Verdict, endpoint_client, post_message
from simplequeue.service.queues import QueueService
from simplequeue.service.topics import REDRIVE_POLICY, TopicService

log = logging.getLogger("simplequeue.deliveries")

BATCH = 32
"""Sent side by side per replica: a slow endpoint holds one of these for its time-out at most."""
WAIT_SECONDS = 20.0
BUSY_WAIT_SECONDS = 1.0
IDLE_SECONDS = 2.0
TIMEOUT_SECONDS = 15.0
"""One attempt's bound, SNS's: resolving, connecting, sending and reading the status."""


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

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def run_forever(self) -> None:
        """Keep up to BATCH deliveries in flight: a slot a send frees is filled by the next pop, so
        an endpoint that takes its whole time-out holds up one slot, not the others."""
        said: str | None = None
        sending: set[asyncio.Task[None]] = set()
        try:
            while True:
                if not self._queues.ready:
                    await asyncio.sleep(IDLE_SECONDS)
                    continue
                free = BATCH - len(sending)
                if free == 0:
                    await asyncio.wait(sending, return_when=asyncio.FIRST_COMPLETED)
                    continue
                # While sends are in flight, a short wait, so that a freed slot is filled soon.
                wait = WAIT_SECONDS if not sending else BUSY_WAIT_SECONDS
                try:
                    began = time.monotonic()
                    items = await self._take(free, wait)
                    said = None
                    for item in items:
                        task = asyncio.create_task(self._send(item), name=f"simplequeue-delivery-{item.id}")
                        sending.add(task)
                        task.add_done_callback(self._sent(sending))
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
                    log.debug("the deliverer waits for the database (%s)", exc.code)
                except QueueError as exc:
                    if exc.code != said:
                        log.warning("the deliverer could not take deliveries (%s: %s)", exc.code, exc.detail)
                        said = exc.code
                await asyncio.sleep(IDLE_SECONDS)
        finally:
            for task in sending:
                task.cancel()
            await asyncio.gather(*sending, return_exceptions=True)
            await self.aclose()

    @staticmethod
    def _sent(sending: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            sending.discard(task)
            if not task.cancelled() and (error := task.exception()) is not None:
                # Its lease runs out and it is sent again: nothing is lost, so one line is enough.
                code = error.code if isinstance(error, QueueError) else type(error).__name__
                log.warning("a delivery could not be settled (%s); it is retried when its lease ends", code)

        return done

    async def _take(self, most: int, wait_seconds: float) -> list[LeasedItem]:
        return await self._queues.pop(
            DELIVERIES, max_items=most, wait_seconds=wait_seconds, lease_seconds=LEASE_SECONDS
        )

    async def run_once(self, wait_seconds: float = 0.0) -> int:
        """Send what is due (after up to wait_seconds for something), all of it before answering;
        how many were taken."""
        items = await self._take(BATCH, wait_seconds)
        if items:
            await asyncio.gather(*(self._send(item) for item in items))
        return len(items)

    async def _send(self, item: LeasedItem) -> None:
        try:
            delivery = read_delivery(item.payload)
        except InvalidDelivery as exc:
            await self._dead(item, f"InvalidDelivery: {exc}")
            return
        try:
            subscription = await self._topics.get_subscription(delivery.subscription)
            topic = await self._topics.get_topic(subscription.topic)
        except (SubscriptionNotFound, TopicNotFound):
            # Unsubscribed since: SNS sends nothing more to an endpoint that left.
            await self._queues.complete(item.id, item.lease_token)
            return
        if delivery.type != CONFIRMATION and not subscription.confirmed:
            await self._queues.complete(item.id, item.lease_token)
            return
        policy = self._topics.delivery_policy(topic, subscription)
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
            content_type=policy.header_content_type,
        )
        await self._settle(item, delivery, subscription.attributes.get(REDRIVE_POLICY), policy, outcome)

    async def _settle(
        self,
        item: LeasedItem,
        delivery: Delivery,
        redrive: str | None,
        policy: DeliveryPolicy,
        outcome: Outcome,
    ) -> None:
        if outcome.delivered:
            await self._queues.complete(item.id, item.lease_token)
            return
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
        except QueueNotFound:
            return False
        return True

    async def _dead(self, item: LeasedItem, reason: str) -> None:
        await self._queues.fail(item.id, Failure(reason, lease_token=item.lease_token, retry=False))
        log.warning("a delivery (item %s) is dead: %s", item.id, reason)
