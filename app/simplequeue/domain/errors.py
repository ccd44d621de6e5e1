"""The domain's errors. Each class's docstring is its default message.

    QueueError
    ├── NotFound                 404
    │   ├── ItemNotFound
    │   └── QueueNotFound
    ├── Conflict                 409
    │   ├── ItemExists
    │   ├── LeaseMismatch
    │   ├── LeaseExpired
    │   └── ItemDead
    ├── InvalidPayload           422
    ├── InvalidCursor            422
    ├── PayloadTooLarge          413
    ├── DatabaseUnavailable      503
    ├── SchemaNotReady           503
    └── StoreError               500

Stores translate their driver's exceptions into this tree in one place each; the HTTP
layer maps the tree to statuses and one JSON envelope.
"""

from __future__ import annotations


class QueueError(Exception):
    """The queue service failed."""

    status_code = 500

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (type(self).__doc__ or "").strip()
        super().__init__(self.detail)

    @property
    def code(self) -> str:
        return type(self).__name__


class NotFound(QueueError):
    """Not found."""

    status_code = 404


class ItemNotFound(NotFound):
    """There is no item with this id."""


class QueueNotFound(NotFound):
    """There is no queue with this name (a queue exists once an item was pushed to it)."""


class Conflict(QueueError):
    """The request conflicts with the item's current state."""

    status_code = 409


class ItemExists(Conflict):
    """An item with this id already exists."""


class LeaseMismatch(Conflict):
    """The lease token is not the item's current lease (it expired; the item may have been popped again)."""


class LeaseExpired(Conflict):
    """The lease has expired; only a live lease can be extended (pop the item again)."""


class ItemDead(Conflict):
    """The item is dead; it can no longer be failed or retried."""


class InvalidPayload(QueueError):
    """The payload cannot be stored as JSON."""

    status_code = 422


class InvalidCursor(QueueError):
    """The cursor is not one this service handed out."""

    status_code = 422


class PayloadTooLarge(QueueError):
    """The payload is larger than the configured limit."""

    status_code = 413


class DatabaseUnavailable(QueueError):
    """The database cannot be reached right now; try again."""

    status_code = 503


class SchemaNotReady(QueueError):
    """The database schema is missing or out of date; run `simplequeue migrate`."""

    status_code = 503


class StoreError(QueueError):
    """The database rejected the operation."""
