"""Configuration, read from SIMPLEQUEUE_* environment variables (or a .env file)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SIMPLEQUEUE_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite:///./simplequeue.db",
        description="sqlite:///path | postgresql://user@host:port/db | mssql+odbc://user:pw@host:port/db?driver=...",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    migrate_on_start: bool = True
    max_payload_bytes: int = Field(
        default=256 * 1024, ge=1, description="Largest payload accepted, as UTF-8 JSON."
    )
    max_request_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="Largest request body read at all; larger bodies get 413 unread.",
    )
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A connection must send a request's headers within this; else 408, closed.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A request's body must arrive within this once its headers have; else 408, closed.",
    )
    pool_size: int = Field(default=10, ge=1, le=500)
    db_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Bounds every database call a request makes (pool wait, connect, statements, "
        "lock waits); past it the request answers 503.",
    )
    wait_recheck_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often a long-poll re-checks the database for items pushed elsewhere.",
    )
    reap_interval_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How often the sweep makes dead the items whose lease expired on their last attempt.",
    )
    purge_interval_seconds: float = Field(
        default=60.0, gt=0, description="How often the sweep deletes history past its retention."
    )
    sweep: bool = Field(default=True, description="Run the sweep in this process.")
    log_level: str = "info"
    access_log: bool = True
