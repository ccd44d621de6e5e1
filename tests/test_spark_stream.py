"""Structured Streaming in and out of queues on local[2] against a live service (SQLite and
PostgreSQL): the sink pushes each micro-batch once, also when a task fails or a batch runs again
after a restart; the source completes what a batch read when the batch commits (the last batch
too), keeps leases alive while a batch runs, and gives back what a query that died had read."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.e2e
pyspark = pytest.importorskip("pyspark", reason="pip install 'simplequeue[spark]'")

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.streaming import StreamingQueryException  # noqa: E402

from tests.sparking import items_of, service, spark, stats  # noqa: E402, F401  (fixtures)


def write_numbers(folder: Path, name: str, numbers: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"n": n}) + "\n" for n in numbers)
    (folder / f"{name}.tmp").write_text(lines)
    (folder / f"{name}.tmp").rename(folder / f"{name}.json")  # whole files only, for the file source


def sink(
    spark: SparkSession, source: Path, service: str, queue: str, checkpoint: Path, **options: str
) -> None:
    frame = spark.readStream.schema("n long").option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        frame.selectExpr("to_json(named_struct('n', n)) AS payload")
        .writeStream.format("simplequeue")
        .option("url", service)
        .option("queue", queue)
        .option("checkpointLocation", str(checkpoint))
        .options(**options)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the stream did not finish within two minutes"
    assert query.exception() is None


def numbers_in(service: str, queue: str) -> list[int]:
    return sorted(i["payload"]["n"] for i in items_of(service, queue))  # type: ignore[index]


def test_the_sink_pushes_each_batch_once_through_task_retries_and_replays(
    spark: SparkSession, service: str, tmp_path: Path
) -> None:
    queue = f"stream-sink-{os.getpid()}"
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    write_numbers(source, "a", range(0, 300))
    write_numbers(source, "b", range(300, 600))
    # Every task's first attempt dies after one batch of 100 pushed; Spark retries it.
    sink(spark, source, service, queue, checkpoint, batch_size="100", _fail_after_batches="1")
    write_numbers(source, "c", range(600, 700))
    sink(spark, source, service, queue, checkpoint)
    # A crash after the last batch pushed and before Spark recorded its commit: the restarted
    # query runs that batch again, with the same query id and batch id, so the same keys.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    sink(spark, source, service, queue, checkpoint)
    assert numbers_in(service, queue) == list(range(700))


def read_queue(spark: SparkSession, service: str, queue: str, **options: str) -> DataFrame:
    return (
        spark.readStream.format("simplequeue")
        .option("url", service)
        .option("queue", queue)
        .option("source", "queue")
        .options(**options)
        .load()
    )


def push_numbers(service: str, queue: str, count: int) -> None:
    with httpx.Client(base_url=service, timeout=30) as http:
        items = [{"payload": {"n": n}} for n in range(count)]
        assert http.post("/push/batch", json={"queue": queue, "items": items}).status_code == 201


def history(service: str, queue: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=service, timeout=30) as http:
        page = http.get(f"/queues/{queue}/history", params={"limit": 1000}).json()
        found: list[dict[str, Any]] = page["items"]
        return found


def test_the_source_completes_every_batch_it_read_the_last_one_too(
    spark: SparkSession, service: str, tmp_path: Path
) -> None:
    queue = f"stream-read-{os.getpid()}"
    push_numbers(service, queue, 45)
    name = f"read_{os.getpid()}_{service.rsplit(':', 1)[1]}"
    query = (
        read_queue(spark, service, queue, maxItemsPerBatch="10", numPartitions="3")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    rows = spark.table(name).collect()
    assert sorted(json.loads(r.payload)["n"] for r in rows) == list(range(45))
    assert {r.attempts for r in rows} == {1}
    assert [r.queue for r in rows] == [queue] * 45
    # Nothing waits for more data to be completed: the last batch of five is done as well.
    counts = stats(service, queue)
    assert (counts["ready"], counts["leased"]) == (0, 0)
    assert len(history(service, queue)) == 45


def test_leases_stay_alive_while_a_slow_batch_runs(spark: SparkSession, service: str, tmp_path: Path) -> None:
    queue = f"stream-slow-{os.getpid()}"
    push_numbers(service, queue, 6)
    seen: list[str] = []

    def slow(batch: DataFrame, batch_id: int) -> None:
        seen.extend(r.id for r in batch.collect())
        time.sleep(3)  # three times the lease: kept alive by the source, or handed out again

    query = (
        read_queue(spark, service, queue, maxItemsPerBatch="3", lease_seconds="1")
        .writeStream.foreachBatch(slow)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert len(seen) == len(set(seen)) == 6
    assert {h["attempts"] for h in history(service, queue)} == {1}, "no lease ran out and was popped again"


def test_what_a_query_read_before_it_died_comes_back_when_the_leases_expire(
    spark: SparkSession, service: str, tmp_path: Path
) -> None:
    queue = f"stream-dies-{os.getpid()}"
    push_numbers(service, queue, 20)

    def dies(batch: DataFrame, batch_id: int) -> None:
        if batch.count():
            raise RuntimeError("the job fell over")

    query = (
        read_queue(spark, service, queue, maxItemsPerBatch="8", lease_seconds="1")
        .writeStream.foreachBatch(dies)
        .option("checkpointLocation", str(tmp_path / "first"))
        .start()
    )
    with pytest.raises(StreamingQueryException, match="the job fell over"):
        query.awaitTermination(120)
    assert stats(service, queue)["history"]["completed"] == 0, "nothing read by the dead query was completed"
    deadline = time.monotonic() + 60
    while stats(service, queue)["ready"] < 20:  # the eight leases run out (one second)
        assert time.monotonic() < deadline, "the dead query's items did not come back"
        time.sleep(0.2)

    name = f"again_{os.getpid()}_{service.rsplit(':', 1)[1]}"
    again = (
        read_queue(spark, service, queue)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "second"))
        .trigger(availableNow=True)
        .start()
    )
    again.awaitTermination(120)
    rows = spark.table(name).collect()
    assert sorted(json.loads(r.payload)["n"] for r in rows) == list(range(20))
    assert sorted(r.attempts for r in rows) == [1] * 12 + [2] * 8
    assert stats(service, queue)["history"]["completed"] == 20


@pytest.mark.parametrize(
    ("options", "says"),
    [
        # Spark asks a source for its columns before it says whether it streams: no default.
        ({"queue": "q"}, r'a stream reads a queue\'s items as they come: add \.option\("source", "queue"\)'),
        ({"queue": "q", "source": "history"}, r"not 'history': history and dead letters are batch reads"),
        ({"queue": "bad queue", "source": "queue"}, r"'bad queue' cannot be a queue's name"),
        (
            {"queue": "q", "source": "queue", "url": "http://127.0.0.1:9"},
            r"at http://127.0.0.1:9 does not answer",
        ),
    ],
)
def test_a_stream_refused_says_why_in_one_line(
    spark: SparkSession, service: str, options: dict[str, str], says: str
) -> None:
    frame = spark.readStream.format("simplequeue").options(**{"url": service, **options}).load()
    query = frame.writeStream.format("memory").queryName(f"never_{os.getpid()}").start()
    with pytest.raises(StreamingQueryException) as refused:
        query.awaitTermination(60)
    message = str(refused.value)
    assert re.search(f"OptionError: .*{says}", message), message[-3000:]
    assert "UnboundLocalError" not in message  # PySpark's, which hid ours
