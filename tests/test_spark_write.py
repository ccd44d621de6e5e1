"""The Spark data source on local[2] against a live service (SQLite and PostgreSQL): the batch
write (exactly once when tasks fail midway and are retried, optional columns, bad input that fails
before anything is pushed) and the history read. One Spark session for the module."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.e2e
pyspark = pytest.importorskip("pyspark", reason="pip install 'simplequeue[spark]'")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.utils import AnalysisException  # noqa: E402

from tests.sparking import items_of, service, spark  # noqa: E402, F401  (fixtures)


def test_a_task_that_fails_midway_and_is_retried_pushes_nothing_twice(
    spark: SparkSession, service: str, tmp_path: Path
) -> None:
    queue = f"spark-retry-{os.getpid()}"
    rows = spark.range(0, 2000, numPartitions=4).selectExpr(
        "to_json(named_struct('n', id)) AS payload", "CAST(id AS STRING) AS dedup_key"
    )

    def write(**options: str) -> dict[str, int]:
        summary = tmp_path / "summary.json"
        summary.unlink(missing_ok=True)
        writer = rows.write.format("simplequeue").option("url", service).option("queue", queue)
        for name, value in {"batch_size": "100", "_summary_path": str(summary), **options}.items():
            writer = writer.option(name, value)
        writer.mode("append").save()
        counted: dict[str, int] = json.loads(summary.read_text())
        return counted

    # every task's first attempt dies after 2 batches pushed; the retries find those 800 rows there,
    # pushed by this write (their own ids), so they count as pushed, not skipped
    assert write(_fail_after_batches="2") == {"rows": 2000, "pushed": 2000, "skipped": 0}
    numbers = sorted(i["payload"]["n"] for i in items_of(service, queue))  # type: ignore[index]
    assert numbers == list(range(2000))
    # the same keys again, a new write: all there before it
    assert write() == {"rows": 2000, "pushed": 0, "skipped": 2000}


def test_optional_columns_and_nulls(spark: SparkSession, service: str) -> None:
    queue = f"spark-columns-{os.getpid()}"
    other = f"{queue}-other"
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    frame = spark.createDataFrame(
        [
            ('{"k": 1}', "key-1", 5, None, "g1", created, queue),
            ('{"k": 2}', "key-1", None, None, None, None, queue),  # same key: a duplicate
            ('{"k": 3}', None, None, 3600.0, None, None, queue),  # delayed
            ('{"k": 4}', None, None, None, None, None, other),
        ],
        "payload string, dedup_key string, priority int, delay_seconds double, `group` string, "
        "created_at timestamp, queue string",
    )
    frame.write.format("simplequeue").option("url", service).mode("append").save()

    popped = items_of(service, queue)
    assert [i["payload"] for i in popped] == [{"k": 1}]
    [first] = popped
    assert (first["priority"], first["group"]) == (5, "g1")
    assert first["created_at"] == "2026-01-02T03:04:05Z"  # the same instant, whatever the time zones
    assert [i["payload"] for i in items_of(service, other)] == [{"k": 4}]
    with httpx.Client(base_url=service) as http:
        assert http.get(f"/queues/{queue}").json()["delayed"] == 1


def test_a_struct_payload_becomes_a_json_value(spark: SparkSession, service: str) -> None:
    queue = f"spark-struct-{os.getpid()}"
    frame = spark.sql("SELECT named_struct('to', 'ada@example.com', 'tags', array('a', 'b')) AS payload")
    frame.write.format("simplequeue").option("url", service).option("queue", queue).mode("append").save()
    assert [i["payload"] for i in items_of(service, queue)] == [{"to": "ada@example.com", "tags": ["a", "b"]}]


def test_map_payloads_become_objects_nested_too(spark: SparkSession, service: str) -> None:
    queue = f"spark-map-{os.getpid()}"
    frame = spark.sql(
        "SELECT map('a', 1, 'b', 2) AS payload UNION ALL SELECT map('c', 3) AS payload"
    ).coalesce(1)
    frame.write.format("simplequeue").option("url", service).option("queue", queue).mode("append").save()
    assert sorted(map(str, (i["payload"] for i in items_of(service, queue)))) == [
        "{'a': 1, 'b': 2}",
        "{'c': 3}",
    ]
    nested = spark.sql("SELECT named_struct('m', map('k', array(map('x', 1)))) AS payload")
    nested.write.format("simplequeue").option("url", service).option("queue", queue).mode("append").save()
    assert [i["payload"] for i in items_of(service, queue)] == [{"m": {"k": [{"x": 1}]}}]


@pytest.mark.parametrize(
    ("options", "sql", "says"),
    [
        ({"queue": "q"}, "SELECT '1' AS payload", 'option "url" is required'),
        ({}, "SELECT '1' AS payload", 'option "queue" is required'),
        ({"queue": "q"}, "SELECT '1' AS body", 'column "payload" is required'),
        ({"queue": "q", "batch_size": "0"}, "SELECT '1' AS payload", 'option "batch_size" must be between'),
        ({"queue": "no/slash"}, "SELECT '1' AS payload", "'no/slash' cannot be a queue's name"),
        ({"queue": "q", "url": "localhost:8000"}, "SELECT '1' AS payload", "is not the service's URL"),
    ],
)
def test_bad_options_fail_before_anything_is_pushed(
    spark: SparkSession, service: str, options: dict[str, str], sql: str, says: str
) -> None:
    writer = spark.sql(sql).write.format("simplequeue").mode("append")
    if not says.startswith('option "url"') and "url" not in options:
        writer = writer.option("url", service)
    for name, value in options.items():
        writer = writer.option(name, value)
    with pytest.raises(Exception, match=says):
        writer.save()


def test_a_payload_that_is_not_json_names_its_partition_and_row(spark: SparkSession, service: str) -> None:
    queue = f"spark-bad-{os.getpid()}"
    frame = spark.createDataFrame([('{"ok": 1}',), ("{broken",)], "payload string").coalesce(1)
    with pytest.raises(Exception, match=r"partition 0, row 1: payload is not JSON"):
        frame.write.format("simplequeue").option("url", service).option("queue", queue).mode("append").save()


def test_an_unreachable_url_fails_at_once_naming_it(spark: SparkSession) -> None:
    with pytest.raises(Exception, match=r"simplequeue at http://127.0.0.1:9 does not answer"):
        spark.sql("SELECT '1' AS payload").write.format("simplequeue").option(
            "url", "http://127.0.0.1:9"
        ).option("queue", "q").mode("append").save()


def test_overwrite_is_refused(spark: SparkSession, service: str) -> None:
    with pytest.raises((AnalysisException, Exception), match="append"):
        spark.sql("SELECT '1' AS payload").write.format("simplequeue").option("url", service).option(
            "queue", "q"
        ).mode("overwrite").save()


def test_history_reads_back_what_finished_split_by_time(spark: SparkSession, service: str) -> None:
    queue = f"spark-history-{os.getpid()}"
    with httpx.Client(base_url=service, timeout=30) as http:
        http.put(f"/queues/{queue}", json={"max_attempts": 1, "history_payload": True})
        http.post("/push/batch", json={"queue": queue, "items": [{"payload": {"n": n}} for n in range(30)]})
    finished = items_of(service, queue)
    with httpx.Client(base_url=service, timeout=30) as http:
        for item in finished[:20]:
            http.delete(f"/items/{item['id']}", params={"lease_token": item["lease_token"]})
        for item in finished[20:]:
            http.post(f"/items/{item['id']}/fail", json={"error": "boom", "lease_token": item["lease_token"]})
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    frame = (
        spark.read.format("simplequeue")
        .option("url", service)
        .option("queue", queue)
        .option("since", since)
        .option("numPartitions", "3")
        .load()
    )
    assert frame.columns[:9] == [
        "id", "queue", "outcome", "attempts", "created_at", "first_popped_at", "finished_at",
        "last_error", "payload",
    ]  # fmt: skip
    assert frame.rdd.getNumPartitions() == 3
    rows = frame.collect()
    assert len(rows) == 30
    assert sorted(json.loads(r.payload)["n"] for r in rows) == list(range(30))
    outcomes = {o: sum(1 for r in rows if r.outcome == o) for o in ("completed", "dead")}
    assert outcomes == {"completed": 20, "dead": 10}
    assert {r.last_error for r in rows if r.outcome == "dead"} == {"boom"}
    # The same instants as the service's, though the session's time zone is not UTC.
    with httpx.Client(base_url=service) as http:
        newest = http.get(f"/queues/{queue}/history", params={"limit": 1}).json()["items"][0]
    [row] = [r for r in rows if r.id == newest["id"]]
    assert row.finished_at.astimezone(UTC) == datetime.fromisoformat(
        newest["finished_at"].replace("Z", "+00:00")
    )


def test_a_read_with_a_bad_option_names_it(spark: SparkSession, service: str) -> None:
    reader = spark.read.format("simplequeue").option("url", service).option("queue", "q")
    with pytest.raises(Exception, match='option "numPartitions" must be a whole number'):
        reader.option("numPartitions", "none").load().collect()


def test_dead_letters_read_with_their_payloads_and_errors(spark: SparkSession, service: str) -> None:
    queue = f"spark-dead-{os.getpid()}"
    with httpx.Client(base_url=service, timeout=30) as http:
        http.put(f"/queues/{queue}", json={"max_attempts": 1})  # history keeps no payloads here
        http.post("/push/batch", json={"queue": queue, "items": [{"payload": {"n": n}} for n in range(12)]})
        for item in items_of(service, queue):
            http.post(
                f"/items/{item['id']}/fail", json={"error": "bad address", "lease_token": item["lease_token"]}
            )
    reader = spark.read.format("simplequeue").option("url", service).option("queue", queue)
    rows = reader.option("source", "dead").option("numPartitions", "2").load().collect()
    assert sorted(json.loads(r.payload)["n"] for r in rows) == list(range(12))
    assert {(r.outcome, r.last_error, r.attempts) for r in rows} == {("dead", "bad address", 1)}
    assert all(r.finished_at is not None for r in rows)
    later = datetime.now(UTC) + timedelta(hours=1)
    window = {"source": "dead", "since": later.isoformat(), "until": (later + timedelta(hours=1)).isoformat()}
    assert reader.options(**window).load().count() == 0


def test_a_stream_source_asked_for_in_a_batch_read_is_refused(spark: SparkSession, service: str) -> None:
    reader = spark.read.format("simplequeue").option("url", service).option("queue", "q")
    with pytest.raises(Exception, match='option "source" must be "history" or "dead"'):
        reader.option("source", "items").load().collect()


def test_the_history_of_a_queue_that_never_was_is_refused_at_once(spark: SparkSession, service: str) -> None:
    reader = spark.read.format("simplequeue").option("url", service).option("queue", "never-was")
    with pytest.raises(Exception, match="has no queue 'never-was'"):
        reader.load().collect()
