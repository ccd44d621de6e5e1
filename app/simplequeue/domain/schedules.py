"""Schedules: pushes kept in the database, recurring (every N seconds, or a cron expression in a
time zone) or once (at a time), each fired exactly once per slot by whichever replica claims it.

A slot is the instant a firing is due. The store keeps each schedule's next slot (next_run_at);
firing it is one transaction that moves next_run_at on with a compare-and-set on the slot it read
and pushes the item, whose dedup key names the schedule and the slot (`dedup_key`): two replicas
racing fire once, and a replica killed mid-way leaves the slot to the next that looks.

Slots of `every_seconds` are whole multiples of the interval since the Unix epoch, so that
replacing a schedule with the same interval keeps its slots. Cron slots follow domain.cron's rules
for the clock changes of the zone.

When more than one slot is due (after an outage), `catch_up` decides: "none" fires the last one if
it is on time (due no more than LATE_SECONDS ago) and no other, "latest" the last one only, "all"
every one, oldest first, at most MAX_CATCH_UP: never a burst but the one asked for.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from simplequeue.domain.cron import Cron, CronError, next_instant, parse_cron, previous_instant
from simplequeue.domain.errors import InvalidSettings, NotFound
from simplequeue.domain.items import NewItem

Overlap = Literal["allow", "skip"]
PutMode = Literal["any", "new", "existing"]
"""What a put asks of the name: nothing ("any": make or replace), that it is free ("new"), or that
it is taken ("existing")."""
CatchUp = Literal["none", "latest", "all"]
OVERLAPS: tuple[Overlap, ...] = ("allow", "skip")
CATCH_UPS: tuple[CatchUp, ...] = ("none", "latest", "all")

SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,80}$"
"""Short enough that `schedule:<name>:<slot>` fits a dedup key's 128 characters."""
_SCHEDULE_NAME = re.compile(r"\A[A-Za-z0-9._-]{1,80}\Z")
MAX_CATCH_UP = 100
"""The most missed slots catch_up "all" fires after an outage: never a storm."""
LATE_SECONDS = 60.0
"""A slot due longer ago than this was missed (the service was down), not merely reached late:
catch_up "none" does not fire it."""
MAX_JITTER_SECONDS = 3600
MAX_EVERY_SECONDS = 366 * 24 * 3600
"""A year and a day: the longest interval (a longer period is a cron expression or an `at`)."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ScheduleNotFound(NotFound):
    """There is no schedule with this name."""


class InvalidSchedule(InvalidSettings):
    """A schedule's field holds what cannot be (a minute of 61, an unknown time zone, no timing):
    `field` names it as the API's body does, and the API answers it as its schema's own checks."""


@dataclass(frozen=True, slots=True)
class Timing:
    """When a schedule fires: exactly one of every_seconds, cron (read in `timezone`) and at."""

    every_seconds: int | None = None
    cron: str | None = None
    timezone: str = "UTC"
    at: datetime | None = None

    def check(self, now: datetime) -> None:
        """Raises InvalidSchedule naming the field."""
        given = [n for n in ("every_seconds", "cron", "at") if getattr(self, n) is not None]
        if not given:
            raise InvalidSchedule("every_seconds", "give one of every_seconds, cron or at")
        if len(given) > 1:
            both = " and ".join(given)
            raise InvalidSchedule(given[1], f"give one of every_seconds, cron or at, not {both}")
        if self.every_seconds is not None and not 1 <= self.every_seconds <= MAX_EVERY_SECONDS:
            raise InvalidSchedule(
                "every_seconds", f"must be 1 to {MAX_EVERY_SECONDS}, not {self.every_seconds}"
            )
        zone_of(self.timezone)
        if self.cron is not None:
            cron_of(self.cron)
        if self.at is not None:
            if self.at.tzinfo is None:
                raise InvalidSchedule("at", "must name its offset (2030-01-01T09:00:00Z)")
            if self.at <= now:
                raise InvalidSchedule("at", f"{_iso(self.at)} is in the past")

    def next_slot(self, after: datetime) -> datetime | None:
        """The first slot strictly after `after`; None when there is none (an `at` gone by)."""
        if self.every_seconds is not None:
            step = timedelta(seconds=self.every_seconds)
            return EPOCH + ((after - EPOCH) // step + 1) * step
        if self.cron is not None:
            return next_instant(cron_of(self.cron), zone_of(self.timezone), after)
        assert self.at is not None
        return self.at if self.at > after else None

    def previous_slot(self, until: datetime) -> datetime | None:
        """The last slot at or before `until`, or None."""
        if self.every_seconds is not None:
            step = timedelta(seconds=self.every_seconds)
            return EPOCH + ((until - EPOCH) // step) * step
        if self.cron is not None:
            return previous_instant(cron_of(self.cron), zone_of(self.timezone), until)
        assert self.at is not None
        return self.at if self.at <= until else None


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A schedule as its caller puts it."""

    queue: str
    payload_json: str  # the item's payload, as JSON text (checked as a push checks it)
    timing: Timing
    priority: int = 0
    group: str | None = None
    paused: bool = False
    jitter_seconds: int = 0
    overlap: Overlap = "allow"
    catch_up: CatchUp = "latest"
    description: str | None = None
    aws_json: str | None = None
    """The schedule as Amazon EventBridge Scheduler's API gave it (its expression, time zone, target
    and time window; JSON text), kept to be answered back as given; None when the REST API made it."""

    def check(self, now: datetime) -> None:
        self.timing.check(now)
        if not 0 <= self.jitter_seconds <= MAX_JITTER_SECONDS:
            raise InvalidSchedule("jitter_seconds", f"must be 0 to {MAX_JITTER_SECONDS}")
        if self.overlap not in OVERLAPS:
            raise InvalidSchedule("overlap", f"must be one of {', '.join(OVERLAPS)}")
        if self.catch_up not in CATCH_UPS:
            raise InvalidSchedule("catch_up", f"must be one of {', '.join(CATCH_UPS)}")


