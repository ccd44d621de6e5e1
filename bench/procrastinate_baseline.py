"""Measure 1's second baseline: procrastinate, a PostgreSQL task queue for Python, as its worker runs.

procrastinate's own benchmark (tests/benchmarks in its repository) defers 1,000 jobs one at a time
and then drains them with a worker at concurrency 1 (`wait=False`), timing the whole; it has no
continuous method like PgQueuer's, so this one takes measure 1's shape instead: a producer
deferring batches of 100 while the worker completes, counted over a window.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import asyncpg

from bench.infra import database

if TYPE_CHECKING:
    from procrastinate.types import JSONDict

CONCURRENCY = 10
"""The worker's `concurrency`: jobs it runs at once, each finished by its own statement."""
BATCH = 100
"""Jobs per `batch_defer_async` call, one INSERT … RETURNING of 100 rows: measure 1's batch size."""
BACKLOG = 500
"""The producer waits while this many deferred jobs have not run yet. procrastinate fetches one
job per statement, one fetch at a time, and with more jobs waiting the planner turns its fetch
into a sort of every 'todo' row (EXPLAIN here: an index scan, 0.03 ms, at 500 waiting; a bitmap
scan and a sort, 0.75 ms, at 2,000), so its rate falls as the backlog grows: about half at 2,000,
about a tenth with a producer that never waits. A shallow backlog is its best case, and a producer
that waits leaves the shared event loop to the worker."""
WARMUP = 1.0
"""Seconds before the window opens: the worker started, the backlog filled."""

SUCCEEDED = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"


async def procrastinate_throughput(seconds: float) -> float:
    """procrastinate 3 as its docs run a worker, in this process: one `run_worker_async` at
    concurrency 10 (LISTEN/NOTIFY on, jobs kept as 'succeeded': its defaults) over psycopg's C
    build, its pool sized 12 (the default 4 would hold 10 concurrent jobs to 4 connections); a
    no-op async task; 1 producer on a connection of its own, deferring batches of 100 with
    `batch_defer_async` and keeping at most 500 jobs waiting. Rate = rows turned 'succeeded' over
    the window (counted in the database, so a job counts once its finish is committed), after a
    1 s warm-up."""
    import procrastinate

    # The worker logs each job at INFO ("Starting job", "... ended with status: Success").
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    async with database("postgresql") as url:
        worker_app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(
                conninfo=url, min_size=CONCURRENCY + 2, max_size=CONCURRENCY + 2
            )
        )
        producer_app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=1)
        )
        ran = 0

        @worker_app.task(name="noop", queue="tp")
        async def noop(n: int) -> None:
            nonlocal ran
            ran += 1

        async with worker_app.open_async(), producer_app.open_async():
            await worker_app.schema_manager.apply_schema_async()
            deferrer = producer_app.configure_task(name="noop", queue="tp", allow_unknown=True)
            counter = iter(range(10**12))

            async def produce() -> None:
                deferred = 0
                while True:
                    if deferred - ran >= BACKLOG:
                        await asyncio.sleep(0.005)
                        continue
                    batch: list[JSONDict] = [{"n": next(counter)} for _ in range(BATCH)]
                    await deferrer.batch_defer_async(*batch)
                    deferred += BATCH

            worker = asyncio.create_task(
                worker_app.run_worker_async(
                    queues=["tp"],
                    concurrency=CONCURRENCY,
                    install_signal_handlers=False,  # ours to stop, by cancelling the task
                    shutdown_graceful_timeout=5,
                )
            )
            producer = asyncio.create_task(produce())
            counting = await asyncpg.connect(url)
            try:
                await asyncio.sleep(WARMUP)
                before: int = await counting.fetchval(SUCCEEDED)
                started = time.perf_counter()
                await asyncio.sleep(seconds)
                after: int = await counting.fetchval(SUCCEEDED)
                rate = (after - before) / (time.perf_counter() - started)
            finally:
                await counting.close()
                producer.cancel()
                worker.cancel()  # procrastinate stops gracefully: running jobs finish, then it returns
                ended = await asyncio.wait_for(
                    asyncio.gather(producer, worker, return_exceptions=True), timeout=30
                )
            for outcome in ended:  # a cancelled task ends in CancelledError, not an Exception
                if isinstance(outcome, Exception):
                    raise outcome
            if not ran:
                raise RuntimeError("the procrastinate worker ran no job")
            return rate
