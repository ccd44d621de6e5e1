"""Schedules as every dialect keeps them: the flow is written here once, over statements of the
same names in each dialect's queries.sql, run by the dialect's `_topic_run` (statements in one
transaction) and `_claim_and_push`.

Firing is one transaction for a batch of due schedules (fire_due_schedules): their rows locked,
skipping those another replica holds, their new slots written by one statement, and their items
pushed by one push through the dialect's own. So of replicas racing for a slot one pushes, and a
replica that dies mid-way has pushed nothing and claimed nothing: the slot is still there for the
next to look. A single schedule can also be fired alone (fire_schedule, a compare-and-set on its
next_run_at), and a trigger is an update and a push in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from simplequeue.domain import NewItem, Page
from simplequeue.domain.schedules import (
    Fired,
    PutMode,
    Schedule,
    ScheduleNotFound,
    ScheduleSpec,
    Timing,
    is_schedule_name,
)
from simplequeue.store import rows
from simplequeue.store.cursors import decode_name_cursor, encode_name_cursor
from simplequeue.store.rows import Row
from simplequeue.store.topics import Step

_CURSOR_MARK = "s:"  # a schedule cursor is its page's last name, marked apart from queues' and topics'


def encode_schedule_cursor(name: str) -> str:
    return encode_name_cursor(name, _CURSOR_MARK)


def schedule_of(row: Row) -> Schedule:
    every = row["every_seconds"]
    spec = ScheduleSpec(
        queue=row["queue"],
        payload_json=row["payload"],
        timing=Timing(
            every_seconds=None if every is None else int(every),
            cron=row["cron"],
            timezone=row["timezone"],
            at=rows.as_utc_or_none(row["at"]),
        ),
        priority=int(row["priority"]),
        group=row["group_key"],
        paused=bool(row["paused"]),
        jitter_seconds=int(row["jitter_seconds"]),
        overlap=row["overlap"],
        catch_up=row["catch_up"],
        description=row["description"],
        aws_json=row["aws"],
    )
    last_item = row["last_item_id"]
    return Schedule(
        name=row["name"],
        spec=spec,
        created_at=rows.as_utc(row["created_at"]),
        modified_at=rows.as_utc_or_none(row["modified_at"]),
        next_run_at=rows.as_utc_or_none(row["next_run_at"]),
        last_run_at=rows.as_utc_or_none(row["last_run_at"]),
        last_item_id=None if last_item is None else rows.as_uuid(last_item),
        previous_live=bool(row["previous_live"]),
    )


def _spec_values(spec: ScheduleSpec) -> dict[str, Any]:
    t = spec.timing
    return {
        "queue": spec.queue,
        "payload": spec.payload_json,
        "every_seconds": t.every_seconds,
        "cron": t.cron,
        "timezone": t.timezone,
        "at": t.at,
        "priority": spec.priority,
        "group_key": spec.group,
        "paused": spec.paused,
        "jitter_seconds": spec.jitter_seconds,
        "overlap": spec.overlap,
        "catch_up": spec.catch_up,
        "description": spec.description,
        "aws": spec.aws_json,
    }


def _claim(fired: Fired) -> dict[str, Any]:
    """A firing as schedules_claimed reads it. The last item's created_at is its slot (item_for)."""
    last = fired.items[-1] if fired.items else None
    return {
        "name": fired.schedule.name,
        "claimed": fired.schedule.next_run_at,
        "following": fired.following,
        "last_run_at": None if last is None else last.created_at,
        "last_item_id": None if last is None else last.id,
    }


Then = Callable[[Sequence[Row]], tuple[Step, Sequence[NewItem]]]
"""What a batch does with the rows it locked: a statement to run, and the items to push."""


