"""Logging for `simplequeue serve`: our loggers, uvicorn's and the access log, one format for all.

`text` is for a person at a terminal; `json` writes one JSON object per line (time, level, logger,
message, and a line's own fields, e.g. the access line's request_id, method, path, status and
duration_ms) for a log pipeline. Nothing logs a payload, a query string (it may hold a lease
token) or an API key.
"""

from __future__ import annotations

from typing import Any, Literal

from pythonjsonlogger.core import RESERVED_ATTRS

LogFormat = Literal["text", "json"]


def logging_config(log_format: LogFormat, level: str) -> dict[str, Any]:
    """A logging.config.dictConfig dict, also handed to uvicorn (and so to each of its workers)."""
    formatter: dict[str, Any]
    if log_format == "json":
        formatter = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "{levelname}{name}{message}",
            "style": "{",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",
            # uvicorn adds an ANSI-coloured copy of some messages: not for a pipeline.
            "reserved_attrs": [*RESERVED_ATTRS, "color_message"],
        }
    else:
        formatter = {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"}
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}
        },
        "loggers": {
            "simplequeue": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            # Ours (simplequeue.access) has the request id and the duration, and no query string.
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }
