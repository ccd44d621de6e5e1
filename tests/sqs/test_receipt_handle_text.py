"""A receipt handle's text: never starting with "-", which a command line (aws-cli's
`--receipt-handle <handle>`) would take for an option; a handle of the release before (the same
digits without the leading letter) still names its lease."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest
from simplequeue.api.sqs.errors import SqsError
from simplequeue.api.sqs.handles import lease_of, receipt_handle
from simplequeue.domain import LeasedItem


def leased(item_id: UUID) -> LeasedItem:
    now = datetime.now(UTC)
    return LeasedItem(item_id, "q", '"x"', now, 1, uuid4(), now)


def test_a_handle_never_starts_with_a_dash() -> None:
    item = leased(UUID(bytes=b"\xf8" + bytes(15)))  # base64url of 0xF8... starts with "-"
    handle = receipt_handle(item)
    assert not handle.startswith("-")
    assert lease_of(handle) == (item.id, item.lease_token)


def test_a_handle_of_the_release_before_still_names_its_lease() -> None:
    item = leased(uuid4())
    old = receipt_handle(item)[1:]  # the digits alone, as the release before wrote them
    assert len(old) == 43
    assert lease_of(old) == (item.id, item.lease_token)


@pytest.mark.parametrize("handle", ["garbage", "Q" + "A" * 41, "-" * 44, "Q" * 45])
def test_other_text_is_no_handle(handle: str) -> None:
    with pytest.raises(SqsError) as e:
        lease_of(handle)
    assert e.value.code == "ReceiptHandleIsInvalid"
