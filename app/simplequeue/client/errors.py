"""Typed exceptions, one per error code the API documents.

Every answer the service refuses carries `{"error": code, "detail": ...}`; `error_for` turns it into
the class named by its code. The tree mirrors the service's: `except NotFound` catches both
ItemNotFound and QueueNotFound, `except Conflict` every 409, and `except Unavailable` every transient
failure: a 503 (DatabaseUnavailable, SchemaNotReady) or no answer at all, once retries ran out.
"""

from __future__ import annotations

from typing import Any


class SimplequeueError(Exception):
    """An error answer of the service (or, for Unavailable, no answer). `code` is the envelope's
    stable code, `status` the HTTP status (None when nothing answered), `detail` its sentence."""

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        status: int | None = None,
        fields: list[dict[str, Any]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.code = code or type(self).__name__
        self.status = status
        self.detail = detail
        self.fields = fields
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f" ({self.status})" if self.status is not None else ""
        return f"{self.code}{where}: {self.detail}"


class NotFound(SimplequeueError):
    """404: nothing is served at that path (also the parent of ItemNotFound and QueueNotFound)."""


class ItemNotFound(NotFound):
    pass


class QueueNotFound(NotFound):
    pass


class Conflict(SimplequeueError):
    """409: the item's state refuses the request; nothing changed."""


class ItemExists(Conflict):
    pass


class LeaseMismatch(Conflict):
    pass


class LeaseExpired(Conflict):
    pass


class ItemDead(Conflict):
    pass


class MalformedJSON(SimplequeueError):
    pass


class Unauthorized(SimplequeueError):
    """401: no API key was sent, or the service does not know it."""


class Forbidden(SimplequeueError):
    """403: the API key's role or queues do not allow this."""


class MethodNotAllowed(SimplequeueError):
    pass


class RequestTimeout(SimplequeueError):
    pass


class PayloadTooLarge(SimplequeueError):
    pass


class UnsupportedMediaType(SimplequeueError):
    pass


class ValidationError(SimplequeueError):
    """422 with `fields` naming what was wrong."""


class QueueInUse(Conflict):
    """409: the queue has leased items; delete it with force=True."""


class TooManyQueues(Conflict):
    """409: the push or put would make a queue past the service's SIMPLEQUEUE_MAX_QUEUES."""


class TopicNotFound(NotFound):
    pass


class SubscriptionNotFound(NotFound):
    pass


class ScheduleNotFound(NotFound):
    pass


class TopicExists(Conflict):
    """409: a topic of this name exists with other attributes."""


class InvalidTopic(SimplequeueError):
    """422: a topic's name or attributes, or a publish, that SNS's rules refuse."""


class InvalidSubscription(SimplequeueError):
    """422: a subscription's protocol, endpoint or attributes (a filter policy) that SNS's rules refuse."""


class InvalidPayload(SimplequeueError):
    pass


class InvalidAttributes(SimplequeueError):
    """422: message attributes that break a rule (names, types, values, how many)."""


class InvalidCursor(SimplequeueError):
    pass


class InternalError(SimplequeueError):
    pass


class StoreError(SimplequeueError):
    pass


class Unavailable(SimplequeueError):
    """The service could not serve the request, even after the retries the client makes: no answer
    (connection refused or reset, a timeout), or a 503. Safe to try again later."""


class DatabaseUnavailable(Unavailable):
    pass


class GatewayError(Unavailable):
    """A 502 or 504 from a proxy or load balancer in front of the service (a replica restarting,
    or slow): the request may or may not have reached the service. The client retries it only where
    repeating is harmless; the worker pauses and pops again."""


class SchemaNotReady(Unavailable):
    pass


ERRORS: dict[str, type[SimplequeueError]] = {
    cls.__name__: cls
    for cls in (
        NotFound,
        ItemNotFound,
        QueueNotFound,
        Conflict,
        ItemExists,
        LeaseMismatch,
        LeaseExpired,
        ItemDead,
        QueueInUse,
        TooManyQueues,
        TopicNotFound,
        SubscriptionNotFound,
        ScheduleNotFound,
        TopicExists,
        InvalidTopic,
        InvalidSubscription,
        MalformedJSON,
        Unauthorized,
        Forbidden,
        MethodNotAllowed,
        RequestTimeout,
        PayloadTooLarge,
        UnsupportedMediaType,
        ValidationError,
        InvalidPayload,
        InvalidAttributes,
        InvalidCursor,
        InternalError,
        StoreError,
        DatabaseUnavailable,
        SchemaNotReady,
    )
}
"""Every code of the API's ErrorCode enum, to its class."""


def error_for(
    status: int, body: Any, *, retry_after: float | None = None, reason: str = ""
) -> SimplequeueError:
    """The exception for an error answer. A code this client does not know (a newer service) gets
    the class of its status's family, keeping the code; a body without the envelope (a proxy's
    page) gets a code made of its status."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code: str = body["error"]
        detail = body.get("detail")
        fields = body.get("fields")
        cls = ERRORS.get(code) or _family(status)
        return cls(
            detail if isinstance(detail, str) else code,
            code=code,
            status=status,
            fields=fields if isinstance(fields, list) else None,
            retry_after=retry_after,
        )
    cls = _family(status)
    return cls(reason or f"HTTP {status}", code=f"HTTP{status}", status=status, retry_after=retry_after)


def _family(status: int) -> type[SimplequeueError]:
    families: dict[int, type[SimplequeueError]] = {
        401: Unauthorized,
        403: Forbidden,
        404: NotFound,
        409: Conflict,
        502: GatewayError,
        503: Unavailable,
        504: GatewayError,
    }
    return families.get(status, SimplequeueError)
