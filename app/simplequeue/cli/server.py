"""The server's side of `simplequeue`: serve, migrate, purge, openapi.

They import the server (the settings, the store, the app) inside their functions: importing this
module, as `simplequeue serve --help` does, costs click and nothing more.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from simplequeue.settings import Settings

APP = "simplequeue.main:app_from_env"


def load_settings() -> Settings:
    """Settings from SIMPLEQUEUE_*; a mistake in them is one line naming the variable."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from simplequeue.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        where = [str(part) for part in first["loc"]]
        name = f"SIMPLEQUEUE_{where[0].upper()}" if where else "SIMPLEQUEUE_* settings"
        inner = f" {'.'.join(where[1:])}" if len(where) > 1 else ""
        raise click.ClickException(f"configuration: {name}{inner}: {first['msg']}") from None
    except SettingsError as exc:  # a complex value (SIMPLEQUEUE_API_KEYS) that is not JSON
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"SIMPLEQUEUE_{field.group(1).upper()}" if field else "SIMPLEQUEUE_* settings"
        raise click.ClickException(f"configuration: {name}: not valid JSON") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--host", default=None, help="Bind address (default SIMPLEQUEUE_HOST or 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default SIMPLEQUEUE_PORT or 8000).")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="Worker processes sharing one database (default SIMPLEQUEUE_WORKERS or 1).",
)
def serve(host: str | None, port: int | None, workers: int | None) -> None:
    """Serve the HTTP API."""
    settings = load_settings()
    workers = workers or settings.workers
    bind = host or settings.host
    if not is_loopback(bind) and not settings.api_keys and not settings.allow_anonymous:
        raise click.ClickException(
            f"refusing to serve on {bind} without API keys: set SIMPLEQUEUE_API_KEYS "
            "(or SIMPLEQUEUE_ALLOW_ANONYMOUS=true to let anyone who reaches it do anything)"
        )
    if workers > 1 and settings.migrate_on_start:
        try:
            _migrate(settings)  # once, before the workers race to it
        except click.ClickException as exc:  # each worker tries again until the database answers
            click.echo(f"simplequeue serve: {exc.message}; the workers will keep trying", err=True)
    with _metrics_shared(workers):
        _run(bind, port, workers, settings)


@contextlib.contextmanager
def _metrics_shared(workers: int) -> Iterator[None]:
    """Several workers keep their metrics in files of one directory, summed at each scrape
    (prometheus-client's multiprocess mode): a fresh one per serve, unless given."""
    if workers == 1 or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="simplequeue-metrics-") as directory:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        try:
            yield
        finally:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]


def _run(bind: str, port: int | None, workers: int, settings: Settings) -> None:
    import logging.config

    import uvicorn

    from simplequeue.api.server import HeaderDeadlineProtocol, serve_one, where_the_pages_are
    from simplequeue.logs import logging_config

    options: dict[str, Any] = {
        "factory": True,
        "host": bind,
        "port": settings.port if port is None else port,
        "workers": workers,
        "log_level": settings.log_level,
        "log_config": logging_config(settings.log_format, settings.log_level),
        "access_log": False,  # ours, simplequeue.access, has the request id and no query string
        "http": HeaderDeadlineProtocol,
    }
    if workers == 1:
        serve_one(uvicorn.Config(APP, **options), settings.public_url)
        return
    # Several: uvicorn's supervisor binds the port (for --port 0, its line names the one chosen).
    logging.config.dictConfig(options["log_config"])
    if options["port"]:
        logging.getLogger("simplequeue").info(where_the_pages_are(bind, options["port"], settings.public_url))
    uvicorn.run(APP, **options)


@click.command()
@click.option(
    "--print",
    "print_only",
    is_flag=True,
    help="Print the DDL for a DBA instead of applying it: the migrations, then the functions or procedures.",
)
def migrate(print_only: bool) -> None:
    """Apply pending schema migrations, then the current functions or procedures (safe to re-run)."""
    from simplequeue.store.factory import dialect_of
    from simplequeue.store.migrations import script

    settings = load_settings()
    if print_only:
        click.echo(script(dialect_of(settings.database_url)))
        return
    applied = _migrate(settings)
    click.echo(f"applied migrations: {applied}" if applied else "schema is up to date")


def _migrate(settings: Settings) -> list[int]:
    import asyncio

    from simplequeue.domain import QueueError
    from simplequeue.main import store_for

    async def run() -> list[int]:
        store = store_for(settings)
        await store.open()
        try:
            return await store.migrate(max_payload_bytes=settings.max_payload_bytes)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except QueueError as exc:
        raise click.ClickException(f"cannot migrate: {exc.code}: {exc.detail}") from None


@click.command()
@click.option(
    "--max-rows", type=int, default=1_000_000, show_default=True, help="Stop after about this many rows."
)
def purge(max_rows: int) -> None:
    """Sweep once: reap expired leases, delete old history and expired items.

    Makes dead the items whose lease expired on their last attempt, then deletes history past each
    queue's retention, dedup keys past their window, and live items past their queue's
    MessageRetentionPeriod, where one is set (for cron)."""
    import asyncio

    from simplequeue.main import store_for
    from simplequeue.service.upkeep import expire, reap
    from simplequeue.service.upkeep import purge as purge_rows

    async def run() -> tuple[int, int, int]:
        store = store_for(load_settings())
        await store.open()
        try:
            reaped = await reap(store, max_rows=max_rows)
            purged = await purge_rows(store, max_rows=max_rows)
            return reaped, purged, await expire(store, max_rows=max_rows)
        finally:
            await store.close()

    reaped, purged, expired = asyncio.run(run())
    click.echo(json.dumps({"reaped": reaped, "purged": purged, "expired": expired}))


@click.command()
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout."
)
def openapi(output: Path | None) -> None:
    """Print the OpenAPI spec that generated clients are built from."""
    from simplequeue.main import create_app

    text = json.dumps(create_app(load_settings()).openapi(), indent=2, sort_keys=True) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
