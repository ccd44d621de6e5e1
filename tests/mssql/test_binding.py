"""Parameters by name: each query's markers in the order pyodbc takes them, every name bound at
its call site, the fake's own refusals, and the clock bound or left to the server."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import (
    Completion,
    DeadFilter,
    DeletedQueue,
    Failure,
    HistoryFilter,
    ItemStatus,
    NewItem,
    QueueSettings,
)
from simplequeue.domain.activity import ActivityWindow
from simplequeue.domain.keys import KeyLoad, KeySettings, KeyStats
from simplequeue.domain.metadata import MetadataChange
from simplequeue.domain.schedules import Fired, ScheduleSpec, Timing
from simplequeue.domain.topics import Subscription, TopicChange
from simplequeue.service import batches
from simplequeue.store.migrations import load_migrations
from simplequeue.store.mssql import params
from simplequeue.store.mssql.statements import Q, fetch
from simplequeue.store.mssql.store import MssqlStore
from simplequeue.store.queries import load_queries
from sqlglot import exp

from tests.mssql.helpers import (
    NOW,
    NOW_TEXT,
    STATS_COLUMNS,
    FakeConnection,
    FakeCursor,
    Result,
    Results,
    completed_ids,
    dead_rows,
    fake_store,
    history_rows,
    item_row,
    limits_row,
    locked_keys,
    parse,
    picked,
    placeholders,
    pushed,
    result,
    stats_row,
    still_there,
    visible_rows,
)
from tests.mssql.test_push_procedures import answers, procedures_sent_as_written

VERSIONS = [m.version for m in load_migrations("mssql")]
TAGS = '[{"n":"a","v":"b"}]'  # FOR JSON PATH's text

# Each query's parameters, in the order of its ? markers: the order in which pyodbc takes the values
# that Query.bind lines up by name. The binding tests below check which value lands on which marker.
PARAMETERS = {
    "push_batch": ("now", "items"),
    "pop": ("now", "queue", "lease_seconds", "limits_checked", "max_items", "lease_token"),
    "lock_keys": ("now", "queue", "walk", "max_keys"),
    "wait_keys": ("now", "queue"),
    "add_keys": ("queue",),
    "lease_keyed": ("now", "queue", "lease_seconds", "limits_checked", "max_items", "seqs", "lease_token"),
    "lease_runs": ("now", "queue", "room", "heads", "lease_seconds", "lease_token"),
    "extend": ("now", "id", "lease_token", "lease_seconds"),
    "complete_batch": ("now", "items"),
    "fail": ("now", "id", "lease_token", "retry", "retry_after", "draw", "error"),
    "reap_expired": ("now", "error", "queue", "limit"),
    "get_item": ("now", "id"),
    "list_dead": ("now", "queue", "since", "until", "after_at", "after_seq", "limit"),
    "pick_dead": ("queue", "ids", "limit"),
    "revive": ("now", "queue", "plan"),
    "purge_dead": ("now", "queue", "limit"),
    "purge_live": ("now", "queue", "limit"),
    "list_history": ("queue", "outcome", "since", "until", "after_at", "after_seq", "limit"),
    "activity": ("queue", "since", "until", "bucket", "limit"),
    "purge_history": ("now", "limit"),
    "put_queue": (
        "now",
        "queue",
        "max_attempts",
        "lease_seconds",
        "backoff_base_seconds",
        "backoff_factor",
        "backoff_cap_seconds",
        "backoff_jitter",
        "retention_seconds",
        "dedup_window_seconds",
        "dedup_window_from",
        "history_payload",
        "dead_letter_queue",
        "message_retention_seconds",
        "max_leased",
        "rate_per_second",
        "rate_burst",
        "max_leased_per_key",
        "rate_per_key_per_second",
        "priority_aging_seconds",
        "limited",
    ),
    "next_visible_at": ("now", "queues"),
    "sequence_numbers": ("ids",),
    "queue_stats": ("now", "queue"),
    "queue_page": ("now", "after", "prefix", "limit"),
    "count_queues": (),
    "queue_exists": ("queue",),
    "queue_metadata": ("queue",),
    "expire_retained": ("now", "limit"),
    "change_queue_metadata": (
        "now",
        "queue",
        "set_attributes",
        "unset_attributes",
        "set_tags",
        "unset_tags",
        "max_tags",
        "touch",
    ),
    "set_paused": ("queue", "paused"),
    "peek": ("now", "queue", "state", "after_at", "after_seq", "limit"),
    "group_items": ("now", "queue", "group", "after_seq", "limit"),
    "dedup_item": ("now", "queue", "dedup_key"),
    "delete_queue": ("now", "queue", "force"),
    "lock_migrations": ("timeout_ms",),
    "unlock_migrations": (),
    "create_version_table": (),
    "applied_versions": (),
    "record_version": ("version", "name", "now"),
    "write_setting": ("name", "value"),
    "compatibility_level": (),
    "topic_create": ("now", "name", "attributes", "tags"),
    "topic_get": ("name",),
    "topic_page": ("after", "limit"),
    "put_key": ("queue", "key", "weight", "max_leased", "rate_per_second"),
    "reset_key": ("queue", "key"),
    "key_page": ("queue", "after", "key", "limit"),
    "top_keys": ("now", "queue", "limit"),
    "topic_update": ("now", "name", "attributes", "tags", "old_attributes", "old_tags"),
    "topic_delete_subscriptions": ("name",),
    "topic_delete": ("name",),
    "subscription_create": ("now", "id", "topic", "protocol", "endpoint", "attributes", "confirmed", "token"),
    "subscription_find": ("topic", "protocol", "endpoint"),
    "subscription_get": ("id",),
    "subscription_page": ("topic", "after", "limit"),
    "subscription_update": ("id", "attributes", "old_attributes", "confirmed", "token"),
    "subscription_delete": ("id",),
    "topic_fanout": ("topic",),
    "signing_key_insert": ("now", "name", "private_pem", "certificate_pem"),
    "signing_key_get": ("name",),
    "lock_limits": ("queue", "now"),
    "queue_limits": ("queue", "now"),
    "count_leased": ("now", "queue", "cap"),
    "take_tokens": ("queue", "tokens", "at"),
    "take_key_tokens": ("queue", "buckets"),
    "schedule_put": (
        "now",
        "name",
        "queue",
        "payload",
        "every_seconds",
        "cron",
        "timezone",
        "at",
        "priority",
        "group_key",
        "paused",
        "jitter_seconds",
        "overlap",
        "catch_up",
        "next_run_at",
        "description",
        "aws",
        "must",
    ),
    "schedule_get": ("name",),
    "schedule_page": ("after", "limit"),
    "schedule_delete": ("name",),
    "schedule_pause": ("now", "name"),
    "schedule_resume": ("now", "name", "next_run_at"),
    "schedules_due": ("now", "limit"),
    "schedule_claim": ("name", "claimed", "following", "last_run_at", "last_item_id"),
    "schedules_next": (),
    "schedules_due_locked": ("now", "limit"),
    "schedules_claimed": ("claims",),
    "schedule_triggered": ("now", "name", "last_item_id"),
}
# The same file with :name kept, for tests that read which parameter a statement takes.
NAMED = load_queries("simplequeue.store.mssql", "named")


def test_every_query_names_its_parameters_in_marker_order() -> None:
    assert {name: query.params for name, query in Q.items()} == PARAMETERS
    assert {query.style for query in Q.values()} == {"qmark"}


@pytest.mark.parametrize("name", sorted(Q))
def test_every_marker_is_a_named_parameter_written_once(name: str) -> None:
    # A ? written into queries.sql would be a marker that no name binds; a name written twice would be
    # a second marker and a second copy of its value (a batch reads a value twice through its variable).
    query = Q[name]
    assert placeholders(query.sql) == len(query.params)
    assert len(set(query.params)) == len(query.params)
    assert sorted(query.params) == sorted(NAMED[name].params)


def test_a_variable_set_from_a_parameter_takes_the_parameters_name() -> None:
    found = {}
    for name, query in NAMED.items():
        for tree in parse(query.sql):
            if isinstance(tree, exp.Declare) and (default := tree.expressions[0].args.get("default")):
                variable = tree.expressions[0].this[0].name
                for placeholder in default.find_all(exp.Placeholder):
                    found[(name, variable)] = placeholder.name
    mismatched = {key: param for key, param in found.items() if key[1] != param}
    # @token is the batch's short name for the lease token the store binds under its protocol name.
    assert mismatched == {("extend", "token"): "lease_token", ("fail", "token"): "lease_token"}
    assert ("pop", "queue") in found


# --- what the fake refuses, as pyodbc would -------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [None, True, 1.5, UUID("00000000-0000-4000-8000-00000000000a"), NOW, b"orders", ["orders"]],
    ids=repr,
)
async def test_the_fake_refuses_parameters_pyodbc_cannot_bind_without_asking(bad: Any) -> None:
    # None needs the server to describe the batch; a bool, a float, a UUID or a datetime bind as types
    # the statements do not expect. Every binding test below relies on this check.
    cursor = FakeCursor(FakeConnection())
    with pytest.raises(AssertionError, match="bind str and int only"):
        await cursor.execute(Q["next_visible_at"].sql, NOW_TEXT, bad)


async def test_the_fake_refuses_a_parameter_too_many_or_too_few() -> None:
    cursor = FakeCursor(FakeConnection())
    for given in [(NOW_TEXT,), (NOW_TEXT, "orders", "extra")]:
        with pytest.raises(AssertionError, match="markers"):
            await cursor.execute(Q["next_visible_at"].sql, *given)


# --- every query bound by name at its call site ---------------------------------------------------


async def test_a_value_missing_or_left_over_is_refused_before_the_batch_is_sent() -> None:
    conn = FakeConnection()
    with pytest.raises(TypeError, match=r"missing \['queues'\], unexpected \[\]"):
        await fetch(conn, "next_visible_at", now=NOW_TEXT)
    with pytest.raises(TypeError, match=r"missing \[\], unexpected \['queue'\]"):
        await fetch(conn, "next_visible_at", now=NOW_TEXT, queues="[]", queue="orders")
    assert conn.executed == []
    await fetch(conn, "next_visible_at", queues="[]", now=NOW_TEXT)  # by name: any order
    assert conn.params("next_visible_at") == (NOW_TEXT, "[]")


async def test_every_query_is_sent_by_a_store_method_that_binds_each_of_its_names(
    fake: tuple[MssqlStore, FakeConnection], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every call site binds through Query.bind, which raises TypeError for a name missing or left
    # over, before anything is sent (the test above). So a query that reached the fake was bound
    # with exactly its names; between them, these calls reach every query of queries.sql.
    store, conn = fake
    procedures_sent_as_written(monkeypatch)
    item_id, token = uuid4(), uuid4()
    keyed = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("push_batch", answers((0, keyed.id, NOW, True)))
    conn.reply("extend", Results([result(seq=7), item_row(item_id, status="leased", lease_token=token)]))
    conn.reply("complete_batch", *[Results([completed_ids(item_id), still_there()])] * 2)
    conn.reply("fail", Results([result(status="dead"), item_row(item_id, status="dead")]))
    conn.reply("get_item", item_row(item_id, status="ready"))
    conn.reply("next_visible_at", Results([result(now=NOW.replace(tzinfo=None)), visible_rows()]))
    conn.reply("queue_stats", Result(STATS_COLUMNS, [stats_row("orders", None)]))
    conn.reply("queue_page", Result(STATS_COLUMNS, [stats_row("orders", None)]))
    conn.reply("count_queues", result(queues=1))
    conn.reply("put_queue", result(created=1))
    conn.reply("list_dead", dead_rows())
    conn.reply("pick_dead", picked(1))
    conn.reply("revive", result(revived=1))
    conn.reply("purge_dead", result(purged=0))
    conn.reply("purge_live", result(purged=0))
    conn.reply("list_history", history_rows())
    conn.reply("activity", Result(["bucket", "pushed", "completed", "failed", "dead"], []))
    conn.reply("reap_expired", Result(["queue", "killed"], []))
    conn.reply("purge_history", result(history=0, keys=0, ids=0))
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], []), Result(["version"], [(v,) for v in VERSIONS]))
    conn.reply("queue_exists", result(found=1))
    conn.reply(
        "queue_metadata",
        result(
            created_at=NOW.replace(tzinfo=None), modified_at=None, attributes=None, tags='[{"n":"a","v":"b"}]'
        ),
    )
    conn.reply("change_queue_metadata", result(found=1, tags=1))
    conn.reply("expire_retained", result(purged=2))
    conn.reply("set_paused", result(changed=1))
    conn.reply("peek", dead_rows())
    conn.reply("group_items", dead_rows())
    conn.reply("dedup_item", item_row(item_id, status="ready"))
    conn.reply("delete_queue", result(found=1, leased=0, deleted=1, items=2, history=3))
    head = item_row(uuid4(), status="leased", lease_token=token, group_key="g")
    conn.reply(
        "pop",
        Result(["seq"], []),
        Result(["seq", *head.columns, "fair_rank", "rank_priority"], [(7, *head.rows[0], 0.0, 0)]),
    )

    await store.push_batch([keyed], skip_existing=False)
    await store.pop("orders", 1, None)
    await store.pop("orders", 2, None, group_runs=True)  # a grouped head: lease_runs follows
    await store.extend(item_id, token, 30)
    await store.complete(item_id, token)
    await store.complete_batch([Completion(item_id, None)])
    await store.fail(item_id, Failure("boom", lease_token=token, retry=False))
    await store.get_item(item_id)
    conn.reply("sequence_numbers", result(id=str(item_id).upper(), seq=7))
    assert await store.sequence_numbers([item_id]) == {item_id: 7}
    await store.next_visible_at(["orders"])
    await store.list_queues(10, None)
    assert await store.count_queues() == 1
    await store.get_queue("orders")
    await store.put_queue("orders", QueueSettings())
    await store.list_dead("orders", DeadFilter(), 10, None)
    assert await batches.redrive(store, "orders", None, None) == 1
    await batches.purge_dead(store, "orders")
    await batches.purge_live(store, "orders")
    await store.list_history("orders", HistoryFilter(), 10, None)
    await store.activity("orders", ActivityWindow(NOW.replace(microsecond=0), 60, 2))
    await store.reap_expired(10)
    await store.purge_history(10)
    assert await store.migrate(max_payload_bytes=1024) == VERSIONS
    await store.check_ready()
    assert await store.queue_exists("orders")
    assert (await store.queue_metadata("orders")).tags == {"a": "b"}
    assert await store.change_queue_metadata("orders", MetadataChange(set_tags={"a": "b"})) == 1
    assert await store.expire_retained(10) == 2
    await store.set_paused("orders", True)
    await store.peek("orders", ItemStatus.LEASED, 10, None)
    await store.group_items("orders", "g", 10, None)
    await store.dedup_item("orders", "k")
    assert await store.delete_queue("orders", force=False) == DeletedQueue(items=2, history=3)
    await _topics(store, conn)
    await _keys(store, conn)
    # A queue with flow limits pops the careful way (test_limits.py).
    monkeypatch.setattr(store.flow, "careful", lambda queue: True)
    conn.reply("queue_limits", limits_row(max_leased=5, rate_per_second=2.0))
    conn.reply("lock_limits", limits_row(max_leased=5, rate_per_second=2.0))
    conn.reply("count_leased", result(leased=1))
    conn.reply("pop", Result(["seq"], []))
    conn.reply("take_tokens", result(changed=1))
    await store.pop("orders", 3, None)
    # A queue with per-key limits: its keys' turns taken and their leases counted (lock_keys),
    # then what their rooms allow leased (test_key_limits.py).
    conn.reply("queue_limits", limits_row(max_leased_per_key=2))
    conn.reply("lock_keys", locked_keys(("gold", 7, 1, 5, 4)))
    conn.reply("lease_keyed", Result(["seq"], []))
    await store.pop("orders", 3, None)
    # With a rate per key: the keys' buckets written back less what the pop took (take_key_tokens).
    conn.reply("queue_limits", limits_row(rate_per_key_per_second=2.0))
    conn.reply("lock_keys", locked_keys(("gold", 7, 1, None, 0, 2.0, 1.5, NOW.replace(tzinfo=None))))
    conn.reply("lease_keyed", Result(["seq"], []))
    conn.reply("take_key_tokens", result(changed=1))
    await store.pop("orders", 3, None)
    # Every key held by other pops: the missing row made (add_keys), one key waited for.
    conn.reply("queue_limits", limits_row(max_leased_per_key=2))
    conn.reply("add_keys", result(added=0))
    conn.reply("wait_keys", result(key="gold"))
    await store.pop("orders", 3, None)
    await _schedules(store, conn)

    named = [e for e in conn.executed if e.name in Q]
    assert {e.name for e in named} == set(Q), "a query no store method sends"
    for e in named:
        assert len(e.params) == len(Q[e.name].params), e.name
    assert not conn.closed, "unlock_migrations, whose errors are swallowed, was bound too"


async def _keys(store: MssqlStore, conn: FakeConnection) -> None:
    """Every fair key statement (store/keys.py), as SQL Server's rows would answer them."""
    key = result(fairness_key="acme", weight=2.0, max_leased=3, rate_per_second=None, ready=4, leased=1)
    conn.reply("put_key", result(fairness_key="acme"))
    conn.reply("key_page", key, key)
    conn.reply("reset_key", Result([], []))
    await store.put_key("orders", "acme", KeySettings(weight=2.0, max_leased=3))
    assert await store.get_key("orders", "acme") == KeyStats("acme", KeySettings(2.0, 3, None), 4, 1)
    assert [k.key for k in (await store.list_keys("orders", 10, None)).items] == ["acme"]
    await store.reset_key("orders", "acme")
    conn.reply(
        "top_keys",
        Result(["fairness_key", "ready", "leased", "max_leased"], [("acme", 4, 3, 3), (None, 1, 0, 2)]),
    )
    assert await store.top_keys("orders", 10) == [KeyLoad("acme", 4, 3, 3), KeyLoad(None, 1, 0, 2)]


