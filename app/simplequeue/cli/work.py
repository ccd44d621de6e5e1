"""`simplequeue work`: run a command per item, like xargs over a queue.

The payload's JSON goes to the command's stdin; its stdout and stderr pass through. Exit status 0
completes the item; anything else fails it with the exit status and the tail of stderr as the
error (retried per the queue's backoff). Leases are extended while a command runs. The first
SIGTERM or SIGINT stops popping and lets running commands finish; a second one terminates them
(their items fail). Commands run in their own session, so a terminal's Ctrl-C reaches only us.

`work` itself exits 0 when every command it ran succeeded, 5 when any failed (whatever stopped
it: --exit-when-empty or a signal), and with the codes of simplequeue.cli for the rest. A queue
nothing was ever pushed to is said once on stderr; plain `work` then waits for its first item
(a worker may well start before its producers), `work --exit-when-empty` exits 6.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import uuid
from collections.abc import Sequence

import click

from simplequeue.cli.client import (
    CLI_RETRY,
    COMMAND_FAILED,
    Failed,
    NoSuchQueue,
    api_key_option,
    no_such_queue,
    queue_option,
    talking_to,
    url_option,
)
from simplequeue.client import AsyncClient, Item, ItemFailed, ItemInfo, QueueNotFound, Worker
from simplequeue.client.failures import MAX_TRACEBACK_CHARS

STDERR_TAIL_BYTES = 4 * MAX_TRACEBACK_CHARS  # enough for MAX_TRACEBACK_CHARS characters of UTF-8
CHUNK = 64 * 1024


def say(message: str) -> None:
    click.echo(f"simplequeue work: {message}", err=True)


class Commands:
    """Runs the command for each item and keeps count; knows the running ones, to stop them."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.running: set[asyncio.subprocess.Process] = set()
        # Commands from the moment their start is asked for to their end. A signal can arrive
        # while a command's process exists but create_subprocess_exec has not returned it yet (its
        # pipes are still being connected): such a command is running for the person who asked.
        self.in_flight = 0
        self.terminating = False
        self.succeeded = 0
        self.failed = 0

    async def __call__(self, item: Item) -> None:
        env = {
            **os.environ,
            "SIMPLEQUEUE_ITEM_ID": item.id,
            "SIMPLEQUEUE_QUEUE": item.queue,
            "SIMPLEQUEUE_ATTEMPT": str(item.attempts),
        }
        self.in_flight += 1
        try:
            try:
                process = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                self.failed += 1
                raise ItemFailed(f"cannot run {self.argv[0]}: {exc.strerror or exc}") from exc
            self.running.add(process)
            if self.terminating:  # the second signal came while it was starting
                _terminate(process)
            try:
                payload = json.dumps(item.payload, ensure_ascii=False).encode() + b"\n"
                _, tail = await asyncio.gather(_feed(process, payload), _relay_stderr(process))
                status = await process.wait()
            finally:
                self.running.discard(process)
        finally:
            self.in_flight -= 1
        if status == 0:
            self.succeeded += 1
            return
        self.failed += 1
        raise ItemFailed(_failure(status, tail))

    def terminate(self) -> None:
        self.terminating = True
        for process in self.running:
            _terminate(process)


def _terminate(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):  # it ended in between
            os.killpg(process.pid, signal.SIGTERM)


async def _feed(process: asyncio.subprocess.Process, payload: bytes) -> None:
    assert process.stdin is not None
    try:
        process.stdin.write(payload)
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the command does not read its stdin: its business
    finally:
        process.stdin.close()


async def _relay_stderr(process: asyncio.subprocess.Process) -> bytes:
    """Pass the command's stderr through as it comes, and keep its tail for the item's error."""
    assert process.stderr is not None
    tail = bytearray()
    while chunk := await process.stderr.read(CHUNK):
        sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.flush()
        tail += chunk
        del tail[:-STDERR_TAIL_BYTES]
    return bytes(tail)


def _failure(status: int, tail: bytes) -> str:
    said = "killed by " + signal.Signals(-status).name if status < 0 else f"exit status {status}"
    text = tail.decode("utf-8", errors="replace").strip()
    if not text:
        return f"{said} (nothing on stderr)"
    room = MAX_TRACEBACK_CHARS - len(said) - 2  # the status stays; the stderr's start gives way
    return f"{said}: {text if len(text) <= room else '…' + text[-(room - 1) :]}"


