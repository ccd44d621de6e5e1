"""Topics through the Python SDK and `simplequeue topic ...`, against a real `serve` on SQLite."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from simplequeue.client import Client, InvalidSubscription, TopicNotFound

from tests.test_cli_client import run
from tests.test_e2e import serving


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('topics') / 'topics.db'}") as base:
        yield base


pytestmark = pytest.mark.e2e


def test_the_sdk_makes_subscribes_publishes_and_unsubscribes(url: str) -> None:
    with Client(url) as sq:
        topic = sq.put_topic("sdk-orders", attributes={"DisplayName": "Orders"})
        assert topic.arn.endswith(":sdk-orders")
        sq.put_queue("sdk-eu")
        sq.put_queue("sdk-all")
        eu = sq.subscribe("sdk-orders", "sdk-eu", raw=True, filter_policy={"region": ["eu"]})
        sq.subscribe("sdk-orders", "sdk-all")
        with pytest.raises(InvalidSubscription):
            sq.subscribe("sdk-orders", "sdk-x", filter_policy={"a": [{"nope": 1}]})
        published = sq.publish(
            "sdk-orders", {"order": 7}, attributes={"region": {"type": "String", "value": "eu"}}
        )
        assert sorted(published.delivered_to) == ["sdk-all", "sdk-eu"]
        [item] = sq.pop("sdk-eu")
        assert item.payload == {"order": 7}
        [item] = sq.pop("sdk-all")
        assert json.loads(json.loads(item.payload)["Message"]) == {"order": 7}
        batch = sq.publish_batch("sdk-orders", [{"message": n} for n in range(3)])
        assert [b.delivered_to for b in batch] == [["sdk-all"]] * 3
        assert [s.endpoint for s in sq.subscriptions("sdk-orders")] == sorted(
            ["sdk-eu", "sdk-all"],
            key=lambda q: next(s.id for s in sq.subscriptions("sdk-orders") if s.endpoint == q),
        )
        sq.unsubscribe("sdk-orders", eu)
        assert [s.endpoint for s in sq.subscriptions("sdk-orders")] == ["sdk-all"]
        assert "sdk-orders" in [t.name for t in sq.topics()]
        sq.delete_topic("sdk-orders")
        with pytest.raises(TopicNotFound):
            sq.get_topic("sdk-orders")


def test_the_cli_runs_a_topic_end_to_end(url: str) -> None:
    def ok(*args: str) -> object:
        done: subprocess.CompletedProcess[str] = run(url, "topic", *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert ok("create", "cli-news", "--attribute", "DisplayName=News")["name"] == "cli-news"  # type: ignore[index]
    with Client(url) as sq:
        sq.put_queue("cli-news-q")
    made = ok("subscribe", "cli-news", "cli-news-q", "--raw")
    published = ok("publish", "cli-news", "hello", "--attribute", "kind=String:greeting")
    assert published["delivered_to"] == ["cli-news-q"]  # type: ignore[index]
    popped = run(url, "pop", "--queue", "cli-news-q")
    assert json.loads(popped.stdout)["payload"] == "hello"
    assert [s["endpoint"] for s in ok("subscriptions", "cli-news")] == ["cli-news-q"]  # type: ignore[union-attr]
    ok("unsubscribe", "cli-news", made["id"])  # type: ignore[index]
    ok("delete", "cli-news")
    missing = run(url, "topic", "publish", "cli-news", "x")
    assert missing.returncode == 1
    [line] = missing.stderr.strip().splitlines()
    assert "TopicNotFound" in line or "no topic" in line.lower(), line
    bad = run(url, "topic", "publish", "cli-news", "x", "--attribute", "kind")
    assert bad.returncode == 2, bad.stderr


def test_an_http_endpoint_subscribes_through_the_sdk_and_the_cli(url: str) -> None:
    """The service's default rules: any public host (hooks.invalid never resolves, so it is taken
    unchecked and left pending), never a metadata or loopback address."""
    with Client(url) as sq:
        sq.put_topic("sdk-hooks")
        made = sq.subscribe("sdk-hooks", "https://hooks.invalid/sns")
        assert (made.protocol, made.endpoint, made.confirmed) == ("https", "https://hooks.invalid/sns", False)
        with pytest.raises(InvalidSubscription, match="metadata"):
            sq.subscribe("sdk-hooks", "http://169.254.169.254/latest/meta-data/")
        assert sq.publish("sdk-hooks", "m").endpoints == 0  # pending: nothing is queued for it
    done = run(url, "topic", "subscribe", "sdk-hooks", "http://127.0.0.1:9/hook")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "loopback" in line, line