async def _topics(store: MssqlStore, conn: FakeConnection) -> None:
    """Every topic statement (store/topics.py), as SQL Server's rows would answer them."""
    topic = result(
        name="news",
        created_at=NOW.replace(tzinfo=None),
        modified_at=None,
        attributes="{}",
        tags="{}",
        subscriptions=1,
    )
    sub_id = uuid4()
    subscription = result(
        id=str(sub_id).upper(),
        topic="news",
        protocol="sqs",
        endpoint="orders",
        attributes="{}",
        confirmed=True,
        token=None,
        created_at=NOW.replace(tzinfo=None),
        queue_exists=1,
    )
    fanout = result(
        topic_created_at=NOW.replace(tzinfo=None),
        topic_modified_at=None,
        topic_attributes="{}",
        topic_tags="{}",
        **{k: v for k, v in zip(subscription.columns, subscription.rows[0], strict=True)},
    )
    conn.reply("topic_create", result(name="news"))
    conn.reply("topic_get", *[topic] * 4)
    conn.reply("topic_page", topic)
    conn.reply("topic_update", topic)
    conn.reply("topic_delete", result(name="news"))
    conn.reply("topic_delete_subscriptions", Result([], []))
    conn.reply("subscription_create", result(id=str(sub_id)))
    conn.reply("subscription_find", subscription)
    conn.reply("subscription_get", *[subscription] * 2)
    conn.reply("subscription_page", subscription)
    conn.reply("subscription_update", subscription)
    conn.reply("subscription_delete", result(id=str(sub_id)))
    conn.reply("topic_fanout", fanout)
    conn.reply(
        "signing_key_get",
        Result(["private_pem", "certificate_pem"], []),
        result(private_pem="k", certificate_pem="c"),
    )
    conn.reply("signing_key_insert", Result([], []))

    assert (await store.create_topic("news", {}, {}, NOW))[1]
    assert (await store.get_topic("news")).subscriptions == 1
    await store.list_topics(10, None)
    await store.change_topic("news", TopicChange(set_tags={"a": "b"}), NOW)
    made = Subscription(sub_id, "news", "sqs", "orders", NOW)
    assert (await store.subscribe(made))[0].id == sub_id
    await store.get_subscription(sub_id)
    await store.list_subscriptions("news", 10, None)
    await store.change_subscription(sub_id, {"RawMessageDelivery": "true"})
    assert [s.endpoint for s in (await store.topic_subscriptions("news"))[1]] == ["orders"]
    assert await store.unsubscribe(sub_id)
    assert await store.signing_key(lambda: ("k", "c"), NOW) == ("k", "c")
    assert await store.delete_topic("news")


