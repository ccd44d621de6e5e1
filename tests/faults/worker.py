"""A worker process for the kill -9 tests: pop under a short lease, "work", complete; record it all.

Run as `python worker.py '<json config>'`. Every event is one JSON line, written with one write(2)
on an O_APPEND descriptor before the next step, so a SIGKILL at any moment leaves a log that says
exactly which leases this worker held: a `pop` line without its `done` line.

Bounded: it stops at its deadline, when the stop file appears, or after max_requests requests.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import httpx


def main() -> None:
    config: dict[str, Any] = json.loads(sys.argv[1])
    base: str = config["base"]
    queue: str = config["queue"]
    lease: int = config["lease_seconds"]
    work_min, work_max = config["work_seconds"]
    max_items: int = config["max_items"]
    deadline = time.monotonic() + config["deadline_seconds"]
    stop_path: str = config["stop_path"]
    rng = random.Random(config.get("seed"))
    fd = os.open(config["log_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(*events: dict[str, Any]) -> None:
        os.write(fd, "".join(json.dumps(e) + "\n" for e in events).encode())

    log({"e": "start", "pid": os.getpid()})
    reason = "max_requests"
    with httpx.Client(base_url=base, timeout=30) as http:
        for _ in range(config.get("max_requests", 1_000_000)):
            if time.monotonic() > deadline:
                reason = "deadline"
                break
            if os.path.exists(stop_path):
                reason = "stop"
                break
            body = {"queue": queue, "max_items": rng.randint(1, max_items), "lease_seconds": lease}
            try:
                response = http.post("/pop", json={**body, "wait_seconds": 1})
            except httpx.TransportError as exc:
                log({"e": "transport", "op": "pop", "error": repr(exc)})
                time.sleep(0.2)
                continue
            if response.status_code != 200:
                log({"e": "http", "op": "pop", "status": response.status_code, "text": response.text[:500]})
                time.sleep(0.2)
                continue
            items = response.json()["items"]
            log(
                *(
                    {
                        "e": "pop",
                        "id": it["id"],
                        "token": it["lease_token"],
                        "exp": it["lease_expires_at"],
                        "attempts": it["attempts"],
                    }
                    for it in items
                )
            )
            for item in items:
                time.sleep(rng.uniform(work_min, work_max))
                log({"e": "completing", "id": item["id"], "token": item["lease_token"]})
                try:
                    done = http.delete(f"/items/{item['id']}", params={"lease_token": item["lease_token"]})
                except httpx.TransportError as exc:
                    log({"e": "transport", "op": "complete", "id": item["id"], "error": repr(exc)})
                    continue
                log(
                    {
                        "e": "done",
                        "id": item["id"],
                        "token": item["lease_token"],
                        "status": done.status_code,
                        "text": "" if done.status_code == 204 else done.text[:500],
                    }
                )
    log({"e": "exit", "reason": reason})
    os.close(fd)


if __name__ == "__main__":
    main()
