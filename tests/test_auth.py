"""API keys: who may do what, as one table, on every engine; and what a caller without a key, or
with a bad one, is told. Each cell starts from a fresh item of its own (pushed and popped by an
admin), so no cell depends on another."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.http import Client, app_client, assert_error
from tests.test_e2e import simplequeue_command

KEYS = {
    "prod": {"key": "producer-key-000000001", "role": "producer"},
    "cons": {"key": "consumer-key-000000001", "role": "consumer"},
    "admin": {"key": "admin-key-0000000000001", "role": "admin"},
    "prodJ": {"key": "producer-key-jobs-00001", "role": "producer", "queues": ["jobs.*"]},
    "consJ": {"key": "consumer-key-jobs-00001", "role": "consumer", "queues": ["jobs.*", "extra"]},
    "adminJ": {"key": "admin-key-jobs-0000001", "role": "admin", "queues": ["jobs.*"]},
}
BOGUS = "not-a-key-of-this-service"
IN, OUT = "jobs.a", "mail"  # a queue the scoped keys cover, and one they do not

# Columns: no key, an unknown key, then each key on a queue it covers ("/in") or not ("/out").
# The unscoped keys cover every queue, so they appear once, on IN.
COLUMNS = "anon bogus prod cons admin prodJ/in prodJ/out consJ/in consJ/out adminJ/in adminJ/out"
MATRIX = """
push            401 401 201 403 201 201 403 403 403 201 403
push_batch      401 401 201 403 201 201 403 403 403 201 403
pop             401 401 403 200 200 403 403 200 403 200 403
complete        401 401 403 204 204 403 403 204 403 204 403
complete_anyone 401 401 403 403 204 403 403 403 403 204 403
complete_batch  401 401 403 200 200 403 403 200 403 200 403
fail            401 401 403 200 200 403 403 200 403 200 403
extend          401 401 403 200 200 403 403 200 403 200 403
get_item        401 401 403 200 200 403 403 200 403 200 403
release         401 401 403 403 200 403 403 403 403 200 403
list_queues     401 401 200 200 200 200 200 200 200 200 200
get_queue       401 401 200 200 200 200 403 200 403 200 403
put_queue       401 401 403 403 200 403 403 403 403 200 403
list_dead       401 401 403 403 200 403 403 403 403 200 403
redrive         401 401 403 403 200 403 403 403 403 200 403
purge_dead      401 401 403 403 200 403 403 403 403 200 403
history         401 401 403 403 200 403 403 403 403 200 403
pause           401 401 403 403 200 403 403 403 403 200 403
resume          401 401 403 403 200 403 403 403 403 200 403
peek            401 401 403 403 200 403 403 403 403 200 403
peek_group      401 401 403 403 200 403 403 403 403 200 403
find_dedup_key  401 401 403 403 404 403 403 403 403 404 403
delete_queue    401 401 403 403 200 403 403 403 403 200 403
metrics         401 401 403 403 200 403 403 403 403 403 403
healthz         200 200 200 200 200 200 200 200 200 200 200
readyz          200 200 200 200 200 200 200 200 200 200 200
"""


@dataclass
class Leased:
    queue: str
    id: str
    token: str


Call = Callable[[Client, Leased, dict[str, str]], Awaitable[httpx.Response]]

CALLS: dict[str, Call] = {
    "push": lambda c, i, h: c.post("/push", json={"queue": i.queue, "payload": 1}, headers=h),
    "push_batch": lambda c, i, h: c.post(
        "/push/batch", json={"queue": i.queue, "items": [{"payload": 1}]}, headers=h
    ),
    "pop": lambda c, i, h: c.post("/pop", json={"queue": i.queue}, headers=h),
    "complete": lambda c, i, h: c.delete(f"/items/{i.id}", params={"lease_token": i.token}, headers=h),
    "complete_anyone": lambda c, i, h: c.delete(f"/items/{i.id}", headers=h),
    "complete_batch": lambda c, i, h: c.post(
        "/items/complete", json={"items": [{"id": i.id, "lease_token": i.token}]}, headers=h
    ),
    "fail": lambda c, i, h: c.post(
        f"/items/{i.id}/fail", json={"error": "e", "lease_token": i.token}, headers=h
    ),
    "extend": lambda c, i, h: c.post(
        f"/items/{i.id}/extend", json={"lease_token": i.token, "lease_seconds": 60}, headers=h
    ),
    "get_item": lambda c, i, h: c.get(f"/items/{i.id}", headers=h),
    "release": lambda c, i, h: c.post(f"/items/{i.id}/release", headers=h),
    "list_queues": lambda c, i, h: c.get("/queues", headers=h),
    "get_queue": lambda c, i, h: c.get(f"/queues/{i.queue}", headers=h),
    "put_queue": lambda c, i, h: c.put(f"/queues/{i.queue}", json={}, headers=h),
    "list_dead": lambda c, i, h: c.get(f"/queues/{i.queue}/dead", headers=h),
    "redrive": lambda c, i, h: c.post(f"/queues/{i.queue}/redrive", json={}, headers=h),
    "purge_dead": lambda c, i, h: c.delete(f"/queues/{i.queue}/dead", headers=h),
    "history": lambda c, i, h: c.get(f"/queues/{i.queue}/history", headers=h),
    "pause": lambda c, i, h: c.post(f"/queues/{i.queue}/pause", headers=h),
    "resume": lambda c, i, h: c.post(f"/queues/{i.queue}/resume", headers=h),
    "peek": lambda c, i, h: c.get(f"/queues/{i.queue}/items", params={"state": "leased"}, headers=h),
    "peek_group": lambda c, i, h: c.get(
        f"/queues/{i.queue}/items/by-group", params={"group": "g"}, headers=h
    ),
    "find_dedup_key": lambda c, i, h: c.get(
        f"/queues/{i.queue}/items/by-dedup-key", params={"dedup_key": "none such"}, headers=h
    ),
    "delete_queue": lambda c, i, h: c.delete(f"/queues/{i.queue}", params={"force": "true"}, headers=h),
    "metrics": lambda c, i, h: c.get("/metrics", headers=h),
    "healthz": lambda c, i, h: c.get("/healthz", headers=h),
    "readyz": lambda c, i, h: c.get("/readyz", headers=h),
}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ADMIN = bearer(KEYS["admin"]["key"])


def column(name: str) -> tuple[dict[str, str], str]:
    """The headers and the queue of a column."""
    who, _, where = name.partition("/")
    headers = {} if who == "anon" else bearer(BOGUS) if who == "bogus" else bearer(KEYS[who]["key"])
    return headers, OUT if where == "out" else IN


@pytest.fixture
async def keyed(settings: Settings, clock: FakeClock) -> AsyncIterator[Client]:
    keyed = settings.model_copy(update={"api_keys": Settings(api_keys=list(KEYS.values())).api_keys})
    async for c in app_client(keyed, clock):
        yield c


async def fresh_item(client: Client, queue: str) -> Leased:
    await client.post(f"/queues/{queue}/resume", headers=ADMIN)  # an earlier cell may have paused it
    pushed = await client.post("/push", json={"queue": queue, "payload": {"n": 1}}, headers=ADMIN)
    assert pushed.status_code == 201, pushed.text
    while True:  # earlier cells may have left items in the queue: pop until ours comes
        popped = (await client.post("/pop", json={"queue": queue, "max_items": 100}, headers=ADMIN)).json()
        mine = [i for i in popped["items"] if i["id"] == pushed.json()["id"]]
        if mine:
            return Leased(queue, mine[0]["id"], mine[0]["lease_token"])
        assert popped["items"], "our item was not popped"


async def test_who_may_do_what(keyed: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    names = COLUMNS.split()
    mismatches: list[str] = []
    for line in MATRIX.strip().splitlines():
        operation, *expected = line.split()
        assert len(expected) == len(names), line
        for name, want in zip(names, expected, strict=True):
            headers, queue = column(name)
            item = await fresh_item(keyed, queue)
            got = await CALLS[operation](keyed, item, headers)
            if got.status_code != int(want):
                mismatches.append(f"{operation} as {name}: {got.status_code}, want {want} ({got.text[:120]})")
            elif got.status_code in (401, 403):
                body = got.json()
                assert body["error"] == {401: "Unauthorized", 403: "Forbidden"}[got.status_code]
                if got.status_code == 401:
                    assert got.headers["WWW-Authenticate"] == 'Bearer realm="simplequeue"'
    assert mismatches == []
    every_key = [BOGUS, *(k["key"] for k in KEYS.values())]
    assert not [key for key in every_key if key in caplog.text]


async def test_a_scoped_key_sees_only_its_queues(keyed: Client) -> None:
    for queue in ("jobs.x", "mail", "extra"):
        assert (
            await keyed.post("/push", json={"queue": queue, "payload": 1}, headers=ADMIN)
        ).status_code == 201
    seen = await keyed.get("/queues", headers=bearer(KEYS["consJ"]["key"]))
    names = {q["name"] for q in seen.json()["queues"]}
    assert {"jobs.x", "extra"} <= names
    assert not any(n == "mail" or not (n.startswith("jobs.") or n == "extra") for n in names)


async def test_refusals_change_nothing(keyed: Client) -> None:
    item = await fresh_item(keyed, OUT)
    before = (await keyed.get(f"/queues/{OUT}", headers=ADMIN)).json()
    consumer = bearer(KEYS["consJ"]["key"])
    assert_error(
        await keyed.post("/push", json={"queue": OUT, "payload": 1}, headers=consumer), 403, "Forbidden"
    )
    assert_error(await keyed.post("/pop", json={"queue": OUT}, headers=consumer), 403, "Forbidden")
    refused = await keyed.delete(f"/items/{item.id}", params={"lease_token": item.token}, headers=consumer)
    assert_error(refused, 403, "Forbidden")
    assert_error(await keyed.post("/push", json={"queue": OUT, "payload": 1}), 401, "Unauthorized")
    after = (await keyed.get(f"/queues/{OUT}", headers=ADMIN)).json()
    assert after == before
    assert (await keyed.get(f"/items/{item.id}", headers=ADMIN)).json()["status"] == "leased"


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "an API key is required"),
        ("Bearer ", "an API key is required"),
        ("Basic YWRtaW46YWRtaW4=", "an API key is required"),
        (f"Bearer {BOGUS}", "unknown API key"),
        (f"bearer {KEYS['admin']['key']}x", "unknown API key"),
    ],
)
async def test_what_a_caller_without_a_good_key_is_told(keyed: Client, header: str | None, says: str) -> None:
    got = await keyed.get("/queues", headers={"Authorization": header} if header else {})
    body = assert_error(got, 401, "Unauthorized")
    assert body["detail"].startswith(says)
    assert got.headers["WWW-Authenticate"].startswith("Bearer")
    assert got.headers["X-Request-ID"]


async def test_the_scheme_is_case_insensitive(keyed: Client) -> None:
    got = await keyed.get("/queues", headers={"Authorization": f"bearer {KEYS['admin']['key']}"})
    assert got.status_code == 200


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*simplequeue_command(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "SIMPLEQUEUE_DATABASE_URL": "sqlite:///:memory:", **(env or {})},
    )


def test_serve_refuses_a_non_loopback_address_without_keys() -> None:
    done = run_cli("serve", "--host", "0.0.0.0", "--port", "1")  # refused before it binds
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "refusing to serve on 0.0.0.0 without API keys" in line
    assert "SIMPLEQUEUE_API_KEYS" in line


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ('[{"key": "short-secret", "role": "admin"}]', "at least 16 characters"),
        ('[{"key": "a-long-enough-secret", "role": "root"}]', "role"),
        ("not json", "SIMPLEQUEUE_API_KEYS"),
        ('[{"key": "a-long-enough-secret", "role": "admin"}, '
         '{"key": "a-long-enough-secret", "role": "consumer"}]', "the same key is given twice"),
    ],
)  # fmt: skip
def test_a_bad_key_setting_is_one_line_that_never_shows_the_key(keys: str, says: str) -> None:
    done = run_cli("migrate", "--print", env={"SIMPLEQUEUE_API_KEYS": keys})
    assert done.returncode == 1, done
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: configuration: ")
    assert says in line
    for secret in ("short-secret", "a-long-enough-secret"):
        assert secret not in line


def test_keys_load_from_a_file(tmp_path: Any) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"key": "from-a-file-0000001", "role": "consumer", "queues": ["q*"]}]))
    settings = Settings(api_keys_file=path, api_keys=[KEYS["admin"]])
    assert [(k.role, k.queues) for k in settings.api_keys] == [("admin", None), ("consumer", ["q*"])]
