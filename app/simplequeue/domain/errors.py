"""The domain's errors. Each class's docstring is its default message.

    QueueError
    ├── NotFound
    │   ├── ItemNotFound
    │   └── QueueNotFound
    ├── Conflict
    │   ├── ItemExists
    │   ├── LeaseMismatch
    │   ├── LeaseExpired
    │   ├── ItemDead
    │   └── TooManyQueues
    ├── InvalidPayload
    ├── InvalidSettings
    ├── InvalidCursor
    ├── PayloadTooLarge
    ├── DatabaseUnavailable      worth a retry: the database is down, frozen or busy
    │   └── DatabaseMisconfigured   the database refuses our settings: no such database, a bad login
    ├── SchemaNotReady
    └── StoreError               the database refused a statement: a bug, or a broken schema

Stores translate their driver's exceptions into this tree in one place each. The tree says
nothing of HTTP: the API maps each class to a status, once (simplequeue.api.errors). A
class's name is its stable error code.
"""

from __future__ import annotations


class QueueError(Exception):
    """The queue service failed."""

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or (type(self).__doc__ or "").strip()
        super().__init__(self.detail)

    @property
    def code(self) -> str:
        """Stable, for clients to switch on."""
        return type(self).__name__


class NotFound(QueueError):
    """Not found."""


class ItemNotFound(NotFound):
    """There is no item with this id."""


class QueueNotFound(NotFound):
    """There is no queue with this name (a queue exists once an item was pushed to it)."""


class Conflict(QueueError):
    """The request conflicts with the item's current state."""


class ItemExists(Conflict):
    """An item of another queue, or pushed with another dedup_key, holds this id."""


class LeaseMismatch(Conflict):
    """The lease token is not the item's current lease (it expired; the item may have been popped again)."""


class LeaseExpired(Conflict):
    """The lease has expired; only a live lease can be extended (pop the item again)."""


class ItemDead(Conflict):
    """The item is dead; it can no longer be failed or retried."""


class QueueInUse(Conflict):
    """The queue has leased items; delete it with force=true to take them from their workers."""


class TooManyQueues(Conflict):
    """The service holds its most queues (SIMPLEQUEUE_MAX_QUEUES): delete one, or raise the limit."""


class InvalidPayload(QueueError):
    """The payload cannot be stored as JSON."""


class InvalidAttributes(QueueError):
    """The message attributes break a rule (their names, types, values or number)."""


class InvalidSettings(QueueError):
    """A queue setting names what cannot be (a dead-letter queue that does not exist, or the queue itself)."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field  # the setting's name, as the API's body names it
        super().__init__(detail)


class InvalidCursor(QueueError):
    """The cursor is not one this service handed out."""


class PayloadTooLarge(QueueError):
    """The payload is larger than the configured limit."""


class DatabaseUnavailable(QueueError):
    """The database cannot be reached right now; try again."""


class DatabaseMisconfigured(DatabaseUnavailable):
    """The database refuses this service's settings (the database does not exist, or the login is refused)."""

    # Still unavailable, and tried again, since a database may be created or a login fixed while
    # the service runs; but no passing outage: the detail names the cause, in one line, for the
    # operator (`database "x" does not exist on db:5432`; never a password). Callers are told
    # no more than DatabaseUnavailable tells them.


class SchemaNotReady(QueueError):
    """The database schema is missing or out of date; run `simplequeue migrate`."""


class StoreError(QueueError):
    """The database rejected the operation."""
