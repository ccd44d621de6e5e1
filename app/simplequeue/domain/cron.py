"""Five-field cron expressions (minute hour day-of-month month day-of-week) read in an IANA time
zone, and the instants they name.

Written here rather than taken from a library because the instants around a zone's clock changes
are ours to decide, and the rules are few:

- A wall-clock time the zone skips (spring forward) names the first instant after the gap: a slot
  at 02:30 in America/New_York fires at 03:00 EDT on that day, once (a 03:00 slot is the same one).
- A wall-clock time the zone repeats (fall back) names its first occurrence only: the slot fires
  once.

Fields take `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n` and `a/n`, lists with commas,
month and day names (jan, mon), 7 for Sunday, and the macros @yearly, @monthly, @weekly, @daily
and @hourly. As in Vixie cron, when both day fields are restricted a day matching either is a day
of the schedule.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (name in messages, lowest, highest, the names of its values from the lowest on)
_FIELDS: tuple[tuple[str, int, int, list[str]], ...] = (
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day of month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_SEARCH_DAYS = 366 * 8 + 2  # the longest wait cron can name: Feb 29, 8 years apart across 2100
_MARGIN = timedelta(hours=3)  # wider than any zone's clock change: where naive search begins


class CronError(ValueError):
    """The expression is not a five-field cron expression; the message names the part."""


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Monday, as date.weekday() counts
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days, in_weekdays = day.day in self.days, day.weekday() in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays


def expanded(expression: str) -> str:
    """The expression with a macro (@daily) written out as its five fields; any other as it is."""
    return _MACROS.get(expression.strip().lower(), expression)


def parse_cron(expression: str) -> Cron:
    """Raises CronError naming the field and the value that is wrong."""
    parts = expanded(expression).split()
    if len(parts) != 5:
        raise CronError(f"cron needs 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}")
    values = [_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    minutes, hours, days, months, weekdays = values
    return Cron(
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset((d - 1) % 7 for d in weekdays),  # cron's 0 and 7 are Sunday: 6 here
        days_restricted=not parts[2].startswith("*"),
        weekdays_restricted=not parts[4].startswith("*"),
    )


def _field(text: str, name: str, low: int, high: int, names: list[str]) -> set[int]:
    found: set[int] = set()
    for part in text.lower().split(","):
        span, _, step_text = part.partition("/")
        step = _number(step_text, name, names, low, high, is_step=True) if step_text else 1
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _number(a, name, names, low, high), _number(b, name, names, low, high)
            if first > last:
                raise CronError(f"{name}: range {span} runs backwards")
        else:
            first = _number(span, name, names, low, high)
            last = high if step_text else first
        found.update(range(first, last + 1, step))
    return found


def _number(text: str, name: str, names: list[str], low: int, high: int, *, is_step: bool = False) -> int:
    if not is_step and text in names:
        return names.index(text) + (low if name == "month" else 0)
    if not text.isdigit():
        raise CronError(f"{name}: {text or 'an empty part'!r} is not a number")
    value = int(text)
    if is_step:
        if value < 1:
            raise CronError(f"{name}: step {value} must be at least 1")
        return value
    if not low <= value <= high:
        raise CronError(f"{name}: {value} is out of range {low}-{high}")
    return value


def next_instant(cron: Cron, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first instant strictly after `after` that the expression names in the zone (UTC), or
    None when it names none (30 February)."""
    return next(_instants(cron, zone, after, forward=True), None)


def previous_instant(cron: Cron, zone: ZoneInfo, until: datetime) -> datetime | None:
    """The last instant at or before `until` that the expression names in the zone (UTC)."""
    return next(_instants(cron, zone, until, forward=False), None)


def _instants(cron: Cron, zone: ZoneInfo, edge: datetime, *, forward: bool) -> Iterator[datetime]:
    # Wall-clock candidates in order map to instants in the same (non-strict) order, since a
    # skipped time maps to its gap's end and a repeated one to its first occurrence; so a search
    # of wall-clock times from a margin before (or after) the edge finds the nearest instant.
    local = edge.astimezone(zone).replace(tzinfo=None)
    start = local - _MARGIN if forward else local + _MARGIN
    step = 1 if forward else -1
    for offset in range(_SEARCH_DAYS):
        day = start.date() + timedelta(days=offset * step)
        if not cron.day_matches(day):
            continue
        hours = cron.hours if forward else cron.hours[::-1]
        minutes = cron.minutes if forward else cron.minutes[::-1]
        for hour in hours:
            for minute in minutes:
                wall = datetime(day.year, day.month, day.day, hour, minute)
                instant = resolve(wall, zone)
                if (instant > edge) if forward else (instant <= edge):
                    yield instant
                    return


def resolve(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant (UTC) a naive wall-clock time names in the zone: its first occurrence when the
    zone repeats it; the end of the gap when the zone skips it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap: fold=1 reads the time with the offset after the change, which gives an instant
    # before the gap; the change itself (on a whole second) is the first instant whose wall time
    # is after `wall`.
    low = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    high = int(first.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)
