"""The `simplequeue` commands that talk to a running service over HTTP: push, pop, stats (and what
`work` shares with them: the options, the one-line failures, the exit statuses).

They use the SDK (simplequeue.client) and nothing of the server. Every failure is one line on
stderr naming the problem, and an exit status from the table in simplequeue.cli: 1 refused or bad
input, 2 usage (an invalid URL too), 3 nothing popped, 4 no answer, 6 no such queue.
The API key comes from SIMPLEQUEUE_API_KEY (or --api-key) and goes as a Bearer token.
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
from urllib.parse import urlsplit

import click

from simplequeue.client import (
    Client,
    Forbidden,
    QueueNotFound,
    RetryPolicy,
    SimplequeueError,
    Unauthorized,
    Unavailable,
)

DEFAULT_URL = "http://127.0.0.1:8000"
BATCH = 500  # JSON lines per push/batch request

REFUSED = 1
NOTHING_POPPED = 3
UNREACHABLE = 4
COMMAND_FAILED = 5
NO_SUCH_QUEUE = 6

# A person at a terminal should hear within seconds that the URL does not answer.
CLI_RETRY = RetryPolicy(attempts=3, total_seconds=3.0)
PROXY_STATUSES = frozenset({502, 503, 504})


def _service_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """An http(s) URL with a host, or a usage error naming --url and SIMPLEQUEUE_URL (exit 2): a
    typo is not an unreachable service."""
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (raises ValueError for a port out of range or not a number)
    except ValueError:
        valid = False
    if not valid:
        raise click.BadParameter(
            f"{value!r} is not the service's URL (http://HOST:PORT, or https://...)",
            ctx=ctx,
            param=param,
        )
    return value


url_option = click.option(
    "--url",
    envvar="SIMPLEQUEUE_URL",
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    callback=_service_url,
    help="The service.",
)
api_key_option = click.option(
    "--api-key",
    "key",
    envvar="SIMPLEQUEUE_API_KEY",
    default=None,
    show_envvar=True,
    metavar="KEY",
    help="Sent as a Bearer token. The environment is the safer way: an option shows in the "
    "process list and the shell's history.",
)
queue_option = click.option("--queue", "-q", default="default", show_default=True, help="The queue's name.")


class Failed(click.ClickException):
    """One line on stderr, no traceback (exit 1)."""


class Unreachable(Failed):
    exit_code = UNREACHABLE


class NoSuchQueue(Failed):
    exit_code = NO_SUCH_QUEUE


def api_key() -> str | None:
    """SIMPLEQUEUE_API_KEY, for commands without --api-key (the spark ones)."""
    return os.environ.get("SIMPLEQUEUE_API_KEY") or None


def client_for(url: str, key: str | None) -> Client:
    return Client(url, retry=CLI_RETRY, timeout=30.0, api_key=key or None)


def no_such_queue(queue: str | None) -> str:
    return f"queue {queue!r} does not exist (nothing was ever pushed to it)"


@contextlib.contextmanager
def talking_to(url: str, *, key: str | None, doing: str, queue: str | None = None) -> Iterator[None]:
    """The service's refusals, and an unreachable or foreign URL, as one line each. `doing` says
    what was asked ("pop from queue 'mail'"), for a key that may not do it."""
    try:
        yield
    except QueueNotFound:
        raise NoSuchQueue(no_such_queue(queue)) from None
    except SimplequeueError as error:
        raise failure(error, url=url, key=key, doing=doing) from None
    except (KeyError, TypeError, ValueError) as exc:  # a 200 whose body is not the API's
        raise Failed(f"{url} does not answer as simplequeue does ({type(exc).__name__}: {exc})") from None


def failure(error: SimplequeueError, *, url: str, key: str | None, doing: str) -> Failed:
    status = error.status
    if status is None:  # no answer at all, after the retries
        return Unreachable(f"{url} does not answer: {error.detail}")
    if error.code == f"HTTP{status}":  # no error envelope: the SDK names the code after the status
        reason = "" if error.detail == f"HTTP {status}" else f" {error.detail}"
        said = f"{url} answered {status}{reason}, not simplequeue's JSON"
        if status in PROXY_STATUSES:
            return Unreachable(f"{said}: a proxy whose simplequeue does not answer?")
        return Failed(f"{said}: not a simplequeue service?")
    if isinstance(error, Unavailable):  # a 503 of the service itself, after the retries
        return Unreachable(f"{url} is not ready: {error.code}: {error.detail}")
    if isinstance(error, Unauthorized):
        if key:
            return Failed(f"{url} does not know this API key: check SIMPLEQUEUE_API_KEY or --api-key")
        return Failed(f"{url} wants an API key: set SIMPLEQUEUE_API_KEY or pass --api-key")
    if isinstance(error, Forbidden):
        return Failed(f"this API key may not {doing}: {error.detail}")
    return Failed(f"{error.code}: {error.detail}")


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


@click.command()
@url_option
@api_key_option
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
@click.option(
    "--fairness-key",
    default=None,
    help="The tenant the item (with `-`: every line) belongs to; pops share a queue's turns among its keys.",
)
@click.option(
    "--dedupe/--no-dedupe",
    default=True,
    show_default=True,
    help="With `-`: each line's item id is made of the queue, the line's number and its JSON, so "
    "running the same input again skips the lines already pushed (within the queue's dedup "
    "window). --no-dedupe gives every line a new id: a rerun pushes everything again.",
)
@click.argument("payload")
def push(
    url: str,
    key: str | None,
    queue: str,
    item_id: uuid.UUID | None,
    dedup_key: str | None,
    fairness_key: str | None,
    dedupe: bool,
    payload: str,
) -> None:
    """Push PAYLOAD (JSON), or JSON lines from stdin.

    Prints the result with its id ("created": false when the id or the dedup key matched an
    item: nothing new was pushed). PAYLOAD `-` pushes JSON lines from stdin in batches, shows
    progress on a terminal, and prints how many were pushed and how many skipped (pushed
    before, by an earlier run of the same input). A bad line stops it after pushing the lines
    before it, and the error says how many that was; run it again once fixed.

    \b
    Exit status: 0 pushed; 1 refused or not JSON; 2 usage (an invalid --url);
    4 the service does not answer (or is not ready).
    """
    if payload == "-" and (item_id or dedup_key):
        raise click.UsageError("--id and --dedup-key are for one PAYLOAD, not for `-`")
    doing = f"push to queue {queue!r}"
    with talking_to(url, key=key, doing=doing, queue=queue), client_for(url, key) as sq:
        if payload != "-":
            pushed = sq.push(
                parse_json(payload, "PAYLOAD"),
                queue=queue,
                id=item_id,
                dedup_key=dedup_key,
                fairness_key=fairness_key,
            )
            click.echo(as_json(pushed))
            return
        loader = LineLoader(sq, queue, url=url, key=key, dedupe=dedupe, fairness_key=fairness_key)
        loader.load(sys.stdin)
        click.echo(as_json({"queue": queue, "pushed": loader.pushed, "skipped": loader.skipped}))


# Line ids are uuid5s in this namespace (itself uuid5(NAMESPACE_URL, "simplequeue:push-lines")).
LINE_IDS = uuid.UUID("ef5d4b2a-4912-5b27-ba99-e2c4e486d59d")


def line_id(queue: str, number: int, payload: Any) -> str:
    """The same queue, line number and JSON value (however spaced) give the same id; the same
    value on two lines gives two."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return str(uuid.uuid5(LINE_IDS, f"{queue}\n{number}\n{canonical}"))


