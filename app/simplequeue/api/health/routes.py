"""The health checks: liveness and readiness, open to every caller (orchestrators have no key)."""

from __future__ import annotations

from fastapi import APIRouter

from simplequeue import __version__
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.health.schemas import HealthStatus
from simplequeue.api.responses import errors

router = APIRouter()


@router.get("/healthz", operation_id="healthz", tags=["health"], responses=errors(public=True))
async def healthz() -> HealthStatus:
    """The process is alive."""
    return HealthStatus(status="ok", version=__version__)


@router.get("/readyz", operation_id="readyz", tags=["health"], responses=errors(503, public=True))
async def readyz(sq: ServiceDep) -> HealthStatus:
    """The database answers and its schema is up to date."""
    await sq.check_ready()
    return HealthStatus(status="ready", version=__version__)
