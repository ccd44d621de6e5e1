"""Activity: items pushed, completed, failed and dead per bucket of time, counted in the database
from history and live items, for one queue or every queue, within a bounded window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from simplequeue.domain import Failure
from simplequeue.domain.activity import (
    MAX_BUCKETS,
    ActivityBucket,
    ActivityWindow,
    InvalidWindow,
    activity_window,
)
from simplequeue.service import batches
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item
from tests.http import Client, app_client, assert_error

MINUTE = 60


def on_the_minute(clock: FakeClock) -> datetime:
    """Moves the clock to 10 s past a whole minute, and answers that minute's start."""
    start = clock.now.replace(second=0, microsecond=0)
    clock.now = start + timedelta(seconds=10)
    return start


def counts(buckets: list[ActivityBucket]) -> list[tuple[int, int, int, int]]:
    return [(b.pushed, b.completed, b.failed, b.dead) for b in buckets]


def window(since: datetime, buckets: int, bucket_seconds: int = MINUTE) -> ActivityWindow:
    return ActivityWindow(since, bucket_seconds, buckets)


async def test_an_idle_queue_has_every_bucket_at_zero(store: Store, queue: str, clock: FakeClock) -> None:
    start = on_the_minute(clock)
    await configure(store, queue)

    found = await store.activity(queue, window(start - timedelta(minutes=4), 5))

    assert [b.start for b in found] == [start - timedelta(minutes=4 - n) for n in range(5)]
    assert counts(found) == [(0, 0, 0, 0)] * 5


async def test_each_event_lands_in_its_bucket(store: Store, queue: str, clock: FakeClock) -> None:
    start = on_the_minute(clock)
    await configure(store, queue, max_attempts=3)
    a, b, c, d = (new_item(queue, n, created_at=clock.now) for n in range(4))
    await push(store, a, b, c, d)

    clock.advance(MINUTE)  # minute 1: one completes, one fails and will be retried
    first = await pop_one(store, queue)
    await store.complete(first.id, first.lease_token)
    second = await pop_one(store, queue)
    await store.fail(second.id, Failure("try again", second.lease_token, retry_after_seconds=0))

    clock.advance(MINUTE)  # minute 2: one dies at once, and one is pushed
    third = await pop_one(store, queue)
    await store.fail(third.id, Failure("fatal", third.lease_token, retry=False))
    await push(store, new_item(queue, "late", created_at=clock.now))

    found = await store.activity(queue, window(start, 3))

    assert counts(found) == [(4, 0, 0, 0), (0, 1, 1, 0), (1, 0, 1, 1)]


async def test_a_retried_item_that_completes_keeps_its_push_and_loses_its_failures(
    store: Store, queue: str, clock: FakeClock
) -> None:
    """History keeps no time per failure: once an item completes, its failures are not counted."""
    start = on_the_minute(clock)
    await configure(store, queue)
    await push(store, new_item(queue, created_at=clock.now))
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("flaky", popped.lease_token, retry_after_seconds=0))
    assert counts(await store.activity(queue, window(start, 1))) == [(1, 0, 1, 0)]

    clock.advance(MINUTE)
    again = await pop_one(store, queue)
    await store.complete(again.id, again.lease_token)

    assert counts(await store.activity(queue, window(start, 2))) == [(1, 0, 0, 0), (0, 1, 0, 0)]


async def test_what_happened_before_the_window_is_left_out(
    store: Store, queue: str, clock: FakeClock
) -> None:
    start = on_the_minute(clock)
    await configure(store, queue)
    old = new_item(queue, created_at=clock.now - timedelta(hours=2))
    await push(store, old, new_item(queue, created_at=clock.now - timedelta(hours=2)))
    popped = await pop_one(store, queue)
    await store.complete(popped.id, popped.lease_token)

    # Completed in the window, pushed before it; the other item is live and older than the window.
    assert counts(await store.activity(queue, window(start, 1))) == [(0, 1, 0, 0)]
    # A window that ended before now counts nothing after its end.
    assert counts(await store.activity(queue, window(start - timedelta(minutes=2), 2))) == [(0, 0, 0, 0)] * 2