class Counting(AsyncClient):
    """The worker's client, counting the items its failures made dead (their last attempt)."""

    died = 0

    async def fail(
        self,
        item: Item | str | uuid.UUID,
        error: str,
        *,
        lease_token: str | uuid.UUID | None = None,
        retry: bool = True,
        retry_after_seconds: float | None = None,
    ) -> ItemInfo:
        info = await super().fail(
            item, error, lease_token=lease_token, retry=retry, retry_after_seconds=retry_after_seconds
        )
        if info.status == "dead":
            self.died += 1
        return info


@click.command(context_settings={"allow_interspersed_args": False})
@url_option
@api_key_option
@queue_option
@click.option(
    "--concurrency", "-c", type=click.IntRange(1, 256), default=1, show_default=True, help="Commands at once."
)
@click.option(
    "--exit-when-empty",
    is_flag=True,
    help="Stop once the queue has nothing ready and nothing runs (exit 6 if it does not exist).",
)
@click.option(
    "--lease",
    type=click.IntRange(1, 43200),
    default=60,
    show_default=True,
    help="Lease seconds, extended while the command runs.",
)
@click.option(
    "--wait",
    type=click.FloatRange(0, 20),
    default=None,
    help="Long-poll seconds per pop (default 20; 1 with --exit-when-empty).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def work(
    url: str,
    key: str | None,
    queue: str,
    concurrency: int,
    exit_when_empty: bool,
    lease: int,
    wait: float | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND for each item, its payload JSON on stdin.

    Exit 0 of COMMAND completes the item, anything else fails it with the tail of stderr.
    SIGTERM/SIGINT: stop popping, let the running commands finish (a second signal terminates
    them). A queue nothing was ever pushed to is said once on stderr; then work waits for its
    first item (with --exit-when-empty, it exits 6).

    \b
    Exit status: 0 every command succeeded; 1 refused, or COMMAND not found;
    2 usage (an invalid --url); 4 the service does not answer (or is not ready);
    5 a command failed (its item retried later, or dead); 6 with --exit-when-empty,
    the queue does not exist.

    Example: simplequeue work --queue mail -c 4 -- ./send-mail.sh
    """
    if shutil.which(command[0]) is None:
        raise Failed(f"command not found: {command[0]}")
    logging.basicConfig(level=logging.WARNING, format="simplequeue work: %(message)s", stream=sys.stderr)
    commands = Commands(command)
    with talking_to(url, key=key, doing=f"work on queue {queue!r}", queue=queue):
        died = asyncio.run(_work(url, key, queue, commands, concurrency, exit_when_empty, lease, wait))
    dead = f", {died} of them dead" if died else ""
    say(f"{commands.succeeded} succeeded, {commands.failed} failed{dead}")
    if commands.failed:
        sys.exit(COMMAND_FAILED)


async def _work(
    url: str,
    key: str | None,
    queue: str,
    commands: Commands,
    concurrency: int,
    exit_when_empty: bool,
    lease: int,
    wait: float | None,
) -> int:
    """Runs the worker until it stops; the number of items that died."""
    # A quick first call, so that a wrong URL, key or queue name is one line within seconds; after
    # that, an outage only pauses the loop (the worker's client keeps retrying).
    async with AsyncClient(url, retry=CLI_RETRY, api_key=key or None) as probe:
        try:
            await probe.stats(queue)
        except QueueNotFound:
            if exit_when_empty:
                raise NoSuchQueue(no_such_queue(queue)) from None
            say(f"{no_such_queue(queue)}; waiting for its first item")
    async with Counting(url, timeout=30.0, api_key=key or None) as client:
        worker = Worker(
            client,
            queue,
            commands,
            concurrency=concurrency,
            # A command takes a process's start at least, far longer than a pop: a buffer would
            # only hold items that another worker could be running.
            prefetch=0,
            lease_seconds=lease,
            wait_seconds=(1.0 if exit_when_empty else 20.0) if wait is None else wait,
            exit_when_empty=exit_when_empty,
        )
        signals = 0

        def on_signal(sig: signal.Signals) -> None:
            nonlocal signals
            signals += 1
            if signals == 1:
                worker.stop()
                say(
                    f"{sig.name}: no more pops; waiting for {commands.in_flight} running "
                    f"command(s) ({sig.name} again stops them)"
                )
            else:
                say(f"{sig.name}: terminating {commands.in_flight} running command(s)")
                commands.terminate()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await worker.run()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        return client.died
