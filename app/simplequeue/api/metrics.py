"""Prometheus metrics at /metrics (prometheus-client), right with `serve --workers N`: what they
count, and the route that serves them (not in the spec).

- Counters of items pushed, popped, completed, failed and dead (failed on their last attempt, or
  whose lease ran out on it), by queue: this process's, summed
  over the workers by prometheus-client's multiprocess mode when PROMETHEUS_MULTIPROC_DIR is set
  (`serve` sets it for several workers).
- Gauges of each queue's items by state and its oldest ready item's age, read from the database at
  scrape time (every worker reads the same tables, so they are not per process), cached briefly
  so that several scrapers cost one read.
- HTTP requests and their durations by route template (never a raw path: ids would make endless
  series), method and status.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from simplequeue.api.access_log import Served
from simplequeue.api.auth import Action, Caller
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.errors import Forbidden
from simplequeue.domain import Outcome, QueueStats

STATES = ("ready", "leased", "delayed", "retrying", "dead")
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25)


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class Metrics:
    """One per app. Implements simplequeue.service.events.Events, and observes every request."""

    def __init__(self, *, cache_seconds: float = 2.0) -> None:
        # In multiprocess mode values live in files shared by the workers, and a scrape collects
        # them all; the metrics themselves then belong to no registry of this process.
        self._own = CollectorRegistry()
        registry = None if multiprocess() else self._own
        self._items = {
            event: Counter(
                f"simplequeue_items_{event}_total",
                f"Items {event}, by queue.",
                ["queue"],
                registry=registry,
            )
            for event in ("pushed", "popped", "completed", "failed", "dead")
        }
        self._requests = Counter(
            "simplequeue_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=registry,
        )
        self._durations = Histogram(
            "simplequeue_http_request_duration_seconds",
            "Time to answer an HTTP request, by route template, method and status.",
            ["route", "method", "status"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._by_queue: dict[tuple[str, str], Counter] = {}
        self.cache_seconds = cache_seconds
        self._queues: list[QueueStats] = []
        self._read_at = -float("inf")

    # Events ----------------------------------------------------------------------------------

    def pushed(self, queue: str, count: int) -> None:
        self._count("pushed", queue, count)

    def popped(self, queue: str, count: int) -> None:
        self._count("popped", queue, count)

    def failed(self, queue: str, count: int) -> None:
        self._count("failed", queue, count)

    def dead(self, queue: str, count: int) -> None:
        self._count("dead", queue, count)

    def finished(self, queue: str, outcome: Outcome, count: int) -> None:
        """The store's hook: completions, and leases that died in the sweep (a failure that kills
        its item is counted by the service, as dead)."""
        self._count("completed" if outcome is Outcome.COMPLETED else "dead", queue, count)

    def _count(self, event: str, queue: str, count: int) -> None:
        # Each (event, queue) series is looked up once (see observe). prometheus-client keeps
        # every series it made anyway, and none is ever removed, so this holds no more than it.
        series = self._by_queue.get((event, queue))
        if series is None:
            series = self._by_queue[event, queue] = self._items[event].labels(queue)
        series.inc(count)

    # Requests --------------------------------------------------------------------------------

    def observe(self, served: Served) -> None:
        labels = (served.route, served.method, served.status)
        series = self._series.get(labels)
        if series is None:
            # .labels() takes a lock and builds its key on every call; a route, method and status
            # name a handful of series, so each is looked up once.
            named = (served.route, served.method, str(served.status))
            series = self._series[labels] = (self._requests.labels(*named), self._durations.labels(*named))
        series[0].inc()
        series[1].observe(served.seconds)

    # Scrapes ---------------------------------------------------------------------------------

    def stale(self) -> bool:
        return time.monotonic() - self._read_at > self.cache_seconds

    def queues_read(self, queues: list[QueueStats]) -> None:
        self._queues = queues
        self._read_at = time.monotonic()

    def exposition(self) -> bytes:
        """Everything, in Prometheus' text format."""
        counted = CollectorRegistry()
        if multiprocess():
            MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
        else:
            counted = self._own
        read = CollectorRegistry()
        read.register(_QueueGauges(self._queues))
        return generate_latest(counted) + generate_latest(read)


class _QueueGauges(Collector):
    def __init__(self, queues: list[QueueStats]) -> None:
        self.queues = queues

    def collect(self) -> Iterator[Metric]:
        items = GaugeMetricFamily(
            "simplequeue_queue_items",
            "Items in each queue, by state (read at scrape time).",
            labels=["queue", "state"],
        )
        oldest = GaugeMetricFamily(
            "simplequeue_queue_oldest_ready_age_seconds",
            "How long the oldest ready item of each queue has waited (0 when none is ready).",
            labels=["queue"],
        )
        for q in self.queues:
            for state in STATES:
                items.add_metric([q.name, state], getattr(q, state))
            oldest.add_metric([q.name], q.oldest_ready_age_seconds or 0.0)
        yield items
        yield oldest


router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(sq: ServiceDep, who: Caller, request: Request) -> Response:
    """Prometheus' text format (admin keys only, when the service has keys)."""
    who.require(Action.ADMINISTER)
    if who.queues is not None:
        raise Forbidden("metrics cover every queue: they need an admin key for all queues")
    found: Metrics = request.app.state.metrics
    if found.stale():
        found.queues_read(await sq.list_queues())
    return Response(found.exposition(), media_type=CONTENT_TYPE_LATEST)
