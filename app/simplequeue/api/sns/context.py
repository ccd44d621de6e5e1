"""What every action is called with: the topic service, who calls, and where the service is
reached (the base of SigningCertURL and UnsubscribeURL); and the reading of the parameters and
ARNs the actions take, with SNS's errors for what is wrong."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from simplequeue.api.auth import Action, Grant
from simplequeue.api.sns.errors import SnsError, invalid, missing, no_subscription, no_topic
from simplequeue.domain.notifications import Arns
from simplequeue.domain.topics import is_topic_name
from simplequeue.domain.xml_chars import first_not_xml
from simplequeue.service.topics import TopicService

PAGE = 100
"""What SNS's List* answer at most per page."""
_SNS_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}")


@dataclass(frozen=True, slots=True)
class Context:
    topics: TopicService
    grant: Grant
    base_url: str
    action: str
    """SNS's name of the action called (AuthorizationError names it)."""

    @property
    def arns(self) -> Arns:
        return self.topics.arns

    @property
    def account_id(self) -> str:
        return self.arns.account_id

    def authorize(self, action: Action, name: str | None = None, arn: str | None = None) -> None:
        """AuthorizationError (403) unless the caller's key may do this, to this topic or queue
        (a key's queue patterns cover topic names too)."""
        if self.grant.may(action, name):
            return
        if name is None or not self.grant.may(action):
            why = f"a {self.grant.role} key may not {action}"
        else:
            why = f"this key does not cover {name}"
        resource = arn or (self.arns.topic(name) if name else f"arn:aws:sns:*:{self.account_id}:*")
        raise SnsError(
            "AuthorizationError",
            f"User: {self.grant.name} is not authorized to perform: SNS:{self.action} "
            f"on resource: {resource} ({why})",
        )


def text(p: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = p.get(name)
    if value is None:
        if required:
            raise missing(name)
        return None
    if not isinstance(value, str):
        raise invalid(name)
    return value


def required(p: dict[str, Any], name: str) -> str:
    value = text(p, name)
    assert value is not None
    return value


def string_map(p: dict[str, Any], name: str) -> dict[str, str]:
    """A map of text to text (Attributes), each value one the XML answers can carry."""
    value = p.get(name)
    if value is None or value == "":
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str | None) for v in value.values()):
        raise invalid(name)
    checked = {k: v or "" for k, v in value.items()}
    for key, text_ in checked.items():
        if first_not_xml(key) is not None or first_not_xml(text_) is not None:
            raise invalid(f"{name}: {key!r}", "it holds a character XML cannot carry")
    return checked


def members(p: dict[str, Any], name: str) -> list[Any]:
    """A list parameter (`Name.member.N`); botocore sends an empty one as `Name=`."""
    value = p.get(name)
    if value is None or value == "":
        return []
    if not isinstance(value, list):
        raise invalid(name)
    return value


def topic_name(ctx: Context, arn: str, param: str = "TopicArn") -> str:
    """The topic an ARN names. A well-formed ARN of another account or region, or of a topic
    there is not, is NotFound; anything else InvalidParameter."""
    name = ctx.arns.topic_of(arn)
    if name is not None and is_topic_name(name):
        return name
    if _SNS_ARN.fullmatch(arn):
        raise no_topic()
    raise invalid(param)


def topic_param(ctx: Context, p: dict[str, Any], param: str = "TopicArn") -> str:
    return topic_name(ctx, required(p, param), param)


def subscription_param(ctx: Context, p: dict[str, Any]) -> tuple[str, UUID]:
    """(topic, subscription id) of SubscriptionArn; a well-formed one of another account or region,
    NotFound; anything else InvalidParameter."""
    arn = required(p, "SubscriptionArn")
    found = ctx.arns.subscription_of(arn)
    if found is not None:
        return found
    head, _, tail = arn.rpartition(":")
    if _SNS_ARN.fullmatch(head) and _is_uuid(tail):
        raise no_subscription()
    raise invalid("SubscriptionArn")


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return True
