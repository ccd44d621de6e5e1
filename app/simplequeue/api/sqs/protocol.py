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

# What the door reads of a request, bounded with room to spare above what SQS's own requests need.
MAX_JSON_DEPTH = 10
"""Arrays and objects within each other, the body's own object counted: SendMessageBatch's deepest
(the body, Entries, an entry, its MessageAttributes, a value, StringListValues) is 6."""
MAX_PARAMETERS = 1000
"""A form's parameters: a SendMessageBatch of 10 entries of 10 message attributes has about 450."""
MAX_KEY_LENGTH = 256
MAX_KEY_PARTS = 8
"""A flattened name's parts: `SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue` has 6."""


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
    pairs = _form_pairs(query)
    if body and "x-www-form-urlencoded" in headers.get("content-type", "x-www-form-urlencoded"):
        try:
            pairs += _form_pairs(body.decode("utf-8"))
        except UnicodeDecodeError:
            raise SqsError("MalformedQueryString", "The request body is not UTF-8.") from None
    if len(pairs) > MAX_PARAMETERS:
        raise _too_many_parameters()
    form = dict(pairs)
    action = form.pop("Action", "")
    if not action:
        raise SqsError("MissingParameter", "The request must contain the parameter Action.")
    form.pop("Version", None)
    return Call(Wire.QUERY, action, from_form(form))


def _form_pairs(text: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_PARAMETERS)
    except ValueError:  # past max_num_fields
        raise _too_many_parameters() from None


def _too_many_parameters() -> SqsError:
    return SqsError("MalformedQueryString", f"The request has more than {MAX_PARAMETERS} parameters.")


def _json_params(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        params = json.loads(body)
    except (ValueError, UnicodeDecodeError):  # a number of over 4,300 digits is a ValueError too
        raise SqsError("InvalidParameterValue", "The request body is not valid JSON.") from None
    except RecursionError:
        raise _too_deep() from None
    if not isinstance(params, dict):
        raise SqsError("InvalidParameterValue", "The request body must be a JSON object.")
    if _depth(params) > MAX_JSON_DEPTH:
        raise _too_deep()
    return params


def _too_deep() -> SqsError:
    return SqsError(
        "InvalidParameterValue", f"The request body nests arrays and objects deeper than {MAX_JSON_DEPTH}."
    )


def _depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value; counted without recursion, and
    no further than one past MAX_JSON_DEPTH."""
    depth, level = 0, [value]
    while level and depth <= MAX_JSON_DEPTH:
        containers = [v for v in level if isinstance(v, dict | list)]
        if containers:
            depth += 1
        level = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]
    return depth


# --- the query protocol's flattened names -------------------------------------------------------

_RENAMED = {
    "AttributeName": "AttributeNames",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "SendMessageBatchRequestEntry": "Entries",
    "DeleteMessageBatchRequestEntry": "Entries",
    "ChangeMessageVisibilityBatchRequestEntry": "Entries",
    "TagKey": "TagKeys",
    "AWSAccountId": "AWSAccountIds",
    "ActionName": "Actions",
}
_LISTS = frozenset(_RENAMED.values())
_MAPS = {
    "Attribute": "Attributes",
    "MessageAttribute": "MessageAttributes",
    "MessageSystemAttribute": "MessageSystemAttributes",
    "Tag": "Tags",
}
_MAP_KEYS = {
    "Attribute": ("Name", "Value"),
    "MessageAttribute": ("Name", "Value"),
    "MessageSystemAttribute": ("Name", "Value"),
    "Tag": ("Key", "Value"),
}


def from_form(form: dict[str, str]) -> dict[str, Any]:
    """`A.1.B=x&A.2.B=y` as `{"A": [{"B": "x"}, {"B": "y"}]}`, with lists and maps named as the
    JSON protocol names them."""
    tree: dict[str, Any] = {}
    for key, value in form.items():
        node = tree
        *path, last = _parts(key)
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise _whole_and_in_parts(key)
        if isinstance(node.get(last), dict):
            raise _whole_and_in_parts(key)
        node[last] = value
    shaped = _shape(tree)
    return shaped if isinstance(shaped, dict) else {}


def _parts(key: str) -> list[str]:
    parts = key.split(".", MAX_KEY_PARTS)
    if len(key) > MAX_KEY_LENGTH or len(parts) > MAX_KEY_PARTS:
        raise SqsError(
            "MalformedQueryString",
            f"The parameter {key[:64]!r}... is not a parameter name: at most {MAX_KEY_LENGTH} characters "
            f"of at most {MAX_KEY_PARTS} parts.",
        )
    return parts


def _whole_and_in_parts(key: str) -> SqsError:
    return SqsError("MalformedQueryString", f"The parameter {key} is given both whole and in parts.")


def _shape(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    # ASCII digits only: str.isdigit() holds for "²", which int() refuses.
    if node and all(k.isascii() and k.isdigit() for k in node):
        return [_shape(node[k]) for k in sorted(node, key=int)]
    shaped: dict[str, Any] = {}
    for key, value in node.items():
        value = _shape(value)
        if key in _MAPS and isinstance(value, list):
            shaped[_MAPS[key]] = _map(key, value)
        elif value == "" and (key in _RENAMED or key in _LISTS):
            # botocore's query serializer sends an empty list as its member's name, valueless
            # (`Entries=`, `AttributeNames=`): the list, empty.
            shaped[_RENAMED.get(key) or key] = []
        else:
            shaped[_RENAMED.get(key) or key] = value
    return shaped


def _map(key: str, entries: list[Any]) -> dict[str, Any]:
    """`Attribute.N.Name` and `Attribute.N.Value` (`Tag.N.Key`, ...) as the JSON protocol's map."""
    name, val = _MAP_KEYS[key]
    shaped: dict[str, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get(name, ""), str):
            raise SqsError(
                "MalformedQueryString", f"Each {key}.N must be given as {key}.N.{name} and {key}.N.{val}."
            )
        shaped[entry.get(name, "")] = entry.get(val)
    return shaped


# --- answers -----------------------------------------------------------------------------------

NO_RESULT = frozenset(
    {
        "DeleteMessage",
        "DeleteQueue",
        "PurgeQueue",
        "ChangeMessageVisibility",
        "SetQueueAttributes",
        "AddPermission",
        "RemovePermission",
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


def to_xml(action: str, result: dict[str, Any], request_id: str, namespace: str = NAMESPACE) -> bytes:
    inner = "" if action in NO_RESULT else f"<{action}Result>{_fields(action, result)}</{action}Result>"
    meta = f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>"
    text = f'<?xml version="1.0"?><{action}Response xmlns="{namespace}">{inner}{meta}</{action}Response>'
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
