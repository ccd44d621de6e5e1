"""Configuration, read from SIMPLEQUEUE_* environment variables (or a .env file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from simplequeue.domain.endpoint_hosts import AllowList
from simplequeue.domain.sns_signing import SigningKey, key_from_file_text
from simplequeue.store.factory import UnsupportedDatabaseURL, dialect_of, missing_driver

MIN_KEY_LENGTH = 16


class ApiKeySetting(BaseModel):
    """One entry of SIMPLEQUEUE_API_KEYS."""

    model_config = ConfigDict(extra="forbid")

    key: SecretStr
    role: Literal["producer", "consumer", "admin"]
    queues: list[str] | None = Field(
        default=None, min_length=1, description="Glob patterns of the queues it may use (default: all)."
    )
    name: str | None = Field(default=None, description="How logs name the key (default: role and position).")
    access_key_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9]{16,128}$",
        description="For the Amazon SQS door: the access key id whose SigV4 secret is `key`.",
    )

    @field_validator("key")
    @classmethod
    def _long_enough(cls, key: SecretStr) -> SecretStr:
        if len(key.get_secret_value()) < MIN_KEY_LENGTH:
            raise ValueError(f"an API key must be at least {MIN_KEY_LENGTH} characters long")
        return key


_KEYS = TypeAdapter(list[ApiKeySetting])


class Settings(BaseSettings):
    # Errors never echo what was given: a URL, a key or a password may be in it.
    model_config = SettingsConfigDict(
        env_prefix="SIMPLEQUEUE_", env_file=".env", extra="ignore", hide_input_in_errors=True
    )

    database_url: str = Field(
        default="sqlite:///./simplequeue.db",
        description="sqlite:///path | postgresql://user@host:port/db | mssql+odbc://user:pw@host:port/db?driver=...",
    )
    database_password: SecretStr | None = Field(
        default=None,
        description="The database password, as it is (any characters, nothing to percent-encode), for "
        "a SIMPLEQUEUE_DATABASE_URL that names a user and no password. Never logged.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64, description="serve's worker processes (--workers).")
    migrate_on_start: bool = True
    max_payload_bytes: int = Field(
        default=1024 * 1024, ge=1, description="Largest payload accepted, as UTF-8 JSON (1 MiB, as SQS)."
    )
    max_queues: int = Field(
        default=1000,
        ge=1,
        description="The most queues the service makes: a push or put that would make one more is "
        "refused (409 TooManyQueues). Also bounds /metrics' per-queue series.",
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
    relay: bool = Field(
        default=True,
        description="Publish, in this process, what applications published to topics inside their "
        "own transactions (simplequeue.outbox.publish, sq_publish).",
    )
    deliver: bool = Field(
        default=True,
        description="Send, in this process, what topics hold for their HTTP/S subscribers.",
    )
    schedule: bool = Field(
        default=True,
        description="Fire, in this process, the schedules' due slots (each once across every replica).",
    )
    sns_endpoints: str = Field(
        default="*, 0.0.0.0/0, ::/0",
        description="Where topics' HTTP/S subscriptions may point, separated by commas: host names, "
        "*.domain, * (any name), IP addresses, CIDR networks; by default any public name or address. "
        "Cloud metadata and link-local addresses are always refused; loopback and private ones only "
        "through a listed network inside their block (127.0.0.1/32, 10.0.0.0/8). Empty: no HTTP/S "
        "subscriptions.",
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    log_format: Literal["text", "json"] = Field(
        default="text", description="text for a terminal; json: one object per line, for a log pipeline."
    )
    access_log: bool = Field(default=True, description="A line per request (simplequeue.access).")
    api_keys: list[ApiKeySetting] = Field(
        default_factory=list,
        description='JSON: [{"key": "...", "role": "producer|consumer|admin", "queues": ["jobs.*"]}]. '
        "With none, every caller may do everything (and serve keeps to loopback).",
    )
    api_keys_file: Path | None = Field(
        default=None, description="A file holding more keys, as the same JSON list."
    )
    allow_anonymous: bool = Field(
        default=False, description="Serve on a non-loopback address without API keys anyway."
    )
    public_url: str | None = Field(
        default=None,
        description="The service's address as callers reach it (e.g. behind a proxy), for the queue URLs "
        "the Amazon SQS door answers with; default: the request's own scheme and host.",
    )
    sns_signing_key_file: Path | None = Field(
        default=None,
        description="A PEM file with the RSA private key (and, optionally, its certificate) that signs "
        "topics' notifications; default: a key made once and kept in the database, shared by every "
        "replica.",
    )
    sqs_account_id: str = Field(
        default="000000000000", pattern=r"^\d{12}$", description="The account id in SQS queue URLs and ARNs."
    )
    sqs_region: str = Field(
        default="us-east-1",
        pattern=r"^[a-z0-9-]{1,32}$",
        description="The region in SQS ARNs and signatures.",
    )

    @field_validator("database_url")
    @classmethod
    def _usable_database_url(cls, url: str) -> str:
        """The store's own rules (no driver is imported), at load: a URL no store can use is one
        line naming SIMPLEQUEUE_DATABASE_URL, not a traceback when the store is built."""
        try:
            dialect = dialect_of(url)
        except UnsupportedDatabaseURL as exc:
            # A custom error's message is shown as it is (a ValueError's gets "Value error, ").
            raise PydanticCustomError("database_url", "{problem}", {"problem": str(exc)}) from None
        if (missing := missing_driver(dialect)) is not None:
            raise PydanticCustomError("database_url", "{problem}", {"problem": missing})
        return url

    @field_validator("sns_endpoints")
    @classmethod
    def _usable_endpoints(cls, text: str) -> str:
        try:
            AllowList.from_setting(text)
        except ValueError as exc:
            raise PydanticCustomError(
                "sns_endpoints", "sns_endpoints: {problem}", {"problem": str(exc)}
            ) from None
        return text

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _password_into_url(self) -> Settings:
        """SIMPLEQUEUE_DATABASE_PASSWORD, percent-encoded into the URL's user part: a password with
        `@`, `:` or `/` in it needs no encoding by whoever sets it (a compose file, a Secret)."""
        if self.database_password is None:
            return self
        try:
            self.database_url = with_password(self.database_url, self.database_password.get_secret_value())
        except ValueError as exc:
            raise PydanticCustomError("database_password", "{problem}", {"problem": str(exc)}) from None
        return self

    @model_validator(mode="after")
    def _signing_key_readable(self) -> Settings:
        if self.sns_signing_key_file is not None:
            signing_key(self.sns_signing_key_file)
        return self

    @model_validator(mode="after")
    def _keys_from_file(self) -> Settings:
        if self.api_keys_file is not None:
            try:
                text = self.api_keys_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"api_keys_file {self.api_keys_file}: {exc.strerror}") from None
            try:
                self.api_keys = [*self.api_keys, *_KEYS.validate_python(json.loads(text))]
            except ValidationError as exc:
                raise ValueError(f"api_keys_file {self.api_keys_file}: {describe(exc)}") from None
            except ValueError as exc:  # not JSON
                raise ValueError(f"api_keys_file {self.api_keys_file}: not JSON ({exc})") from None
        seen = [k.key.get_secret_value() for k in self.api_keys]
        if len(set(seen)) != len(seen):
            raise ValueError("api_keys: the same key is given twice")
        return self


def with_password(url: str, password: str) -> str:
    """The URL with the password put in its user part, percent-encoded; ValueError (naming no
    secret) for a URL that has no user or has a password already, or an engine without one."""
    parts = urlsplit(url)
    if parts.scheme.startswith("sqlite"):
        raise ValueError("database_password: SQLite takes no password")
    user, at, host = parts.netloc.rpartition("@")
    if not at or not user:
        raise ValueError("database_password: SIMPLEQUEUE_DATABASE_URL names no user to give it to")
    if ":" in user:
        raise ValueError(
            "database_password: SIMPLEQUEUE_DATABASE_URL has a password already; give it in one place"
        )
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def signing_key(path: Path) -> SigningKey:
    """The key SIMPLEQUEUE_SNS_SIGNING_KEY_FILE holds; ValueError in one line, never its contents."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"sns_signing_key_file {path}: {exc.strerror}") from None
    try:
        return key_from_file_text(text)
    except ValueError as exc:
        raise ValueError(f"sns_signing_key_file {path}: {exc}") from None


def describe(exc: ValidationError, prefix: str = "") -> str:
    """The first problem, as `where: what`, without the input (it may be a key)."""
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{prefix}{where}: {first['msg']}" if where else f"{prefix}{first['msg']}"