async def test_without_a_clock_the_server_clock_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    store, conn = fake_store(monkeypatch, clock=False)
    item = NewItem(uuid4(), "orders", "null", NOW)
    conn.reply("push_batch", answers((0, item.id, NOW, True)))
    conn.reply("next_visible_at", Results([result(now=NOW.replace(tzinfo=None)), visible_rows()]))

    await store.push_batch([item], skip_existing=False)
    await store.pop("orders", 1, 30)
    await store.next_visible_at(["orders"])

    server_clock = "COALESCE(CAST(NULLIF(N'', N'') AS DATETIME2(7)), SYSUTCDATETIME())"
    for name in ("push_batch", "pop", "next_visible_at"):
        assert server_clock in conn.inlined(name)
    # created_at is the item's own time, never the clock's.
    assert pushed(conn)[0]["created_at"] == NOW_TEXT


async def _schedules(store: MssqlStore, conn: FakeConnection) -> None:
    """Every schedule statement (store/schedules.py), as SQL Server's rows would answer them."""
    naive = NOW.replace(tzinfo=None)
    row = result(
        name="nightly",
        queue="orders",
        payload="{}",
        every_seconds=None,
        cron="0 3 * * *",
        timezone="Europe/Berlin",
        at=None,
        priority=0,
        group_key=None,
        paused=False,
        jitter_seconds=0,
        overlap="allow",
        catch_up="latest",
        created_at=naive,
        modified_at=None,
        next_run_at=naive,
        last_run_at=None,
        last_item_id=None,
        description=None,
        aws=None,
        previous_live=0,
    )
    none = Result(row.columns, [])
    conn.reply("schedule_get", none, *[row] * 6)
    conn.reply("schedule_put", result(name="nightly"))
    conn.reply("schedule_page", row)
    conn.reply("schedule_pause", result(name="nightly"))
    conn.reply("schedule_resume", result(name="nightly"))
    conn.reply("schedules_due", row)
    conn.reply("schedule_claim", result(name="nightly"))
    conn.reply("schedule_triggered", result(name="nightly"))
    conn.reply("schedule_delete", result(name="nightly"))

    spec = ScheduleSpec("orders", "{}", Timing(cron="0 3 * * *", timezone="Europe/Berlin"))
    assert (await store.put_schedule("nightly", spec, NOW, NOW))[1]
    assert (await store.get_schedule("nightly")).spec.timing.timezone == "Europe/Berlin"
    await store.list_schedules(10, None)
    await store.pause_schedule("nightly", NOW)
    await store.resume_schedule("nightly", NOW, NOW)
    assert [s.name for s in (await store.schedules_due(NOW, 10))[0]] == ["nightly"]
    item = NewItem(uuid4(), "orders", "{}", NOW, dedup_key="schedule:nightly:x")
    conn.reply("push_batch", answers((0, item.id, NOW, True)))
    assert await store.fire_schedule("nightly", NOW, None, [item], NOW)
    conn.reply("push_batch", answers((0, item.id, NOW, True)))
    await store.trigger_schedule("nightly", NewItem(item.id, "orders", "{}", NOW), NOW)
    conn.reply("schedules_next", result(next_run_at=naive))
    assert await store.next_schedule_slot() == NOW
    conn.reply("schedules_due_locked", row)
    conn.reply("schedules_claimed", result(name="nightly"))
    conn.reply("push_batch", answers((0, item.id, NOW, True)))
    [fired] = await store.fire_due_schedules(NOW, 10, lambda s: Fired(s, None, (item,)))
    assert fired.schedule.name == "nightly"
    [claims] = conn.params("schedules_claimed")
    assert json.loads(claims) == [
        {
            "name": "nightly",
            "claimed": params.timestamp(NOW),
            "following": "",
            "last_run_at": params.timestamp(NOW),
            "last_item_id": str(item.id),
        }
    ]
    assert await store.delete_schedule("nightly")
