"""The composition root: `create_app(settings)` builds the store, the service and the API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI

from simplequeue import __version__
from simplequeue.api.app import QueueApi, build_api
from simplequeue.api.auth import ApiKey, Grant, Keyring, Role
from simplequeue.api.metrics import Metrics
from simplequeue.api.sqs.routes import SqsConfig
from simplequeue.domain import Clock, FinishedHook, ignore_finished, system_clock
from simplequeue.domain.notifications import Arns
from simplequeue.service.deliveries import Deliverer
from simplequeue.service.endpoints import EndpointRules
from simplequeue.service.local.attempts import ReceiveAttempts
from simplequeue.service.local.moves import MoveTasks
from simplequeue.service.local.purges import Purges
from simplequeue.service.queues import Limits, QueueService, Upkeep
from simplequeue.service.schedules import Scheduler, ScheduleService
from simplequeue.service.topics import Relay, TopicService
from simplequeue.settings import Settings, signing_key
from simplequeue.shutdown import on_stop_signal
from simplequeue.store.factory import create_store, dialect_of
from simplequeue.store.protocol import Store

log = logging.getLogger("simplequeue")


def store_for(
    settings: Settings, clock: Clock | None = None, on_finished: FinishedHook = ignore_finished
) -> Store:
    """The store the settings name (built, not opened)."""
    return create_store(
        settings.database_url,
        pool_size=settings.pool_size,
        timeout_seconds=settings.db_timeout_seconds,
        clock=clock,
        on_finished=on_finished,
    )


def keyring_for(settings: Settings) -> Keyring:
    return Keyring(
        ApiKey(
            k.key.get_secret_value(),
            Grant(
                name=k.name or f"{k.role} key #{n}",
                role=Role(k.role),
                queues=tuple(k.queues) if k.queues is not None else None,
            ),
            access_key_id=k.access_key_id,
        )
        for n, k in enumerate(settings.api_keys, start=1)
    )


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, store: Store | None = None
) -> QueueApi:
    """Build the service. `clock` replaces the service's UTC clock (and the database clock,
    where the store supports it) so that tests can control time. `store` replaces the one the
    settings name (the lifespan still opens and closes it)."""
    settings = settings or Settings()
    metrics = Metrics(max_queue_labels=settings.max_queues)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        the_store = store or store_for(settings, clock, on_finished=metrics.finished)
        service = QueueService(
            the_store,
            clock or system_clock,
            limits=Limits(max_payload_bytes=settings.max_payload_bytes, max_queues=settings.max_queues),
            recheck_seconds=settings.wait_recheck_seconds,
            upkeep=Upkeep(settings.reap_interval_seconds, settings.purge_interval_seconds)
            if settings.sweep
            else None,
            events=metrics,
        )
        moves = MoveTasks(service, clock or system_clock)
        endpoints = (
            EndpointRules.from_setting(settings.sns_endpoints) if settings.sns_endpoints.strip() else None
        )
        topics = TopicService(
            the_store,
            service,
            clock or system_clock,
            Arns(settings.sqs_region, settings.sqs_account_id),
            signing_key(settings.sns_signing_key_file) if settings.sns_signing_key_file else None,
            endpoints,
        )
        schedules = ScheduleService(the_store, service, clock or system_clock, max_queues=settings.max_queues)
        try:
            await service.start(migrate=settings.migrate_on_start)
            log.info(
                "simplequeue %s serving a %s database; %s",
                __version__,
                dialect_of(settings.database_url),
                f"{len(settings.api_keys)} API keys" if settings.api_keys else "no API keys: anyone may call",
            )
            app.state.service = service
            app.state.topics = topics
            app.state.schedules = schedules
            app.state.metrics = metrics
            # The SQS door's state, this process's own (simplequeue.service.local): its message move
            # tasks (stopped below), its FIFO receive attempts, its purges.
            app.state.sqs_moves = moves
            app.state.sqs_attempts = ReceiveAttempts(clock or system_clock)
            app.state.sqs_purges = Purges(service)
            base_url = settings.public_url or f"http://{settings.host}:{settings.port}"
            workers: list[asyncio.Task[None]] = []
            if settings.relay:
                relay = Relay(topics, service, base_url)
                workers.append(asyncio.create_task(relay.run_forever(), name="simplequeue-relay"))
            if settings.deliver and endpoints is not None:
                deliverer = Deliverer(topics, service, endpoints)
                workers.append(asyncio.create_task(deliverer.run_forever(), name="simplequeue-deliverer"))
            if settings.schedule:
                scheduler = Scheduler(schedules, the_store, service, clock or system_clock)
                workers.append(asyncio.create_task(scheduler.run_forever(), name="simplequeue-scheduler"))
            try:
                with on_stop_signal(service.stop_waiting):
                    yield
            finally:
                for worker in workers:
                    worker.cancel()
                for worker in workers:
                    with suppress(asyncio.CancelledError):
                        await worker
        finally:
            await moves.close()
            await service.stop()

    app = build_api(
        title="simplequeue",
        version=__version__,
        lifespan=lifespan,
        max_body_bytes=settings.max_request_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
        keyring=keyring_for(settings),
        access_log=settings.access_log,
        observers=[metrics.observe],
    )
    app.state.sqs = SqsConfig(settings.public_url, settings.sqs_account_id, settings.sqs_region)
    return app


def app_from_env() -> QueueApi:
    """Factory for `uvicorn --factory` and multi-worker serving."""
    return create_app(Settings())
