"""`simplequeue topic ...`: topics over HTTP (make, list, delete, subscribe a queue, publish),
each printing the service's answer as JSON, each failure as one line (cli.client's rules)."""

from __future__ import annotations

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


def _pairs(given: tuple[str, ...], what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise click.UsageError(f"{what} {text!r} is not NAME=VALUE")
        pairs[name] = value
    return pairs


def _attributes(given: tuple[str, ...]) -> dict[str, dict[str, str]] | None:
    """--attribute name=Type:value (Type: String, Number, Binary, or one with a label)."""
    found: dict[str, dict[str, str]] = {}
    for name, typed in _pairs(given, "--attribute").items():
        kind, sep, value = typed.partition(":")
        if not sep:
            raise click.UsageError(
                f"--attribute {name}={typed!r}: write NAME=TYPE:VALUE, as kind=String:order"
            )
        found[name] = {"type": kind, "value": value}
    return found or None


@click.group()
def topic() -> None:
    """Topics: one published message, one item in every subscribed queue whose filter it passes."""


@topic.command("create")
@url_option
@api_key_option
@click.option("--attribute", "-a", multiple=True, help="An SNS topic attribute, NAME=VALUE.")
@click.option("--tag", multiple=True, help="A tag, KEY=VALUE.")
@click.argument("name")
def create(url: str, key: str | None, attribute: tuple[str, ...], tag: tuple[str, ...], name: str) -> None:
    """Make topic NAME (ending in .fifo: a FIFO topic), or print it as it is."""
    attributes, tags = _pairs(attribute, "--attribute"), _pairs(tag, "--tag")
    with talking_to(url, key=key, doing=f"make topic {name!r}"), client_for(url, key) as sq:
        click.echo(as_json(sq.put_topic(name, attributes=attributes, tags=tags)))


@topic.command("list")
@url_option
@api_key_option
def list_topics(url: str, key: str | None) -> None:
    """Print every topic, in name order."""
    with talking_to(url, key=key, doing="list topics"), client_for(url, key) as sq:
        click.echo(as_json(sq.topics()))


@topic.command("delete")
@url_option
@api_key_option
@click.argument("name")
def delete(url: str, key: str | None, name: str) -> None:
    """Delete topic NAME and its subscriptions (delivered items stay in their queues)."""
    with talking_to(url, key=key, doing=f"delete topic {name!r}"), client_for(url, key) as sq:
        sq.delete_topic(name)
    click.echo(as_json({"deleted": name}))


@topic.command("subscribe")
@url_option
@api_key_option
@click.option("--raw", is_flag=True, help="Deliver the message itself, not SNS's JSON notification.")
@click.option("--filter-policy", default=None, metavar="JSON", help="An SNS filter policy.")
@click.option(
    "--body-scope", is_flag=True, help="The filter policy reads the message (JSON), not its attributes."
)
@click.argument("name")
@click.argument("endpoint")
def subscribe(
    url: str,
    key: str | None,
    raw: bool,
    filter_policy: str | None,
    body_scope: bool,
    name: str,
    endpoint: str,
) -> None:
    """Deliver topic NAME's messages to ENDPOINT: a queue's name, or an http(s):// URL (sent a
    SubscriptionConfirmation to confirm first)."""
    if filter_policy is not None:
        parse_json(filter_policy, "--filter-policy")
    doing = f"subscribe {endpoint!r} to topic {name!r}"
    with talking_to(url, key=key, doing=doing), client_for(url, key) as sq:
        made = sq.subscribe(
            name,
            endpoint,
            raw=raw,
            filter_policy=filter_policy,
            filter_scope="MessageBody" if body_scope else None,
        )
    click.echo(as_json(made))


@topic.command("subscriptions")
@url_option
@api_key_option
@click.argument("name")
def subscriptions(url: str, key: str | None, name: str) -> None:
    """Print topic NAME's subscriptions."""
    with talking_to(url, key=key, doing=f"list topic {name!r}'s subscriptions"), client_for(url, key) as sq:
        click.echo(as_json(sq.subscriptions(name)))


@topic.command("unsubscribe")
@url_option
@api_key_option
@click.argument("name")
@click.argument("subscription")
def unsubscribe(url: str, key: str | None, name: str, subscription: str) -> None:
    """Remove SUBSCRIPTION (its id) from topic NAME."""
    with talking_to(url, key=key, doing=f"unsubscribe from topic {name!r}"), client_for(url, key) as sq:
        sq.unsubscribe(name, subscription)
    click.echo(as_json({"unsubscribed": subscription}))


@topic.command("publish")
@url_option
@api_key_option
@click.option("--subject", default=None)
@click.option("--attribute", "-a", multiple=True, help="A message attribute, NAME=TYPE:VALUE.")
@click.option("--group", default=None, help="MessageGroupId (FIFO topics).")
@click.option("--dedup-key", default=None, help="MessageDeduplicationId (FIFO topics).")
@click.option("--json", "as_json_value", is_flag=True, help="MESSAGE is JSON, not text.")
@click.argument("name")
@click.argument("message")
def publish(
    url: str,
    key: str | None,
    subject: str | None,
    attribute: tuple[str, ...],
    group: str | None,
    dedup_key: str | None,
    as_json_value: bool,
    name: str,
    message: str,
) -> None:
    """Publish MESSAGE to topic NAME; prints its id and the queues that got it."""
    value = parse_json(message, "MESSAGE") if as_json_value else message
    attributes = _attributes(attribute)
    with talking_to(url, key=key, doing=f"publish to topic {name!r}"), client_for(url, key) as sq:
        try:
            published = sq.publish(
                name, value, subject=subject, attributes=attributes, group=group, dedup_key=dedup_key
            )
        except ValueError as exc:
            raise Failed(str(exc)) from None
    click.echo(as_json(published))
