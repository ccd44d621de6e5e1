"""One table of names, each a queue's name or not, that every door runs: the HTTP API (a body's
field and a path), the SQS door, the Spark options (test_queue_names), simplequeue.outbox on every
driver (test_outbox_drivers) and PostgreSQL's SQL entry points (test_sql_entry_points). Each door
must take exactly the names marked True and refuse the others, changing nothing."""

from __future__ import annotations

NAMES: dict[str, bool] = {
    "a": True,
    "Z": True,
    "0": True,
    ".": True,
    "_-.": True,
    "orders.v2_EU-1": True,
    "q.fifo": True,
    "x" * 128: True,
    "x" * 129: False,
    "": False,
    "a\n": False,  # Python's re.match(r"^...$") takes it: `$` matches before a last newline
    "a\r\n": False,
    "\na": False,
    "a\nb": False,
    " a": False,
    "a ": False,
    "a b": False,
    "a\t": False,
    "a\x00": False,
    "\x00": False,
    "é": False,
    "caf\u00e9": False,
    "\uff41": False,  # a fullwidth a
    "\u0661": False,  # an Arabic-Indic digit one: \d would take it
    "\u212a": False,  # the Kelvin sign, which case-insensitive matching folds to k
    "a/b": False,
    "a:b": False,
    "a%0A": False,
}


def name_id(name: str) -> str:
    """A test id that shows what the name holds (pytest would print a newline as it is)."""
    return ascii(name) if len(name) < 20 else f"{name[0]}*{len(name)}"


def decisions(accepted: dict[str, bool]) -> dict[str, bool]:
    """The names whose door decided otherwise than the table, with the door's decision."""
    return {name: took for name, took in accepted.items() if took != NAMES[name]}
