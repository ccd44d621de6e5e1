"""AddPermission and RemovePermission: statements of the queue's Policy, written as SQS writes
them (Sid the label, the accounts' roots as principals, `SQS:<action>`, the queue's ARN). A Policy
is kept and answered, never enforced: who may do what is the service's keys and roles."""

from __future__ import annotations

import json
import re
from typing import Any

from simplequeue.api.auth import Action
from simplequeue.api.sqs import params
from simplequeue.api.sqs.addressing import queue_param
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, from_domain, invalid, missing
from simplequeue.domain import QueueError
from simplequeue.domain.metadata import MetadataChange

ALLOWED = frozenset(
    {
        "*",
        "ChangeMessageVisibility",
        "DeleteMessage",
        "GetQueueAttributes",
        "GetQueueUrl",
        "ListDeadLetterSourceQueues",
        "PurgeQueue",
        "ReceiveMessage",
        "SendMessage",
    }
)
"""What SQS lets a queue's owner grant another account; the rest only the owner may do."""
MAX_ACTIONS = 7
LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")
ACCOUNT = re.compile(r"\d{12}")


async def add_permission(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    label = _label(p)
    accounts = params.names(p, "AWSAccountIds")
    actions = params.names(p, "Actions")
    if not actions:
        raise missing("Actions")
    if not accounts or not all(ACCOUNT.fullmatch(a) for a in accounts):
        raise invalid("PrincipalId", accounts, "Unable to verify.")
    if len(actions) > MAX_ACTIONS:
        raise SqsError("OverLimit", f"{len(actions)} Actions were found, maximum allowed is {MAX_ACTIONS}.")
    for action in actions:
        if action not in ALLOWED:
            raise invalid(
                "ActionName", f"SQS:{action}", "Only the queue owner is allowed to invoke this action."
            )
    ctx.authorize(Action.ADMINISTER, name)
    policy = await _policy(ctx, name)
    if any(s.get("Sid") == label for s in policy["Statement"]):
        raise invalid("Label", label, "Already exists.")
    principals = [f"arn:aws:iam::{account}:root" for account in accounts]
    granted = [f"SQS:{action}" for action in actions]
    policy["Statement"].append(
        {
            "Sid": label,
            "Effect": "Allow",
            "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
            "Action": granted[0] if len(granted) == 1 else granted,
            "Resource": ctx.place.arn(name),
        }
    )
    await _keep(ctx, name, policy)
    return {}


async def remove_permission(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    name = queue_param(ctx, p)
    label = _label(p)
    ctx.authorize(Action.ADMINISTER, name)
    policy = await _policy(ctx, name)
    kept = [s for s in policy["Statement"] if s.get("Sid") != label]
    if len(kept) == len(policy["Statement"]):
        raise invalid("Label", label, "can't find label.")
    policy["Statement"] = kept
    await _keep(ctx, name, policy)
    return {}


def _label(p: dict[str, Any]) -> str:
    label = params.required_text(p, "Label")
    if not LABEL.fullmatch(label):
        raise invalid("Label", label, "it must be 1 to 80 alphanumeric characters, hyphens or underscores.")
    return label


async def _policy(ctx: Context, name: str) -> dict[str, Any]:
    """The queue's Policy as a document with a Statement list (SQS's default when it has none)."""
    try:
        kept = (await ctx.service.queue_metadata(name)).attributes.get("Policy")
    except QueueError as exc:
        raise from_domain(exc) from None
    document: Any = json.loads(kept) if kept else {}
    if not isinstance(document, dict):
        document = {}
    result: dict[str, Any] = document
    result.setdefault("Version", "2012-10-17")
    result.setdefault("Id", f"{ctx.place.arn(name)}/SQSDefaultPolicy")
    statements = result.get("Statement")
    result["Statement"] = [statements] if isinstance(statements, dict) else list(statements or [])
    return result


async def _keep(ctx: Context, name: str, policy: dict[str, Any]) -> None:
    """The policy written back; one with no statement left is removed, as SQS answers none."""
    if policy["Statement"]:
        change = MetadataChange(set_attributes={"Policy": json.dumps(policy, separators=(",", ":"))})
    else:
        change = MetadataChange(unset_attributes=frozenset({"Policy"}))
    try:
        await ctx.service.change_queue_metadata(name, change)
    except QueueError as exc:
        raise from_domain(exc) from None
