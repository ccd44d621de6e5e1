"""What a person meets at the service's address, in-process: `GET /` sends them to the dashboard
(while `POST /` stays the SQS door), and the spec's viewers, /docs (Swagger UI) and /redoc
(ReDoc), are pages of this service alone: their scripts and styles come from the package, under
the dashboard's headers, and need no key. That they render is tried in a browser by
tests/test_dashboard.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from simplequeue.settings import Settings

from tests.http import Client, app_client

PAGES = ("/docs", "/redoc")


@pytest.fixture(params=["open", "keyed"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Client]:
    """The app on SQLite (the engine is not what is tested), without keys and with them."""
    keys = [{"key": "admin-key-of-the-front-pages", "role": "admin"}] if request.param == "keyed" else []
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'front.db'}", api_keys=keys, sweep=False)
    async for client in app_client(settings, None):
        yield client


class References(HTMLParser):
    """Every URL a page loads (src, href), and the text of its script and style elements."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self.styled: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.urls += [url for name in ("src", "href") if (url := found.get(name)) is not None]
        if "style" in found:
            self.styled.append(tag)
        self._in = tag if tag in ("script", "style") else None

    def handle_data(self, data: str) -> None:
        if self._in is not None and data.strip():
            self.inline.append(f"<{self._in}>{data.strip()[:60]}")


def references(html: str) -> References:
    parser = References()
    parser.feed(html)
    return parser


def csp(answer: httpx.Response) -> dict[str, list[str]]:
    header = answer.headers["Content-Security-Policy"]
    directives = [d.split() for d in header.split(";")]
    return {name: sources for name, *sources in directives}


async def test_root_sends_a_person_to_the_dashboard(app: Client) -> None:
    for method in ("GET", "HEAD"):
        answer = await app.request(method, "/")
        assert (answer.status_code, answer.headers["Location"]) == (307, "/ui/"), method
    dashboard = await app.get("/", follow_redirects=True)
    assert (dashboard.status_code, dashboard.url.path) == (200, "/ui/")
    assert "<title>simplequeue</title>" in dashboard.text


async def test_post_to_root_is_still_the_sqs_door(app: Client) -> None:
    answer = await app.post("/", data={"Action": "ListQueues"})  # unsigned: the door decides
    if (await app.get("/queues")).status_code == 401:  # the service has keys
        assert answer.status_code == 403
        assert "<Code>MissingAuthenticationToken</Code>" in answer.text
    else:
        assert answer.status_code == 200
        assert "<ListQueuesResponse" in answer.text


@pytest.mark.parametrize("page", PAGES)
async def test_the_docs_pages_are_served_with_the_dashboards_headers(app: Client, page: str) -> None:
    html = await app.get(page)
    assert html.status_code == 200
    files = [urljoin(page, url) for url in references(html.text).urls]
    for path in [page, *files, f"{page}/nothing-here"]:
        answer = await app.get(path)
        assert answer.headers["X-Content-Type-Options"] == "nosniff", path
        assert answer.headers["Referrer-Policy"] == "no-referrer", path
        assert answer.headers["X-Frame-Options"] == "DENY", path
        policy = csp(answer)
        assert policy["default-src"] == ["'self'"], path
        assert policy["frame-ancestors"] == ["'none'"], path
        # Scripts only from this service: no script-src of its own, so default-src's 'self' holds.
        assert "script-src" not in policy, path
        assert policy.get("img-src", ["'self'"]) in (["'self'"], ["'self'", "data:"]), path
        everything = [source for sources in policy.values() for source in sources]
        wide = [s for s in everything if "unsafe" in s or "://" in s or s in ("*", "https:", "http:")]
        assert wide == [], path
    missing = await app.get(f"{page}/nothing-here")
    assert (missing.status_code, missing.json()["error"]) == (404, "NotFound")


@pytest.mark.parametrize("page", PAGES)
async def test_the_docs_pages_load_every_file_from_this_service(app: Client, page: str) -> None:
    """No URL with a host or a scheme, no inline script or style (the CSP would refuse them), and
    every file the page names is here, with no key (as the page is)."""
    html = await app.get(page)
    found = references(html.text)
    assert found.urls, html.text
    assert [url for url in found.urls if urlsplit(url).scheme or urlsplit(url).netloc] == []
    assert (found.inline, found.styled) == ([], [])
    assert "<redoc" in html.text if page == "/redoc" else '<div id="swagger-ui">' in html.text
    for url in found.urls:
        answer = await app.get(urljoin(page, url))
        assert answer.status_code == 200, url
        if url.endswith(".js"):
            # The builds name other sites in strings (licences, their own docs' links); ours none.
            ours = not url.endswith(("swagger-ui-bundle.js", "redoc.standalone.js"))
            assert not ours or "://" not in answer.text, url
    spec = await app.get(urljoin(page, "openapi.json"))
    assert spec.status_code == 200


async def test_the_redoc_build_asks_for_its_logo_here(app: Client) -> None:
    """ReDoc's build as shipped loads its logo from its makers' CDN; this one asks for it beside the
    page (/redoc/logo-mini.svg), which answers."""
    bundle = (await app.get("/redoc/redoc.standalone.js")).text
    assert "cdn.redoc.ly" not in bundle
    assert 'window.location.pathname+"/logo-mini.svg"' in bundle
    logo = await app.get("/redoc/logo-mini.svg")
    assert (logo.status_code, logo.headers["content-type"]) == (200, "image/svg+xml")


async def test_fastapis_cdn_pages_are_gone(app: Client) -> None:
    assert (await app.get("/docs/oauth2-redirect")).status_code == 404
    for page in PAGES:
        assert "cdn.jsdelivr.net" not in (await app.get(page)).text
