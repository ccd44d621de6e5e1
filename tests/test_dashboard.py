"""The dashboard at /ui, driven in headless Chromium (Debian's `chromium`, through playwright)
against a real serve with API keys, on SQLite and PostgreSQL: it asks for the key, lists queues
with their counts and charts, shows a queue's items by state (paged by the API's cursors), its
history, an item with its payload and errors, the queue's settings (edited through PUT
/queues/{name}, whose 422 it shows), and its buttons pause, redrive, delete items (one or
selected) and the queue through the API. Keys that may not administer see no button they cannot
use. Schedules are listed with their next run, and paused, resumed, run and deleted from their
page. Every page is also driven by the keyboard, and no page logs an error or meets a CSP
violation. Without Chromium the tests are skipped, except under CI, where they fail.

SIMPLEQUEUE_SCREENSHOTS=docs saves the pages the docs show as PNGs under docs/images/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.engines import postgres_database
from tests.test_e2e import serving

pytestmark = pytest.mark.e2e

ADMIN = "admin-key-for-the-dashboard-1"
PRODUCER = "producer-key-for-the-dashboard"
CONSUMER = "consumer-key-for-the-dashboard"
MAIL_ADMIN = "admin-key-of-mail-only-for-the-dashboard"
KEYS = [
    {"key": ADMIN, "role": "admin"},
    {"key": PRODUCER, "role": "producer"},
    {"key": CONSUMER, "role": "consumer"},
    {"key": MAIL_ADMIN, "role": "admin", "queues": ["mail"]},
]


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Debian's chromium for the dashboard test")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of each engine the dashboard is tried on (PostgreSQL: skipped with its
    reason when it does not answer, failed under CI)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ui.db'}"
    else:
        with postgres_database() as url:
            yield url


@pytest.fixture
def served(database: str) -> Iterator[str]:
    with serving(database, env={"SIMPLEQUEUE_API_KEYS": json.dumps(KEYS)}) as base:
        yield base


@pytest.fixture
def api(served: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as http:
        yield http


@pytest.fixture
def service(served: str, api: httpx.Client) -> str:
    """mail: 3 ready, 1 delayed, 1 dead (its error recorded), 1 leased; reports: 5 ready, paused;
    orders: 2 ready and 4 completed."""
    http = api
    http.put("/queues/mail", json={"max_attempts": 1})
    for n in range(3):
        http.post("/push", json={"queue": "mail", "payload": {"to": f"user{n}@example.com"}})
    http.post("/push", json={"queue": "mail", "payload": {"to": "later@example.com"}, "delay_seconds": 3600})
    [item] = http.post("/pop", json={"queue": "mail", "lease_seconds": 600}).json()["items"]
    failure = {"error": "smtp 550: mailbox unavailable", "lease_token": item["lease_token"]}
    http.post(f"/items/{item['id']}/fail", json=failure)
    http.post("/pop", json={"queue": "mail", "lease_seconds": 600})
    http.post("/push/batch", json={"queue": "reports", "items": [{"payload": n} for n in range(5)]})
    http.post("/queues/reports/pause")
    http.post("/push/batch", json={"queue": "orders", "items": [{"payload": n} for n in range(6)]})
    for done in http.post("/pop", json={"queue": "orders", "max_items": 4}).json()["items"]:
        http.delete(f"/items/{done['id']}", params={"lease_token": done["lease_token"]})
    return served


def shoot(page: Any, name: str, *, full_page: bool = True) -> None:
    directory = os.environ.get("SIMPLEQUEUE_SCREENSHOTS")
    if directory:
        page.screenshot(path=str(Path(directory) / name), full_page=full_page)


# Every CSP violation the page meets, as the page itself hears of them (playwright's init scripts
# run outside the page's CSP).
WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
    (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


@dataclass
class Tab:
    """A browser tab on the dashboard, with what it logged and the confirmations it was asked."""

    page: Any
    console: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)

    def clean(self, *expected: str) -> None:
        """No CSP violation, and no error logged but the API's answers named in `expected` (a
        401, 403 or 404 the page shows as it should)."""
        assert self.page.evaluate("window.__violations") == []
        assert [m for m in self.console if not any(e in m for e in expected)] == [], self.console


@contextmanager
def browsing(chromium: str, base: str, key: str | None = ADMIN, *, width: int = 1200) -> Iterator[Tab]:
    """A tab of headless Chromium on `base`'s dashboard, with `key` in its sessionStorage. Every
    confirmation is accepted and recorded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        context = browser.new_context(
            viewport={"width": width, "height": 720}, permissions=["clipboard-read", "clipboard-write"]
        )
        page = context.new_page()
        tab = Tab(page)
        page.on("dialog", lambda d: (tab.asked.append(d.message), d.accept()))
        page.on(
            "console",
            lambda m: tab.console.append(f"{m.text} {m.location.get('url')}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: tab.console.append(str(e)))
        page.add_init_script(WATCH_CSP)
        if key is not None:
            page.add_init_script(f"sessionStorage.setItem('simplequeue-key', {json.dumps(key)})")
        try:
            yield tab
        finally:
            browser.close()


def test_the_dashboard_shows_queues_and_administers_them(chromium: str, service: str) -> None:
    from playwright.sync_api import expect

    api = httpx.Client(base_url=service, headers={"Authorization": f"Bearer {ADMIN}"})
    with browsing(chromium, service, key=None) as tab:
        page = tab.page
        page.goto(f"{service}/ui/")
        expect(page.locator("#banner")).to_contain_text("Unauthorized")  # no key yet
        expect(page.locator("#banner .code")).to_have_text("Unauthorized")

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
        # Ready items say since when they are poppable (not "—"); ids are one line with a copy button.
        expect(page.locator("#items tbody tr")).to_have_count(1)
        expect(page.locator("#items tbody tr").first.locator("time").nth(1)).to_have_text(
            re.compile(r"^(now|\d+ s ago)$")
        )
        first_id = page.locator("#items tbody tr").first.get_attribute("data-item")
        assert first_id is not None
        id_box = page.locator(f'tr[data-item="{first_id}"] code.id').bounding_box()
        assert id_box is not None
        assert id_box["height"] < 20  # one line
        page.locator(f'tr[data-item="{first_id}"] button.copy').click()
        expect(page.locator(f'tr[data-item="{first_id}"] button.copy')).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == first_id
        created = page.locator(f'tr[data-item="{first_id}"] time').first
        expect(created).to_have_text(re.compile(r"^(now|\d+ s ago)$"))
        assert "(20" in (created.get_attribute("title") or "")  # the absolute time on hover

        page.click("text=dead (1)")
        expect(page.locator("#items")).to_contain_text("smtp 550: mailbox unavailable")
        page.click("#items button:has-text('Redrive')")
        expect(page.locator(".tabs")).to_contain_text("dead (0)")
        assert api.get("/queues/mail").json()["dead"] == 0

        page.click("button:has-text('Pause')")
        expect(page.locator("h1 .badge")).to_have_text("paused")
        assert api.get("/queues/mail").json()["paused"] is True
        page.click("#resume")
        expect(page.locator("h1 .badge")).to_have_text("live")
        assert api.get("/queues/mail").json()["paused"] is False

        page.click("text=leased (1)")
        expect(page.locator("#items tbody tr")).to_have_count(1)
        expect(page.locator("#items tbody tr")).to_contain_text(re.compile("in [89] min"))  # the lease's end

        # A stale page: from mail's dead letters (their Purge button) to a queue that does not exist.
        page.click("text=dead (0)")
        page.evaluate("location.hash = '#/queues/nope/dead'")
        expect(page.locator("#not-found")).to_have_text("Queue not found")
        expect(page.locator("main button")).to_have_count(0)
        expect(page.locator("#items")).to_have_count(0)
        expect(page.locator("h1")).not_to_contain_text("mail")
        page.wait_for_timeout(5500)  # a refresh later, still nothing of mail
        expect(page.locator("#not-found")).to_be_visible()
        expect(page.locator("main >> text=mail")).to_have_count(0)

        tab.clean("status of 401 (Unauthorized)", f"status of 404 (Not Found) {service}/queues/nope")
    api.close()


def test_an_item_its_payload_errors_and_actions(chromium: str, service: str, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    big = {"rows": [{"n": n, "text": "lorem ipsum " * 4} for n in range(200)]}  # ~15 KB of JSON
    pushed = api.post(
        "/push",
        json={
            "queue": "big",
            "payload": big,
            "priority": 7,
            "group": "g-1",
            "fairness_key": "tenant-9",
            "dedup_key": "report-42",
        },
    ).json()
    api.put("/queues/big", json={"max_attempts": 2})
    for n in (1, 2):
        [leased] = api.post("/pop", json={"queue": "big"}).json()["items"]
        error = {
            "error": f"timeout #{n} talking to db",
            "lease_token": leased["lease_token"],
            "retry_after_seconds": 0,
        }
        api.post(f"/items/{leased['id']}/fail", json=error)
    item_id = pushed["id"]
    with browsing(chromium, service) as tab:
        page = tab.page
        # The search box takes an id and opens the item.
        page.goto(f"{service}/ui/")
        expect(page.locator("#queues")).to_be_visible()
        page.fill("#search", item_id.upper())
        page.press("#search", "Enter")
        expect(page).to_have_url(re.compile(f"#/items/{item_id}$"))
        expect(page.locator("h1")).to_contain_text(item_id)
        expect(page.locator("h1 .badge")).to_have_text("dead")
        facts = page.locator("#facts")
        expect(facts.locator('[data-fact="Queue"]')).to_have_text("big")
        expect(facts.locator('[data-fact="Attempts"]')).to_have_text("2 of 2")
        expect(facts.locator('[data-fact="Priority"]')).to_have_text("7")
        expect(facts.locator('[data-fact="Group"]')).to_have_text("g-1")
        expect(facts.locator('[data-fact="Fairness key"]')).to_have_text("tenant-9")
        expect(facts.locator('[data-fact="Dedup key"]')).to_have_text("report-42")
        expect(facts.locator('[data-fact="Died"] time')).to_have_text(re.compile(r"^(now|\d+ s ago)$"))
        expect(facts.locator('[data-fact="First popped"] time')).to_be_visible()
        # Every error with its time, in order.
        expect(page.locator("#errors li")).to_have_count(2)
        expect(page.locator("#errors li").nth(0)).to_contain_text("timeout #1 talking to db")
        expect(page.locator("#errors li").nth(1)).to_contain_text("timeout #2 talking to db")
        expect(page.locator("#errors li time")).to_have_count(2)
        # The payload: pretty, cut at 4,000 characters until asked, and collapsible.
        payload = page.locator("#payload")
        assert len(payload.inner_text()) < 4100
        page.click("#show-all")
        expect(page.locator("#show-all")).to_have_count(0)
        assert json.loads(payload.inner_text()) == big
        page.click("#payload-details summary")
        expect(payload).to_be_hidden()
        page.click("#payload-details summary")
        expect(payload).to_be_visible()

        page.click("#item-redrive")
        expect(page.locator("h1 .badge")).to_have_text("ready")
        assert tab.asked[-1].startswith(f"Make item {item_id} ready again")
        assert api.get(f"/items/{item_id}").json()["status"] == "ready"
        expect(facts.locator('[data-fact="Visible at"]')).to_have_text(
            re.compile(r"^(now|\d+ s ago|in \d+ s)$")
        )
        # A leased item shows which lease holds it, and an admin may end that lease.
        [held] = api.post("/pop", json={"queue": "big", "lease_seconds": 600}).json()["items"]
        page.reload()
        expect(page.locator("h1 .badge")).to_have_text("leased")
        expect(facts.locator('[data-fact="Lease"]')).to_have_text(held["lease_token"][:8] + "…")
        page.click("#item-release")
        expect(page.locator("h1 .badge")).to_have_text("ready")
        assert tab.asked[-1].startswith(f"End the lease on item {item_id} now?")
        expect(facts.locator('[data-fact="Lease"]')).to_have_text("—")
        # Deleting a live item finishes it (its history says completed) and shows the history.
        page.click("#item-delete")
        expect(page).to_have_url(re.compile("#/queues/big/history$"))
        # Its history: completed now, dead before it was redriven, newest first.
        expect(page.locator("#items tbody tr").first).to_have_attribute("data-item", item_id)
        expect(page.locator("#items tbody tr").first).to_contain_text("completed")
        expect(page.locator("#items tbody tr").nth(1)).to_contain_text("dead")
        assert api.get(f"/items/{item_id}").status_code == 404

        # An item that is not there: a not-found page, nothing of the one before.
        page.fill("#search", item_id)
        page.press("#search", "Enter")
        expect(page.locator("#not-found")).to_have_text("Item not found")
        expect(page.locator("main button")).to_have_count(0)
        expect(page.locator("#items")).to_have_count(0)
        page.evaluate("location.hash = '#/items/not-an-id'")
        expect(page.locator("#not-found")).to_have_text("Item not found")
        # Text that is no id is a dedup key or a group of the queue on screen: with none on
        # screen, the banner says so, with its code.
        page.fill("#search", "report-42")
        page.press("#search", "Enter")
        expect(page.locator("#banner .code")).to_have_text("NoQueue")
        tab.clean(f"status of 404 (Not Found) {service}/items/{item_id}")


def test_the_search_box_finds_a_dedup_keys_item_and_a_groups_items(
    chromium: str, served: str, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    # shop: an ordered group "cart/7" of 55 items (its head leased), an item keyed "welcome?ann", and
    # an item whose dedup key is "cart/7" too. Keys may hold any character: '/' and '?' here.
    items = [{"payload": f"line {n}", "group": "cart/7"} for n in range(55)]
    assert api.post("/push/batch", json={"queue": "shop", "items": items}).status_code == 201
    keyed = api.post("/push", json={"queue": "shop", "payload": "hello", "dedup_key": "welcome?ann"}).json()
    both = api.post("/push", json={"queue": "shop", "payload": "both", "dedup_key": "cart/7"}).json()
    [head] = api.post("/pop", json={"queue": "shop", "lease_seconds": 600}).json()["items"]
    assert head["payload"] == "line 0"
    with browsing(chromium, served) as tab:
        page = tab.page
        # On the list of queues, no queue is on screen: only an id can be found.
        page.goto(f"{served}/ui/")
        expect(page.locator("#queues")).to_be_visible()
        page.fill("#search", "cart/7")
        page.press("#search", "Enter")
        expect(page.locator("#banner .code")).to_have_text("NoQueue")

        # On a queue's page, a dedup key whose item is in no group with that name opens the item.
        page.goto(f"{served}/ui/#/queues/shop")
        expect(page.locator("#items")).to_be_visible()
        page.fill("#search", "welcome?ann")
        page.press("#search", "Enter")
        expect(page).to_have_url(re.compile(f"#/items/{keyed['id']}$"))
        expect(page.locator('#facts [data-fact="Dedup key"]')).to_have_text("welcome?ann")
        expect(page.locator("#banner")).to_be_hidden()

        # On an item's page, the search is in the item's queue. "cart/7" is a group and a dedup key:
        # the results show the item holding the key and the group's items in group order, paged.
        page.fill("#search", "cart/7")
        page.press("#search", "Enter")
        expect(page).to_have_url(re.compile("#/queues/shop/find/cart%2F7$"))
        expect(page.locator("#found-title code")).to_have_text("cart/7")
        expect(page.locator("#found-dedup a.id-link")).to_have_text(both["id"])
        rows = page.locator("#found-group #items tbody tr")
        expect(rows).to_have_count(50)
        expect(rows.first).to_have_attribute("data-item", head["id"])
        expect(rows.first.locator(".badge")).to_have_text("leased")
        expect(rows.nth(1)).to_contain_text('"line 1"')
        expect(rows.nth(49)).to_contain_text('"line 49"')
        expect(page.locator("#found-group input[type=checkbox]")).to_have_count(0)  # nothing to act on here
        page.click("#page-next")
        expect(page.locator("#page-number")).to_have_text("Page 2")
        expect(rows).to_have_count(5)
        expect(rows.first).to_contain_text('"line 50"')
        expect(page.locator("#page-next")).to_be_disabled()
        page.click("#page-previous")
        expect(rows).to_have_count(50)
        expect(rows.first).to_have_attribute("data-item", head["id"])
        # An item of the results opens as any item does.
        rows.nth(1).locator("a.id-link").click()
        expect(page.locator('#facts [data-fact="Group"]')).to_have_text("cart/7")

        # Neither a dedup key nor a group: the results say so, and nothing of the page before stays.
        page.fill("#search", "nobody")
        page.press("#search", "Enter")
        expect(page).to_have_url(re.compile("#/queues/shop/find/nobody$"))
        expect(page.locator("#no-dedup")).to_be_visible()
        expect(page.locator("#no-group")).to_be_visible()
        expect(page.locator("#items")).to_have_count(0)
        # An id still opens its item.
        page.fill("#search", keyed["id"])
        page.press("#search", "Enter")
        expect(page).to_have_url(re.compile(f"#/items/{keyed['id']}$"))
        # A key the API refuses (over 128 characters) is told in the banner with its code.
        page.goto(f"{served}/ui/#/queues/shop")
        expect(page.locator("#items")).to_be_visible()
        page.fill("#search", "x" * 129)
        page.press("#search", "Enter")
        expect(page.locator("#banner .code")).to_have_text("ValidationError")
        tab.clean(
            f"status of 404 (Not Found) {served}/queues/shop/items/by-dedup-key",
            f"status of 422 (Unprocessable Entity) {served}/queues/shop/items/by-",
        )


def test_the_queues_come_a_page_at_a_time(chromium: str, served: str, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    names = [f"q{n:03}" for n in range(52)]  # a page holds 50
    for name in names:
        api.post("/push", json={"queue": name, "payload": 1})
    with browsing(chromium, served) as tab:
        page = tab.page
        page.goto(f"{served}/ui/#/")
        rows = page.locator("#queues tbody tr")
        expect(rows).to_have_count(50)
        expect(rows.first).to_have_attribute("data-queue", "q000")
        expect(page.locator("#queue-count")).to_contain_text("50 queues on this page")
        expect(page.locator("#page-previous")).to_be_disabled()
        page.click("#page-next")
        expect(page.locator("#page-number")).to_have_text("Page 2")
        expect(rows).to_have_count(2)
        expect(rows.last).to_have_attribute("data-queue", "q051")
        expect(page.locator("#page-next")).to_be_disabled()
        page.click("#page-previous")
        expect(rows).to_have_count(50)
        tab.clean()


def test_tabs_page_by_cursor_and_act_on_selected_items(chromium: str, served: str, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    api.put("/queues/jobs", json={"max_attempts": 3})
    ids = api.post(
        "/push/batch", json={"queue": "jobs", "items": [{"payload": {"n": n}} for n in range(120)]}
    )
    ready = ids.json()["ids"]
    api.post("/push", json={"queue": "jobs", "payload": "later", "delay_seconds": 7200})
    popped = api.post("/pop", json={"queue": "jobs", "max_items": 6, "lease_seconds": 900}).json()["items"]
    a, b, c, d = popped[:4]  # the last two stay leased
    api.post(
        f"/items/{a['id']}/fail",
        json={
            "error": "rate limited by upstream",
            "lease_token": a["lease_token"],
            "retry_after_seconds": 600,
        },
    )
    for dead in (b, c):
        api.post(
            f"/items/{dead['id']}/fail",
            json={"error": "bad input", "lease_token": dead["lease_token"], "retry": False},
        )
    api.delete(f"/items/{d['id']}", params={"lease_token": d["lease_token"]})  # completed
    with browsing(chromium, served) as tab:
        page = tab.page
        page.goto(f"{served}/ui/#/queues/jobs")
        rows = page.locator("#items tbody tr")
        expect(rows).to_have_count(50)
        expect(page.locator("#page-previous")).to_be_disabled()
        first_page = rows.first.get_attribute("data-item")
        page.click("#page-next")
        expect(page.locator("#page-number")).to_have_text("Page 2")
        expect(rows.first).not_to_have_attribute("data-item", first_page or "")
        page.click("#page-next")
        expect(page.locator("#page-number")).to_have_text("Page 3")
        expect(rows).to_have_count(120 - 6 - 100)
        expect(page.locator("#page-next")).to_be_disabled()
        page.click("#page-previous")
        expect(page.locator("#page-number")).to_have_text("Page 2")
        expect(rows).to_have_count(50)
        page.click("#page-previous")
        expect(rows.first).to_have_attribute("data-item", first_page or "")
        assert first_page == ready[6]  # oldest created first, after the six popped

        # Delete selected: the confirmation says how many.
        for item in ready[6:9]:
            page.check(f'tr[data-item="{item}"] input.select')
        expect(page.locator("#selected-count")).to_have_text("3 selected")
        page.click("#delete-selected")
        assert tab.asked[-1].startswith("Delete the 3 selected items of jobs?")
        expect(page.locator('a[data-tab="ready"]')).to_have_text("ready (111)")
        assert api.get("/queues/jobs").json()["history"]["completed"] == 4

        page.click('a[data-tab="delayed"]')
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(re.compile("in 1 h"))
        page.click('a[data-tab="retrying"]')
        expect(rows.first).to_contain_text("rate limited by upstream")
        expect(rows.first).to_contain_text(re.compile("in [89] min"))
        page.click('a[data-tab="leased"]')
        expect(rows).to_have_count(2)
        expect(rows.first).to_contain_text(re.compile("in 1[34] min"))

        page.click('a[data-tab="dead"]')
        # The leased tab also shows 2 rows: wait for the dead tab's own table before ticking, or the
        # tick may land on the page it replaces.
        expect(page.locator('#items[data-tab="dead"]')).to_be_visible()
        expect(rows).to_have_count(2)
        page.check("#select-all")
        expect(page.locator("#selected-count")).to_have_text("2 selected")
        expect(page.locator("#redrive-selected")).to_be_enabled()
        page.click("#redrive-selected")
        assert tab.asked[-1].startswith("Make the 2 selected dead items of jobs ready again?")
        expect(page.locator("#empty")).to_have_text("No dead items.")
        assert api.get("/queues/jobs").json()["dead"] == 0

        # Redrive all dead, then purge the dead (their history records stay).
        for n in range(2):
            [leased] = api.post("/pop", json={"queue": "jobs", "lease_seconds": 60}).json()["items"]
            api.post(
                f"/items/{leased['id']}/fail",
                json={"error": f"bad {n}", "lease_token": leased["lease_token"], "retry": False},
            )
        page.reload()
        expect(rows).to_have_count(2)
        page.click("#redrive-all")
        assert tab.asked[-1] == "Make every dead item of jobs (2) ready again?"
        expect(page.locator("#empty")).to_have_text("No dead items.")
        [leased] = api.post("/pop", json={"queue": "jobs", "lease_seconds": 60}).json()["items"]
        api.post(
            f"/items/{leased['id']}/fail",
            json={"error": "bad", "lease_token": leased["lease_token"], "retry": False},
        )
        page.reload()
        expect(rows).to_have_count(1)
        page.click("#purge-dead")
        assert tab.asked[-1] == "Delete every dead item of jobs (1)? This cannot be undone."
        expect(page.locator("#empty")).to_have_text("No dead items.")
        assert api.get("/queues/jobs").json()["dead"] == 0

        # History: completed and dead items, newest first.
        page.click('a[data-tab="history"]')
        expect(rows).to_have_count(9)  # 4 completed, 5 dead (a record is written when an item dies)
        expect(rows.first).to_contain_text("dead")  # the one purged last
        newest = [r["id"] for r in api.get("/queues/jobs/history").json()["items"]]
        assert [rows.nth(n).get_attribute("data-item") for n in range(9)] == newest
        expect(page.locator("#items input")).to_have_count(0)  # nothing to select in history
        tab.clean()


def test_settings_are_edited_and_the_queue_deleted(chromium: str, service: str, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    with browsing(chromium, service) as tab:
        page = tab.page
        page.goto(f"{service}/ui/#/queues/mail/settings")
        expect(page.locator("#set-max_attempts")).to_have_value("1")
        factor = api.get("/queues/mail").json()["settings"]["backoff"]["factor"]
        expect(page.locator("#set-backoff\\.factor")).to_have_value(f"{factor:g}")
        expect(page.locator("#set-dedup_window_from")).to_have_value("finish")
        page.fill("#set-max_attempts", "7")
        page.fill("#set-retention_seconds", "3600")
        page.select_option("#set-dedup_window_from", "send")
        expect(page.locator("#set-dead_letter_queue")).to_have_value("")  # none
        api.put("/queues/mail-dlq", json={}).raise_for_status()
        page.fill("#set-dead_letter_queue", "mail-dlq")
        page.fill("#set-message_retention_seconds", "86400")
        page.fill("#set-max_leased", "4")
        page.fill("#set-rate_per_second", "2.5")
        page.fill("#set-priority_aging_seconds", "300")
        page.click("#save-settings")
        expect(page.locator("#settings-message")).to_contain_text("Saved")
        settings = api.get("/queues/mail").json()["settings"]
        assert (settings["max_attempts"], settings["retention_seconds"]) == (7, 3600)
        assert (settings["max_leased"], settings["rate_per_second"], settings["rate_burst"]) == (4, 2.5, None)
        assert settings["dedup_window_from"] == "send", "a save keeps every setting the form shows"
        assert (settings["dead_letter_queue"], settings["message_retention_seconds"]) == ("mail-dlq", 86400)
        assert settings["priority_aging_seconds"] == 300
        page.reload()
        expect(page.locator("#set-priority_aging_seconds")).to_have_value("300")
        expect(page.locator("#set-dedup_window_from")).to_have_value("send")
        expect(page.locator("#set-dead_letter_queue")).to_have_value("mail-dlq")
        # A dead-letter queue that does not exist is refused next to its field; emptied, it is none.
        page.fill("#set-dead_letter_queue", "nowhere")
        page.click("#save-settings")
        expect(page.locator('.field-error[data-field="dead_letter_queue"]')).to_contain_text("no queue named")
        page.fill("#set-dead_letter_queue", "")
        page.fill("#set-message_retention_seconds", "")
        expect(page.locator("#set-max_leased")).to_have_value("4")  # a save keeps the limits it shows
        page.fill("#set-max_leased", "")
        page.fill("#set-rate_per_second", "")
        page.click("#save-settings")
        expect(page.locator("#settings-message")).to_contain_text("Saved")
        settings = api.get("/queues/mail").json()["settings"]
        assert (settings["dead_letter_queue"], settings["message_retention_seconds"]) == (None, None)
        page.click('a[data-tab="history"]')
        expect(page.locator("#items, #empty").first).to_be_visible()
        expect(page.locator("#no-history")).to_have_count(0)
        # A queue that keeps no history says so where its history would be.
        api.put("/queues/mail", json={**settings, "retention_seconds": 0}).raise_for_status()
        page.reload()
        expect(page.locator("#no-history")).to_contain_text("keeps no history")
        api.put("/queues/mail", json=settings).raise_for_status()
        page.goto(f"{service}/ui/#/queues/mail/settings")
        expect(page.locator("#set-max_attempts")).to_have_value("7")
        # What the API refuses, it says why, in the form and next to the field.
        page.fill("#set-max_attempts", "0")
        page.click("#save-settings")
        expect(page.locator("#settings-message")).to_contain_text("ValidationError")
        expect(page.locator("#settings-message")).to_contain_text("max_attempts")
        expect(page.locator('.field-error[data-field="max_attempts"]')).to_contain_text(
            "greater than or equal to 1"
        )
        expect(page.locator("#set-max_attempts")).to_have_attribute("aria-invalid", "true")
        assert api.get("/queues/mail").json()["settings"]["max_attempts"] == 7

        # Deleting: the name typed, then 409 QueueInUse (an item is leased) with a force option.
        page.click("#delete-queue")
        dialog = page.locator("#delete-dialog")
        expect(dialog).to_be_visible()
        expect(page.locator("#confirm-delete")).to_be_disabled()
        page.fill("#confirm-name", "mai")
        expect(page.locator("#confirm-delete")).to_be_disabled()
        page.fill("#confirm-name", "mail")
        page.click("#confirm-delete")
        expect(page.locator("#delete-problem")).to_contain_text("QueueInUse")
        assert api.get("/queues/mail").status_code == 200
        page.click("#force-delete")
        expect(page.locator("h1")).to_have_text("Queues")
        expect(page.locator('tr[data-queue="mail"]')).to_have_count(0)
        assert api.get("/queues/mail").status_code == 404
        # A queue without leases goes at the first confirmation.
        page.goto(f"{service}/ui/#/queues/orders/settings")
        page.click("#delete-queue")
        page.fill("#confirm-name", "orders")
        page.press("#confirm-name", "Enter")
        expect(page.locator('tr[data-queue="reports"]')).to_be_visible()
        expect(page.locator('tr[data-queue="orders"]')).to_have_count(0)
        tab.clean(
            *(
                f"status of {e} {service}/queues/mail"
                for e in ("422 (Unprocessable Entity)", "409 (Conflict)")
            )
        )


def test_keys_that_may_not_administer_see_no_button_they_cannot_use(
    chromium: str, service: str, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    dead = api.get("/queues/mail/dead").json()["items"][0]["id"]
    forbidden = "status of 403 (Forbidden)"
    with browsing(chromium, service, key=PRODUCER) as tab:
        page = tab.page
        page.goto(f"{service}/ui/")
        expect(page.locator('tr[data-queue="mail"]')).to_be_visible()
        expect(page.locator("#activity-chart")).to_be_visible()
        page.click('a[href="#/queues/mail"]')
        expect(page.locator("#read-only")).to_contain_text("may read the counts of mail only")
        expect(page.locator("#activity-chart")).to_be_visible()
        expect(page.locator("main button:not([data-span])")).to_have_count(0)
        expect(page.locator(".tabs")).to_have_count(0)
        page.wait_for_timeout(5500)  # a refresh later, the same
        expect(page.locator("#read-only")).to_be_visible()
        expect(page.locator("#banner")).to_be_hidden()
        page.goto(f"{service}/ui/#/queues/mail/settings")
        expect(page.locator("#set-max_attempts")).to_be_disabled()
        expect(page.locator("#save-settings")).to_have_count(0)
        expect(page.locator("#delete-queue")).to_have_count(0)
        expect(page.locator("#pause")).to_have_count(0)
        page.fill("#search", dead)
        page.press("#search", "Enter")  # a producer may not read items: said, with the code
        expect(page.locator("#banner .code")).to_have_text("Forbidden")
        expect(page.locator("main")).to_be_empty()
        tab.clean(forbidden)
    with browsing(chromium, service, key=CONSUMER) as tab:
        page = tab.page
        page.goto(f"{service}/ui/#/items/{dead}")
        expect(page.locator("#errors")).to_contain_text("smtp 550")
        expect(page.locator("#read-only")).to_contain_text("not act on it")
        expect(page.locator("#item-redrive")).to_have_count(0)
        expect(page.locator("#item-delete")).to_have_count(0)
        tab.clean(forbidden)
    with browsing(chromium, service, key=MAIL_ADMIN) as tab:
        page = tab.page
        page.goto(f"{service}/ui/")
        expect(page.locator("#queues tbody tr")).to_have_count(1)  # its own queue only
        expect(page.locator(".chart")).to_contain_text("needs a key that covers every queue")
        page.click('a[href="#/queues/mail"]')
        expect(page.locator("#pause")).to_be_visible()
        page.goto(f"{service}/ui/#/queues/orders")
        expect(page.locator("#banner .code")).to_have_text("Forbidden")
        expect(page.locator("main")).to_be_empty()
        tab.clean(forbidden)


def focus_by_tab(page: Any, selector: str, presses: int = 80, key: str = "Tab") -> None:
    """Press Tab (or `key`: Shift+Tab) until the element `selector` names has the focus, as a
    keyboard user would."""
    for _ in range(presses):
        page.keyboard.press(key)
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def test_the_main_actions_are_reached_by_keyboard(chromium: str, served: str, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    api.post("/push/batch", json={"queue": "jobs", "items": [{"payload": n} for n in range(60)]})
    with browsing(chromium, served) as tab:
        page = tab.page
        page.goto(f"{served}/ui/")
        expect(page.locator("#queues")).to_be_visible()
        focus_by_tab(page, 'a[href="#/queues/jobs"]')
        page.keyboard.press("Enter")
        expect(page.locator("h1")).to_contain_text("jobs")
        focus_by_tab(page, "#page-next")
        page.keyboard.press("Enter")
        expect(page.locator("#page-number")).to_have_text("Page 2")
        expect(page.locator("#items tbody tr")).to_have_count(10)
        focus_by_tab(page, "#page-previous")
        page.keyboard.press("Enter")
        expect(page.locator("#page-number")).to_have_text("Page 1")
        focus_by_tab(page, "#pause", key="Shift+Tab")  # back past the tabs
        page.keyboard.press("Enter")
        expect(page.locator("h1 .badge")).to_have_text("paused")
        focus_by_tab(page, 'a[data-tab="history"]')
        page.keyboard.press("Enter")
        expect(page.locator("#empty")).to_contain_text("No finished items")
        focus_by_tab(page, 'a[data-tab="settings"]', presses=5)
        page.keyboard.press("Enter")
        focus_by_tab(page, "#set-max_attempts")
        page.keyboard.press("Control+A")
        page.keyboard.type("4")
        page.keyboard.press("Enter")  # submits the form
        expect(page.locator("#settings-message")).to_contain_text("Saved")
        assert api.get("/queues/jobs").json()["settings"]["max_attempts"] == 4
        focus_by_tab(page, "#delete-queue")
        page.keyboard.press("Enter")
        expect(page.locator("#confirm-name")).to_be_focused()
        page.keyboard.type("jobs")
        page.keyboard.press("Enter")
        expect(page.locator("h1")).to_have_text("Queues")
        assert api.get("/queues/jobs").status_code == 404
        # A item by its id, from the search box, by keyboard.
        focus_by_tab(page, "#search")
        tab.clean()


def test_topics_show_their_subscriptions_and_what_reached_each_queue(
    chromium: str, served: str, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    api.put("/topics/orders", json={"attributes": {"DisplayName": "Order events"}})
    api.put("/topics/ledger.fifo", json={})
    for queue in ("billing", "mail"):
        api.put(f"/queues/{queue}", json={"max_attempts": 1})
    api.post(
        "/topics/orders/subscriptions",
        json={"endpoint": "billing", "attributes": {"RawMessageDelivery": "true"}},
    )
    policy = json.dumps({"region": ["eu"]})
    api.post(
        "/topics/orders/subscriptions", json={"endpoint": "mail", "attributes": {"FilterPolicy": policy}}
    )
    api.post("/topics/orders/subscriptions", json={"endpoint": "warehouse"})
    for n in range(4):
        region = {"type": "String", "value": "eu" if n % 2 else "us"}
        api.post("/topics/orders/publish", json={"message": n, "attributes": {"region": region}})
    [done, failed] = api.post("/pop", json={"queue": "billing", "max_items": 2}).json()["items"]
    api.delete(f"/items/{done['id']}", params={"lease_token": done["lease_token"]})
    api.post(f"/items/{failed['id']}/fail", json={"lease_token": failed["lease_token"], "error": "declined"})

    with browsing(chromium, served) as tab:
        page = tab.page
        page.goto(f"{served}/ui/")
        page.click("#sections a[href='#/topics']")
        expect(page.locator('tr[data-topic="orders"]')).to_contain_text("Order events")
        expect(page.locator('tr[data-topic="ledger.fifo"]')).to_contain_text("fifo")
        page.locator('tr[data-topic="orders"]').click()
        rows = page.locator("#subscriptions tbody tr")
        expect(rows).to_have_count(3)
        # billing: 4 delivered, 1 completed, 1 dead, 2 waiting; mail: the 2 from the EU;
        # warehouse has no queue (a publish skips it).
        expect(rows.nth(0)).to_contain_text("billing")
        expect(rows.nth(0).locator("td")).to_have_text(
            ["billing", "raw", "every message", "2", "0", "1", "1"]
        )
        expect(rows.nth(1)).to_contain_text('{"region": ["eu"]}')
        expect(rows.nth(1).locator("td.num").first).to_have_text("2")
        expect(rows.nth(2)).to_contain_text("no queue")
        rows.nth(0).locator("a").click()
        expect(page.locator("h1")).to_contain_text("billing")
        page.goto(f"{served}/ui/#/topics/nope")
        expect(page.locator("#not-found")).to_have_text("Topic not found")
        tab.clean("404")


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


@pytest.mark.parametrize(("page", "title"), [("/docs", ".swagger-ui .info .title"), ("/redoc", "h1")])
def test_the_api_docs_render_from_this_service_alone(
    chromium: str, served: str, page: str, title: str
) -> None:
    """Swagger UI and ReDoc render the spec under the pages' CSP, with no error, and every request
    they make stays on this service (tests/test_front_pages.py holds their headers and files)."""
    from playwright.sync_api import expect

    with browsing(chromium, served, key=None) as tab:
        requests: list[str] = []
        tab.page.on("request", lambda r: requests.append(r.url))
        tab.page.goto(f"{served}{page}")
        expect(tab.page.locator(title).first).to_contain_text("simplequeue", timeout=30_000)
        expect(tab.page.get_by_text("/queues/{name}/redrive").first).to_be_attached()
        tab.clean()
    assert f"{served}/openapi.json" in requests
    elsewhere = [url for url in requests if not url.removeprefix("blob:").startswith(f"{served}/")]
    assert elsewhere == []


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
            " VALUES (?, ?, ?, 1, ?, ?, CASE WHEN ? = 'dead' THEN 'smtp 550: mailbox unavailable' END)",
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
                (
                    i,
                    queue,
                    created,
                    finished,
                    finished,
                    json.dumps([{"at": finished, "error": "smtp 550: mailbox unavailable"}]),
                )
                for i, queue, outcome, created, finished in history
                if outcome == "dead"
            ],
        )
    return totals


def one_retrying_item(http: httpx.Client) -> str:
    """An e-mail that failed twice and waits for its third attempt, as the item page shows it."""
    payload = {
        "to": "ada@example.com",
        "template": "welcome",
        "locale": "en-GB",
        "vars": {
            "first_name": "Ada",
            "plan": "team",
            "trial_days": 14,
            "links": {"start": "https://example.com/start"},
        },
    }
    pushed = http.post(
        "/push",
        json={
            "queue": "emails",
            "payload": payload,
            "dedup_key": "welcome-ada",
            "group": "user-1842",
            "priority": 5,
        },
    ).json()
    errors = [
        "smtp 451 4.7.1: greylisted, try again in 60 s",
        "smtp 421 4.4.2: connection timed out after 30 s",
    ]
    for n, error in enumerate(errors):
        [leased] = http.post("/pop", json={"queue": "emails", "lease_seconds": 120}).json()["items"]
        assert leased["id"] == pushed["id"]
        retry = 0 if n == 0 else 900
        http.post(
            f"/items/{leased['id']}/fail",
            json={"error": error, "lease_token": leased["lease_token"], "retry_after_seconds": retry},
        )
    return str(pushed["id"])


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
            item = one_retrying_item(http)
        totals = seed_a_busy_hour(database, {"emails": 12, "orders": 25, "reports": 6})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            page = browser.new_page(viewport={"width": 1200, "height": 720})
            page.goto(f"{base}/ui/")
            chart = page.locator("#activity-chart")
            expect(chart).to_have_attribute(
                "data-pushed", str(totals["pushed"] + 41)
            )  # and the retrying e-mail
            expect(chart).to_have_attribute("data-completed", str(totals["completed"]))
            expect(chart).to_have_attribute("data-failed", str(totals["failed"] + 2))
            expect(chart).to_have_attribute("data-dead", str(totals["dead"]))
            shoot(page, "images/dashboard-queues.png")
            page.locator('tr[data-queue="emails"]').click()
            expect(page.locator("h1")).to_contain_text("emails")
            expect(chart.locator("polyline")).to_have_count(4)
            shoot(page, "images/dashboard-chart.png", full_page=False)  # the chart, not every item
            page.click('a[data-tab="history"]')
            expect(page.locator("#items tbody tr")).to_have_count(50)
            expect(page.locator("#page-next")).to_be_enabled()
            page.evaluate("document.querySelector('.toolbar').scrollIntoView()")
            shoot(page, "images/dashboard-history.png", full_page=False)  # the tab, not the chart
            page.goto(f"{base}/ui/#/items/{item}")
            expect(page.locator("#errors li")).to_have_count(2)
            shoot(page, "images/dashboard-item.png")
            browser.close()


def test_a_queue_with_flow_limits_says_so_and_when_it_is_at_them(
    chromium: str, service: str, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    api.put("/queues/throttled", json={"max_leased": 2, "rate_per_second": 14}).raise_for_status()
    api.post("/push/batch", json={"queue": "throttled", "items": [{"payload": n} for n in range(5)]})
    with browsing(chromium, service) as tab:
        page = tab.page
        page.goto(f"{service}/ui/#/queues/throttled/ready")
        expect(page.locator("#limits")).to_contain_text("at most 2 leased at once (0 now)")
        expect(page.locator("#limits")).to_contain_text("14 items/s, bursts of 14")
        expect(page.locator("#limits .at-limit")).to_have_count(0)
        api.post("/pop", json={"queue": "throttled", "max_items": 5, "lease_seconds": 600})
        page.reload()
        expect(page.locator("#limits")).to_contain_text("(2 now)")
        expect(page.locator("#limits .at-limit")).to_have_text("at its limit")
        shoot(page, "flow-limits.png")
        page.goto(f"{service}/ui/#/queues/orders/ready")
        expect(page.locator("h1")).to_contain_text("orders")
        expect(page.locator("#limits")).to_have_count(0)  # no limits: no line
        tab.clean()


def test_a_queues_busiest_keys_and_the_limits_that_cut_its_pops_short_are_shown(
    chromium: str, service: str, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    api.put("/queues/tenants", json={"max_leased_per_key": 2}).raise_for_status()
    api.put("/queues/tenants/keys/enterprise", json={"max_leased": 4}).raise_for_status()
    counts = {"enterprise": 40, "acme-corp": 25, "globex": 12, "initech": 3}
    items = [{"payload": n, "fairness_key": key} for key, count in counts.items() for n in range(count)]
    api.post("/push/batch", json={"queue": "tenants", "items": [*items, {"payload": "a"}, {"payload": "b"}]})
    pop = {"queue": "tenants", "max_items": 20, "lease_seconds": 600}
    popped = api.post("/pop", json=pop).json()["items"]
    assert len(popped) == 4 + 2 + 2 + 2 + 2  # each key up to its cap: the pop was cut short
    for key in ("globex", None):  # one lease of each ends: room again
        done = next(item for item in popped if item["fairness_key"] == key)
        api.delete(f"/items/{done['id']}", params={"lease_token": done["lease_token"]}).raise_for_status()
    with browsing(chromium, service) as tab:
        page = tab.page
        page.goto(f"{service}/ui/#/queues/tenants/ready")
        rows = page.locator("#top-keys tbody tr")
        expect(rows).to_have_count(5)
        expect(rows.first).to_contain_text("enterprise")
        expect(page.locator("#top-keys tr[data-key='enterprise'] td")).to_have_text(
            ["enterprise", "36", "4", "4", "at its limit"]
        )
        globex = page.locator("#top-keys tr[data-key='globex'] td")
        expect(globex).to_have_text(["globex", "10", "1", "2", ""])
        expect(page.locator("#top-keys tr[data-key='']")).to_contain_text("(no key)")
        expect(page.locator("#top-keys .at-limit")).to_have_count(3)
        expect(page.locator("#limits")).to_contain_text("at most 2 of one key leased at once")
        expect(page.locator("#binding [data-limit='max_leased_per_key']")).to_have_text("max_leased_per_key")
        expect(page.locator("#binding")).to_contain_text("1 pop, last")
        shoot(page, "images/dashboard-keys.png", full_page=False)
        page.set_viewport_size({"width": 400, "height": 900})
        # Narrow: the table fits the window (long keys wrap) rather than pushing the page wider.
        assert page.evaluate("document.querySelector('#top-keys').scrollWidth <= window.innerWidth")
        shoot(page, "keys-narrow.png", full_page=False)
        page.goto(f"{service}/ui/#/queues/orders/ready")
        expect(page.locator("h1")).to_contain_text("orders")
        expect(page.locator("#top-keys")).to_have_count(0)  # no keys: no table
        expect(page.locator("#binding")).to_have_count(0)
        tab.clean()


def test_schedules_are_listed_and_paused_resumed_run_and_deleted_from_their_page(
    chromium: str, service: str, api: httpx.Client
) -> None:
    from playwright.sync_api import expect

    with browsing(chromium, service) as tab:
        page = tab.page
        page.goto(f"{service}/ui/")
        page.click("#sections a[href='#/schedules']")
        # None yet: the page says how to make one.
        expect(page.locator("#no-schedules")).to_contain_text(f"curl -X PUT '{service}/schedules/tick'")
        expect(page.locator("#no-schedules")).to_contain_text("sq.put_schedule(")
        shoot(page, "schedules-empty.png")
        nightly = {
            "queue": "mail",
            "payload": {"job": "digest", "to": "team@example.com"},
            "cron": "0 3 * * *",
            "timezone": "America/New_York",
            "overlap": "skip",
            "priority": 5,
        }
        api.put("/schedules/nightly", json=nightly).raise_for_status()
        api.put("/schedules/hourly", json={"queue": "orders", "payload": 1, "every_seconds": 3600})
        weekly = {"queue": "reports", "payload": {}, "cron": "@weekly", "paused": True}
        api.put("/schedules/weekly", json=weekly)
        at = (datetime.now(UTC) + timedelta(days=2)).isoformat()
        reminder = {"queue": "mail", "payload": "renew", "at": at}
        api.put("/schedules/reminder", json=reminder).raise_for_status()
        hourly = api.post("/schedules/hourly/trigger").json()["last_item_id"]
        page.reload()
        rows = page.locator("#schedules tbody tr")
        expect(rows).to_have_count(4)
        row = page.locator('tr[data-schedule="nightly"]')
        expect(row).to_contain_text("0 3 * * *")
        expect(row).to_contain_text("America/New_York")
        next_run = api.get("/schedules/nightly").json()["next_run_at"]
        expect(row.locator('[data-col="next"] time')).to_have_attribute("datetime", next_run)
        expect(row.locator('[data-col="next"] time')).to_have_text(re.compile(r"^in \d+ (s|min|h)$"))
        expect(row.locator('[data-col="last"]')).to_have_text("never")
        expect(page.locator('tr[data-schedule="hourly"]')).to_contain_text("every hour")
        fired_hourly = page.locator('tr[data-schedule="hourly"] [data-col="item"] a')
        expect(fired_hourly).to_have_attribute("title", hourly)
        expect(page.locator('tr[data-schedule="weekly"] .badge')).to_have_text("paused")
        expect(page.locator('tr[data-schedule="weekly"] [data-col="next"]')).to_have_text("paused")
        expect(page.locator('tr[data-schedule="reminder"]')).to_contain_text("once at")
        shoot(page, "schedules.png")
        page.set_viewport_size({"width": 1000, "height": 720})
        shoot(page, "schedules-narrow.png")
        page.set_viewport_size({"width": 1200, "height": 720})

        row.click()
        expect(page.locator("h1")).to_have_text("nightly live")
        expect(page.locator("#schedule-payload")).to_contain_text('"to": "team@example.com"')
        expect(page.locator('[data-fact="Priority"]')).to_have_text("5")
        expect(page.locator('[data-fact="Overlap"]')).to_contain_text("skip")
        page.click("#schedule-pause")
        expect(page.locator("h1 .badge")).to_have_text("paused")
        assert api.get("/schedules/nightly").json()["paused"] is True
        expect(page.locator('[data-fact="Next run"]')).to_contain_text("none while paused")
        shoot(page, "schedule-paused.png")
        page.click("#schedule-resume")
        expect(page.locator("h1 .badge")).to_have_text("live")
        assert api.get("/schedules/nightly").json()["paused"] is False
        page.click("#schedule-trigger")
        fired = page.locator('[data-fact="Last item"] a')
        expect(fired).to_be_visible()
        after = api.get("/schedules/nightly").json()
        assert after["last_item_id"] is not None
        assert after["last_run_at"] is not None
        expect(fired.locator("code")).to_have_text(after["last_item_id"])
        assert tab.asked[-1].startswith("Push one item of nightly to mail now?")
        shoot(page, "schedule.png")
        fired.click()
        expect(page.locator("#payload")).to_contain_text('"job": "digest"')
        page.go_back()

        # Deleting takes the name typed, as a queue's delete does.
        page.click("#delete-schedule")
        page.fill("#confirm-name", "nightl")
        expect(page.locator("#confirm-delete")).to_be_disabled()
        page.fill("#confirm-name", "nightly")
        page.click("#confirm-delete")
        expect(page.locator("h1")).to_have_text("Schedules")
        expect(rows).to_have_count(3)
        assert api.get("/schedules/nightly").status_code == 404
        page.goto(f"{service}/ui/#/schedules/nightly")
        expect(page.locator("#not-found")).to_have_text("Schedule not found")
        # What the API refuses, the dialog says, with its code: here one deleted meanwhile.
        page.goto(f"{service}/ui/#/schedules/weekly")
        page.click("#delete-schedule")
        api.delete("/schedules/weekly").raise_for_status()
        page.fill("#confirm-name", "weekly")
        page.click("#confirm-delete")
        expect(page.locator("#delete-problem")).to_contain_text("ScheduleNotFound")
        tab.clean("404")
    with browsing(chromium, service, key=MAIL_ADMIN) as tab:  # its queue's schedules only
        tab.page.goto(f"{service}/ui/#/schedules")
        expect(tab.page.locator("#schedules tbody tr")).to_have_count(1)
        expect(tab.page.locator('tr[data-schedule="reminder"]')).to_be_visible()
        tab.page.goto(f"{service}/ui/#/schedules/hourly")
        expect(tab.page.locator("#read-only")).to_contain_text("may not see this one")
        expect(tab.page.locator("main button")).to_have_count(0)
        tab.clean("403")
    with browsing(chromium, service, key=PRODUCER) as tab:  # schedules need an admin key
        tab.page.goto(f"{service}/ui/#/schedules")
        expect(tab.page.locator("#read-only")).to_contain_text("need an admin API key")
        expect(tab.page.locator("#banner")).to_be_hidden()
        tab.clean("403")


def test_the_schedules_come_a_page_at_a_time(chromium: str, served: str, api: httpx.Client) -> None:
    from playwright.sync_api import expect

    for n in range(55):
        api.put(f"/schedules/s{n:02}", json={"queue": "ticks", "payload": n, "every_seconds": 60})
    with browsing(chromium, served) as tab:
        page = tab.page
        page.goto(f"{served}/ui/#/schedules")
        rows = page.locator("#schedules tbody tr")
        expect(rows).to_have_count(50)
        expect(rows.first).to_have_attribute("data-schedule", "s00")
        page.click("#page-next")
        expect(page.locator("#page-number")).to_have_text("Page 2")
        expect(rows).to_have_count(5)
        expect(rows.first).to_have_attribute("data-schedule", "s50")
        expect(page.locator("#schedule-count")).to_contain_text("5 schedules on this page")
        page.click("#page-previous")
        expect(rows).to_have_count(50)
        tab.clean()
