"""`simplequeue serve`'s logs as an operator's pipeline reads them: every line one JSON object
(ours, uvicorn's, the access log) with time, level, logger and message; the access line with its
request fields; never a payload, a lease token or an API key."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.test_e2e import free_port, simplequeue_command

pytestmark = pytest.mark.e2e

KEY = "admin-key-for-the-log-test-1"
PAYLOAD_SECRET = "payload-that-must-not-be-logged"


def serve_and_call(tmp_path: Path, log_format: str) -> tuple[str, str]:
    """Serve, make a few calls, stop; the log and the lease token that went by."""
    port = free_port()
    env = {
        **os.environ,
        "SIMPLEQUEUE_DATABASE_URL": f"sqlite:///{tmp_path / 'logs.db'}",
        "SIMPLEQUEUE_LOG_FORMAT": log_format,
        "SIMPLEQUEUE_API_KEYS": json.dumps([{"key": KEY, "role": "admin"}]),
    }
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*simplequeue_command(), "serve", "--port", str(port)], env=env, stderr=sink, stdout=sink
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
            auth = {"Authorization": f"Bearer {KEY}", "X-Request-ID": "trace-me-42"}
            with httpx.Client(base_url=base, headers=auth, timeout=10) as http:
                assert http.post("/push", json={"queue": "q", "payload": PAYLOAD_SECRET}).status_code == 201
                item = http.post("/pop", json={"queue": "q"}).json()["items"][0]
                done = http.delete(f"/items/{item['id']}", params={"lease_token": item["lease_token"]})
                assert done.status_code == 204
            assert (
                httpx.get(f"{base}/queues", headers={"Authorization": "Bearer wrong-key"}).status_code == 401
            )
        finally:
            process.terminate()
            process.wait(timeout=15)
    return log.read_text(), item["lease_token"]


def test_json_logs_are_one_object_per_line_and_keep_secrets_out(tmp_path: Path) -> None:
    text, lease_token = serve_and_call(tmp_path, "json")
    lines: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines()]
    assert lines
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line), line
        assert "color_message" not in line
    loggers = {line["logger"] for line in lines}
    assert {"simplequeue", "simplequeue.access", "uvicorn.error"} <= loggers
    access = [line for line in lines if line["logger"] == "simplequeue.access"]
    pushed = next(line for line in access if line["route"] == "/push")
    assert pushed["request_id"] == "trace-me-42"
    assert (pushed["method"], pushed["path"], pushed["status"]) == ("POST", "/push", 201)
    assert isinstance(pushed["duration_ms"], float)
    completed = next(line for line in access if line["method"] == "DELETE")
    assert completed["route"] == "/items/{item_id}"
    refused = next(line for line in access if line["status"] == 401)
    assert refused["route"] == "/queues"
    for secret in (PAYLOAD_SECRET, lease_token, KEY, "wrong-key"):
        assert secret not in text


def test_text_logs_name_the_request(tmp_path: Path) -> None:
    text, lease_token = serve_and_call(tmp_path, "text")
    assert "simplequeue.access: request trace-me-42: POST /push 201 in" in text
    for secret in (PAYLOAD_SECRET, lease_token, KEY):
        assert secret not in text
