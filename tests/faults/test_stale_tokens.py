"""Stale lease tokens against a real service: a token whose lease expired and whose item was popped
again since is refused (409 LeaseMismatch) by complete, fail, extend and batch complete, and
changes nothing; the new token completes (204). An expired token of an item nobody popped since
still completes (docs/concepts.md)."""

from __future__ import annotations

import time
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Engine, Reporter, ServiceFactory, sizes

SHORT_LEASE = 1


def expect(response: httpx.Response, status: int, error: str | None = None) -> Any:
    assert response.status_code == status, (
        f"{response.request.method} {response.request.url}: {response.text}"
    )
    if error is not None:
        assert response.json()["error"] == error, response.text
    return response.json() if response.content else None


def pop_one(http: httpx.Client, queue: str, lease: int, wait: float = 0) -> dict[str, Any]:
    body = {"queue": queue, "lease_seconds": lease, "wait_seconds": wait}
    items = expect(http.post("/pop", json=body), 200)["items"]
    assert len(items) == 1, items
    item: dict[str, Any] = items[0]
    return item


def stale_round(http: httpx.Client, queue: str) -> int:
    """One round of every case; returns how many cases it checked."""
    cases = 0
    item_id = expect(http.post("/push", json={"queue": queue, "payload": {"stale": True}}), 201)["id"]
    first = pop_one(http, queue, SHORT_LEASE)
    assert first["id"] == item_id
    # The lease runs out; a long-poll is answered when it does, with a new lease and a new token.
    second = pop_one(http, queue, 60, wait=SHORT_LEASE + 10)
    assert second["id"] == item_id
    assert second["lease_token"] != first["lease_token"]
    assert second["attempts"] == first["attempts"] + 1
    old, new = first["lease_token"], second["lease_token"]

    expect(http.delete(f"/items/{item_id}", params={"lease_token": old}), 409, "LeaseMismatch")
    cases += 1
    expect(
        http.post(f"/items/{item_id}/fail", json={"error": "late", "lease_token": old}), 409, "LeaseMismatch"
    )
    cases += 1
    expect(http.post(f"/items/{item_id}/extend", json={"lease_token": old, "lease_seconds": 60}), 409)
    cases += 1
    batch = expect(http.post("/items/complete", json={"items": [{"id": item_id, "lease_token": old}]}), 200)
    assert batch["results"] == [{"id": item_id, "result": "lease_mismatch"}], batch
    cases += 1
    # Nothing changed: still leased under the new token, no error recorded.
    state = expect(http.get(f"/items/{item_id}"), 200)
    assert state["status"] == "leased", state
    assert state["attempts"] == second["attempts"], state
    assert not state.get("errors"), state
    cases += 1
    expect(http.delete(f"/items/{item_id}", params={"lease_token": new}), 204)
    cases += 1
    expect(http.delete(f"/items/{item_id}", params={"lease_token": new}), 404, "ItemNotFound")
    expect(http.delete(f"/items/{item_id}", params={"lease_token": old}), 404, "ItemNotFound")
    cases += 1

    # An expired token of an item nobody popped since still completes (and fails).
    for action in ("complete", "fail"):
        expired_id = expect(http.post("/push", json={"queue": queue, "payload": action}), 201)["id"]
        lease = pop_one(http, queue, SHORT_LEASE)
        assert lease["id"] == expired_id
        time.sleep(SHORT_LEASE + 0.5)
        if action == "complete":
            expect(http.delete(f"/items/{expired_id}", params={"lease_token": lease["lease_token"]}), 204)
        else:
            body = {"error": "late but first", "lease_token": lease["lease_token"], "retry": False}
            assert expect(http.post(f"/items/{expired_id}/fail", json=body), 200)["status"] == "dead"
            expect(
                http.delete(f"/items/{expired_id}", params={"lease_token": lease["lease_token"]}),
                409,
                "ItemDead",
            )
        cases += 1
    return cases


@pytest.mark.parametrize("variant", VARIANTS)
def test_stale_lease_tokens_are_refused(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter
) -> None:
    size = sizes(variant)
    service = services(engine.url, name=f"stale-{engine.name}")
    queue = f"stale-{uuid4().hex[:12]}"
    started = time.monotonic()
    cases = 0
    with httpx.Client(base_url=service.base, timeout=30) as http:
        expect(http.put(f"/queues/{queue}", json={"max_attempts": 10, "lease_seconds": 30}), 201)
        for _ in range(size.stale_rounds):
            cases += stale_round(http, queue)
        counts = expect(http.get(f"/queues/{queue}"), 200)
    report.figures(
        "stale tokens",
        engine=engine.name,
        rounds=size.stale_rounds,
        cases=cases,
        seconds=time.monotonic() - started,
    )
    assert counts["ready"] == counts["leased"] == 0, counts