class ScheduleStore:
    """Schedules, for a dialect that runs the named statements (see the module's docstring)."""

    async def _topic_run(self, steps: Sequence[Step]) -> list[list[Any]]:
        raise NotImplementedError  # the dialect's: statements in one transaction (store/topics.py)

    async def _claim_and_push(self, claim: Step, items: Sequence[NewItem]) -> bool:
        """In one transaction: run `claim`; when it returned a row, push `items` all or nothing.
        Whether the claim changed a row (False: nothing was pushed)."""
        raise NotImplementedError

    async def _lock_and_push(self, lock: Step, then: Then) -> None:
        """In one transaction: run `lock`, which locks the rows it returns until the end; unless it
        returned none, run the statement `then` makes of them and push its items, all or nothing.
        A value that is a list of rows (dicts) is bound as the dialect binds a batch: JSON text, or
        on PostgreSQL an array per field."""
        raise NotImplementedError

    async def put_schedule(
        self,
        name: str,
        spec: ScheduleSpec,
        next_run_at: datetime | None,
        now: datetime,
        must: PutMode = "any",
    ) -> tuple[Schedule, bool]:
        """Make or replace the schedule (its last run and item are kept); (it, whether this made it).
        `must` "new": a taken name's schedule is left as it is, and answered with False;
        "existing": ScheduleNotFound when the name is free (nothing is made)."""
        values = {"name": name, "now": now, "next_run_at": next_run_at, **_spec_values(spec), "must": must}
        before, changed, after = await self._topic_run(
            [("schedule_get", {"name": name}), ("schedule_put", values), ("schedule_get", {"name": name})]
        )
        # The put's own answer, not the read before it, says what it did: that read may be stale
        # by the time the put runs (another replica's put of the same name in between).
        if not after or (not changed and must == "existing"):
            raise ScheduleNotFound(f"There is no schedule named {name!r}.")
        if not changed:
            return schedule_of(after[0]), False
        return schedule_of(after[0]), (not before if must == "any" else must == "new")

    async def get_schedule(self, name: str) -> Schedule:
        [found] = await self._topic_run([("schedule_get", {"name": name})])
        if not found:
            raise ScheduleNotFound(f"There is no schedule named {name!r}.")
        return schedule_of(found[0])

    async def list_schedules(self, limit: int, cursor: str | None) -> Page[Schedule]:
        after = decode_name_cursor(cursor, _CURSOR_MARK, is_schedule_name)
        [found] = await self._topic_run([("schedule_page", {"after": after, "limit": limit})])
        page = [schedule_of(r) for r in found]
        last = encode_schedule_cursor(page[-1].name) if len(page) == limit else None
        return Page(page, last)

    async def delete_schedule(self, name: str) -> bool:
        [deleted] = await self._topic_run([("schedule_delete", {"name": name})])
        return bool(deleted)

    async def pause_schedule(self, name: str, now: datetime) -> Schedule:
        """Raises ScheduleNotFound."""
        return await self._changed(name, ("schedule_pause", {"name": name, "now": now}))

    async def resume_schedule(self, name: str, next_run_at: datetime | None, now: datetime) -> Schedule:
        """Unpause it; a paused schedule's next slot becomes `next_run_at`. Raises ScheduleNotFound."""
        values = {"name": name, "now": now, "next_run_at": next_run_at}
        return await self._changed(name, ("schedule_resume", values))

    async def _changed(self, name: str, step: Step) -> Schedule:
        changed, found = await self._topic_run([step, ("schedule_get", {"name": name})])
        if not changed:
            raise ScheduleNotFound(f"There is no schedule named {name!r}.")
        return schedule_of(found[0])

    async def schedules_due(self, now: datetime, limit: int) -> tuple[list[Schedule], datetime | None]:
        """(up to `limit` unpaused schedules due at `now`, oldest slot first; the next slot after
        now of the others, None if none): a scheduler's one statement per wake."""
        [found] = await self._topic_run([("schedules_due", {"now": now, "limit": limit})])
        schedules = [schedule_of(r) for r in found]
        due = [s for s in schedules if s.next_run_at is not None and s.next_run_at <= now]
        later = [s.next_run_at for s in schedules if s.next_run_at is not None and s.next_run_at > now]
        return due, min(later, default=None)

    async def next_schedule_slot(self) -> datetime | None:
        """The earliest next slot of any unpaused schedule; None if none has one. One statement:
        what an idle scheduler costs per wake."""
        [found] = await self._topic_run([("schedules_next", {})])
        return rows.as_utc_or_none(found[0]["next_run_at"]) if found else None

    async def fire_due_schedules(
        self, now: datetime, limit: int, plan: Callable[[Schedule], Fired]
    ) -> list[Fired]:
        """Fire up to `limit` of the schedules due at `now` that no other replica is firing, in one
        transaction: each `plan`ned (its next slot and its items) while its row is locked, the new
        slots written by one statement and every item pushed by one push. What was fired (empty:
        nothing due, or every due row held by another replica). A push refused (ItemExists) undoes
        the whole batch."""
        fired: list[Fired] = []

        def then(found: Sequence[Row]) -> tuple[Step, Sequence[NewItem]]:
            fired[:] = [plan(schedule_of(row)) for row in found]  # a retried transaction plans again
            claims = [_claim(f) for f in fired]
            return ("schedules_claimed", {"claims": claims}), [i for f in fired for i in f.items]

        await self._lock_and_push(("schedules_due_locked", {"now": now, "limit": limit}), then)
        return fired

    async def fire_schedule(
        self,
        name: str,
        claimed: datetime,
        following: datetime | None,
        items: Sequence[NewItem],
        last_slot: datetime | None,
    ) -> bool:
        """Move the schedule's next slot from `claimed` to `following` and push `items` (the
        slots' items, the last fired at `last_slot`), in one transaction; False, pushing
        nothing, when its next slot is no longer `claimed` (another replica fired it, or it was
        replaced, paused or deleted)."""
        claim = {
            "name": name,
            "claimed": claimed,
            "following": following,
            "last_run_at": last_slot if items else None,
            "last_item_id": items[-1].id if items else None,
        }
        return await self._claim_and_push(("schedule_claim", claim), items)

    async def trigger_schedule(self, name: str, item: NewItem, now: datetime) -> None:
        """Push the item now, whatever the schedule's slots (paused too), recording it as the last
        run. Raises ScheduleNotFound."""
        values = {"name": name, "now": now, "last_item_id": item.id}
        if not await self._claim_and_push(("schedule_triggered", values), [item]):
            raise ScheduleNotFound(f"There is no schedule named {name!r}.")
