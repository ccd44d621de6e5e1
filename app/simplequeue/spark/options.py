"""The data source's options, checked on the driver before anything is pushed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx

DEFAULT_BATCH_SIZE = 500
# Under the service's default 8 MiB request limit, with room for the batch's own JSON.
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024


class OptionError(ValueError):
    """A missing or bad option: the message names it."""


@dataclass(frozen=True)
class WriteOptions:
    url: str
    queue: str | None  # None: every row names its queue (a `queue` column)
    batch_size: int
    batch_bytes: int
    api_key: str | None
    fail_after_batches: int | None  # tests only: fail a task's first attempt after this many batches

    @classmethod
    def of(cls, options: Mapping[str, str], columns: list[str]) -> WriteOptions:
        url = (options.get("url") or "").rstrip("/")
        if not url:
            raise OptionError('option "url" is required: .option("url", "http://host:8000")')
        queue = options.get("queue") or None
        if queue is None and "queue" not in columns:
            raise OptionError('option "queue" is required (or a "queue" column naming each row\'s queue)')
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


def check_reachable(url: str, api_key: str | None, timeout: float = 10.0) -> None:
    """On the driver, before any task starts: a URL that does not answer fails the job at once,
    naming it, rather than after every task's retries."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.get(f"{url}/readyz", timeout=timeout, headers=headers)
    except httpx.HTTPError as exc:
        raise OptionError(f"simplequeue at {url} does not answer ({type(exc).__name__})") from None
    if answer.status_code != 200:
        raise OptionError(f"simplequeue at {url} is not ready: {answer.status_code} {answer.text[:200]}")
