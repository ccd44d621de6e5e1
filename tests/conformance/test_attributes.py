"""Message attributes: what an item carries beside its payload comes back as it went in, on every
path that hands an item out (pop, get, peek, dead listings, a redrive, a pop that completes), and
every push path stores it (a plain batch, keyed and grouped items, ids left out). Through the HTTP
API, attributes that break a rule are a 422 and nothing is written."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from httpx import AsyncClient
from simplequeue.domain import (
    Attribute,
    Completion,
    DeadFilter,
    Failure,
    ItemStatus,
    decode_attributes,
    encode_attributes,
)
from simplequeue.service import batches
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.factories import new_item
from tests.http import assert_error

ATTRIBUTES = {
    "trace": Attribute("String", "ünïcødé ✓ 🚀 \t\r\n"),
    "count": Attribute("Number.int", "-1.50e+3"),
    "blob": Attribute("Binary.raw", bytes(range(256))),
    "doc": Attribute("String.json", '{"a": [1, 2]}'),
}
TEXT = encode_attributes(ATTRIBUTES)


def with_attributes(queue: str, payload: Any = "body", **fields: Any) -> Any:
    return replace(new_item(queue, payload, **fields), attributes_json=TEXT)


async def test_attributes_round_trip_through_pop_and_get(store: Store, queue: str) -> None:
    item = with_attributes(queue)
    plain = new_item(queue, "plain")
    await push(store, item, plain)

    popped = await store.pop(queue, 2, 30)

    assert [p.attributes_json for p in popped] == [TEXT, None]
    assert decode_attributes(popped[0].attributes_json) == ATTRIBUTES
    assert (await store.get_item(item.id)).attributes_json == TEXT
    assert (await store.get_item(plain.id)).attributes_json is None


@pytest.mark.parametrize(
    "fields",
    [{"dedup_key": "k"}, {"group": "g"}, {"id_given": True}],
    ids=["dedup-key", "group", "remembered-id"],
)
async def test_every_push_path_stores_them(store: Store, queue: str, fields: dict[str, Any]) -> None:
    item = with_attributes(queue, **fields)
    await push(store, item, new_item(queue, "after"))

    assert (await pop_one(store, queue)).attributes_json == TEXT


async def test_the_coalesced_push_path_stores_them(store: Store, queue: str) -> None:
    item = with_attributes(queue)
    [pushed] = await store.push_batch([item], skip_existing=True)

    assert pushed is not None
    assert pushed.created
    assert (await pop_one(store, queue)).attributes_json == TEXT


async def test_a_duplicate_keeps_the_originals_attributes(store: Store, queue: str) -> None:
    original = with_attributes(queue, dedup_key="k")
    await push(store, original)
    [again] = await push(store, new_item(queue, "again", dedup_key="k"))

    assert again is not None
    assert (again.id, again.created) == (original.id, False)
    assert (await store.get_item(original.id)).attributes_json == TEXT


async def test_dead_items_keep_them_and_a_redrive_brings_them_back(store: Store, queue: str) -> None:
    await configure(store, queue, max_attempts=1)
    item = with_attributes(queue)
    await push(store, item)
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("boom", lease_token=popped.lease_token))

    [dead] = (await store.list_dead(queue, DeadFilter(), 10, None)).items
    assert dead.attributes_json == TEXT

    assert await batches.redrive(store, queue, None, None) == 1
    [peeked] = (await store.peek(queue, ItemStatus.READY, 10, None)).items
    assert peeked.attributes_json == TEXT
    again = await pop_one(store, queue)
    assert again.attributes_json == TEXT
    # Completed: a lease left to run out on its last attempt would be dead for every test's sweep.
    await store.complete(again.id, again.lease_token)


async def test_a_pop_that_completes_hands_them_out(store: Store, queue: str) -> None:
    first = with_attributes(queue, "first")
    second = with_attributes(queue, "second")
    await push(store, first, second)
    popped = await pop_one(store, queue)

    outcomes, items = await store.complete_and_pop([Completion(popped.id, popped.lease_token)], queue, 1, 30)

    assert len(outcomes) == 1
    assert [i.attributes_json for i in items] == [TEXT]


# --- through the HTTP API --------------------------------------------------------------------------

REST = {
    "trace": {"type": "String", "value": "ünïcødé ✓"},
    "count": {"type": "Number.float", "value": "3.25"},
    "blob": {"type": "Binary", "value": base64.b64encode(b"\x00\xff").decode()},
}


async def test_the_api_takes_and_answers_them(client: AsyncClient, queue: str) -> None:
    pushed = await client.post("/push", json={"queue": queue, "payload": {"n": 1}, "attributes": REST})
    assert pushed.status_code == 201, pushed.text
    batch = await client.post(
        "/push/batch", json={"queue": queue, "items": [{"payload": 2, "attributes": REST}, {"payload": 3}]}
    )
    assert batch.status_code == 201, batch.text

    got = (await client.get(f"/items/{pushed.json()['id']}")).json()
    assert got["attributes"] == REST
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 3})).json()["items"]
    assert [p["attributes"] for p in popped] == [REST, REST, None]


@pytest.mark.parametrize(
    ("attributes", "why"),
    [
        ({f"a{n}": {"type": "String", "value": "x"} for n in range(11)}, "at most 10"),
        ({"AWS.trace": {"type": "String", "value": "x"}}, "reserved"),
        ({"amazon.x": {"type": "String", "value": "x"}}, "reserved"),
        ({".a": {"type": "String", "value": "x"}}, "period"),
        ({"a..b": {"type": "String", "value": "x"}}, "period"),
        ({"a.": {"type": "String", "value": "x"}}, "period"),
        ({"sp ace": {"type": "String", "value": "x"}}, "characters"),
        ({"x" * 257: {"type": "String", "value": "x"}}, "characters"),
        ({"": {"type": "String", "value": "x"}}, "characters"),
        ({"a": {"type": "Text", "value": "x"}}, "String, Number or Binary"),
        ({"a": {"type": "String.\u00e9", "value": "x"}}, "printable ASCII"),
        ({"a": {"type": "String", "value": "\u0000"}}, "character"),
        ({"a": {"type": "String", "value": "\ufffe"}}, "character"),
        ({"a": {"type": "Number", "value": "one"}}, "number"),
        ({"a": {"type": "Number", "value": "1" * 39}}, "38"),
        ({"a": {"type": "Number", "value": "1e127"}}, "10^126"),
        ({"a": {"type": "Number", "value": "-1e129"}}, "10^126"),
        ({"a": {"type": "Number", "value": "NaN"}}, "number"),
        ({"a": {"type": "Binary", "value": "not base64!"}}, "base64"),
        # What the schema itself bounds is FastAPI's ValidationError, naming the field.
        ({"a": {"type": "String." + "x" * 250, "value": "x"}}, None),
        ({"a": {"type": "String", "value": ""}}, None),
        ({"a": {"type": "Binary", "value": ""}}, None),
        ({"a": {"type": "String"}}, None),
        ({"a": {"type": "String", "value": "x", "extra": 1}}, None),
    ],
)
async def test_the_api_refuses_what_sqs_would_and_writes_nothing(
    client: AsyncClient, queue: str, attributes: dict[str, Any], why: str | None
) -> None:
    code = "ValidationError" if why is None else "InvalidAttributes"
    single = await client.post("/push", json={"queue": queue, "payload": 1, "attributes": attributes})
    assert (why or "") in assert_error(single, 422, code)["detail"]
    batch = await client.post(
        "/push/batch",
        json={"queue": queue, "items": [{"payload": 1}, {"payload": 2, "attributes": attributes}]},
    )
    assert_error(batch, 422, code)
    assert (await client.get(f"/queues/{queue}")).status_code == 404


async def test_a_number_sqs_takes_is_kept_as_written(client: AsyncClient, queue: str) -> None:
    texts = ["0", "-0.000", "1e126", "+.5E-128", "1" * 38, "-1e128"]
    numbers = {f"n{k}": {"type": "Number", "value": v} for k, v in enumerate(texts)}
    pushed = await client.post("/push", json={"queue": queue, "payload": 1, "attributes": numbers})
    assert pushed.status_code == 201, pushed.text
    assert (await client.get(f"/items/{pushed.json()['id']}")).json()["attributes"] == numbers


async def test_attributes_count_toward_the_payload_limit(lite: AsyncClient, queue: str) -> None:
    # lite's limit is 1024 bytes: a payload of 1000 fits alone, not beside 30 bytes of attributes.
    payload = "x" * 998  # 1000 bytes as JSON
    attributes = {"name": {"type": "String", "value": "v" * 20}}  # 4 + 6 + 20 = 30 bytes
    alone = await lite.post("/push", json={"queue": queue, "payload": payload})
    assert alone.status_code == 201
    both = await lite.post("/push", json={"queue": queue, "payload": payload, "attributes": attributes})
    detail = assert_error(both, 413, "PayloadTooLarge")["detail"]
    assert "attributes 30" in detail
    assert "1024" in detail
    popped = (await lite.post("/pop", json={"queue": queue, "max_items": 10})).json()["items"]
    assert [p["attributes"] for p in popped] == [None]


async def test_null_or_empty_attributes_are_none(client: AsyncClient, queue: str) -> None:
    for given in (None, {}):
        pushed = await client.post("/push", json={"queue": queue, "payload": 1, "attributes": given})
        assert pushed.status_code == 201
        item = (await client.get(f"/items/{pushed.json()['id']}")).json()
        assert item["attributes"] is None
    assert json.loads(encode_attributes({}) or "null") is None
