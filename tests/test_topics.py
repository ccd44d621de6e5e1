"""Topics over the REST API, on every reachable engine: making them, subscribing queues, and
publishing, which delivers one item per matching subscription in one transaction (SNS's fan-out)."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import pytest
from simplequeue.domain.sns_signing import verify

from tests.http import Client, assert_error


@pytest.fixture
def topic() -> str:
    return f"tp-{uuid4().hex[:16]}"


async def make_topic(client: Client, topic: str, **body: Any) -> dict[str, Any]:
    response = await client.put(f"/topics/{topic}", json=body)
    assert response.status_code in (200, 201), response.text
    made: dict[str, Any] = response.json()
    return made


async def subscribe(client: Client, topic: str, queue: str, **attributes: str) -> dict[str, Any]:
    response = await client.post(
        f"/topics/{topic}/subscriptions", json={"endpoint": queue, "attributes": attributes}
    )
    assert response.status_code in (200, 201), response.text
    made: dict[str, Any] = response.json()
    return made


async def make_queue(client: Client, queue: str) -> None:
    response = await client.put(f"/queues/{queue}", json={})
    assert response.status_code in (200, 201), response.text


async def pop_all(client: Client, queue: str) -> list[dict[str, Any]]:
    response = await client.post("/pop", json={"queue": queue, "max_items": 100, "wait_seconds": 0})
    if response.status_code == 404:
        return []
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_topic_is_made_once_and_found_as_it_is(client: Client, topic: str) -> None:
    made = await client.put(f"/topics/{topic}", json={"attributes": {"DisplayName": "Orders"}})
    assert made.status_code == 201, made.text
    assert made.json()["arn"] == f"arn:aws:sns:us-east-1:000000000000:{topic}"
    again = await client.put(f"/topics/{topic}", json={"attributes": {"DisplayName": "Orders"}})
    assert again.status_code == 200
    other = await client.put(f"/topics/{topic}", json={"attributes": {"DisplayName": "Other"}})
    assert_error(other, 409, "TopicExists")
    got = await client.get(f"/topics/{topic}")
    assert got.json()["attributes"] == {"DisplayName": "Orders"}
    assert got.json()["subscriptions"] == 0


async def test_bad_topics_are_refused_and_make_nothing(client: Client, topic: str) -> None:
    assert_error(
        await client.put(f"/topics/{topic}", json={"attributes": {"Nope": "1"}}), 422, "ValidationError"
    )
    assert_error(
        await client.put(f"/topics/{topic}", json={"attributes": {"FifoTopic": "true"}}), 422, "InvalidTopic"
    )
    fifo_only = {"ContentBasedDeduplication": "true"}
    assert_error(await client.put(f"/topics/{topic}", json={"attributes": fifo_only}), 422, "InvalidTopic")
    assert (await client.put("/topics/bad%20name", json={})).status_code == 422
    assert_error(await client.get(f"/topics/{topic}"), 404, "TopicNotFound")


async def test_a_publish_reaches_every_subscribed_queue_as_an_sns_notification(
    client: Client, topic: str
) -> None:
    await make_topic(client, topic)
    queues = [f"{topic}-q{n}" for n in range(3)]
    for q in queues:
        await make_queue(client, q)
        await subscribe(client, topic, q)
    published = await client.post(
        f"/topics/{topic}/publish",
        json={
            "message": "hello",
            "subject": "greeting",
            "attributes": {"kind": {"type": "String", "value": "a"}},
        },
    )
    assert published.status_code == 200, published.text
    answer = published.json()
    assert sorted(answer["delivered_to"]) == sorted(queues)
    certificate = (await client.get("/sns/certificate.pem")).text.encode()
    for q in queues:
        [item] = await pop_all(client, q)
        body = json.loads(item["payload"])
        assert body["Type"] == "Notification"
        assert body["MessageId"] == answer["message_id"]
        assert body["TopicArn"] == f"arn:aws:sns:us-east-1:000000000000:{topic}"
        assert (body["Subject"], body["Message"]) == ("greeting", "hello")
        assert body["MessageAttributes"] == {"kind": {"Type": "String", "Value": "a"}}
        assert body["SigningCertURL"].endswith("/sns/certificate.pem")
        assert verify(body, certificate), body


async def test_raw_delivery_hands_on_the_message_and_its_attributes(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    queue = f"{topic}-raw"
    await make_queue(client, queue)
    await subscribe(client, topic, queue, RawMessageDelivery="true")
    attributes = {"n": {"type": "Number", "value": "7"}}
    response = await client.post(
        f"/topics/{topic}/publish", json={"message": {"order": 1}, "attributes": attributes}
    )
    assert response.status_code == 200, response.text
    [item] = await pop_all(client, queue)
    assert item["payload"] == {"order": 1}
    assert item["attributes"] == {"n": {"type": "Number", "value": "7"}}


async def test_filter_policies_choose_the_queues(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    red, big, every = f"{topic}-red", f"{topic}-big", f"{topic}-all"
    for q in (red, big, every):
        await make_queue(client, q)
    await subscribe(client, topic, red, FilterPolicy=json.dumps({"color": ["red"]}))
    await subscribe(
        client,
        topic,
        big,
        FilterPolicy=json.dumps({"size": [{"numeric": [">", 10]}]}),
        FilterPolicyScope="MessageBody",
    )
    await subscribe(client, topic, every)
    for message, color in (({"size": 20}, "blue"), ({"size": 1}, "red"), ({"size": 2}, "green")):
        response = await client.post(
            f"/topics/{topic}/publish",
            json={"message": message, "attributes": {"color": {"type": "String", "value": color}}},
        )
        assert response.status_code == 200, response.text
    assert [json.loads(json.loads(i["payload"])["Message"]) for i in await pop_all(client, red)] == [
        {"size": 1}
    ]
    assert [json.loads(json.loads(i["payload"])["Message"]) for i in await pop_all(client, big)] == [
        {"size": 20}
    ]
    assert len(await pop_all(client, every)) == 3


async def test_a_bad_filter_policy_is_refused_in_sns_words(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    response = await client.post(
        f"/topics/{topic}/subscriptions",
        json={
            "endpoint": f"{topic}-q",
            "attributes": {"FilterPolicy": '{"a": [{"numeric": [">", 5, "<", 1]}]}'},
        },
    )
    body = assert_error(response, 422, "InvalidSubscription")
    assert body["detail"].startswith("Invalid parameter: FilterPolicy:"), body
    assert (await client.get(f"/topics/{topic}")).json()["subscriptions"] == 0


async def test_a_publish_retried_with_its_id_delivers_nothing_twice(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    queue = f"{topic}-q"
    await make_queue(client, queue)
    await subscribe(client, topic, queue)
    message_id = str(uuid4())
    for _ in range(3):
        response = await client.post(f"/topics/{topic}/publish", json={"message": "once", "id": message_id})
        assert response.status_code == 200, response.text
        assert response.json()["message_id"] == message_id
    assert len(await pop_all(client, queue)) == 1


async def test_a_publish_skips_a_queue_that_does_not_exist_and_makes_none(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    gone = f"{topic}-gone"
    await subscribe(client, topic, gone)
    response = await client.post(f"/topics/{topic}/publish", json={"message": "x"})
    assert response.json()["delivered_to"] == []
    assert_error(await client.get(f"/queues/{gone}"), 404, "QueueNotFound")


async def test_a_batch_is_delivered_whole_or_not_at_all(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    queue = f"{topic}-q"
    await make_queue(client, queue)
    await subscribe(client, topic, queue, RawMessageDelivery="true")
    bad = await client.post(
        f"/topics/{topic}/publish/batch",
        json={"messages": [{"message": "ok"}, {"message": "no", "group": "g"}]},
    )
    assert_error(bad, 422, "InvalidTopic")
    assert await pop_all(client, queue) == []
    good = await client.post(
        f"/topics/{topic}/publish/batch", json={"messages": [{"message": n} for n in range(10)]}
    )
    assert good.status_code == 200, good.text
    assert sorted(i["payload"] for i in await pop_all(client, queue)) == list(range(10))


async def test_fifo_topics_deliver_to_fifo_queues_by_group_and_deduplicate(
    client: Client, topic: str
) -> None:
    name = f"{topic}.fifo"
    made = await make_topic(client, name, attributes={"ContentBasedDeduplication": "true"})
    assert made["attributes"]["FifoTopic"] == "true"
    plain = await client.post(f"/topics/{name}/subscriptions", json={"endpoint": f"{topic}-plain"})
    assert_error(plain, 422, "InvalidSubscription")
    queue = f"{topic}-q.fifo"
    await make_queue(client, queue)
    await subscribe(client, name, queue, RawMessageDelivery="true")
    assert_error(await client.post(f"/topics/{name}/publish", json={"message": "a"}), 422, "InvalidTopic")
    for message in ("a", "b", "a"):  # the second "a" is the first's duplicate (content-based)
        response = await client.post(f"/topics/{name}/publish", json={"message": message, "group": "g1"})
        assert response.status_code == 200, response.text
    items = await pop_all(client, queue)
    assert [i["payload"] for i in items] == ["a"]  # a group hands out its head only
    assert items[0]["group"] == "g1"


async def test_subscriptions_are_listed_changed_and_removed(client: Client, topic: str) -> None:
    await make_topic(client, topic)
    first = await subscribe(client, topic, f"{topic}-a")
    again = await subscribe(client, topic, f"{topic}-a")
    assert again["id"] == first["id"]
    await subscribe(client, topic, f"{topic}-b")
    listed = (await client.get(f"/topics/{topic}/subscriptions", params={"limit": 1})).json()
    assert len(listed["subscriptions"]) == 1
    assert listed["next_cursor"]
    rest = (
        await client.get(
            f"/topics/{topic}/subscriptions", params={"limit": 1, "cursor": listed["next_cursor"]}
        )
    ).json()
    assert {s["endpoint"] for s in listed["subscriptions"] + rest["subscriptions"]} == {
        f"{topic}-a",
        f"{topic}-b",
    }
    path = f"/topics/{topic}/subscriptions/{first['id']}"
    changed = await client.patch(path, json={"set_attributes": {"RawMessageDelivery": "true"}})
    assert changed.json()["attributes"] == {"RawMessageDelivery": "true"}
    assert (await client.delete(path)).status_code == 204
    assert_error(await client.get(path), 404, "SubscriptionNotFound")
    assert (await client.delete(f"/topics/{topic}")).status_code == 204
    assert_error(await client.get(f"/topics/{topic}/subscriptions"), 404, "TopicNotFound")


async def test_topics_are_paged_by_name(client: Client, topic: str) -> None:
    for n in range(3):
        await make_topic(client, f"{topic}-{n}")
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/topics", params=params)).json()
        seen += [t["name"] for t in page["topics"] if t["name"].startswith(topic)]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"{topic}-{n}" for n in range(3)]
    assert_error(await client.get("/topics", params={"cursor": "bogus"}), 422, "InvalidCursor")


async def test_the_signing_key_is_made_once_and_kept(client: Client) -> None:
    first = (await client.get("/sns/certificate.pem")).text
    assert first.startswith("-----BEGIN CERTIFICATE-----")
    assert (await client.get("/sns/certificate.pem")).text == first
