"""What a failed item's error says: a handler's exception as a short traceback, or an ItemFailed's
own message; and the one line a log gives it (never a payload)."""

from __future__ import annotations

import traceback

MAX_TRACEBACK_CHARS = 4000
TRACEBACK_FRAMES = 5


def short_traceback(
    exc: BaseException, *, frames: int = TRACEBACK_FRAMES, limit: int = MAX_TRACEBACK_CHARS
) -> str:
    """The exception with its last few frames, cut to `limit` characters from the front (the
    exception's own line, at the end, is kept)."""
    text = "".join(traceback.format_exception(exc, limit=-frames)).replace("\x00", "\\0").strip()
    if len(text) > limit:
        text = "…" + text[-(limit - 1) :]
    return text or type(exc).__name__


class ItemFailed(Exception):
    """Raise from a handler to fail its item with this message as the error, instead of a
    traceback (e.g. a command's exit status and the tail of its stderr)."""


def error_text(exc: BaseException) -> str:
    """What a failed item's error says: an ItemFailed's message, else a short traceback."""
    if isinstance(exc, ItemFailed) and str(exc):
        text = str(exc).replace("\x00", "\\0").strip()
        return text if len(text) <= MAX_TRACEBACK_CHARS else "…" + text[-(MAX_TRACEBACK_CHARS - 1) :]
    return short_traceback(exc)


def log_reason(exc: BaseException) -> str:
    """For the log line: an ItemFailed's first line (its author wrote it to be read), else only
    the exception's type (its text may quote a payload)."""
    if isinstance(exc, ItemFailed) and str(exc).strip():
        return str(exc).strip().splitlines()[0][:200]
    return type(exc).__name__
