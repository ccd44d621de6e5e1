"""A strict Python caller of simplequeue through the client openapi-python-client generates from
openapi/openapi.json (package `simplequeue_openapi`, not committed). `mypy --strict` over this file
proves a caller may omit every defaulted request field and gets typed answers; running it against
a live `simplequeue serve` proves the generated models read what the service answers.

Usage: python push_pop.py <base url>
"""

from __future__ import annotations

import sys
import time

from simplequeue_openapi import Client
from simplequeue_openapi.api.items import complete_item, pop, push
from simplequeue_openapi.api.queues import list_queues
from simplequeue_openapi.models import (
    ErrorBody,
    ErrorCode,
    PopRequest,
    PushRequest,
    PushResponse,
    QueueList,
)


def fail(message: str) -> None:
    sys.exit(f"failed: {message}")


def main(base_url: str) -> None:
    queue = f"py-{time.time_ns()}"
    with Client(base_url=base_url, raise_on_unexpected_status=True) as client:
        # Only `payload`: the queue and the rest take the server's defaults.
        defaulted = push.sync(client=client, body=PushRequest(payload={"hello": "world"}))
        if not isinstance(defaulted, PushResponse) or defaulted.queue != "default":
            return fail(f"push with only a payload answered {defaulted!r}")

        pushed = push.sync(client=client, body=PushRequest(payload={"n": 1}, queue=queue))
        if not isinstance(pushed, PushResponse) or not pushed.created:
            return fail(f"push answered {pushed!r}")

        # Only `queue`: max_items, wait_seconds and lease_seconds take their defaults.
        popped = pop.sync(client=client, body=PopRequest(queue=queue))
        if popped is None or isinstance(popped, ErrorBody):
            return fail(f"pop answered {popped!r}")
        if [item.id for item in popped.items] != [pushed.id]:
            return fail(f"popped {[item.id for item in popped.items]}, pushed {pushed.id}")
        lease_token = popped.items[0].lease_token

        # The queues, a page at a time (the default queue and ours: two pages of one).
        first = list_queues.sync(client=client, limit=1)
        if not isinstance(first, QueueList) or not isinstance(first.next_cursor, str):
            return fail(f"a first page of one queue answered {first!r}")
        rest = list_queues.sync(client=client, limit=1, cursor=first.next_cursor)
        if not isinstance(rest, QueueList) or rest.queues[0].name == first.queues[0].name:
            return fail(f"the next page answered {rest!r}")

        done = complete_item.sync_detailed(pushed.id, client=client, lease_token=lease_token)
        if done.status_code != 204:
            return fail(f"complete answered {done.status_code}")

        # A typed error: completing it again is 404 ItemNotFound, in the one envelope.
        again = complete_item.sync(pushed.id, client=client)
        if not isinstance(again, ErrorBody) or again.error is not ErrorCode.ITEM_NOT_FOUND:
            return fail(f"completing twice answered {again!r}")

        # A validation error names its fields.
        invalid = pop.sync(client=client, body=PopRequest(queue=queue, max_items=0))
        if not isinstance(invalid, ErrorBody) or invalid.error is not ErrorCode.VALIDATION_ERROR:
            return fail(f"max_items 0 answered {invalid!r}")
        if not invalid.fields:
            return fail("a ValidationError without fields")
        where = ".".join(str(part) for part in invalid.fields[0].loc)

    print(f"ok: pushed, popped and completed {pushed.id}; then {again.error.value}; then {where} invalid")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python push_pop.py <base url>")
    main(sys.argv[1])
