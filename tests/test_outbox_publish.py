"""Publishing to a topic in the caller's own transaction (simplequeue.outbox.publish), on every
driver the outbox takes, on SQLite and PostgreSQL: a publish whose transaction rolls back delivers
nothing; one that commits is delivered by the relay to every subscribed queue whose filter it
passes, once, even when the relay runs twice."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import uuid4

import asyncpg
import pytest
from simplequeue import outbox
from simplequeue.domain import DeadFilter, QueueSettings, system_clock
from simplequeue.domain.notifications import Arns
from simplequeue.domain.publications import PUBLICATIONS, InvalidPublication, read_publication
from simplequeue.main import store_for
from simplequeue.service.queues import QueueService
from simplequeue.service.topics import Relay, TopicService
from simplequeue.settings import Settings

from tests.outbox_callers import ORDERS, Caller, caller_on
from tests.test_outbox_drivers import plain, target  # noqa: F401 (the drivers' fixture, shared)

_orders = itertools.count(random.randrange(10**12))


@dataclass
class Case:
    caller: Caller
    queues: QueueService
    topics: TopicService
    relay: Relay
    engine: str


@pytest.fixture
async def case(target: tuple[str, str, str]) -> AsyncIterator[Case]:  # noqa: F811
    driver, engine, where = target
    url = f"sqlite:///{where}" if engine == "sqlite" else where
    store = store_for(Settings(database_url=url, db_timeout_seconds=5, sweep=False))
    queues = QueueService(store, system_clock)
    await queues.start(migrate=True)
    topics = TopicService(store, queues, system_clock, Arns("us-east-1", "000000000000"))
    await plain(engine, where, ORDERS, "SELECT 1")
    async with caller_on(driver, engine, where) as caller:
        yield Case(caller, queues, topics, Relay(topics, queues, "http://sq.example"), engine)
    await queues.stop()


async def subscribed(case: Case, raw: bool = True, **attributes: str) -> tuple[str, str]:
    topic, queue = f"ob-{uuid4().hex[:12]}", f"ob-{uuid4().hex[:12]}"
    await case.topics.create_topic(topic, {}, {})
    await case.queues.put_queue(queue, QueueSettings())
    given = {"RawMessageDelivery": "true"} if raw else {}
    await case.topics.subscribe(topic, "sqs", queue, given | attributes)
    return topic, queue


async def popped(case: Case, queue: str) -> list[object]:
    items = await case.queues.pop(queue, max_items=100, wait_seconds=0, lease_seconds=30)
    return [i.payload for i in items]


async def test_a_committed_publish_is_delivered_and_a_rolled_back_one_is_not(case: Case) -> None:
    topic, queue = await subscribed(case)
    await case.caller.begin()
    await case.caller.write(next(_orders))
    await case.caller.publish(topic, {"order": "rolled back"})
    await case.caller.rollback()

    await case.caller.begin()
    await case.caller.write(next(_orders))
    message_id = await case.caller.publish(topic, {"order": "kept"}, subject="order")
    await case.caller.commit()

    assert await case.relay.run_once() >= 1
    assert await popped(case, queue) == [{"order": "kept"}]
    await case.relay.run_once()  # nothing left: a second run delivers nothing again
    assert await popped(case, queue) == []
    assert message_id is not None


async def test_a_publication_relayed_twice_is_delivered_once(case: Case) -> None:
    topic, queue = await subscribed(case, raw=False, FilterPolicy=json.dumps({"kind": ["a"]}))
    await case.caller.begin()
    message_id = await case.caller.publish(
        topic, "hello", attributes={"kind": {"type": "String", "value": "a"}}, id=uuid4()
    )
    await case.caller.publish(topic, "filtered out", attributes={"kind": {"type": "String", "value": "b"}})
    await case.caller.commit()
    # A relay that delivered and died before it completed: its items are taken again.
    taken = await case.queues.pop(PUBLICATIONS, max_items=10, wait_seconds=0, lease_seconds=30)
    assert len(taken) == 2
    await case.topics.publish(*read_publication(taken[0].payload, taken[0].id), "http://sq.example")
    for item in taken:
        await case.queues.release(item.id)
    assert await case.relay.run_once() == 2
    [body] = await popped(case, queue)
    envelope = json.loads(str(body))
    assert (envelope["Message"], envelope["MessageId"]) == ("hello", str(message_id))


async def test_a_publication_to_a_topic_that_is_gone_dies_with_the_reason(case: Case) -> None:
    await case.caller.begin()
    await case.caller.publish(f"gone-{uuid4().hex[:8]}", "x")
    await case.caller.commit()
    await case.relay.run_once()
    dead = await case.queues.list_dead(PUBLICATIONS, DeadFilter(), 100, None)
    assert any("TopicNotFound" in (i.errors[-1].error if i.errors else "") for i in dead.items)


def test_bad_publications_are_refused_before_the_database_is_touched() -> None:
    with pytest.raises(InvalidPublication):
        outbox.publish(object(), "bad name", "x")
    with pytest.raises(InvalidPublication):
        outbox.publish(object(), "t.fifo", "x")  # no group
    with pytest.raises(InvalidPublication):
        outbox.publish(object(), "t", "x", group="g")


async def test_sq_publish_from_sql_commits_or_rolls_back_with_the_callers_transaction(
    postgres_url: str,
) -> None:
    store = store_for(Settings(database_url=postgres_url, db_timeout_seconds=5, sweep=False))
    queues = QueueService(store, system_clock)
    await queues.start(migrate=True)
    topics = TopicService(store, queues, system_clock, Arns("us-east-1", "000000000000"))
    relay = Relay(topics, queues, "http://sq.example")
    try:
        topic, queue = f"sql-{uuid4().hex[:12]}", f"sql-{uuid4().hex[:12]}"
        await topics.create_topic(topic, {}, {})
        await queues.put_queue(queue, QueueSettings())
        await topics.subscribe(topic, "sqs", queue, {"RawMessageDelivery": "true"})
        conn = await asyncpg.connect(postgres_url)
        try:
            async with conn.transaction():
                await conn.execute("SELECT sq_publish($1, '{\"n\": 1}')", topic)
            rolled_back = conn.transaction()
            await rolled_back.start()
            await conn.execute("SELECT sq_publish($1, '{\"n\": 2}')", topic)
            await rolled_back.rollback()
            with pytest.raises(asyncpg.PostgresError, match="FIFO"):
                await conn.execute("SELECT sq_publish($1, '1')", "x.fifo")
            null_kept = await conn.fetchval(
                "SELECT sq_publish($1, '{\"a\": null}', subject => 's', message_id => gen_random_uuid())",
                topic,
            )
        finally:
            await conn.close()
        while await relay.run_once():
            pass
        got = [i.payload for i in await queues.pop(queue, max_items=10, wait_seconds=0, lease_seconds=30)]
        assert sorted(map(str, got)) == sorted(map(str, [{"n": 1}, {"a": None}]))
        assert null_kept is not None
    finally:
        await queues.stop()
