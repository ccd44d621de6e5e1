"""Every route of the API, in the order the spec lists them: each resource's own, and /metrics.

One router that holds the routes themselves, not the resources' routers included: the app, the
front door (simplequeue.api.hot) and the error handlers read its routes as APIRoutes."""

from __future__ import annotations

from fastapi import APIRouter

from simplequeue.api import metrics
from simplequeue.api.health import routes as health
from simplequeue.api.items import routes as items
from simplequeue.api.queues import keys
from simplequeue.api.queues import routes as queues
from simplequeue.api.schedules import routes as schedules
from simplequeue.api.topics import routes as topics

router = APIRouter(
    routes=[
        *items.router.routes,
        *queues.router.routes,
        *keys.router.routes,
        *topics.router.routes,
        *schedules.router.routes,
        *metrics.router.routes,
        *health.router.routes,
    ]
)
