"""One rule for a queue's name (simplequeue.domain.names), the same at every door: the table in
tests/queue_names.py, run here against the domain, the HTTP API (a body's field, a path), the SQS
door and the Spark options. The outbox's drivers and PostgreSQL's SQL entry points run it in their
own suites (test_outbox_drivers, test_sql_entry_points)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from simplequeue.api.sqs.errors import SqsError
from simplequeue.api.sqs.urls import Place, checked_name, creatable
from simplequeue.domain.names import QUEUE_NAME, is_queue_name
from simplequeue.settings import Settings
from simplequeue.spark.options import OptionError, check_queue_name

from tests.http import Client, app_client
from tests.queue_names import NAMES, decisions

PLACE = Place("http://sq", "000000000000", "us-east-1")
NO_SEGMENT = ("", "a/b")
"""Names that are no single path segment: a path with them reaches no queue's route (307, 404)."""


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Client]:
    # The HTTP API's fields decide before any store is asked: one engine shows what they take.
    async for c in app_client(Settings(database_url=f"sqlite:///{tmp_path / 'q.db'}", sweep=False), None):
        yield c


def test_the_domain_takes_the_names_of_the_table() -> None:
    assert decisions({name: is_queue_name(name) for name in NAMES}) == {}
    # Whichever method a caller uses on the compiled rule (simplequeue.outbox exports it).
    for method in (QUEUE_NAME.match, QUEUE_NAME.search, QUEUE_NAME.fullmatch):
        assert decisions({name: method(name) is not None for name in NAMES}) == {}


def _escaped(name: str) -> str:
    """Every byte escaped, so that the client sends the name as it is ('.' included)."""
    return "".join(f"%{b:02X}" for b in name.encode())


async def test_the_http_api_takes_the_names_of_the_table_in_a_body_and_in_a_path(api: Client) -> None:
    pushed, put = {}, {}
    for name in NAMES:
        answer = await api.post("/push", json={"queue": name, "payload": 1})
        assert answer.status_code in (201, 422), answer.text
        pushed[name] = answer.status_code == 201
        answer = await api.put(f"/queues/{_escaped(name)}", json={})
        assert answer.status_code in (200, 201, 422) or name in NO_SEGMENT, (name, answer.status_code)
        put[name] = answer.status_code in (200, 201)
    assert decisions(pushed) == {}
    assert decisions(put) == {}
    listed = {q["name"] for q in (await api.get("/queues")).json()["queues"]}
    assert listed == {name for name, valid in NAMES.items() if valid}


def _sqs_finds(name: str) -> bool:
    try:
        checked_name(name)
    except SqsError:
        return False
    return True


def _sqs_creates(name: str) -> bool:
    try:
        creatable(name)
    except SqsError:
        return False
    return True


def test_the_sqs_door_finds_the_names_of_the_table_and_creates_none_outside_it() -> None:
    assert decisions({name: _sqs_finds(name) for name in NAMES}) == {}
    assert decisions({name: PLACE.queue_of_arn(PLACE.arn(name)) == name for name in NAMES}) == {}
    # CreateQueue takes SQS's own rule, within ours: 1 to 80 of [A-Za-z0-9_-], and a .fifo suffix.
    created = {name for name in NAMES if _sqs_creates(name)}
    assert created == {"a", "Z", "0", "q.fifo"}
    assert all(is_queue_name(name) for name in created)


def test_the_spark_options_take_the_names_of_the_table() -> None:
    def takes(name: str) -> bool:
        try:
            check_queue_name(name)
        except OptionError:
            return False
        return True

    assert decisions({name: takes(name) for name in NAMES}) == {}