async def test_dead_items_count_once_whether_or_not_they_were_purged(
    store: Store, queue: str, clock: FakeClock
) -> None:
    start = on_the_minute(clock)
    await configure(store, queue)
    await push(store, new_item(queue, created_at=clock.now), new_item(queue, created_at=clock.now))
    for _ in range(2):
        popped = await pop_one(store, queue)
        await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))
    assert counts(await store.activity(queue, window(start, 1))) == [(2, 0, 2, 2)]

    await batches.purge_dead(store, queue)

    # Their failures went with their rows; their history records stay.
    assert counts(await store.activity(queue, window(start, 1))) == [(2, 0, 0, 2)]


async def test_every_queue_together_and_each_alone(store: Store, queue: str, clock: FakeClock) -> None:
    start = on_the_minute(clock)
    other = f"{queue}-other"
    await push(store, new_item(queue, created_at=clock.now), new_item(other, created_at=clock.now))
    clock.advance(MINUTE)
    await push(store, new_item(other, created_at=clock.now))
    popped = await pop_one(store, other)
    await store.complete(popped.id, popped.lease_token)

    assert counts(await store.activity(queue, window(start, 2))) == [(1, 0, 0, 0), (0, 0, 0, 0)]
    assert counts(await store.activity(other, window(start, 2))) == [(1, 0, 0, 0), (1, 1, 0, 0)]
    # Every queue: the sum of each queue's (the database may hold other tests' queues).
    each = [
        counts(await store.activity(q.name, window(start, 2)))
        for q in (await store.list_queues(1000, None)).items
    ]
    summed = [tuple(map(sum, zip(*column, strict=True))) for column in zip(*each, strict=True)]
    everything = counts(await store.activity(None, window(start, 2)))
    assert everything == summed
    assert everything[1][0] >= 1
    assert everything[1][1] >= 1


async def test_longer_buckets_add_up_their_minutes(store: Store, queue: str, clock: FakeClock) -> None:
    start = on_the_minute(clock)
    quarter = start - timedelta(minutes=start.minute % 15)
    await push(store, new_item(queue, created_at=clock.now))
    clock.advance(MINUTE)
    await push(store, new_item(queue, created_at=clock.now))

    found = await store.activity(queue, window(quarter, 2, 15 * MINUTE))

    assert [b.start for b in found] == [quarter, quarter + timedelta(minutes=15)]
    assert sum(b.pushed for b in found) == 2


# --- the window's bounds (domain.activity) ---------------------------------------------------------

NOW = datetime(2026, 3, 1, 12, 34, 56, 789000, tzinfo=UTC)


def test_the_default_window_is_the_last_hour_in_whole_minutes() -> None:
    found = activity_window(NOW, None, MINUTE)
    assert found.since == datetime(2026, 3, 1, 11, 34, tzinfo=UTC)
    assert found.buckets == 61  # the minute an hour ago through the minute now
    assert found.until == datetime(2026, 3, 1, 12, 35, tzinfo=UTC)


def test_a_day_fits_at_a_minute_and_a_week_at_fifteen() -> None:
    assert activity_window(NOW, NOW - timedelta(hours=24), MINUTE).buckets == 24 * 60 + 1
    assert activity_window(NOW, NOW - timedelta(days=7), 15 * MINUTE).buckets <= MAX_BUCKETS


def test_a_window_too_long_is_cut_to_its_latest_part() -> None:
    week = activity_window(NOW, NOW - timedelta(days=30), 3600)  # more than 7 days ago: from then
    assert week.since == datetime(2026, 2, 22, 12, tzinfo=UTC)
    assert week.buckets == 7 * 24 + 1
    day = activity_window(NOW, NOW - timedelta(days=2), MINUTE)  # 2,881 minutes: the latest 1,500
    assert day.buckets == MAX_BUCKETS
    assert day.until == datetime(2026, 3, 1, 12, 35, tzinfo=UTC)
    future = activity_window(NOW, NOW + timedelta(days=1), MINUTE)  # from now
    assert (future.since, future.buckets) == (datetime(2026, 3, 1, 12, 34, tzinfo=UTC), 1)


