"""The README's front-page examples, run as written against a live `simplequeue serve`, and doing
what they say: boto3's message is an item `POST /pop` gets (SQLite), and the outbox's push, made in
the application's own transaction beside its order row, is an item of the service (PostgreSQL).
The site's home, docs/index.md, shows the same. They are not `<!-- run -->` blocks of
tests/test_docs.py: mypy has no types for boto3, and the outbox's needs the service's database as
the application's."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.engines import postgres_database
from tests.test_e2e import serving

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PYTHON = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def example(containing: str, page: Path = README) -> str:
    [found] = [block for block in PYTHON.findall(page.read_text(encoding="utf-8")) if containing in block]
    return found


def run(code: str, base: str, **env: str) -> None:
    script = code.replace("http://127.0.0.1:8000", base)
    ran = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]


def pop(base: str, queue: str) -> list[dict[str, Any]]:
    answer = httpx.post(f"{base}/pop", json={"queue": queue, "max_items": 10}, timeout=10)
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_the_boto3_example_sends_a_message_that_pop_gets(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path / 'readme.db'}") as base:
        run(example("boto3.client("), base)
        assert [item["payload"] for item in pop(base, "emails")] == ['{"to": "ada@example.com"}']


def test_the_outbox_example_pushes_inside_the_applications_transaction() -> None:
    with postgres_database() as url, serving(url) as base:
        asyncio.run(fetch(url, "CREATE TABLE orders (id bigint PRIMARY KEY, total numeric)"))
        run(example("outbox.push("), base, DATABASE_URL=url)
        assert [item["payload"] for item in pop(base, "emails")] == [{"order": 42}]
        assert asyncio.run(fetch(url, "SELECT total FROM orders WHERE id = 42")) == Decimal("99.5")


async def fetch(url: str, sql: str) -> Any:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def test_the_sites_home_shows_the_same_examples() -> None:
    for containing in ("boto3.client(", "outbox.push("):
        assert example(containing, ROOT / "docs" / "index.md") == example(containing)
