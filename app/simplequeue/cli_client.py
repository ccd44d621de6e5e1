"""The `simplequeue` commands that talk to a running service over HTTP: push, pop, stats.

They use the SDK (simplequeue.client) and nothing of the server. Every failure is one line on
stderr naming the problem and a non-zero exit: 1 for an error answer or bad input, 2 for usage
(click's own), 3 for `pop` when nothing came within --wait, 4 when the service cannot be reached.
SIMPLEQUEUE_API_KEY, when set, is sent as a Bearer token.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any

import click

from simplequeue.client import Client, RetryPolicy, SimplequeueError, Unavailable

DEFAULT_URL = "http://127.0.0.1:8000"
BATCH = 500  # JSON lines per push/batch request
NOTHING_POPPED = 3
UNREACHABLE = 4
# A person at a terminal should hear within seconds that the URL does not answer.
CLI_RETRY = RetryPolicy(attempts=3, total_seconds=3.0)

url_option = click.option(
    "--url",
    envvar="SIMPLEQUEUE_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The service (or SIMPLEQUEUE_URL).",
)
queue_option = click.option("--queue", "-q", default="default", show_default=True, help="The queue's name.")


class Failed(click.ClickException):
    """One line on stderr, no traceback."""


class Unreachable(Failed):
    exit_code = UNREACHABLE


def api_key() -> str | None:
    """SIMPLEQUEUE_API_KEY, sent as a Bearer token. Only from the environment: an option would put
    the key in the process list and the shell's history."""
    return os.environ.get("SIMPLEQUEUE_API_KEY") or None


def client_for(url: str) -> Client:
    return Client(url, retry=CLI_RETRY, timeout=30.0, api_key=api_key())


@contextlib.contextmanager
def talking_to(url: str) -> Iterator[None]:
    """The service's refusals and an unreachable or foreign URL, as one line each."""
    try:
        yield
    except SimplequeueError as error:
        if isinstance(error, Unavailable) and error.status is None:
            raise Unreachable(f"{url} does not answer: {error.detail}") from None
        raise Failed(f"{error.code}: {error.detail}") from None
    except (KeyError, TypeError, ValueError) as exc:  # a 200 whose body is not the API's
        raise Failed(f"{url} does not answer as simplequeue does ({type(exc).__name__}: {exc})") from None


def as_json(value: Any) -> str:
    return json.dumps(value, default=_plain, ensure_ascii=False, separators=(",", ":"))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Failed(f"{where} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc


def json_lines(stream: IO[str]) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(stream, start=1):
        if line.strip():
            yield number, parse_json(line, f"stdin line {number}")


@click.command()
@url_option
@queue_option
@click.option(
    "--id",
    "item_id",
    type=click.UUID,
    default=None,
    help="The item's id. Run the command again with the same id and it pushes nothing new, for the "
    "queue's dedup window (an hour by default), even once the item was processed.",
)
@click.option("--dedup-key", default=None, help="Deduplicate by content: pushes with one key make one item.")
@click.argument("payload")
def push(url: str, queue: str, item_id: uuid.UUID | None, dedup_key: str | None, payload: str) -> None:
    """Push PAYLOAD (JSON) and print the result with its id ("created": false when the id or the
    dedup key matched an item: nothing new was pushed); PAYLOAD `-` pushes JSON lines from stdin in
    batches, shows progress on a terminal, and prints how many were pushed."""
    if payload == "-" and (item_id or dedup_key):
        raise click.UsageError("--id and --dedup-key are for one PAYLOAD, not for `-`")
    with talking_to(url), client_for(url) as sq:
        if payload != "-":
            pushed = sq.push(parse_json(payload, "PAYLOAD"), queue=queue, id=item_id, dedup_key=dedup_key)
            click.echo(as_json(pushed))
            return
        click.echo(as_json({"queue": queue, "pushed": _push_lines(sq, queue, sys.stdin)}))


def _push_lines(sq: Client, queue: str, stream: IO[str]) -> int:
    show = sys.stderr.isatty()
    pushed, batch = 0, []
    for _, payload in json_lines(stream):
        batch.append({"payload": payload})
        if len(batch) == BATCH:
            pushed += len(sq.push_batch(batch, queue=queue).ids)
            batch = []
            if show:
                click.echo(f"\rpushed {pushed:,}", err=True, nl=False)
    if batch:
        pushed += len(sq.push_batch(batch, queue=queue).ids)
    if show:
        click.echo(f"\rpushed {pushed:,}", err=True)
    return pushed


@click.command()
@url_option
@queue_option
@click.option("--wait", type=click.FloatRange(0, 20), default=0, show_default=True, help="Long-poll seconds.")
@click.option(
    "--lease", type=click.IntRange(1, 43200), default=None, help="Lease seconds (default: the queue's)."
)
@click.option("--max", "max_items", type=click.IntRange(1, 100), default=1, show_default=True)
def pop(url: str, queue: str, wait: float, lease: int | None, max_items: int) -> None:
    """Lease items and print each as one JSON line (id, lease_token, payload, ...). Exit status 3
    when nothing came within --wait."""
    with talking_to(url), client_for(url) as sq:
        items = sq.pop(queue, max_items=max_items, wait_seconds=wait, lease_seconds=lease)
    for item in items:
        click.echo(as_json(item))
    if not items:
        sys.exit(NOTHING_POPPED)


@click.command()
@url_option
@click.option("--queue", "-q", default=None, help="One queue (default: every queue).")
def stats(url: str, queue: str | None) -> None:
    """Print queue counts and settings as JSON."""
    with talking_to(url), client_for(url) as sq:
        found: Any = sq.stats(queue) if queue is not None else sq.queues()
    click.echo(as_json(found))
