"""Spark ingest against the service's batch-push ceiling, measured in the same run.

    python -m bench.spark_ingest [--rows 100000,1000000] [--engines sqlite,postgresql]

For each engine and row count, on a fresh database and service (bench.app under uvicorn, one
process, loopback), alternately:
- ceiling: the same rows pushed straight over HTTP by asyncio clients, batches of 500 with a dedup
  key each (as Spark's rows carry), 4 requests in flight;
- spark: the rows read from Parquet and written by `df.write.format("simplequeue")` on
  local[2] (4 partitions, batches of 500), the session started beforehand.
Each into its own queue; the figure is rows per second from start to the last answer. The ratio
spark / ceiling is the target (>= 0.5). Needs `pip install -e '.[bench,spark]'` and Java.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.infra import database, server

RESULTS = Path(__file__).parent / "results"
BATCH = 500
IN_FLIGHT = 4
ROUNDS = 2  # ceiling, spark, ceiling, spark: the median of each
WARM_ROWS = 4000


def payload(n: int) -> dict[str, object]:
    return {"order_id": n, "customer": f"c{n % 9973}", "amount_cents": (n * 37) % 100_000, "note": "x" * 40}


async def ceiling(base: str, queue: str, rows: int) -> float:
    batches = [range(start, min(start + BATCH, rows)) for start in range(0, rows, BATCH)]
    pending = iter(batches)
    started = time.perf_counter()

    async def pusher(http: httpx.AsyncClient) -> None:
        for chunk in pending:
            items = [{"payload": payload(n), "dedup_key": f"bench:{queue}:{n}"} for n in chunk]
            answer = await http.post("/push/batch", json={"queue": queue, "items": items})
            answer.raise_for_status()

    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        await asyncio.wait_for(asyncio.gather(*(pusher(http) for _ in range(IN_FLIGHT))), timeout=1800)
    return rows / (time.perf_counter() - started)


def spark_write(spark: object, parquet: str, base: str, queue: str, rows: int) -> float:
    started = time.perf_counter()
    frame = spark.read.parquet(parquet)  # type: ignore[attr-defined]
    (
        frame.write.format("simplequeue")
        .option("url", base)
        .option("queue", queue)
        .option("batch_size", str(BATCH))
        .mode("append")
        .save()
    )
    return rows / (time.perf_counter() - started)


def ready(base: str, queue: str) -> int:
    count: int = httpx.get(f"{base}/queues/{queue}", timeout=60).json()["ready"]
    return count


async def measure(engine: str, rows: int, spark: object, parquet: str, warm: str) -> dict[str, object]:
    results: dict[str, list[float]] = {"ceiling": [], "spark": []}
    async with database(engine) as url:
        with server(url) as base:
            # Warm both up (the server's first requests, Spark's Python workers) off the clock.
            await ceiling(base, "warm-up", WARM_ROWS)
            spark_write(spark, warm, base, "warm-up-spark", WARM_ROWS)
            for round_ in range(ROUNDS):
                queue = f"ceiling-{round_}"
                results["ceiling"].append(await ceiling(base, queue, rows))
                assert ready(base, queue) == rows, "the ceiling run lost rows"
                print(f"  {engine} {rows:,} ceiling: {results['ceiling'][-1]:,.0f} rows/s", flush=True)
                queue = f"spark-{round_}"
                results["spark"].append(spark_write(spark, parquet, base, queue, rows))
                assert ready(base, queue) == rows, "the spark run lost or duplicated rows"
                print(f"  {engine} {rows:,} spark:   {results['spark'][-1]:,.0f} rows/s", flush=True)
    top, ours = statistics.median(results["ceiling"]), statistics.median(results["spark"])
    return {
        "engine": engine,
        "rows": rows,
        "ceiling": top,
        "spark": ours,
        "ratio": ours / top,
        "samples": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.spark_ingest", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", default="100000,1000000")
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from simplequeue.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("simplequeue bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    figures = []
    with tempfile.TemporaryDirectory(prefix="sq-bench-spark-") as folder:

        def parquet_of(rows: int) -> str:
            path = f"{folder}/rows-{rows}.parquet"
            spark.range(0, rows, numPartitions=4).selectExpr(
                "to_json(named_struct('order_id', id, 'customer', concat('c', id % 9973), "
                "'amount_cents', (id * 37) % 100000, 'note', repeat('x', 40))) AS payload"
            ).write.parquet(path)
            return path

        warm = parquet_of(WARM_ROWS)
        for rows in [int(r) for r in args.rows.split(",")]:
            parquet = parquet_of(rows)
            for engine in args.engines.split(","):
                figures.append(asyncio.run(measure(engine, rows, spark, parquet, warm)))
    spark.stop()

    print("\n| engine | rows | batch-push ceiling | spark ingest (local[2]) | ratio | target |")
    print("|---|---|---|---|---|---|")
    for f in figures:
        met = "met" if f["ratio"] >= 0.5 else "**not met**"  # type: ignore[operator]
        print(
            f"| {f['engine']} | {f['rows']:,} | {f['ceiling']:,.0f} rows/s | {f['spark']:,.0f} rows/s "
            f"| {f['ratio']:.2f}x | >= 0.5x, {met} |"
        )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"spark-ingest-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps({"cpu": os.cpu_count(), "figures": figures}, indent=2) + "\n")
    print(f"\nsaved {path}")


if __name__ == "__main__":
    main()
