"""The dashboard's weight and how long a queue of 10,000 items takes to render, in headless
Chromium against a real serve (SQLite by default; --postgres for a throwaway PostgreSQL database).

    .venv/bin/python -m bench.dashboard [--items 10000] [--runs 5] [--postgres]

Prints the bytes of the page's files (as served), then per page (the queue list, the queue's
ready tab) the median and range over the runs of: the time from navigation start until the page
shows its rows and its chart (cold: a new browser context, nothing cached; warm: a reload), and
the bytes of API answers it read. Figures, no thresholds: only this machine's numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from tests.test_e2e import serving

FILES = ("index.html", "app.js", "style.css", "favicon.svg")
POSTGRES_URL = os.environ.get(
    "SIMPLEQUEUE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)

# Runs in the page before its own script: notes when the page first holds `selector` and a chart.
WATCH = """
window.__shown = null;
new MutationObserver((_, observer) => {
  if (document.querySelector(%r) && document.querySelector("#activity-chart")) {
    window.__shown = performance.now();
    observer.disconnect();
  }
}).observe(document, { childList: true, subtree: true });
"""
API_BYTES = """performance.getEntriesByType("resource")
  .filter((e) => !/\\/ui\\//.test(e.name)).reduce((n, e) => n + e.encodedBodySize, 0)"""


@contextmanager
def postgres() -> Iterator[str]:
    import asyncpg

    name = f"sq_bench_dashboard_{secrets.token_hex(3)}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield urlunsplit(urlsplit(POSTGRES_URL)._replace(path="/" + name))
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def seed(base: str, items: int) -> None:
    with httpx.Client(base_url=base, timeout=60) as http:
        for start in range(0, items, 1000):
            batch = [
                {"payload": {"n": n, "to": f"user{n}@example.com"}}
                for n in range(start, min(items, start + 1000))
            ]
            http.post("/push/batch", json={"queue": "bench", "items": batch}).raise_for_status()


def page_weight(base: str) -> dict[str, int]:
    return {name: len(httpx.get(f"{base}/ui/{name}").content) for name in FILES}


def measure(browser: Any, url: str, selector: str, runs: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"cold ms": [], "warm ms": [], "API KB": []}
    for _ in range(runs):
        context = browser.new_context(viewport={"width": 1200, "height": 720})
        page = context.new_page()
        page.add_init_script(WATCH % selector)
        for kind in ("cold ms", "warm ms"):
            if kind == "cold ms":
                page.goto(url)
            else:
                page.reload()
            found[kind].append(shown(page))
            if kind == "cold ms":
                found["API KB"].append(page.evaluate(API_BYTES) / 1024)
        context.close()
    return found


def shown(page: Any) -> float:
    """When the page showed its rows, in ms from navigation start (waited for here by polling: the
    page's CSP refuses the eval that wait_for_function's string would need)."""
    for _ in range(3000):
        at = page.evaluate("window.__shown")
        if at is not None:
            return float(at)
        page.wait_for_timeout(10)
    raise TimeoutError("the page never showed its rows")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f}  ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--postgres", action="store_true", help="a throwaway database at " + POSTGRES_URL)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres() if args.postgres else sqlite(tmp) as url:
        report(url, args)


def report(url: str, args: argparse.Namespace) -> None:
    from playwright.sync_api import sync_playwright

    with serving(url) as base, sync_playwright() as playwright:
        seed(base, args.items)
        weight = page_weight(base)
        print(f"engine: {'postgresql' if args.postgres else 'sqlite'}; {args.items} ready items in a queue")
        files = ", ".join(f"{k} {v:,} B" for k, v in weight.items())
        print(f"page files: {files} = {sum(weight.values()):,} B")
        browser = playwright.chromium.launch(executable_path=args.chromium, headless=True)
        pages = {
            "queue list": (f"{base}/ui/", "#queues tbody tr"),
            "queue (ready tab)": (f"{base}/ui/#/queues/bench", "#items tbody tr"),
        }
        print(f"median (min-max) of {args.runs} runs, from navigation start to rows and chart shown:")
        for name, (address, selector) in pages.items():
            for kind, values in measure(browser, address, selector, args.runs).items():
                print(f"  {name:18} {kind:8} {spread(values)}")
        browser.close()


@contextmanager
def sqlite(tmp: str) -> Iterator[str]:
    yield f"sqlite:///{Path(tmp) / 'dashboard.db'}"


if __name__ == "__main__":
    main()
