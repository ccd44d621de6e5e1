"""The dashboard at /ui, driven in headless Chromium (Debian's `chromium`, through playwright)
against a real serve with API keys: it asks for the key, lists queues with their counts, shows a
queue's items by state and its dead letters with their last error, and its buttons pause and
redrive through the API. Without Chromium the test is skipped, except under CI, where it fails.

SIMPLEQUEUE_SCREENSHOTS=DIR also saves the pages as PNGs there (docs/dashboard*.png come from it).
"""

from __future__ import annotations

import json
import os
import re
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
            http.post("/push/batch", json={"queue": "orders", "items": [{"payload": n} for n in range(6)]})
            for done in http.post("/pop", json={"queue": "orders", "max_items": 4}).json()["items"]:
                http.delete(f"/items/{done['id']}", params={"lease_token": done["lease_token"]})
        yield base


def shoot(page: object, name: str, *, full_page: bool = True) -> None:
    directory = os.environ.get("SIMPLEQUEUE_SCREENSHOTS")
    if directory:
        page.screenshot(path=str(Path(directory) / name), full_page=full_page)  # type: ignore[attr-defined]


# Every CSP violation the page meets, as the page itself hears of them (playwright's init scripts
# run outside the page's CSP).
WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
    (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def test_the_dashboard_shows_queues_and_administers_them(chromium: str, service: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    api = httpx.Client(base_url=service, headers={"Authorization": f"Bearer {ADMIN}"})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        page = browser.new_page(viewport={"width": 1200, "height": 720})
        page.on("dialog", lambda dialog: dialog.accept())
        console: list[str] = []  # every error the page logs: uncaught, CSP, or a load that failed
        page.on(
            "console",
            lambda m: console.append(f"{m.text} {m.location.get('url')}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: console.append(str(e)))
        page.add_init_script(WATCH_CSP)
        page.goto(f"{service}/ui/")
        expect(page.locator("#banner")).to_contain_text("Unauthorized")  # no key yet

        page.fill("#key", ADMIN)
        page.click("#key-form button")
        mail = page.locator('tr[data-queue="mail"]')
        expect(mail).to_contain_text("mail")
        expect(page.locator('tr[data-queue="reports"]')).to_contain_text("paused")
        expect(page.locator("#banner")).to_be_hidden()
        # Every queue's activity of the last hour: 15 pushed, 4 completed, 1 failed and dead.
        chart = page.locator("#activity-chart")
        expect(chart).to_have_attribute("data-pushed", "15")
        expect(chart).to_have_attribute("data-completed", "4")
        expect(chart).to_have_attribute("data-failed", "1")
        expect(chart).to_have_attribute("data-dead", "1")
        expect(chart.locator("polyline")).to_have_count(4)
        expect(chart).to_have_attribute("data-buckets", re.compile("^6[12]$"))  # an hour of minutes
        expect(page.locator(".legend")).to_contain_text("Completed 4")
        shoot(page, "dashboard.png")
        page.click("button[data-span='24h']")
        expect(chart).to_have_attribute("data-buckets", re.compile("^9[78]$"))  # 24 h of 15 minutes
        expect(chart).to_have_attribute("data-pushed", "15")
        page.click("button[data-span='1h']")
        expect(chart).to_have_attribute("data-buckets", re.compile("^6[12]$"))

        page.locator('tr[data-queue="orders"]').click()
        expect(page.locator("h1")).to_contain_text("orders")
        expect(chart).to_have_attribute("data-pushed", "6")
        expect(chart).to_have_attribute("data-completed", "4")
        page.goto(f"{service}/ui/#/")

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

        # A stale page: from mail's dead letters (their Purge button) to a queue that does not exist.
        page.click("text=dead (0)")
        page.evaluate("location.hash = '#/queues/nope/dead'")
        expect(page.locator("#not-found")).to_have_text("Queue not found")
        expect(page.locator("button")).to_have_count(1)  # the key form's, no other
        expect(page.locator("#items")).to_have_count(0)
        expect(page.locator("h1")).not_to_contain_text("mail")
        page.wait_for_timeout(5500)  # a refresh later, still nothing of mail
        expect(page.locator("#not-found")).to_be_visible()
        expect(page.locator("text=mail")).to_have_count(0)

        assert page.evaluate("window.__violations") == []
        # The only errors: the API's answers to the page without a key (401) and about the unknown
        # queue (404), each of which the page shows as it should.
        expected = ("status of 401 (Unauthorized)", f"status of 404 (Not Found) {service}/queues/nope")
        assert [m for m in console if not any(e in m for e in expected)] == [], console
        browser.close()
    api.close()


def test_the_dashboard_is_served_with_headers_against_framing_and_sniffing(service: str) -> None:
    for path in ("/ui/", "/ui/app.js", "/ui/style.css", "/ui/nothing-here"):
        answer = httpx.get(f"{service}{path}")
        assert answer.headers["Content-Security-Policy"] == "default-src 'self'; frame-ancestors 'none'", path
        assert answer.headers["X-Content-Type-Options"] == "nosniff", path
        assert answer.headers["Referrer-Policy"] == "no-referrer", path
        assert answer.headers["X-Frame-Options"] == "DENY", path
    missing = httpx.get(f"{service}/ui/nothing-here")
    assert (missing.status_code, missing.json()["error"]) == (404, "NotFound")
    # The API's own answers are not the page's: no CSP there (SQS and API clients have no use for it).
    assert "Content-Security-Policy" not in httpx.get(f"{service}/healthz").headers


def test_the_dashboard_has_no_inline_script_or_style() -> None:
    ui = Path(__file__).parent.parent / "app" / "simplequeue" / "api" / "ui"
    page = (ui / "index.html").read_text(encoding="utf-8")
    assert "<style" not in page
    assert " style=" not in page
    assert page.count("<script") == page.count('<script src="app.js"></script>') == 1
    script = (ui / "app.js").read_text(encoding="utf-8")
    assert "innerHTML" not in script
    assert '"style"' not in script  # no style attribute set from the script (CSP would refuse it)


def seed_a_busy_hour(database: Path, queues: dict[str, int]) -> dict[str, int]:
    """An hour of finished items and failures written straight into the served SQLite file (the
    service's clock cannot be moved), so that the chart has a shape: per queue, about `rate` items
    a minute pushed and completed, some failing, a few dying. Returns the totals written."""
    import math
    import sqlite3
    import uuid
    from datetime import UTC, datetime, timedelta

    def text(moment: datetime) -> str:
        return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"

    now = datetime.now(UTC)
    totals = {"pushed": 0, "completed": 0, "failed": 0, "dead": 0}
    history, live = [], []
    for q, (queue, rate) in enumerate(queues.items()):
        for minute in range(60):
            at = now - timedelta(minutes=minute)
            done = max(0, round(rate * (1 + 0.5 * math.sin(minute / 7 + q))))
            dead = 2 if (minute + 5 * q) % 17 == 0 else 0
            failed = round(done * 0.15 * (1 + math.cos(minute / 5))) if queue != "reports" else 0
            for n in range(done + dead):
                outcome = "dead" if n < dead else "completed"
                history.append((str(uuid.uuid4()), queue, outcome, text(at - timedelta(seconds=3)), text(at)))
            for _ in range(failed):
                error = json.dumps([{"at": text(at), "error": "smtp 451: try again later"}])
                live.append((str(uuid.uuid4()), queue, text(at - timedelta(seconds=5)), text(at), error))
            totals["pushed"] += done + dead
            totals["completed"] += done
            totals["dead"] += dead
            totals["failed"] += failed + dead
            totals["pushed"] += failed
    with sqlite3.connect(database) as db:
        db.executemany(
            "INSERT INTO sq_history (id, queue, outcome, attempts, created_at, finished_at, last_error)"
            " VALUES (?, ?, ?, 1, ?, ?, CASE WHEN ? = 'dead' THEN 'boom' END)",
            [(*row, row[2]) for row in history],
        )
        db.executemany(
            "INSERT INTO sq_items (id, queue, payload, created_at, status, attempts, visible_at, errors)"
            " VALUES (?, ?, '{}', ?, 'ready', 1, ?, ?)",
            live,
        )
        # The dead records' items, still held (not purged): their failure is counted too.
        db.executemany(
            "INSERT INTO sq_items (id, queue, payload, created_at, status, attempts, visible_at, died_at,"
            " errors) VALUES (?, ?, '{}', ?, 'dead', 1, ?, ?, ?)",
            [
                (i, queue, created, finished, finished, json.dumps([{"at": finished, "error": "boom"}]))
                for i, queue, outcome, created, finished in history
                if outcome == "dead"
            ],
        )
    return totals


def test_screenshots_of_a_busy_hour(chromium: str, tmp_path: Path) -> None:
    """The chart with an hour of history behind it, as the docs show it (docs/images/dashboard-*.png
    with SIMPLEQUEUE_SCREENSHOTS=docs)."""
    from playwright.sync_api import expect, sync_playwright

    database = tmp_path / "busy.db"
    with serving(f"sqlite:///{database}") as base:
        with httpx.Client(base_url=base) as http:
            for queue in ("emails", "orders", "reports"):
                http.put(f"/queues/{queue}", json={"max_attempts": 3})
            http.post(
                "/push/batch", json={"queue": "orders", "items": [{"payload": {"n": n}} for n in range(40)]}
            )
        totals = seed_a_busy_hour(database, {"emails": 12, "orders": 25, "reports": 6})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            page = browser.new_page(viewport={"width": 1200, "height": 720})
            page.goto(f"{base}/ui/")
            chart = page.locator("#activity-chart")
            expect(chart).to_have_attribute("data-pushed", str(totals["pushed"] + 40))
            expect(chart).to_have_attribute("data-completed", str(totals["completed"]))
            expect(chart).to_have_attribute("data-failed", str(totals["failed"]))
            expect(chart).to_have_attribute("data-dead", str(totals["dead"]))
            shoot(page, "images/dashboard-queues.png")
            page.locator('tr[data-queue="emails"]').click()
            expect(page.locator("h1")).to_contain_text("emails")
            expect(chart.locator("polyline")).to_have_count(4)
            shoot(page, "images/dashboard-chart.png", full_page=False)  # the chart, not every item
            browser.close()
