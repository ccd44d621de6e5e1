"""The schedules' request and response bodies. Generated clients depend on these shapes.

What the schema can check it checks (types, ranges, one of the enumerations); what only the
domain can judge (a cron field's range, a time zone's name, which timing is given, an `at` gone
by) is its 422 ValidationError, naming the field as the schema's own errors do.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool

from simplequeue.api.fields import TIME_TEXT, Body, Int32, Key, Number, QueueName, UtcDatetime
from simplequeue.domain import MAX_PAYLOAD_DEPTH
from simplequeue.domain.schedules import (
    MAX_CATCH_UP,
    MAX_EVERY_SECONDS,
    MAX_JITTER_SECONDS,
    CatchUp,
    Overlap,
    Schedule,
    Timing,
)


class ScheduleRequest(Body):
    """A schedule, made or replaced whole: one of every_seconds, cron or at says when."""

    queue: QueueName = Field(description="The queue each firing pushes its item to.")
    payload: Any = Field(
        ...,
        description="The item's payload: any JSON value, as a push takes it (nesting at most "
        f"{MAX_PAYLOAD_DEPTH} levels; 422 InvalidPayload).",
    )
    every_seconds: Annotated[int, Field(ge=1, le=MAX_EVERY_SECONDS), Number] | None = Field(
        None,
        description="Fire every so many seconds, on whole multiples of it since the Unix epoch.",
    )
    cron: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Fire at the times of a five-field cron expression (minute hour day-of-month month "
        "day-of-week; names, ranges, steps and @hourly, @daily, @weekly, @monthly, @yearly), read in "
        "`timezone`. A time the zone skips fires once, at the end of the gap; one it repeats, once.",
        examples=["*/15 9-17 * * mon-fri"],
    )
    timezone: str = Field(
        "UTC",
        min_length=1,
        max_length=64,
        description="The IANA zone cron is read in.",
        examples=["Europe/Berlin"],
    )
    at: UtcDatetime | None = Field(
        None, description=f"Fire once, at this time ({TIME_TEXT}); not in the past."
    )
    priority: Int32 = Field(0, description="The items' priority.")
    group: Key | None = Field(None, description="The ordered group the items join.")
    paused: StrictBool = Field(False, description="Made paused: nothing fires until it is resumed.")
    jitter_seconds: Annotated[int, Number] = Field(
        0,
        ge=0,
        le=MAX_JITTER_SECONDS,
        description="Spread each item's visibility over this many seconds after its slot (the same "
        "spread for the same slot on every replica).",
    )
    overlap: Overlap = Field(
        "allow", description="skip: a slot whose previous item is still live (ready, leased) pushes nothing."
    )
    catch_up: CatchUp = Field(
        "latest",
        description="When several slots are due (after an outage): none fires the last one if it is "
        f"less than a minute late, latest the last one, all each of them (the last {MAX_CATCH_UP} at most).",
    )

    def timing(self) -> Timing:
        return Timing(every_seconds=self.every_seconds, cron=self.cron, timezone=self.timezone, at=self.at)


class ScheduleResponse(BaseModel):
    name: str
    queue: str
    payload: Any
    every_seconds: int | None
    cron: str | None
    timezone: str
    at: datetime | None
    priority: int
    group: str | None
    paused: bool
    jitter_seconds: int
    overlap: Overlap
    catch_up: CatchUp
    created_at: datetime
    modified_at: datetime | None
    next_run_at: datetime | None = Field(description="The next slot; null once an `at` has fired.")
    last_run_at: datetime | None = Field(description="The slot last fired (or when it was last triggered).")
    last_item_id: UUID | None = Field(description="The item the last firing pushed.")

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleResponse:
        spec, timing = schedule.spec, schedule.spec.timing
        return cls(
            name=schedule.name,
            queue=spec.queue,
            payload=json.loads(spec.payload_json),
            every_seconds=timing.every_seconds,
            cron=timing.cron,
            timezone=timing.timezone,
            at=timing.at,
            priority=spec.priority,
            group=spec.group,
            paused=spec.paused,
            jitter_seconds=spec.jitter_seconds,
            overlap=spec.overlap,
            catch_up=spec.catch_up,
            created_at=schedule.created_at,
            modified_at=schedule.modified_at,
            next_run_at=schedule.next_run_at,
            last_run_at=schedule.last_run_at,
            last_item_id=schedule.last_item_id,
        )


class ScheduleList(BaseModel):
    schedules: list[ScheduleResponse]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")
