"""The two wire protocols SQS speaks, decoded into one shape and encoded back.

- AWS JSON 1.0: `X-Amz-Target: AmazonSQS.<Action>`, a JSON object in, a JSON object out.
- The query protocol: a form (`Action=...&Version=2012-11-05&...`, in the body or the URL's query),
  flattened lists and maps (`Attribute.1.Name`, `SendMessageBatchRequestEntry.2.MessageBody`), and
  XML out in SQS's namespace, with `ResponseMetadata/RequestId`.

Actions see the JSON protocol's parameter names and shapes whichever protocol the caller spoke, and
return what the JSON protocol answers; `to_xml` writes the query protocol's answer from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from simplequeue.api.sqs.errors import NAMESPACE, SqsError

TARGET_PREFIX = "AmazonSQS."


class Wire(Enum):
    JSON = "json"
    QUERY = "query"


@dataclass(frozen=True, slots=True)
class Call:
    wire: Wire
    action: str
    params: dict[str, Any]


def decode(headers: dict[str, str], query: str, body: bytes) -> Call:
    """The call a request makes. `headers` lower-cased; `query` the URL's raw query string."""
    target = headers.get("x-amz-target")
    if target is not None:
        action = target[len(TARGET_PREFIX) :] if target.startswith(TARGET_PREFIX) else target
        return Call(Wire.JSON, action, _json_params(body))
    pairs = parse_qsl(query, keep_blank_values=True)
    if body and "x-www-form-urlencoded" in headers.get("content-type", "x-www-form-urlencoded"):
        try:
            pairs += parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise SqsError("MalformedQueryString", "The request body is not UTF-8.") from None
    form = dict(pairs)
    action = form.pop("Action", "")
    if not action:
        raise SqsError("MissingParameter", "The request must contain the parameter Action.")
    form.pop("Version", None)
    return Call(Wire.QUERY, action, from_form(form))


def _json_params(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        params = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise SqsError("InvalidParameterValue", "The request body is not valid JSON.") from None
    if not isinstance(params, dict):
        raise SqsError("InvalidParameterValue", "The request body must be a JSON object.")
    return params


# --- the query protocol's flattened names -------------------------------------------------------

_RENAMED = {
    "AttributeName": "AttributeNames",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "SendMessageBatchRequestEntry": "Entries",
    "DeleteMessageBatchRequestEntry": "Entries",
    "ChangeMessageVisibilityBatchRequestEntry": "Entries",
    "TagKey": "TagKeys",
}
_MAPS = {"Attribute": "Attributes", "MessageAttribute": "MessageAttributes", "Tag": "Tags"}
_MAP_KEYS = {"Attribute": ("Name", "Value"), "MessageAttribute": ("Name", "Value"), "Tag": ("Key", "Value")}


def from_form(form: dict[str, str]) -> dict[str, Any]:
    """`A.1.B=x&A.2.B=y` as `{"A": [{"B": "x"}, {"B": "y"}]}`, with lists and maps named as the
    JSON protocol names them."""
    tree: dict[str, Any] = {}
    for key, value in form.items():
        node = tree
        *path, last = key.split(".")
        for part in path:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SqsError(
                    "MalformedQueryString", f"The parameter {key} is given both whole and in parts."
                )
            node = child
        node[last] = value
    shaped = _shape(tree)
    return shaped if isinstance(shaped, dict) else {}


def _shape(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_shape(node[k]) for k in sorted(node, key=int)]
    shaped: dict[str, Any] = {}
    for key, value in node.items():
        value = _shape(value)
        if key in _MAPS and isinstance(value, list):
            name, val = _MAP_KEYS[key]
            shaped[_MAPS[key]] = {e.get(name, ""): e.get(val) for e in value if isinstance(e, dict)}
        else:
            shaped[_RENAMED.get(key) or key] = value
    return shaped


# --- answers -----------------------------------------------------------------------------------

NO_RESULT = frozenset(
    {
        "DeleteMessage",
        "DeleteQueue",
        "PurgeQueue",
        "ChangeMessageVisibility",
        "SetQueueAttributes",
        "TagQueue",
        "UntagQueue",
    }
)
"""Actions whose answer holds nothing: no `<ActionResult>` element in XML, `{}` in JSON."""

_MEMBER = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
}


def to_json(result: dict[str, Any]) -> bytes:
    return json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()


def to_xml(action: str, result: dict[str, Any], request_id: str) -> bytes:
    inner = "" if action in NO_RESULT else f"<{action}Result>{_fields(action, result)}</{action}Result>"
    meta = f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>"
    text = f'<?xml version="1.0"?><{action}Response xmlns="{NAMESPACE}">{inner}{meta}</{action}Response>'
    return text.encode()


def _fields(action: str, values: dict[str, Any]) -> str:
    out: list[str] = []
    for key, value in values.items():
        if key in ("Attributes", "MessageAttributes") and isinstance(value, dict):
            out += [_attribute(key, k, v) for k, v in value.items()]
        elif key == "Tags" and isinstance(value, dict):
            out += [f"<Tag><Key>{escape(k)}</Key><Value>{escape(v)}</Value></Tag>" for k, v in value.items()]
        elif isinstance(value, list):
            member = _MEMBER.get(key, f"{action}ResultEntry")
            for entry in value:
                text = _fields(action, entry) if isinstance(entry, dict) else _scalar(entry)
                out.append(f"<{member}>{text}</{member}>")
        else:
            out.append(f"<{key}>{_scalar(value)}</{key}>")
    return "".join(out)


def _attribute(key: str, name: str, value: Any) -> str:
    if key == "Attributes":
        return f"<Attribute><Name>{escape(name)}</Name><Value>{_scalar(value)}</Value></Attribute>"
    fields = _fields("", value) if isinstance(value, dict) else ""
    return f"<MessageAttribute><Name>{escape(name)}</Name><Value>{fields}</Value></MessageAttribute>"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value), _CR)


_CR = {"\r": "&#xD;"}  # XML readers turn a bare CR into LF; a body's CR must arrive as itself
