"""A fair queue's keys (its tenants): their own weight and limits, and their live counts. Each
route parses, makes one QueueService call, and shapes the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from simplequeue.api.auth import Action, Caller
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.fields import KEY_TEXT, Body, Key, Number
from simplequeue.api.queues.routes import Cursor, QueuePath
from simplequeue.api.responses import errors
from simplequeue.domain.keys import MAX_WEIGHT, MIN_WEIGHT, KeySettings, KeyStats

KeyPath = Annotated[Key, Path(description=f"The fairness key, as items are pushed with it. {KEY_TEXT}")]


class KeySettingsRequest(Body):
    """A key's own settings. PUT replaces them all: an omitted field takes its default."""

    weight: Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT), Number] = Field(
        1.0,
        description="The key's share of turns among the queue's keys: a key of weight 3 is handed out "
        "three items to a key of weight 1's one while both have items ready. Applies to items pushed "
        "from now on.",
    )
    max_leased: Annotated[int, Field(ge=1, le=1_000_000), Number] | None = Field(
        None,
        description="At most this many of the key's items are leased at once, across every replica. "
        "null: the queue's max_leased_per_key.",
    )
    rate_per_second: Annotated[float, Field(gt=0, le=1_000_000), Number] | None = Field(
        None,
        description="Pops hand out at most this many of the key's items per second on average, across "
        "every replica (a token bucket of one second's worth, at least 1, kept in the key's row; "
        "setting it starts a full bucket). null: the queue's rate_per_key_per_second.",
    )

    def to_domain(self) -> KeySettings:
        return KeySettings(self.weight, self.max_leased, self.rate_per_second)


class FairKey(BaseModel):
    """A key of a queue: its own settings (null: the queue's default) and its live items' counts."""

    key: str
    weight: float
    max_leased: int | None
    rate_per_second: float | None
    ready: int = Field(description="Its items ready to pop (due or not).")
    leased: int = Field(description="Its items leased now.")

    @classmethod
    def of(cls, found: KeyStats) -> FairKey:
        s = found.settings
        return cls(
            key=found.key,
            weight=s.weight,
            max_leased=s.max_leased,
            rate_per_second=s.rate_per_second,
            ready=found.ready,
            leased=found.leased,
        )


class FairKeyList(BaseModel):
    keys: list[FairKey] = Field(description="In key order.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


router = APIRouter(tags=["queues"])


@router.get("/queues/{name}/keys", operation_id="listKeys", responses=errors(404, 422, 503))
async def list_keys(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    limit: Annotated[int, Query(ge=1, le=1000, description="Keys per page.")] = 100,
    cursor: Cursor = None,
) -> FairKeyList:
    """The queue's fairness keys with their settings and counts, in key order, a page at a time:
    follow `next_cursor` until it is null. Items pushed without a key are not listed."""
    who.require(Action.READ_STATS, name)
    page = await sq.list_keys(name, limit, cursor)
    return FairKeyList(keys=[FairKey.of(k) for k in page.items], next_cursor=page.next_cursor)


@router.get("/queues/{name}/keys/{key}", operation_id="getKey", responses=errors(404, 422, 503))
async def get_key(name: QueuePath, key: KeyPath, sq: ServiceDep, who: Caller) -> FairKey:
    """One key's settings and counts (a key the queue never saw: the defaults, and no items)."""
    who.require(Action.READ_STATS, name)
    return FairKey.of(await sq.get_key(name, key))


@router.put(
    "/queues/{name}/keys/{key}",
    operation_id="putKey",
    responses=errors(400, 404, 413, 415, 422, 503),
)
async def put_key(
    name: QueuePath, key: KeyPath, body: KeySettingsRequest, sq: ServiceDep, who: Caller
) -> FairKey:
    """Set a key's own weight and limits (omitted fields take their defaults). They apply from the
    next push (weight) and the next pop (limits) on. 404 QueueNotFound for a queue that does not
    exist."""
    who.require(Action.ADMINISTER, name)
    return FairKey.of(await sq.put_key(name, key, body.to_domain()))


@router.delete("/queues/{name}/keys/{key}", operation_id="resetKey", responses=errors(404, 422, 503))
async def reset_key(name: QueuePath, key: KeyPath, sq: ServiceDep, who: Caller) -> FairKey:
    """The key back to the queue's defaults: weight 1, the queue's per-key limits. Its turn is kept."""
    who.require(Action.ADMINISTER, name)
    return FairKey.of(await sq.reset_key(name, key))
