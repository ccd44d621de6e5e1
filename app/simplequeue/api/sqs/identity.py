"""STS's GetCallerIdentity, on the SQS door's address: test fixtures and tools (Terraform, the CDK,
`aws sts get-caller-identity`) learn the account before they make queues. The caller is the key
that signed the request (its name as the user), or, without keys, the account's root."""

from __future__ import annotations

import re
from typing import Any

from simplequeue.api.auth import OPEN
from simplequeue.api.sqs.context import Context

STS_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"


async def get_caller_identity(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    account = ctx.place.account_id
    if ctx.grant is OPEN:
        return {"Arn": f"arn:aws:iam::{account}:root", "UserId": account, "Account": account}
    name = ctx.grant.name
    user = _NOT_IN_A_USER_NAME.sub("-", name)  # "admin key #1" as an IAM user name may be written
    return {"Arn": f"arn:aws:iam::{account}:user/{user}", "UserId": name, "Account": account}


_NOT_IN_A_USER_NAME = re.compile(r"[^\w+=,.@-]")
