"""`simplequeue schedule ...`: schedules over HTTP (put, list, show, pause, resume, trigger,
delete), each printing the service's answer as JSON, each failure as one line (cli.client's
rules)."""

from __future__ import annotations

from datetime import datetime

import click

from simplequeue.cli.client import (
    Failed,
    api_key_option,
    as_json,
    client_for,
    parse_json,
    talking_to,
    url_option,
)


@click.group()
def schedule() -> None:
    """Schedules: pushes kept in the database, each slot fired once by whichever replica claims it."""


@schedule.command("put")
@url_option
@api_key_option
@click.option("--queue", "-q", required=True, help="The queue each firing pushes to.")
@click.option("--every", "every_seconds", type=int, default=None, help="Fire every N seconds.")
@click.option("--cron", default=None, help="Fire at a cron expression's times ('0 9 * * mon-fri').")
@click.option("--timezone", "--tz", default="UTC", show_default=True, help="The IANA zone cron is read in.")
@click.option("--at", default=None, metavar="TIME", help="Fire once, at this ISO-8601 time.")
@click.option("--priority", type=int, default=0, show_default=True)
@click.option("--group", default=None, help="The ordered group the items join.")
@click.option("--paused", is_flag=True, help="Make it paused.")
@click.option("--jitter", "jitter_seconds", type=int, default=0, show_default=True, help="Seconds of spread.")
@click.option("--overlap", type=click.Choice(["allow", "skip"]), default="allow", show_default=True)
@click.option("--catch-up", type=click.Choice(["none", "latest", "all"]), default="latest", show_default=True)
@click.argument("name")
@click.argument("payload")
def put(
    url: str,
    key: str | None,
    queue: str,
    every_seconds: int | None,
    cron: str | None,
    timezone: str,
    at: str | None,
    priority: int,
    group: str | None,
    paused: bool,
    jitter_seconds: int,
    overlap: str,
    catch_up: str,
    name: str,
    payload: str,
) -> None:
    """Make or replace schedule NAME, which pushes PAYLOAD (JSON) to --queue (--every, --cron or --at)."""
    value = parse_json(payload, "PAYLOAD")
    try:
        when = datetime.fromisoformat(at.replace("Z", "+00:00")) if at is not None else None
    except ValueError:
        raise Failed(f"--at {at!r} is not an ISO-8601 time such as 2030-01-01T09:00:00Z") from None
    with talking_to(url, key=key, doing=f"put schedule {name!r}"), client_for(url, key) as sq:
        made = sq.put_schedule(
            name,
            queue=queue,
            payload=value,
            every_seconds=every_seconds,
            cron=cron,
            timezone=timezone,
            at=when,
            priority=priority,
            group=group,
            paused=paused,
            jitter_seconds=jitter_seconds,
            overlap=overlap,
            catch_up=catch_up,
        )
    click.echo(as_json(made))


@schedule.command("list")
@url_option
@api_key_option
def list_schedules(url: str, key: str | None) -> None:
    """Print every schedule, in name order."""
    with talking_to(url, key=key, doing="list schedules"), client_for(url, key) as sq:
        click.echo(as_json(sq.schedules()))


# The commands that take a schedule's name, call one SDK method with it and print the schedule the
# service answers: (command, what the failure line says it was doing, the method, help).
_NAMED = (
    ("show", "read", "get_schedule", "Print schedule NAME, with its next slot, last run and last item."),
    ("pause", "pause", "pause_schedule", "Fire nothing of schedule NAME until it is resumed."),
    ("resume", "resume", "resume_schedule", "Fire schedule NAME again, from its first slot after now."),
    ("trigger", "trigger", "trigger_schedule", "Push one item of schedule NAME now, paused or not."),
)


def _named_command(command: str, doing: str, method: str, help_text: str) -> None:
    @schedule.command(command, help=help_text)
    @url_option
    @api_key_option
    @click.argument("name")
    def run(url: str, key: str | None, name: str) -> None:
        with talking_to(url, key=key, doing=f"{doing} schedule {name!r}"), client_for(url, key) as sq:
            click.echo(as_json(getattr(sq, method)(name)))


for _named in _NAMED:
    _named_command(*_named)


@schedule.command("delete")
@url_option
@api_key_option
@click.argument("name")
def delete(url: str, key: str | None, name: str) -> None:
    """Delete schedule NAME (the items it pushed stay in their queue)."""
    with talking_to(url, key=key, doing=f"delete schedule {name!r}"), client_for(url, key) as sq:
        sq.delete_schedule(name)
    click.echo(as_json({"deleted": name}))
