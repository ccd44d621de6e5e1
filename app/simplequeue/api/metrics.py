"""Prometheus metrics at /metrics (prometheus-client), right with `serve --workers N`: what they
count, and the route that serves them (not in the spec).

- Counters of items pushed, popped, completed, failed and dead (failed on their last attempt, or
  whose lease ran out on it), by queue: this process's, summed
  over the workers by prometheus-client's multiprocess mode when PROMETHEUS_MULTIPROC_DIR is set
  (`serve` sets it for several workers).
- Gauges of each queue's items by state and its oldest ready item's age, read from the database at
  scrape time (every worker reads the same tables, so they are not per process), cached briefly
  so that several scrapers cost one read.
- Pops cut short by a queue's flow limit (max_leased, max_leased_per_key, rate, rate_per_key) while more items
  were ready, by queue and limit: how often the limits bind. Never by key: a queue's keys are
  unbounded; its stats (GET /queues/{name}) show its busiest keys instead.
- HTTP requests and their durations by route template (never a raw path: ids would make endless
  series), method and status.

Per-queue series are bounded: at most max_queue_labels queues (SIMPLEQUEUE_MAX_QUEUES, the most
queues the service makes) get their own `queue` label in a process, the first it counts or reads;
any other queue's figures are added into the label OTHER (no queue's name can be it). Within the
limit every queue keeps its own series; past it (queues deleted and made anew under other names,
or made by the outbox beyond the limit) the exposition stays bounded: at most
(5 counters + the throttled counter's 3 limits + 6 gauges) x (max_queue_labels + 1) queue
series per process.
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
OTHER = "(other)"
"""The `queue` label of the queues past the limit of labels: parentheses are in no queue's name."""
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25)


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class Metrics:
    """One per app. Implements simplequeue.service.events.Events, and observes every request."""

    def __init__(self, *, cache_seconds: float = 2.0, max_queue_labels: int = 1000) -> None:
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
        self._throttled = Counter(
            "simplequeue_pops_throttled_total",
            "Pops that handed out fewer items than they asked for while more were ready, cut short "
            "by the queue's flow limit (max_leased, max_leased_per_key, rate, rate_per_key), by queue "
            "and limit.",
            ["queue", "limit"],
            registry=registry,
        )
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
        self._labels = QueueLabels(max_queue_labels)
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

    def throttled(self, queue: str, limit: str) -> None:
        self._throttled.labels(self._labels.of(queue), limit).inc()

    def finished(self, queue: str, outcome: Outcome, count: int) -> None:
        """The store's hook: completions, and leases that died in the sweep (a failure that kills
        its item is counted by the service, as dead)."""
        self._count("completed" if outcome is Outcome.COMPLETED else "dead", queue, count)

    def _count(self, event: str, queue: str, count: int) -> None:
        # Each (event, queue) series is looked up once (see observe). prometheus-client keeps
        # every series it made anyway, and none is ever removed, so this holds no more than it.
        label = self._labels.of(queue)
        series = self._by_queue.get((event, label))
        if series is None:
            series = self._by_queue[event, label] = self._items[event].labels(label)
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
        read.register(_QueueGauges(self._queues, self._labels))
        return generate_latest(counted) + generate_latest(read)


class QueueLabels:
    """Which queues get their own `queue` label: the first `most` named, in this process."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._own: set[str] = set()

    def of(self, queue: str) -> str:
        if queue in self._own:
            return queue
        if len(self._own) < self.most:
            self._own.add(queue)
            return queue
        return OTHER


class _QueueGauges(Collector):
    def __init__(self, queues: list[QueueStats], labels: QueueLabels) -> None:
        self.queues = queues
        self.labels = labels

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
        counts: dict[str, dict[str, int]] = {}
        ages: dict[str, float] = {}
        for q in self.queues:
            label = self.labels.of(q.name)
            into = counts.setdefault(label, dict.fromkeys(STATES, 0))
            for state in STATES:
                into[state] += getattr(q, state)
            ages[label] = max(ages.get(label, 0.0), q.oldest_ready_age_seconds or 0.0)
        for label, by_state in counts.items():
            for state, count in by_state.items():
                items.add_metric([label, state], count)
            oldest.add_metric([label], ages[label])
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
        found.queues_read([q async for q in sq.every_queue()])
    return Response(found.exposition(), media_type=CONTENT_TYPE_LATEST)
