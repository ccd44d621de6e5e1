"""A fair queue's keys and their own settings (domain/keys.py), the same way on every dialect: a
key's settings are columns of its sq_fair_keys row, written by one statement (`_topic_run`) and
read a page at a time (`_fetch_page`), in key order with a name cursor as pages of queues are; its
busiest keys (`top_keys`) are one statement too."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simplequeue.domain import Page, QueueNotFound
from simplequeue.domain.keys import KeyLoad, KeySettings, KeyStats, KeyTurn
from simplequeue.domain.names import key_problem
from simplequeue.store.cursors import decode_name_cursor, encode_name_cursor
from simplequeue.store.limits import FlowState
from simplequeue.store.rows import Row

_KEY_MARK = "k:"


def _is_key(value: str) -> bool:
    return key_problem(value) is None


def key_stats(row: Row) -> KeyStats:
    max_leased = row["max_leased"]
    rate = row["rate_per_second"]
    settings = KeySettings(
        weight=float(row["weight"]),
        max_leased=int(max_leased) if max_leased not in (None, "") else None,
        rate_per_second=float(rate) if rate not in (None, "") else None,
    )
    return KeyStats(str(row["fairness_key"]), settings, int(row["ready"] or 0), int(row["leased"] or 0))


def key_load(row: Row) -> KeyLoad:
    key, cap = row["fairness_key"], row["max_leased"]
    return KeyLoad(
        str(key) if key is not None else None,
        int(row["ready"] or 0),
        int(row["leased"] or 0),
        int(cap) if cap is not None else None,
    )


def key_turns(
    caps: Mapping[str, int | None], found: Iterable[Row], tokens: Mapping[str, int]
) -> list[KeyTurn]:
    """The turns of the keys a careful pop holds (`caps`: each key's cap, in the order the pop took
    them) from the rows it read after taking them: per key its unexpired leases (`leased`) and its
    items in pop order (`seq`, `place`; a row without a seq for a key with none). `tokens`: the
    whole tokens of each key that has a rate."""
    leased: dict[str, int] = {}
    items: dict[str, tuple[list[int], list[int]]] = {key: ([], []) for key in caps}
    for row in found:
        leased[row["key"]] = int(row["leased"])
        if row["seq"] is not None:
            items[row["key"]][0].append(int(row["seq"]))
            items[row["key"]][1].append(int(row["place"]))
    return [KeyTurn(key, cap, leased.get(key, 0), *items[key], tokens.get(key)) for key, cap in caps.items()]


class KeyStore:
    """put_key, get_key, reset_key, list_keys and top_keys, over a dialect's `_topic_run` (statements in one
    transaction) and `_fetch_page`."""

    flow: FlowState

    def _now(self) -> object:
        raise NotImplementedError

    def _limited_step(self, queue: str) -> list[tuple[str, Mapping[str, Any]]]:
        """The statement that sets the queue's `limited` from its keys' settings: SQL Server's
        batches do that themselves."""
        return [] if self._KEYS_SET_LIMITED else [("key_limited", {"queue": queue})]

    _KEYS_SET_LIMITED = False

    async def _topic_run(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> Sequence[Sequence[Row]]:
        raise NotImplementedError

    async def _fetch_page(self, statement: str, limit: int, **values: Any) -> Sequence[Row]:
        raise NotImplementedError

    async def put_key(self, queue: str, key: str, settings: KeySettings) -> None:
        """Set a key's settings (making its row: the queue becomes fair). QueueNotFound."""
        values = {
            "queue": queue,
            "key": key,
            "weight": settings.weight,
            "max_leased": settings.max_leased,
            "rate_per_second": settings.rate_per_second,
        }
        written = await self._topic_run([("put_key", values), *self._limited_step(queue)])
        if not written[0]:
            raise QueueNotFound()
        self.flow.forget(queue)

    async def reset_key(self, queue: str, key: str) -> None:
        """A key's settings back to the queue's defaults (its rank stays: its turn is kept)."""
        await self._topic_run([("reset_key", {"queue": queue, "key": key}), *self._limited_step(queue)])
        self.flow.forget(queue)

    async def get_key(self, queue: str, key: str) -> KeyStats:
        """A key's settings and counts; a key the queue never saw has the defaults and no items."""
        found = await self._fetch_page("key_page", 1, queue=queue, key=key, after=None)
        return key_stats(found[0]) if found else KeyStats(key, KeySettings(), 0, 0)

    async def list_keys(self, queue: str, limit: int, cursor: str | None) -> Page[KeyStats]:
        """The queue's keys in key order, a page at a time (unkeyed items are not a key here)."""
        after = decode_name_cursor(cursor, _KEY_MARK, _is_key)
        page = await self._fetch_page("key_page", limit, queue=queue, key=None, after=after)
        found = [key_stats(row) for row in page]
        return Page(found, encode_name_cursor(found[-1].key, _KEY_MARK) if len(found) == limit else None)

    async def top_keys(self, queue: str, limit: int) -> list[KeyLoad]:
        """The queue's busiest keys (see Store.top_keys)."""
        found = await self._fetch_page("top_keys", limit, queue=queue, now=self._now())
        return [key_load(row) for row in found]