class LineLoader:
    """`push -`: JSON lines in batches of BATCH, counted as they commit, so that a failure can say
    how far it got."""

    def __init__(
        self,
        sq: Client,
        queue: str,
        *,
        url: str,
        key: str | None,
        dedupe: bool,
        fairness_key: str | None = None,
    ) -> None:
        self.sq, self.queue, self.url, self.key, self.dedupe = sq, queue, url, key, dedupe
        self.fairness_key = fairness_key
        self.pushed = self.skipped = 0
        self.done_through = 0  # the last line number of the last batch that committed
        self.batch: list[dict[str, Any]] = []
        self.lines: list[int] = []
        self.show = sys.stderr.isatty()

    def load(self, stream: IO[str]) -> None:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                payload = json.loads(line)
            except json.JSONDecodeError as exc:
                bad = Failed(f"stdin line {number} is not JSON: {exc.msg} (column {exc.colno})")
            else:
                self.add(number, payload)
                continue
            self.flush()  # the lines before it go, so that the error can say "every line before"
            raise self.stopped(bad)
        self.flush()
        if self.show:
            click.echo(err=True)

    def add(self, number: int, payload: Any) -> None:
        entry: dict[str, Any] = {"payload": payload}
        if self.fairness_key is not None:
            entry["fairness_key"] = self.fairness_key
        if self.dedupe:
            entry["id"] = line_id(self.queue, number, payload)
        self.batch.append(entry)
        self.lines.append(number)
        if len(self.batch) == BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        try:
            created = self.sq.push_batch(self.batch, queue=self.queue).created
        except SimplequeueError as error:
            lines = f"lines {self.lines[0]}-{self.lines[-1]}"
            said = failure(error, url=self.url, key=self.key, doing=f"push to queue {self.queue!r}")
            raise self.stopped(
                type(said)(f"{lines} (one batch) not pushed: {said.message}"), "them"
            ) from None
        self.pushed += sum(created)
        self.skipped += len(created) - sum(created)
        self.done_through = self.lines[-1]
        self.batch, self.lines = [], []
        if self.show:
            click.echo(f"\rpushed {self.pushed:,}, skipped {self.skipped:,}", err=True, nl=False)

    def stopped(self, error: Failed, it: str = "it") -> Failed:
        """The error, and where the input stands: what was pushed before it, and how to go on."""
        if self.show:
            click.echo(err=True)
        if not self.done_through:
            return type(error)(f"{error.message}; nothing was pushed")
        counts = f"{self.pushed} pushed" + (f", {self.skipped} already there" if self.skipped else "")
        if self.dedupe:
            rerun = "rerun is safe: the same input again skips the lines already pushed"
        else:
            after = self.done_through + 1
            rerun = f"with --no-dedupe a rerun pushes them again: go on from line {after} (tail -n +{after})"
        return type(error)(f"{error.message}; {counts} before {it} (lines 1-{self.done_through}); {rerun}")