@pytest.mark.parametrize("bucket", [5, 9, 86401])
def test_buckets_out_of_range_are_refused(bucket: int) -> None:
    with pytest.raises(InvalidWindow, match="bucket must be 10 to 86400 seconds"):
        activity_window(NOW, None, bucket)


# --- over HTTP --------------------------------------------------------------------------------------


async def test_the_routes_answer_every_bucket_of_the_last_hour(
    client: Client, queue: str, clock: FakeClock
) -> None:
    on_the_minute(clock)
    for n in range(3):
        assert (await client.post("/push", json={"queue": queue, "payload": n})).status_code == 201
    [item] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    assert (await client.delete(f"/items/{item['id']}")).status_code == 204

    answer = await client.get(f"/queues/{queue}/activity")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["queue"], body["bucket_seconds"], len(body["buckets"])) == (queue, 60, 61)
    assert body["buckets"][-1] | {"start": None} == {
        "start": None,
        "pushed": 3,
        "completed": 1,
        "failed": 0,
        "dead": 0,
    }
    day = (
        await client.get("/activity", params={"since": iso(clock.now - timedelta(hours=24)), "bucket": 900})
    ).json()
    assert (day["queue"], day["bucket_seconds"], len(day["buckets"])) == (None, 900, 97)
    assert day["buckets"][-1]["pushed"] >= 3


async def test_an_unknown_queue_is_not_found(lite: Client) -> None:
    assert_error(await lite.get("/queues/nope/activity"), 404, "QueueNotFound")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-13-01T00:00:00Z"}, "since"),
        ({"bucket": "5"}, "bucket"),
        ({"bucket": "86401"}, "bucket"),
        ({"bucket": "a minute"}, "bucket"),
    ],
)
async def test_bad_since_or_bucket_are_validation_errors(
    lite: Client, params: dict[str, str], field: str
) -> None:
    await lite.post("/push", json={"queue": "q", "payload": 1})
    for path in ("/activity", "/queues/q/activity"):
        body = assert_error(await lite.get(path, params=params), 422, "ValidationError")
        assert [f["loc"] for f in body["fields"]] == [["query", field]], body


async def test_windows_out_of_bounds_are_cut_and_say_so(lite: Client, clock: FakeClock) -> None:
    await lite.post("/push", json={"queue": "q", "payload": 1})
    old = (
        await lite.get("/queues/q/activity", params={"since": "2000-01-01T00:00:00Z", "bucket": 3600})
    ).json()
    assert old["since"] == iso(clock.now.replace(minute=0, second=0) - timedelta(days=7))
    assert len(old["buckets"]) == 7 * 24 + 1
    long = (await lite.get("/activity", params={"since": iso(clock.now - timedelta(days=2))})).json()
    assert len(long["buckets"]) == MAX_BUCKETS


async def test_who_may_read_activity(settings: Settings, clock: FakeClock) -> None:
    """Whoever may read queue stats; every queue's together only with a key that covers them all."""
    keys = [
        {"key": "producer-key-000000001", "role": "producer"},
        {"key": "consumer-key-jobs-00001", "role": "consumer", "queues": ["jobs.*"]},
        {"key": "admin-key-0000000000001", "role": "admin"},
    ]
    keyed = settings.model_copy(update={"api_keys": Settings(api_keys=keys).api_keys})
    producer, scoped, admin = ({"Authorization": f"Bearer {k['key']}"} for k in keys)
    async for c in app_client(keyed, clock):
        for queue in ("jobs.a", "mail"):
            assert (
                await c.post("/push", json={"queue": queue, "payload": 1}, headers=admin)
            ).status_code == 201
        assert (await c.get("/queues/mail/activity", headers=producer)).status_code == 200
        assert (await c.get("/activity", headers=producer)).status_code == 200
        assert (await c.get("/queues/jobs.a/activity", headers=scoped)).status_code == 200
        assert_error(await c.get("/queues/mail/activity", headers=scoped), 403, "Forbidden")
        assert_error(await c.get("/activity", headers=scoped), 403, "Forbidden")
        assert_error(await c.get("/activity"), 401, "Unauthorized")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
