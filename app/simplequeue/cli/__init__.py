"""The `simplequeue` command: serve, migrate, purge, openapi on the server's side; push, pop, stats,
work and probe over HTTP; spark jobs.

Each command lives in the module of its group and is imported only when it runs (`LazyGroup`):
`simplequeue --version`, `--help` and the client commands never import the server (FastAPI, the
store's drivers, the settings) nor PySpark, so that they start in a fraction of a second; `spark`
imports PySpark only when a Spark job runs. An import-linter contract (pyproject.toml) keeps this
module, `client`, `work` and `probe` free of the server and of `spark`.

Exit status, the same for every command:

  0  done (probe: the service is alive, or ready with --ready)
  1  the service refused the request (an error answer; no API key, an unknown one, or one
     that may not do this), bad input (PAYLOAD not JSON, a COMMAND not found), an answer
     that is not simplequeue's, a configuration mistake; probe: not alive or not ready
  2  usage: an unknown option, a missing argument, an invalid --url/SIMPLEQUEUE_URL
  3  pop: nothing came within --wait
  4  the service does not answer at the URL (refused, timed out, or a proxy's 502, 503 or
     504 with no simplequeue behind it), or is not ready (its own 503: the database does
     not answer), after a few quick retries: worth trying again later
  5  work: at least one command failed (its item was failed: retried later, or dead)
  6  the queue does not exist (nothing was ever pushed to it): pop, stats --queue, and
     work --exit-when-empty (plain work says so once on stderr and waits for the first item)

probe answers 0 or 1 only (a container's HEALTHCHECK reads anything else as a fault of its own).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True, slots=True)
class Lazy:
    """A command imported only when it is run (or its own help asked for)."""

    module: str
    attribute: str
    help: str
    """Its line in `simplequeue --help`: the first sentence of the command's own help (a test
    holds them equal), so that listing the commands imports none of them."""


COMMANDS: dict[str, Lazy] = {
    "serve": Lazy("simplequeue.cli.server", "serve", "Serve the HTTP API."),
    "migrate": Lazy(
        "simplequeue.cli.server",
        "migrate",
        "Apply pending schema migrations, then the current functions or procedures (safe to re-run).",
    ),
    "purge": Lazy(
        "simplequeue.cli.server",
        "purge",
        "Sweep once: reap expired leases, delete old history and expired items.",
    ),
    "openapi": Lazy(
        "simplequeue.cli.server", "openapi", "Print the OpenAPI spec that generated clients are built from."
    ),
    "probe": Lazy("simplequeue.cli.probe", "probe", "Ask the service on this machine whether it is alive."),
    "push": Lazy("simplequeue.cli.client", "push", "Push PAYLOAD (JSON), or JSON lines from stdin."),
    "pop": Lazy("simplequeue.cli.client", "pop", "Lease items and print each as one JSON line."),
    "stats": Lazy("simplequeue.cli.client", "stats", "Print queue counts and settings as JSON."),
    "schedule": Lazy(
        "simplequeue.cli.schedules",
        "schedule",
        "Schedules: pushes kept in the database, each slot fired once by whichever replica claims it.",
    ),
    "topic": Lazy(
        "simplequeue.cli.topics",
        "topic",
        "Topics: one published message, one item in every subscribed queue whose filter it passes.",
    ),
    "work": Lazy("simplequeue.cli.work", "work", "Run COMMAND for each item, its payload JSON on stdin."),
    "spark": Lazy(
        "simplequeue.cli.spark",
        "spark",
        "Spark jobs over the service's HTTP API (needs simplequeue[spark] and Java).",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on demand (click's documented lazy-loading pattern):
    `get_command` imports the one asked for; `list_commands` and the help's list of commands read
    the names and lines of `lazy` and import nothing."""

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, name: str) -> click.Command:
        entry = self.lazy[name]
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{entry.module}.{entry.attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's own, with the lines of commands not imported yet taken from `lazy`."""
        listed: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            if loaded is None and name in self.lazy:
                listed.append((name, click.Command(name, help=self.lazy[name].help)))
            elif loaded is not None and not loaded.hidden:
                listed.append((name, loaded))
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in listed])


@click.group(cls=LazyGroup, lazy=COMMANDS)
@click.version_option(package_name="simplequeue", prog_name="simplequeue")
def main() -> None:
    """simplequeue: a queue service over HTTP, backed by a relational database.

    Configure with SIMPLEQUEUE_* environment variables (see the README).

    \b
    Exit status:
      0  done
      1  refused by the service, bad input, not a simplequeue answer
      2  usage (an unknown option, an invalid --url/SIMPLEQUEUE_URL)
      3  pop: nothing came within --wait
      4  the service does not answer, or is not ready (try again later)
      5  work: at least one command failed
      6  the queue does not exist (pop, stats --queue, work --exit-when-empty)
    probe: 0 alive (or ready), 1 not.
    """