@dataclass(frozen=True, slots=True)
class Schedule:
    """A stored schedule: its spec and where its firing stands."""

    name: str
    spec: ScheduleSpec
    created_at: datetime
    modified_at: datetime | None = None
    next_run_at: datetime | None = None  # None: nothing left to fire (an `at` that fired)
    last_run_at: datetime | None = None
    last_item_id: UUID | None = None
    previous_live: bool = field(default=False, compare=False)
    """Whether last_item_id's item is still live (read with the due schedules, for overlap skip)."""


@dataclass(frozen=True, slots=True)
class Firing:
    """What to do with a due schedule now: fire these slots (oldest first; maybe none), then keep
    `following` as its next slot. `claimed` is the next_run_at the compare-and-set expects."""

    claimed: datetime
    slots: tuple[datetime, ...]
    following: datetime | None


@dataclass(frozen=True)
class Fired:
    """A due schedule as a firing leaves it: its next slot, and the items it pushes, oldest slot
    first (maybe none: a slot skipped, or missed under catch_up 'none')."""

    schedule: Schedule
    following: datetime | None
    items: tuple[NewItem, ...] = ()


def is_schedule_name(name: str) -> bool:
    return _SCHEDULE_NAME.fullmatch(name) is not None


def check_name(name: str) -> None:
    if not is_schedule_name(name):
        raise InvalidSchedule("name", "1 to 80 letters, digits, '.', '_' or '-'")


def zone_of(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule("timezone", f"{name!r} is not an IANA time zone") from None


def cron_of(expression: str) -> Cron:
    try:
        return parse_cron(expression)
    except CronError as exc:
        raise InvalidSchedule("cron", str(exc)) from None


def first_slot(timing: Timing, now: datetime) -> datetime | None:
    """A new (or replaced, or resumed) schedule's next slot: the first after now."""
    return timing.next_slot(now)


def plan_firing(schedule: Schedule, now: datetime) -> Firing | None:
    """What a scheduler does with the schedule at `now`: None when its next slot is not due.

    When several slots are due (the service was down, or slow), "all" fires each of them, oldest
    first (the last MAX_CATCH_UP); "latest" the last one only; "none" the last one only if it is
    no more than LATE_SECONDS late, else nothing."""
    due = schedule.next_run_at
    if due is None or due > now:
        return None
    timing, policy = schedule.spec.timing, schedule.spec.catch_up
    following = timing.next_slot(now)
    if policy == "all":
        return Firing(due, _slots_between(timing, due, now), following)
    latest = timing.previous_slot(now)
    assert latest is not None, "a due slot is at or before now"
    if policy == "none" and now - latest > timedelta(seconds=LATE_SECONDS):
        return Firing(due, (), following)
    return Firing(due, (latest,), following)


def _slots_between(timing: Timing, first: datetime, until: datetime) -> tuple[datetime, ...]:
    """The slots from `first` to `until`, both included, the last MAX_CATCH_UP of them: walked back
    from `until`, so that a long outage costs MAX_CATCH_UP steps, not one per missed slot."""
    found: deque[datetime] = deque()
    slot = timing.previous_slot(until)
    while slot is not None and slot >= first and len(found) < MAX_CATCH_UP:
        found.appendleft(slot)
        slot = timing.previous_slot(slot - timedelta(microseconds=1))
    return tuple(found)


def dedup_key(name: str, slot: datetime) -> str:
    """The dedup key of the item that fires the slot: the same on every replica."""
    return f"schedule:{name}:{_iso(slot)}"


def jitter(name: str, slot: datetime, jitter_seconds: int) -> float:
    """How long after its slot the item becomes poppable: spread over [0, jitter_seconds) by a hash
    of (schedule, slot), so that every replica would push the same item."""
    if jitter_seconds <= 0:
        return 0.0
    digest = hashlib.sha256(f"{name}\n{_iso(slot)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * jitter_seconds


def _iso(instant: datetime) -> str:
    spec = "microseconds" if instant.microsecond else "seconds"
    text = instant.astimezone(UTC).isoformat(timespec=spec)
    return text.replace("+00:00", "Z")
