"""What every action is called with: the service, where the door answers from, who calls, and
this process's own state for the door (simplequeue.service.local), built by the app's lifespan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from simplequeue.api.auth import Action, Grant
from simplequeue.api.sqs.errors import SqsError
from simplequeue.api.sqs.urls import Place
from simplequeue.service.local.attempts import ReceiveAttempts
from simplequeue.service.local.moves import MoveTasks
from simplequeue.service.local.purges import Purges
from simplequeue.service.queues import QueueService
from simplequeue.service.waiting import never_gone


@dataclass(frozen=True, slots=True)
class Context:
    service: QueueService
    place: Place
    grant: Grant
    path_queue: str | None = None
    """The queue of the URL the request was posted to (the query protocol may post to it)."""
    gone: Callable[[], Awaitable[bool]] = never_gone
    """Whether the caller hung up (a long-poll then ends)."""
    moves: MoveTasks | None = None
    """This process's message move tasks (None: an app built without them)."""
    xml: bool = False
    """Whether the answer is written in XML (the query protocol), which cannot carry every
    character a message may hold."""
    attempts: ReceiveAttempts | None = None
    """This process's FIFO receive attempts (ReceiveRequestAttemptId; None: not remembered)."""
    purges: Purges | None = None
    """This process's purges, one per queue in 60 seconds (None: an app built without them)."""

    def authorize(self, action: Action, queue: str | None = None) -> None:
        """AccessDenied (403) unless the caller's key may do this, to this queue."""
        if self.grant.may(action, queue):
            return
        if queue is None or not self.grant.may(action):
            why = f"a {self.grant.role} key may not {action}"
        else:
            why = f"this key may not use queue {queue}"
        raise SqsError("AccessDenied", f"Access to the resource is denied: {why}.")
