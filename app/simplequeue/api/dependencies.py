"""What a route asks FastAPI for besides its inputs: the service it calls (the caller, from its
API key, is simplequeue.api.auth's Caller)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from simplequeue.service.queues import QueueService
from simplequeue.service.schedules import ScheduleService
from simplequeue.service.topics import TopicService


async def get_service(request: Request) -> QueueService:
    # One dependency, and `async def`: FastAPI runs a plain `def` dependency in a thread pool, and
    # resolves each dependency separately; under load both showed as top costs of a push.
    service: QueueService = request.app.state.service
    service.require_ready()  # 503 until the database has been reached (see QueueService.start)
    return service


ServiceDep = Annotated[QueueService, Depends(get_service)]


async def get_topics(request: Request) -> TopicService:
    request.app.state.service.require_ready()
    topics: TopicService = request.app.state.topics
    return topics


TopicsDep = Annotated[TopicService, Depends(get_topics)]


async def get_schedules(request: Request) -> ScheduleService:
    request.app.state.service.require_ready()
    schedules: ScheduleService = request.app.state.schedules
    return schedules


SchedulesDep = Annotated[ScheduleService, Depends(get_schedules)]
