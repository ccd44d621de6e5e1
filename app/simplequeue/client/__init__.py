"""A Python SDK for simplequeue: an async client over httpx and a worker loop.

It speaks HTTP only and imports nothing of the server (an import-linter contract holds it)::

    from simplequeue.client import AsyncClient, run_worker

    async with AsyncClient("http://127.0.0.1:8000") as sq:
        await sq.push({"to": "ada@example.com"}, queue="mail")

    def send(item):  # or an async def
        ...

    run_worker("http://127.0.0.1:8000", "mail", send, concurrency=8)
"""

from simplequeue.client.core import AsyncClient
from simplequeue.client.errors import (
    Conflict,
    DatabaseUnavailable,
    Forbidden,
    InternalError,
    InvalidAttributes,
    InvalidCursor,
    InvalidPayload,
    InvalidSubscription,
    InvalidTopic,
    ItemDead,
    ItemExists,
    ItemNotFound,
    LeaseExpired,
    LeaseMismatch,
    MalformedJSON,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    QueueInUse,
    QueueNotFound,
    RequestTimeout,
    ScheduleNotFound,
    SchemaNotReady,
    SimplequeueError,
    StoreError,
    SubscriptionNotFound,
    TooManyQueues,
    TopicExists,
    TopicNotFound,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    ValidationError,
)
from simplequeue.client.failures import ItemFailed, short_traceback
from simplequeue.client.models import (
    BatchPushResult,
    CompleteResult,
    DeadPage,
    ErrorEntry,
    FairKey,
    FairKeyPage,
    HistoryEntry,
    HistoryPage,
    Item,
    ItemInfo,
    LimitBinding,
    Published,
    PushResult,
    QueuePage,
    QueueStats,
    Schedule,
    Subscription,
    Topic,
    TopKey,
)
from simplequeue.client.retries import NO_RETRY, RetryPolicy
from simplequeue.client.sync import Client
from simplequeue.client.worker import Worker, run_worker

__all__ = [
    "NO_RETRY",
    "AsyncClient",
    "BatchPushResult",
    "Client",
    "CompleteResult",
    "Conflict",
    "DatabaseUnavailable",
    "DeadPage",
    "ErrorEntry",
    "FairKey",
    "FairKeyPage",
    "Forbidden",
    "HistoryEntry",
    "HistoryPage",
    "InternalError",
    "InvalidAttributes",
    "InvalidCursor",
    "InvalidPayload",
    "InvalidSubscription",
    "InvalidTopic",
    "Item",
    "ItemDead",
    "ItemExists",
    "ItemFailed",
    "ItemInfo",
    "ItemNotFound",
    "LeaseExpired",
    "LeaseMismatch",
    "LimitBinding",
    "MalformedJSON",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "Published",
    "PushResult",
    "QueueInUse",
    "QueueNotFound",
    "QueuePage",
    "QueueStats",
    "RequestTimeout",
    "RetryPolicy",
    "Schedule",
    "ScheduleNotFound",
    "SchemaNotReady",
    "SimplequeueError",
    "StoreError",
    "Subscription",
    "SubscriptionNotFound",
    "TooManyQueues",
    "TopKey",
    "Topic",
    "TopicExists",
    "TopicNotFound",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "ValidationError",
    "Worker",
    "run_worker",
    "short_traceback",
]
