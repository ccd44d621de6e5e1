"""What the health checks answer."""

from __future__ import annotations

from pydantic import BaseModel, Field


class HealthStatus(BaseModel):
    status: str
    version: str = Field(description="This replica's release (a rolling upgrade runs two at once).")
