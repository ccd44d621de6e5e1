"""The async client: one method per operation of the API, over httpx, with bounded retries.

Retries: simplequeue.client.retries says which failures each operation is repeated after.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx

from simplequeue.client.errors import SimplequeueError, Unavailable, error_for
from simplequeue.client.models import (
    BatchPushResult,
    CompleteResult,
    DeadPage,
    FairKey,
    FairKeyPage,
    HistoryEntry,
    HistoryPage,
    Item,
    ItemInfo,
    Published,
    PushResult,
    QueuePage,
    QueueStats,
    Schedule,
    Subscription,
    Topic,
)
from simplequeue.client.retries import DEFAULT_RETRY, UNSENT, Repeat, RetryPolicy, asked_delay

log = logging.getLogger("simplequeue.client")

Sleep = Callable[[float], Awaitable[None]]


def _key_path(queue: str, key: str) -> str:
    # A key may hold any character but NUL: '/', '?' and '%' among them.
    return f"/queues/{queue}/keys/{quote(key, safe='')}"


def _id(value: Item | str | uuid.UUID) -> str:
    return value.id if isinstance(value, Item) else str(value)


def _drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _iso(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


class AsyncClient:
    """A client of one simplequeue service.

    `transport` is injectable (httpx.ASGITransport for an app in-process, httpx.MockTransport in
    tests); `timeout` bounds each request (a pop's long-poll is added to it); `retry` bounds the
    retries; `sleep` is what waits between them; `api_key` goes as a Bearer token in the
    Authorization header (and nowhere else: not in logs, not in errors).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.timeout = timeout
        self.retry = retry
        self._sleep = sleep
        sent = dict(headers or {})
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.AsyncClient(base_url=base_url, transport=transport, timeout=timeout, headers=sent)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the transport and its retries -------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        retry: Repeat,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        request_timeout: float | None = None,
    ) -> tuple[httpx.Response, int]:
        """The first answer that is not a 503 (or the last one), and how many tries it took.
        Raises Unavailable when no try got an answer."""
        policy = self.retry
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            retry_after: float | None = None
            try:
                response = await self._http.request(
                    method,
                    path,
                    json=json,
                    params=params,
                    timeout=self.timeout if request_timeout is None else request_timeout,
                )
            except httpx.TransportError as exc:
                repeatable = retry is Repeat.ANY or isinstance(exc, UNSENT)
                failure: SimplequeueError = Unavailable(
                    f"{method} {path}: {type(exc).__name__}: {exc}".rstrip(": "), code="Unavailable"
                )
                if not repeatable:
                    raise failure from exc
                cause: BaseException | None = exc
            else:
                if response.status_code != 503:
                    return response, tries
                retry_after = asked_delay(response)
                failure = self._error(response, retry_after)
                cause = None
            delay = policy.delay(tries, retry_after)
            if tries >= policy.attempts or time.monotonic() - started + delay > policy.total_seconds:
                raise failure from cause
            log.info("%s %s: %s; retry %d in %.2fs", method, path, failure.code, tries, delay)
            await self._sleep(delay)

    @staticmethod
    def _error(response: httpx.Response, retry_after: float | None = None) -> SimplequeueError:
        try:
            body = response.json()
        except ValueError:
            body = None
        return error_for(response.status_code, body, retry_after=retry_after, reason=response.reason_phrase)

    async def _json(
        self,
        method: str,
        path: str,
        *,
        retry: Repeat,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        request_timeout: float | None = None,
    ) -> Any:
        response, _ = await self._call(
            method, path, retry=retry, json=json, params=params, request_timeout=request_timeout
        )
        if response.is_error:
            raise self._error(response)
        return None if response.status_code == 204 else response.json()

    # --- producing ---------------------------------------------------------------------------

    async def push(
        self,
        payload: Any,
        *,
        queue: str = "default",
        id: str | uuid.UUID | None = None,
        priority: int | None = None,
        delay_seconds: float | None = None,
        not_before: datetime | str | None = None,
        created_at: datetime | str | None = None,
        group: str | None = None,
        dedup_key: str | None = None,
        attributes: Mapping[str, Mapping[str, str]] | None = None,
        fairness_key: str | None = None,
    ) -> PushResult:
        """Push one item. It always carries an id (a new UUID unless given): a retry after a lost
        answer cannot insert it twice, before or after a worker finished it, within the queue's
        dedup_window_seconds (an hour by default); after that the id makes a new item.

        The id deduplicates one push and its retries. To make different pushes of the same thing
        one item (two producers, a re-run job), give them one `dedup_key`: then the key decides
        instead, and an id some other item holds is ItemExists. ItemExists also means the id
        belongs to an item of another queue.

        `attributes` are message attributes, by name: {"type": "String" | "Number" | "Binary"
        (optionally with a custom label after a period), "value": text, base64 for Binary}, as
        Amazon SQS's MessageAttributes (docs/api.md, Message attributes).

        `fairness_key` names the tenant the item belongs to: pops take ready items of several keys
        round-robin, so one tenant's backlog cannot starve another's (docs/flow-control.md)."""
        item_id = str(id or uuid.uuid4())
        body = _drop_none(
            {
                "queue": queue,
                "payload": payload,
                "id": item_id,
                "priority": priority,
                "delay_seconds": delay_seconds,
                "not_before": _iso(not_before),
                "created_at": _iso(created_at),
                "group": group,
                "dedup_key": dedup_key,
                "attributes": attributes,
                "fairness_key": fairness_key,
            }
        )
        if payload is None:
            body["payload"] = None
        response, tries = await self._call("POST", "/push", retry=Repeat.ANY, json=body)
        if response.is_error:
            raise self._error(response)
        result = PushResult.of(response.json())
        if tries > 1 and not result.created and result.id == item_id:
            # Our own earlier attempt committed: the service remembered its id (or its dedup_key).
            result = PushResult(result.id, result.queue, True, result.created_at)
        return result

    async def push_batch(
        self, items: Sequence[Mapping[str, Any]], *, queue: str = "default"
    ) -> BatchPushResult:
        """Push 1..1000 items in one transaction. Each item is a mapping of the fields a single push
        takes (`payload` required; `id`, `priority`, `delay_seconds`, `not_before`, `created_at`,
        `group`, `dedup_key`, `fairness_key`, `attributes`). Items without an id get one, so a retry
        is idempotent as a single push's is: a retry whose earlier attempt committed inserts nothing,
        and the items this call's earlier attempt created are reported as created."""
        entries: list[dict[str, Any]] = []
        for item in items:
            entry = {
                k: _iso(v) if isinstance(v, datetime) else v
                for k, v in item.items()
                if v is not None or k == "payload"
            }
            if "payload" not in entry:
                raise ValueError("each item of a batch needs a payload")
            entry["id"] = str(entry.get("id") or uuid.uuid4())
            entries.append(entry)
        ids: list[str] = [e["id"] for e in entries]
        body = {"queue": queue, "items": entries}
        response, tries = await self._call("POST", "/push/batch", retry=Repeat.ANY, json=body)
        if response.is_error:
            raise self._error(response)
        answer = response.json()
        created: list[bool] = answer["created"]
        if tries > 1:  # an item answered with its own id was ours, from an earlier attempt
            created = [
                made or got == sent for made, got, sent in zip(created, answer["ids"], ids, strict=True)
            ]
        return BatchPushResult(ids=answer["ids"], created=created)

    # --- consuming ---------------------------------------------------------------------------

    async def pop(
        self,
        queue: str = "default",
        *,
        max_items: int = 1,
        wait_seconds: float = 0,
        lease_seconds: int | None = None,
    ) -> list[Item]:
        """Lease up to max_items (1..100), long-polling up to wait_seconds (0..20) when none is ready."""
        body = _drop_none(
            {
                "queue": queue,
                "max_items": max_items,
                "wait_seconds": wait_seconds,
                "lease_seconds": lease_seconds,
            }
        )
        answer = await self._json(
            "POST", "/pop", retry=Repeat.ANY, json=body, request_timeout=self.timeout + wait_seconds
        )
        return [Item.of(i) for i in answer["items"]]

    async def complete_and_pop(
        self,
        done: Sequence[Item],
        queue: str = "default",
        *,
        max_items: int = 1,
        wait_seconds: float = 0,
        lease_seconds: int | None = None,
    ) -> tuple[list[CompleteResult], list[Item]]:
        """Complete up to 100 finished items and pop the next ones in one request: (a result per
        finished item, in order; the items popped). The completions are committed even when the
        pop then waits or finds nothing. Repeated only when the request was never sent, so that
        every result stands for this call."""
        body = _drop_none(
            {
                "queue": queue,
                "max_items": max_items,
                "wait_seconds": wait_seconds,
                "lease_seconds": lease_seconds,
                "complete": [{"id": i.id, "lease_token": i.lease_token} for i in done],
            }
        )
        answer = await self._json(
            "POST", "/pop", retry=Repeat.UNSENT, json=body, request_timeout=self.timeout + wait_seconds
        )
        results = [CompleteResult(r["id"], r["result"]) for r in answer["completed"]]
        return results, [Item.of(i) for i in answer["items"]]

    async def complete(
        self, item: Item | str | uuid.UUID, lease_token: str | uuid.UUID | None = None
    ) -> None:
        """Finish an item (it is deleted; a history record stays). Given an Item, its lease token is
        used. ItemNotFound, LeaseMismatch (someone else holds it now) or ItemDead otherwise."""
        token = item.lease_token if isinstance(item, Item) and lease_token is None else lease_token
        params = {"lease_token": str(token)} if token is not None else None
        await self._json("DELETE", f"/items/{_id(item)}", retry=Repeat.UNSENT, params=params)

    async def complete_many(
        self, items: Iterable[Item | tuple[str | uuid.UUID, str | uuid.UUID | None]]
    ) -> list[CompleteResult]:
        """Finish 1..1000 items at once; each gets its own result (completed, not_found,
        lease_mismatch, dead)."""
        refs = []
        for entry in items:
            if isinstance(entry, Item):
                refs.append({"id": entry.id, "lease_token": entry.lease_token})
            else:
                refs.append(_drop_none({"id": str(entry[0]), "lease_token": entry[1] and str(entry[1])}))
        answer = await self._json("POST", "/items/complete", retry=Repeat.UNSENT, json={"items": refs})
        return [CompleteResult(r["id"], r["result"]) for r in answer["results"]]

    async def fail(
        self,
        item: Item | str | uuid.UUID,
        error: str,
        *,
        lease_token: str | uuid.UUID | None = None,
        retry: bool = True,
        retry_after_seconds: float | None = None,
    ) -> ItemInfo:
        """Record an error: the item is retried after the queue's backoff (or retry_after_seconds),
        or dead when retry is False or this was its last attempt."""
        token = item.lease_token if isinstance(item, Item) and lease_token is None else lease_token
        body = _drop_none(
            {
                "error": error,
                "lease_token": token and str(token),
                "retry": retry,
                "retry_after_seconds": retry_after_seconds,
            }
        )
        return ItemInfo.of(
            await self._json("POST", f"/items/{_id(item)}/fail", retry=Repeat.UNSENT, json=body)
        )

    async def extend(
        self, item: Item | str | uuid.UUID, lease_seconds: int, *, lease_token: str | uuid.UUID | None = None
    ) -> ItemInfo:
        """Heartbeat: the live lease now ends lease_seconds from now. LeaseMismatch, LeaseExpired or
        ItemDead when the lease is no longer this worker's."""
        token = item.lease_token if isinstance(item, Item) and lease_token is None else lease_token
        if token is None:
            raise ValueError("extend needs a lease token")
        body = {"lease_token": str(token), "lease_seconds": lease_seconds}
        return ItemInfo.of(
            await self._json("POST", f"/items/{_id(item)}/extend", retry=Repeat.ANY, json=body)
        )

    # --- looking and administering -----------------------------------------------------------

    async def get_item(self, item: Item | str | uuid.UUID) -> ItemInfo:
        return ItemInfo.of(await self._json("GET", f"/items/{_id(item)}", retry=Repeat.ANY))

    async def release(self, item: Item | str | uuid.UUID) -> ItemInfo:
        """End the item's lease now (admin): it is ready again at once, that attempt counted. An item
        not leased is answered as it is. Not repeated after a request that may have arrived: a
        second release could end the lease of the worker that popped it next."""
        return ItemInfo.of(await self._json("POST", f"/items/{_id(item)}/release", retry=Repeat.UNSENT))

    async def stats(self, queue: str = "default") -> QueueStats:
        """One queue's counts and settings; QueueNotFound if it never existed."""
        return QueueStats.of(await self._json("GET", f"/queues/{queue}", retry=Repeat.ANY))

    async def queues(self, *, page_size: int = 1000) -> list[QueueStats]:
        """Every queue (that the key covers), in name order: queue_page after queue_page."""
        found: list[QueueStats] = []
        cursor: str | None = None
        while True:
            page = await self.queue_page(limit=page_size, cursor=cursor)
            found += page.queues
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    async def queue_page(self, *, limit: int = 100, cursor: str | None = None) -> QueuePage:
        """One page of the queues, in name order, after `cursor` (a page's next_cursor) if given."""
        params: dict[str, str | int] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        answer = await self._json("GET", "/queues", retry=Repeat.ANY, params=params)
        # A service from before pages answered every queue, without a cursor.
        return QueuePage([QueueStats.of(q) for q in answer["queues"]], answer.get("next_cursor"))

    async def put_queue(self, queue: str, /, **settings: Any) -> QueueStats:
        """Set a queue's settings (PUT replaces them all: an omitted one takes its default), such as
        max_attempts=3, dead_letter_queue="orders-dlq" (where items that die move; it must exist),
        message_retention_seconds=3600 (live items older are never handed out, then deleted),
        priority_aging_seconds=300 (a waiting item's priority rises by one per 300 seconds)."""
        return QueueStats.of(await self._json("PUT", f"/queues/{queue}", retry=Repeat.ANY, json=settings))

    async def put_key(
        self,
        queue: str,
        key: str,
        /,
        *,
        weight: float = 1.0,
        max_leased: int | None = None,
        rate_per_second: float | None = None,
    ) -> FairKey:
        """Set a fairness key's own weight, max_leased and rate_per_second (PUT replaces them all;
        None: the queue's max_leased_per_key, rate_per_key_per_second). The queue must exist."""
        body = {"weight": weight, "max_leased": max_leased, "rate_per_second": rate_per_second}
        return FairKey.of(await self._json("PUT", _key_path(queue, key), retry=Repeat.ANY, json=body))

    async def get_key(self, queue: str, key: str, /) -> FairKey:
        """A fairness key's settings and its ready and leased counts."""
        return FairKey.of(await self._json("GET", _key_path(queue, key), retry=Repeat.ANY))

    async def reset_key(self, queue: str, key: str, /) -> FairKey:
        """A fairness key back to the queue's defaults (weight 1, the queue's per-key limits)."""
        return FairKey.of(await self._json("DELETE", _key_path(queue, key), retry=Repeat.ANY))

    async def key_page(self, queue: str, /, *, limit: int = 100, cursor: str | None = None) -> FairKeyPage:
        """One page of a queue's fairness keys, in key order, after `cursor` if given."""
        params: dict[str, str | int] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        answer = await self._json("GET", f"/queues/{queue}/keys", retry=Repeat.ANY, params=params)
        return FairKeyPage([FairKey.of(k) for k in answer["keys"]], answer["next_cursor"])

    async def dead(
        self,
        queue: str = "default",
        *,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> DeadPage:
        """Dead items (died_at in [since, until) when given), newest dead first, with payloads."""
        params: dict[str, str | int] = {"limit": limit}
        for name, value in (("since", _iso(since)), ("until", _iso(until))):
            if value is not None:
                params[name] = value
        return await self._item_page(f"/queues/{queue}/dead", params, cursor)

    async def _item_page(self, path: str, params: dict[str, str | int], cursor: str | None) -> DeadPage:
        """One page of a listing of items (dead, peeked, a group's), after `cursor` if given."""
        if cursor:
            params["cursor"] = cursor
        answer = await self._json("GET", path, retry=Repeat.ANY, params=params)
        return DeadPage([ItemInfo.of(i) for i in answer["items"]], answer["next_cursor"])

    async def history(
        self,
        queue: str = "default",
        *,
        outcome: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> HistoryPage:
        """Finished items (outcome completed or dead), newest first, kept for the queue's retention."""
        params: dict[str, str | int] = {"limit": limit}
        for name, value in (
            ("outcome", outcome),
            ("since", _iso(since)),
            ("until", _iso(until)),
            ("cursor", cursor),
        ):
            if value is not None:
                params[name] = value
        answer = await self._json("GET", f"/queues/{queue}/history", retry=Repeat.ANY, params=params)
        return HistoryPage([HistoryEntry.of(i) for i in answer["items"]], answer["next_cursor"])

    async def redrive(
        self,
        queue: str = "default",
        *,
        ids: Iterable[str | uuid.UUID] | None = None,
        rate_per_second: float | None = None,
    ) -> int:
        body = _drop_none(
            {"ids": None if ids is None else [str(i) for i in ids], "rate_per_second": rate_per_second}
        )
        answer = await self._json("POST", f"/queues/{queue}/redrive", retry=Repeat.UNSENT, json=body)
        return int(answer["redriven"])

    async def purge_dead(self, queue: str = "default") -> int:
        answer = await self._json("DELETE", f"/queues/{queue}/dead", retry=Repeat.ANY)
        return int(answer["purged"])

    async def pause(self, queue: str) -> QueueStats:
        """Hand out nothing from the queue (pushes are still taken) until resume()."""
        return QueueStats.of(await self._json("POST", f"/queues/{queue}/pause", retry=Repeat.ANY))

    async def resume(self, queue: str) -> QueueStats:
        return QueueStats.of(await self._json("POST", f"/queues/{queue}/resume", retry=Repeat.ANY))

    async def peek(
        self, queue: str, state: str = "ready", *, limit: int = 100, cursor: str | None = None
    ) -> DeadPage:
        """Live items in one state (ready, delayed, retrying, leased), oldest first, leasing nothing."""
        return await self._item_page(f"/queues/{queue}/items", {"state": state, "limit": limit}, cursor)

    async def group_items(
        self, queue: str, group: str, *, limit: int = 100, cursor: str | None = None
    ) -> DeadPage:
        """An ordered group's live items in group order (its head first), leasing nothing."""
        params: dict[str, str | int] = {"group": group, "limit": limit}
        return await self._item_page(f"/queues/{queue}/items/by-group", params, cursor)

    async def find_by_dedup_key(self, queue: str, dedup_key: str) -> ItemInfo:
        """The item, live or dead, that holds the dedup key in the queue; ItemNotFound if none does."""
        params = {"dedup_key": dedup_key}
        return ItemInfo.of(
            await self._json("GET", f"/queues/{queue}/items/by-dedup-key", retry=Repeat.ANY, params=params)
        )

    async def delete_queue(self, queue: str, *, force: bool = False) -> dict[str, Any]:
        """Delete the queue with its items, history and dedup keys; QueueInUse while items are
        leased, unless force."""
        params: dict[str, str | int] = {"force": "true"} if force else {}
        # Not repeated once sent: a repeat of a delete that went through would answer 404.
        answer: dict[str, Any] = await self._json(
            "DELETE", f"/queues/{queue}", retry=Repeat.UNSENT, params=params
        )
        return answer

    # --- topics ---------------------------------------------------------------------------------

    async def put_topic(
        self,
        topic: str,
        /,
        *,
        attributes: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Topic:
        """Make a topic (a name ending in .fifo makes a FIFO topic), or find it as it is; TopicExists
        if it exists with other attributes. Attributes are Amazon SNS's (DisplayName, SignatureVersion,
        ContentBasedDeduplication...)."""
        body = {"attributes": dict(attributes or {}), "tags": dict(tags or {})}
        return Topic.of(await self._json("PUT", f"/topics/{topic}", retry=Repeat.ANY, json=body))

    async def get_topic(self, topic: str) -> Topic:
        return Topic.of(await self._json("GET", f"/topics/{topic}", retry=Repeat.ANY))

    async def topics(self, *, page_size: int = 1000) -> list[Topic]:
        """Every topic (that the key covers), in name order."""
        found: list[Topic] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
            answer = await self._json("GET", "/topics", retry=Repeat.ANY, params=params)
            found += [Topic.of(t) for t in answer["topics"]]
            if (cursor := answer["next_cursor"]) is None:
                return found

    async def delete_topic(self, topic: str) -> None:
        """Delete the topic and its subscriptions; what was delivered stays in the queues."""
        await self._json("DELETE", f"/topics/{topic}", retry=Repeat.UNSENT)

    async def subscribe(
        self,
        topic: str,
        endpoint: str,
        *,
        raw: bool = False,
        filter_policy: Mapping[str, Any] | str | None = None,
        filter_scope: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> Subscription:
        """Deliver the topic's messages to `endpoint`: a queue's name, or an HTTP/S URL (which is
        sent a SubscriptionConfirmation and gets nothing else until it confirms). As SNS's JSON
        notification, or with raw=True the message itself (a queue's item takes its attributes).
        filter_policy: Amazon SNS's filter policy (a mapping, or its JSON text), on the message
        attributes or, with filter_scope="MessageBody", on the message. Subscribing again answers
        the same one."""
        given = dict(attributes or {})
        if raw:
            given["RawMessageDelivery"] = "true"
        if filter_policy is not None:
            given["FilterPolicy"] = (
                filter_policy if isinstance(filter_policy, str) else json.dumps(filter_policy)
            )
        if filter_scope is not None:
            given["FilterPolicyScope"] = filter_scope
        scheme = endpoint.partition("://")[0].lower() if "://" in endpoint else "sqs"
        body = {"protocol": scheme, "endpoint": endpoint, "attributes": given}
        return Subscription.of(
            await self._json("POST", f"/topics/{topic}/subscriptions", retry=Repeat.ANY, json=body)
        )

    async def subscriptions(self, topic: str, *, page_size: int = 1000) -> list[Subscription]:
        found: list[Subscription] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
            answer = await self._json(
                "GET", f"/topics/{topic}/subscriptions", retry=Repeat.ANY, params=params
            )
            found += [Subscription.of(s) for s in answer["subscriptions"]]
            if (cursor := answer["next_cursor"]) is None:
                return found

    async def unsubscribe(self, topic: str, subscription: Subscription | str | uuid.UUID) -> None:
        sid = subscription.id if isinstance(subscription, Subscription) else str(subscription)
        await self._json("DELETE", f"/topics/{topic}/subscriptions/{sid}", retry=Repeat.UNSENT)

    async def publish(
        self,
        topic: str,
        message: Any,
        *,
        subject: str | None = None,
        attributes: Mapping[str, Mapping[str, str]] | None = None,
        id: str | uuid.UUID | None = None,
        group: str | None = None,
        dedup_key: str | None = None,
    ) -> Published:
        """Deliver a message to every subscribed queue whose filter it passes, in one transaction.
        It carries an id (a new UUID unless given), so a retry after a lost answer delivers
        nothing twice. group (MessageGroupId) and dedup_key (MessageDeduplicationId): FIFO topics."""
        body = _drop_none(
            {
                "message": message,
                "subject": subject,
                "attributes": attributes,
                "id": str(id or uuid.uuid4()),
                "group": group,
                "dedup_key": dedup_key,
            }
        )
        body["message"] = message
        return Published.of(await self._json("POST", f"/topics/{topic}/publish", retry=Repeat.ANY, json=body))

    async def publish_batch(self, topic: str, messages: Sequence[Mapping[str, Any]]) -> list[Published]:
        """Up to 10 messages (each a mapping of publish's fields, `message` required), delivered in
        one transaction or not at all."""
        entries = [
            {k: v for k, v in m.items() if v is not None or k == "message"}
            | {"id": str(m.get("id") or uuid.uuid4())}
            for m in messages
        ]
        answer = await self._json(
            "POST", f"/topics/{topic}/publish/batch", retry=Repeat.ANY, json={"messages": entries}
        )
        return [Published.of(r) for r in answer["results"]]

    # --- schedules ------------------------------------------------------------------------------

    async def put_schedule(
        self,
        name: str,
        /,
        *,
        queue: str,
        payload: Any,
        every_seconds: int | None = None,
        cron: str | None = None,
        timezone: str = "UTC",
        at: datetime | None = None,
        priority: int = 0,
        group: str | None = None,
        paused: bool = False,
        jitter_seconds: int = 0,
        overlap: str = "allow",
        catch_up: str = "latest",
    ) -> Schedule:
        """Make or replace a schedule that pushes `payload` to `queue`: every so many seconds, at
        the times of a cron expression read in `timezone`, or once `at` a time. ValidationError
        names the field the service refuses."""
        body: dict[str, Any] = {
            "queue": queue,
            "payload": payload,
            "every_seconds": every_seconds,
            "cron": cron,
            "timezone": timezone,
            "at": at.isoformat() if at is not None else None,
            "priority": priority,
            "group": group,
            "paused": paused,
            "jitter_seconds": jitter_seconds,
            "overlap": overlap,
            "catch_up": catch_up,
        }
        return Schedule.of(await self._json("PUT", f"/schedules/{name}", retry=Repeat.ANY, json=body))

    async def get_schedule(self, name: str) -> Schedule:
        return Schedule.of(await self._json("GET", f"/schedules/{name}", retry=Repeat.ANY))

    async def schedules(self, *, page_size: int = 1000) -> list[Schedule]:
        """Every schedule (of the queues the key covers), in name order."""
        found: list[Schedule] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
            answer = await self._json("GET", "/schedules", retry=Repeat.ANY, params=params)
            found += [Schedule.of(s) for s in answer["schedules"]]
            if (cursor := answer["next_cursor"]) is None:
                return found

    async def delete_schedule(self, name: str) -> None:
        """Delete the schedule; the items it pushed stay in their queue."""
        await self._json("DELETE", f"/schedules/{name}", retry=Repeat.UNSENT)

    async def pause_schedule(self, name: str) -> Schedule:
        return Schedule.of(await self._json("POST", f"/schedules/{name}/pause", retry=Repeat.ANY))

    async def resume_schedule(self, name: str) -> Schedule:
        """Fire again from the first slot after now (the pause's slots are not caught up)."""
        return Schedule.of(await self._json("POST", f"/schedules/{name}/resume", retry=Repeat.ANY))

    async def trigger_schedule(self, name: str) -> Schedule:
        """Push one item now, paused or not. Not retried once sent: a retry could push a second."""
        return Schedule.of(await self._json("POST", f"/schedules/{name}/trigger", retry=Repeat.UNSENT))
