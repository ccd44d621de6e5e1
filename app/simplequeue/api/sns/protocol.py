"""SNS's query protocol: a form in, XML out.

The form flattens lists as `Name.member.N` (`TagKeys.member.1=a`) and maps as `Name.entry.N.key`
and `.value` (`Attributes.entry.1.key=DisplayName`; a message attribute's are `.Name` and
`.Value`, itself a structure: `MessageAttributes.entry.1.Value.DataType`). `decode` turns it into
nested dicts and lists; `to_xml` writes an answer the other way, with `Entries` for a map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from simplequeue.api.sns.errors import NAMESPACE, SnsError, missing
from simplequeue.api.sqs.protocol import MAX_KEY_LENGTH, MAX_KEY_PARTS, MAX_PARAMETERS


@dataclass(frozen=True, slots=True)
class Call:
    action: str
    params: dict[str, Any]


class Entries(dict[str, Any]):
    """A map in an answer: written as `<entry><key>..</key><value>..</value></entry>`."""


def form(query: str, body: bytes, content_type: str | None) -> dict[str, str]:
    """The request's parameters: the URL's query and a form body (a later one wins)."""
    pairs = _pairs(query)
    if body and "x-www-form-urlencoded" in (content_type or "x-www-form-urlencoded"):
        try:
            pairs += _pairs(body.decode("utf-8"))
        except UnicodeDecodeError:
            raise SnsError("MalformedQueryString", "The request body is not UTF-8.", 404) from None
    if len(pairs) > MAX_PARAMETERS:
        raise _too_many()
    return dict(pairs)


def decode(query: str, body: bytes, content_type: str | None) -> Call:
    params = form(query, body, content_type)
    action = params.pop("Action", "")
    if not action:
        raise missing("Action")
    params.pop("Version", None)
    return Call(action, from_form(params))


def _pairs(text: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_PARAMETERS)
    except ValueError:  # past max_num_fields
        raise _too_many() from None


def _too_many() -> SnsError:
    return SnsError("MalformedQueryString", f"The request has more than {MAX_PARAMETERS} parameters.", 404)


def from_form(params: dict[str, str]) -> dict[str, Any]:
    """`A.member.1.B=x` as `{"A": [{"B": "x"}]}`, `A.entry.1.key=k&A.entry.1.value=v` as
    `{"A": {"k": "v"}}`."""
    tree: dict[str, Any] = {}
    for key, value in params.items():
        parts = key.split(".", MAX_KEY_PARTS)
        if len(key) > MAX_KEY_LENGTH or len(parts) > MAX_KEY_PARTS:
            raise SnsError(
                "MalformedQueryString", f"The parameter {key[:64]!r}... is not a parameter name.", 404
            )
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise _whole_and_in_parts(key)
        if isinstance(node.get(parts[-1]), dict):
            raise _whole_and_in_parts(key)
        node[parts[-1]] = value
    shaped = _shape(tree)
    return shaped if isinstance(shaped, dict) else {}


def _whole_and_in_parts(key: str) -> SnsError:
    return SnsError("MalformedQueryString", f"The parameter {key} is given both whole and in parts.", 404)


def _indexed(node: dict[str, Any]) -> list[Any]:
    # ASCII digits only: str.isdigit() holds for "²", which int() refuses.
    if not all(k.isascii() and k.isdigit() for k in node):
        raise SnsError("MalformedQueryString", "A list's members must be numbered.", 404)
    return [node[k] for k in sorted(node, key=int)]


def _shape(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if set(node) == {"member"} and isinstance(node["member"], dict):
        return [_shape(v) for v in _indexed(node["member"])]
    if set(node) == {"entry"} and isinstance(node["entry"], dict):
        shaped_map: dict[str, Any] = {}
        for entry in _indexed(node["entry"]):
            entry = _shape(entry)
            if not isinstance(entry, dict):
                raise SnsError("MalformedQueryString", "A map's entries must have a key and a value.", 404)
            name = entry.get("key", entry.get("Name"))
            if not isinstance(name, str):
                raise SnsError("MalformedQueryString", "A map's entries must have a key and a value.", 404)
            shaped_map[name] = entry.get("value", entry.get("Value"))
        return shaped_map
    return {key: _shape(value) for key, value in node.items()}


# --- answers -----------------------------------------------------------------------------------


NO_RESULT = frozenset({"DeleteTopic", "SetTopicAttributes", "Unsubscribe", "SetSubscriptionAttributes"})
"""Actions whose answer has no `<ActionResult>` (SNS's model gives them no output); every other
answer has one, empty or not (botocore looks for it)."""


def to_xml(action: str, result: dict[str, Any], request_id: str) -> bytes:
    inner = "" if action in NO_RESULT else f"<{action}Result>{_fields(result)}</{action}Result>"
    meta = f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>"
    text = f'<?xml version="1.0"?><{action}Response xmlns="{NAMESPACE}">{inner}{meta}</{action}Response>'
    return text.encode()


def _fields(values: dict[str, Any]) -> str:
    return "".join(f"<{key}>{_value(value)}</{key}>" for key, value in values.items() if value is not None)


def _value(value: Any) -> str:
    if isinstance(value, Entries):
        return "".join(
            f"<entry><key>{escape(k)}</key><value>{_value(v)}</value></entry>" for k, v in value.items()
        )
    if isinstance(value, dict):
        return _fields(value)
    if isinstance(value, list):
        return "".join(f"<member>{_value(v)}</member>" for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value), {"\r": "&#xD;"})
