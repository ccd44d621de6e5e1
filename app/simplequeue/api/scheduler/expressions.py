"""EventBridge Scheduler's schedule expressions, read as our timings and written back.

- `rate(N minute|minutes|hour|hours|day|days)` is every_seconds. Our slots are whole multiples of
  the interval since the Unix epoch; AWS counts from the schedule's creation.
- `at(yyyy-mm-ddThh:mm:ss)`, a wall-clock time in ScheduleExpressionTimezone, is `at`.
- `cron(minutes hours day-of-month month day-of-week year)` is our five-field cron read in that
  zone: `?` is `*`, and the day of week's numbers 1-7 (SUN-SAT) are cron's 0-6; names are the same.
  What ours cannot keep (a year other than `*`, `L`, `W`, `#`) is refused, naming it.

Written back (a schedule the REST API made has no expression as given): the same forms, and
`rate(N seconds)` for an interval of no whole minute, which EventBridge Scheduler itself has not.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from simplequeue.domain.cron import expanded
from simplequeue.domain.schedules import Timing

_RATE = re.compile(r"rate\(\s*(\d{1,9})\s+(minute|minutes|hour|hours|day|days)\s*\)")
_AT = re.compile(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)")
_CRON = re.compile(r"cron\((.*)\)", re.DOTALL)
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_UNKEPT = (("L", "L (last)"), ("W", "W (weekday)"), ("#", "# (nth weekday)"))
_NUMBER = re.compile(r"\d+")
_NAMES = re.compile(r"jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|sun|mon|tue|wed|thu|fri|sat", re.I)
"""Month and day names, taken out before looking for L and W (JUL and WED are no L or W)."""


class ExpressionError(ValueError):
    """The expression is none EventBridge Scheduler writes, or one ours cannot keep; the message
    says which part."""


def timing_of(expression: str, timezone: str | None) -> Timing:
    """Our timing of an EventBridge Scheduler expression read in `timezone` (None: UTC). The
    timing is not yet checked (a cron field's range, the zone's name): Timing.check does that."""
    zone = timezone or "UTC"
    text = expression.strip()
    if match := _RATE.fullmatch(text):
        count = int(match[1])
        if count < 1:
            raise ExpressionError("rate(): the value must be 1 or more")
        return Timing(every_seconds=count * _UNIT_SECONDS[match[2].rstrip("s")], timezone=zone)
    if match := _AT.fullmatch(text):
        try:
            local = datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S")
        except ValueError:
            raise ExpressionError(f"at(): {match[1]} is no date and time") from None
        return Timing(at=_in_zone(local, zone), timezone=zone)
    if match := _CRON.fullmatch(text):
        return Timing(cron=_cron_of(match[1]), timezone=zone)
    raise ExpressionError(
        "ScheduleExpression must be at(yyyy-mm-ddThh:mm:ss), rate(value unit) or "
        "cron(minutes hours day-of-month month day-of-week year)"
    )


def _in_zone(local: datetime, zone: str) -> datetime:
    try:
        return local.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
    except (ValueError, KeyError):  # an unknown zone: Timing.check names it as the timezone's fault
        return local.replace(tzinfo=UTC)


def _cron_of(fields_text: str) -> str:
    fields = fields_text.split()
    if len(fields) != 6:
        raise ExpressionError(
            f"cron() needs 6 fields (minutes hours day-of-month month day-of-week year), got {len(fields)}"
        )
    minute, hour, day, month, weekday, year = fields
    for mark, name in _UNKEPT:
        if any(mark in _NAMES.sub("", field).upper() for field in fields):
            raise ExpressionError(f"cron(): {name} is not supported here")
    if year != "*":
        raise ExpressionError(f"cron(): a year other than * ({year}) is not supported here")
    day = "*" if day == "?" else day
    weekday = "*" if weekday == "?" else _our_weekdays(weekday)
    return f"{minute} {hour} {day} {month} {weekday}"


def _to_ours(number: int) -> str:
    if not 1 <= number <= 7:
        raise ExpressionError(f"cron(): day-of-week {number} is out of range 1-7 (SUN-SAT)")
    return str(number - 1)


def _our_weekdays(field: str) -> str:
    """AWS's day-of-week field with each day's number as cron's (a step's number is a count: kept)."""
    parts = []
    for part in field.split(","):
        span, slash, step = part.partition("/")
        if span != "*":
            span = "-".join(_to_ours(int(n)) if _NUMBER.fullmatch(n) else n for n in span.split("-"))
        parts.append(span + slash + step)
    return ",".join(parts)


def expression_of(timing: Timing) -> str:
    """The EventBridge Scheduler expression of a timing (read in its timezone)."""
    if timing.every_seconds is not None:
        return _rate(timing.every_seconds)
    if timing.cron is not None:
        return _aws_cron(timing.cron)
    assert timing.at is not None
    local = timing.at.astimezone(ZoneInfo(timing.timezone))
    return f"at({local:%Y-%m-%dT%H:%M:%S})"


def _rate(seconds: int) -> str:
    for unit in ("day", "hour", "minute"):
        count, rest = divmod(seconds, _UNIT_SECONDS[unit])
        if rest == 0:
            return f"rate({count} {unit}{'' if count == 1 else 's'})"
    return f"rate({seconds} second{'' if seconds == 1 else 's'})"


def _aws_cron(cron: str) -> str:
    minute, hour, day, month, weekday = expanded(cron).split()
    if weekday == "*":
        weekday = "?"
    else:
        weekday = ",".join(_aws_weekdays(part) for part in weekday.split(","))
        if day == "*":
            day = "?"
    return f"cron({minute} {hour} {day} {month} {weekday} *)"


def _aws_weekdays(part: str) -> str:
    """One part of our day-of-week field in AWS's numbers (cron's 0 and 7 are both Sunday, AWS's 1)."""
    span, slash, step = part.partition("/")
    low, dash, high = span.partition("-")
    if not all(_NUMBER.fullmatch(n) for n in (low, *([high] if dash else []))):
        return part  # names (mon-fri) and * read the same in both
    if not dash:
        return f"{int(low) % 7 + 1}{slash}{step}"
    first, last = int(low), int(high)
    if last == 7 and first > 0:  # ..-7 ends on Sunday, AWS's first day: the range wraps
        return f"{first + 1}-7{slash}{step},1" if not slash else part
    return f"{first % 7 + 1}-{last % 7 + 1 if last < 7 else 7}{slash}{step}"
