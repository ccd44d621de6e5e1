"""The data source's options, checked on the driver before anything is pushed, and the checks of
the service (its URL, whether it answers, the API key, the queue's name) that `simplequeue spark`
runs before it starts Spark. Nothing here imports PySpark."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import httpx

DEFAULT_BATCH_SIZE = 500
# Under the service's default 8 MiB request limit, with room for the batch's own JSON.
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024
# The service's rule for a queue's name (simplequeue.domain.names.QUEUE_NAME_PATTERN; the spark
# package imports nothing of the server, so it is repeated here and a test holds the two equal).
QUEUE_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)


class OptionError(ValueError):
    """A missing or bad option: the message names it."""


class NoAnswer(OptionError):
    """Nothing answers at the URL (refused, timed out, not HTTP), or only a proxy does, or the
    service is not ready (its database does not answer)."""


@dataclass(frozen=True)
class WriteOptions:
    url: str
    queue: str | None  # None: every row names its queue (a `queue` column)
    batch_size: int
    batch_bytes: int
    api_key: str | None
    fail_after_batches: int | None  # tests only: fail a task's first attempt after this many batches
    summary_path: str | None  # `simplequeue spark ingest`: where the commit writes what was pushed

    @classmethod
    def of(cls, options: Mapping[str, str], columns: list[str]) -> WriteOptions:
        url = (options.get("url") or "").rstrip("/")
        if not url:
            raise OptionError('option "url" is required: .option("url", "http://host:8000")')
        queue = options.get("queue") or None
        if queue is None and "queue" not in columns:
            raise OptionError('option "queue" is required (or a "queue" column naming each row\'s queue)')
        if queue is not None:
            check_queue_name(queue)
        if "payload" not in columns:
            raise OptionError('column "payload" is required (a JSON string, or a struct, map or array)')
        fail_after = options.get("_fail_after_batches")
        return cls(
            url=url,
            queue=queue,
            batch_size=positive(options, "batch_size", DEFAULT_BATCH_SIZE, most=1000),
            batch_bytes=positive(options, "batch_bytes", DEFAULT_BATCH_BYTES, most=64 * 1024 * 1024),
            api_key=options.get("api_key") or None,
            fail_after_batches=int(fail_after) if fail_after else None,
            summary_path=options.get("_summary_path") or None,
        )


def positive(options: Mapping[str, str], name: str, default: int, most: int) -> int:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f'option "{name}" must be a whole number, not {text!r}') from None
    if not 1 <= value <= most:
        raise OptionError(f'option "{name}" must be between 1 and {most}, not {value}')
    return value


def check_queue_name(queue: str) -> None:
    if not QUEUE_NAME.fullmatch(queue):  # not match: its $ also matches before a last newline
        raise OptionError(
            f"{queue!r} cannot be a queue's name: 1 to 128 of the letters A-Z and a-z, digits, '.', '_', '-'"
        )


def check_url(url: str) -> str:
    """The service's URL without a trailing slash, if it is an http(s) URL with a host."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise OptionError(f"{url!r} is not a URL ({exc}): give http://host:port") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise OptionError(
            f"{url!r} is not the service's URL: give http://host:port, e.g. http://127.0.0.1:8000"
        )
    return url.rstrip("/")


def check_service(
    url: str,
    api_key: str | None,
    queue: str | None,
    *,
    to: Literal["push", "read history", "pop"],
    key_from: str = 'option "api_key"',
    connect_timeout: float = 10.0,
    read_timeout: float = 10.0,
) -> None:
    """Before Spark runs anything: the service answers at `url`, is ready, and takes the API key
    (and the queue's name), each refusal one line. One or two cheap requests. `to`: what the job
    does, so what it needs: a push makes its queue and a stream waits for it, reading history needs
    the queue and an admin key (others pass GET /queues/{queue} and would fail later)."""
    url = check_url(url)
    if queue is not None:
        check_queue_name(queue)
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    with httpx.Client(timeout=timeout, headers=_bearer(api_key)) as http:
        _ready(http, url)
        if queue is None:
            # One queue is enough to ask about (below): the first page of one.
            listed = _get(http, url, "/queues", api_key, key_from, "to list the queues", {"limit": 1})
            if to != "read history":
                return
            names = _names(listed)
            if not names:
                return
            queue = names[0]  # each queue's history needs the same role: one is enough to ask
        doing = {"push": "to push to", "pop": "to read", "read history": "to read the history of"}[to]
        path = f"/queues/{queue}/history" if to == "read history" else f"/queues/{queue}"
        params = {"limit": 1} if to == "read history" else None
        answer = _get(http, url, path, api_key, key_from, f"{doing} queue {queue!r}", params)
        if answer.status_code == 404 and to == "read history":
            raise OptionError(f"simplequeue at {url} has no queue {queue!r}")
        if answer.status_code == 422:
            raise OptionError(f"simplequeue at {url} refused the queue's name {queue!r}: {_detail(answer)}")
        if answer.status_code >= 400 and answer.status_code != 404:
            raise OptionError(
                f"simplequeue at {url} answered GET {path} with {answer.status_code}: {_detail(answer)}"
            )


def _names(listed: httpx.Response) -> list[str]:
    try:
        queues = listed.json()["queues"]
        return [str(q["name"]) for q in queues]
    except (ValueError, KeyError, TypeError):
        return []


def _bearer(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _ready(http: httpx.Client, url: str) -> None:
    try:
        answer = http.get(f"{url}/readyz")
    except httpx.HTTPError as exc:
        raise NoAnswer(f"simplequeue at {url} does not answer ({type(exc).__name__})") from None
    if answer.status_code in (502, 503, 504) and not _is_json(answer):
        raise NoAnswer(f"{url} answered {answer.status_code}: a proxy whose simplequeue does not answer?")
    if answer.status_code == 503:
        raise NoAnswer(f"simplequeue at {url} is not ready: {_detail(answer)}")
    if answer.status_code != 200 or not _is_json(answer):
        raise OptionError(
            f"{url} answers, but not as simplequeue does (GET /readyz: {answer.status_code}): is it the "
            "service's URL?"
        )


def _get(
    http: httpx.Client,
    url: str,
    path: str,
    api_key: str | None,
    key_from: str,
    doing: str,
    params: dict[str, int] | None = None,
) -> httpx.Response:
    try:
        answer = http.get(f"{url}{path}", params=params)
    except httpx.HTTPError as exc:
        raise NoAnswer(f"simplequeue at {url} does not answer GET {path} ({type(exc).__name__})") from None
    if answer.status_code == 401 and api_key is None:
        raise OptionError(f"simplequeue at {url} wants an API key: set {key_from}")
    if answer.status_code == 401:
        raise OptionError(f"simplequeue at {url} does not know the API key in {key_from}: {_detail(answer)}")
    if answer.status_code == 403:
        raise OptionError(
            f"simplequeue at {url} refused the API key in {key_from} {doing}: {_detail(answer)}"
        )
    return answer


def _is_json(answer: httpx.Response) -> bool:
    content_type: str = answer.headers.get("content-type", "")
    return content_type.startswith("application/json")


def _detail(answer: httpx.Response) -> str:
    """The error envelope's sentence, else the start of the body."""
    try:
        body = answer.json()
    except ValueError:
        return answer.text[:200]
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    return answer.text[:200]
