"""One SQS call over either protocol, as the clients send it: the JSON protocol as boto3 does
(`X-Amz-Target`, a JSON object), the query protocol as botocore 1.31 did (a form, flattened lists
and maps), against a service without keys. The answer comes back in one shape whichever protocol
carried it, so that a test states SQS's behaviour once and checks it on both."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import httpx

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
PROTOCOLS = ["json", "query"]
_MAPS = {
    "Attributes": ("Attribute", "Name", "Value"),
    "tags": ("Tag", "Key", "Value"),
    "Tags": ("Tag", "Key", "Value"),
}


@dataclass
class Answer:
    status: int
    code: str | None = None
    """The query protocol's error code (the JSON protocol's x-amzn-query-error), None on success."""
    message: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    json_type: str | None = None
    """The JSON protocol's `__type` of an error (None on success and over the query protocol)."""


def call(base: str, protocol: str, action: str, **params: Any) -> Answer:
    if protocol == "json":
        return _json_answer(httpx.post(base + "/", json=params, headers=_json_headers(action), timeout=30))
    return _query_answer(action, httpx.post(base + "/", data=_form(action, params), timeout=30))


async def acall(client: httpx.AsyncClient, protocol: str, action: str, **params: Any) -> Answer:
    """call, through a client of an app in this process (one on an injected clock)."""
    if protocol == "json":
        return _json_answer(await client.post("/", json=params, headers=_json_headers(action)))
    return _query_answer(action, await client.post("/", data=_form(action, params)))


def _json_headers(action: str) -> dict[str, str]:
    return {"X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0"}


def _json_answer(answer: httpx.Response) -> Answer:
    body = answer.json()
    if answer.status_code != 200:
        code = answer.headers["x-amzn-query-error"].split(";")[0]
        return Answer(answer.status_code, code, body.get("message", ""), json_type=body.get("__type"))
    return Answer(200, result=body)


def _form(action: str, params: dict[str, Any]) -> dict[str, str]:
    form: dict[str, str] = {"Action": action, "Version": "2012-11-05"}
    for key, value in params.items():
        if isinstance(value, dict):
            member, name, val = _MAPS[key]
            for n, (k, v) in enumerate(value.items(), 1):
                form[f"{member}.{n}.{name}"], form[f"{member}.{n}.{val}"] = k, v
        elif isinstance(value, list):
            member = key[:-1] if key.endswith("s") else key
            form |= {f"{member}.{n}": v for n, v in enumerate(value, 1)}
        else:
            form[key] = str(value)
    return form


def _query_answer(action: str, answer: httpx.Response) -> Answer:
    root = ET.fromstring(answer.content)
    if answer.status_code != 200:
        return Answer(
            answer.status_code,
            root.findtext(f"{NS}Error/{NS}Code"),
            root.findtext(f"{NS}Error/{NS}Message") or "",
        )
    return Answer(200, result=_result(root.find(f"{NS}{action}Result")))


_LISTS = {"Message": "Messages", "BatchResultErrorEntry": "Failed"}


def _result(node: ET.Element | None, *, top: bool = True) -> dict[str, Any]:
    """An XML result in the JSON protocol's shape: Attribute elements as a map, repeated
    messages and batch entries as lists, other elements as their text (a batch entry's
    Message is its text)."""
    result: dict[str, Any] = {}
    for child in node if node is not None else []:
        tag = child.tag.removeprefix(NS)
        if tag == "Attribute":
            result.setdefault("Attributes", {})[child.findtext(f"{NS}Name")] = child.findtext(f"{NS}Value")
        elif top and (tag in _LISTS or tag.endswith("ResultEntry")):
            result.setdefault(_LISTS.get(tag, "Successful"), []).append(_result(child, top=False))
        else:
            result[tag] = child.text
    return result
