"""Queue URLs and ARNs: `{public_url or scheme://host}/{account_id}/{name}`,
`arn:aws:sqs:{region}:{account_id}:{name}`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from simplequeue.api.sqs.errors import SqsError, no_queue
from simplequeue.domain.names import is_queue_name

SQS_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
"""What CreateQueue takes (a FIFO queue's name ends in .fifo, within the 80). Other calls find any
queue of the service by name, those made through the REST API (dots, up to 128) too."""

ACCOUNT_PATH = re.compile(r"/(?P<account>\d{12})/(?P<queue>[^/]+)")


@dataclass(frozen=True, slots=True)
class Place:
    """Where the door answers from: the base of its queue URLs, the account and region."""

    base_url: str
    account_id: str
    region: str

    def queue_url(self, name: str) -> str:
        return f"{self.base_url}/{self.account_id}/{name}"

    def arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account_id}:{name}"

    def queue_of_arn(self, arn: str) -> str | None:
        """The queue an ARN of this account and region names (None: another's, or no ARN)."""
        prefix = self.arn("")
        name = arn[len(prefix) :] if arn.startswith(prefix) else ""
        return name if is_queue_name(name) else None


def base_url(public_url: str | None, scheme: str, host: str) -> str:
    return (public_url or f"{scheme}://{host}").rstrip("/")


def queue_of_path(path: str, account_id: str) -> str | None:
    """The queue a request posted to a queue URL names (None: posted to `/`)."""
    if path in ("", "/"):
        return None
    match = ACCOUNT_PATH.fullmatch(path)
    if match is None or match["account"] != account_id:
        raise no_queue()
    return checked_name(unquote(match["queue"]))


def queue_of_url(url: str, account_id: str) -> str:
    """The queue a QueueUrl names. Its scheme and host are not ours to check (a proxy may stand
    between): the path decides, as SQS's does; a path that is no queue's is QueueDoesNotExist. A
    bare queue name is taken as that queue, as SQS takes it."""
    parts = urlsplit(url)
    if not parts.scheme and not url.startswith("/"):
        return checked_name(url)
    path = parts.path if parts.scheme else url
    return queue_of_path(path, account_id) or _not_a_queue()


def _not_a_queue() -> str:
    raise no_queue()


def checked_name(name: str) -> str:
    """A name that may be a queue's; any other names no queue."""
    if not is_queue_name(name):
        raise no_queue()
    return name


def creatable(name: str) -> str:
    fifo = name.endswith(".fifo")
    stem = name[: -len(".fifo")] if fifo else name
    if not SQS_QUEUE_NAME.fullmatch(stem) or len(name) > 80:
        raise SqsError(
            "InvalidParameterValue",
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
        )
    return name


def is_fifo(name: str) -> bool:
    return name.endswith(".fifo")
