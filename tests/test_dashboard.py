"""The dashboard at /ui, driven in headless Chromium (Debian's `chromium`, through playwright)
against a real serve with API keys: it asks for the key, lists queues with their counts, shows a
queue's items by state and its dead letters with their last error, and its buttons pause and
redrive through the API. Without Chromium the test is skipped, except under CI, where it fails.

SIMPLEQUEUE_SCREENSHOTS=DIR also saves the pages as PNGs there (docs/dashboard*.png come from it).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.test_e2e import serving

pytestmark = pytest.mark.e2e

ADMIN = "admin-key-for-the-dashboard-1"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Debian's chromium for the dashboard test")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    keys = json.dumps([{"key": ADMIN, "role": "admin"}])
    with serving(f"sqlite:///{tmp_path / 'ui.db'}", env={"SIMPLEQUEUE_API_KEYS": keys}) as base:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}) as http:
            http.put("/queues/mail", json={"max_attempts": 1})
            for n in range(3):
                http.post("/push", json={"queue": "mail", "payload": {"to": f"user{n}@example.com"}})
            http.post(
                "/push", json={"queue": "mail", "payload": {"to": "later@example.com"}, "delay_seconds": 3600}
            )
            [item] = http.post("/pop", json={"queue": "mail", "lease_seconds": 600}).json()["items"]
            failure = {"error": "smtp 550: mailbox unavailable", "lease_token": item["lease_token"]}
            http.post(f"/items/{item['id']}/fail", json=failure)
            http.post("/pop", json={"queue": "mail", "lease_seconds": 600})
            http.post("/push/batch", json={"queue": "reports", "items": [{"payload": n} for n in range(5)]})
            http.post("/queues/reports/pause")
        yield base


def shoot(page: object, name: str) -> None:
    directory = os.environ.get("SIMPLEQUEUE_SCREENSHOTS")
    if directory:
        page.screenshot(path=str(Path(directory) / name), full_page=True)  # type: ignore[attr-defined]


def test_the_dashboard_shows_queues_and_administers_them(chromium: str, service: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    api = httpx.Client(base_url=service, headers={"Authorization": f"Bearer {ADMIN}"})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        page = browser.new_page(viewport={"width": 1200, "height": 720})
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{service}/ui/")
        expect(page.locator("#banner")).to_contain_text("Unauthorized")  # no key yet

        page.fill("#key", ADMIN)
        page.click("#key-form button")
        mail = page.locator('tr[data-queue="mail"]')
        expect(mail).to_contain_text("mail")
        expect(page.locator('tr[data-queue="reports"]')).to_contain_text("paused")
        expect(page.locator("#banner")).to_be_hidden()
        shoot(page, "dashboard.png")

        mail.click()
        expect(page.locator("h1")).to_contain_text("mail")
        page.click("text=dead (1)")
        expect(page.locator("#items")).to_contain_text("smtp 550: mailbox unavailable")
        shoot(page, "dashboard-dead.png")
        page.click("#items button:has-text('Redrive')")
        expect(page.locator(".tabs")).to_contain_text("dead (0)")
        assert api.get("/queues/mail").json()["dead"] == 0

        page.click("button:has-text('Pause')")
        expect(page.locator("h1 .badge")).to_have_text("paused")
        assert api.get("/queues/mail").json()["paused"] is True

        page.click("text=leased (1)")
        expect(page.locator("#items tbody tr")).to_have_count(1)
        browser.close()
    api.close()