@click.command()
@url_option
@api_key_option
@queue_option
@click.option("--wait", type=click.FloatRange(0, 20), default=0, show_default=True, help="Long-poll seconds.")
@click.option(
    "--lease", type=click.IntRange(1, 43200), default=None, help="Lease seconds (default: the queue's)."
)
@click.option("--max", "max_items", type=click.IntRange(1, 100), default=1, show_default=True)
def pop(url: str, key: str | None, queue: str, wait: float, lease: int | None, max_items: int) -> None:
    """Lease items and print each as one JSON line.

    Each line has the item's id, lease_token, payload, attempts and times. A queue nothing was
    ever pushed to is said at once, not waited on: with --wait the queue is looked up first
    (GET /queues/NAME), without it only when nothing came.

    \b
    Exit status: 0 items printed; 1 refused; 2 usage (an invalid --url);
    3 nothing came within --wait; 4 the service does not answer (or is not ready);
    6 the queue does not exist.
    """
    with (
        talking_to(url, key=key, doing=f"pop from queue {queue!r}", queue=queue),
        client_for(url, key) as sq,
    ):
        if wait > 0:
            sq.stats(queue)  # QueueNotFound: exit 6 now, rather than after the long-poll
        items = sq.pop(queue, max_items=max_items, wait_seconds=wait, lease_seconds=lease)
        if not items and wait == 0:
            sq.stats(queue)  # nothing, because there is no such queue?
    for item in items:
        click.echo(as_json(item))
    if not items:
        sys.exit(NOTHING_POPPED)


@click.command()
@url_option
@api_key_option
@click.option("--queue", "-q", default=None, help="One queue (default: every queue).")
def stats(url: str, key: str | None, queue: str | None) -> None:
    """Print queue counts and settings as JSON.

    \b
    Exit status: 0 printed; 1 refused; 2 usage (an invalid --url);
    4 the service does not answer (or is not ready); 6 the queue (--queue) does
    not exist.
    """
    doing = f"read the stats of queue {queue!r}" if queue is not None else "read the queues' stats"
    with talking_to(url, key=key, doing=doing, queue=queue), client_for(url, key) as sq:
        found: Any = sq.stats(queue) if queue is not None else sq.queues()
    click.echo(as_json(found))
