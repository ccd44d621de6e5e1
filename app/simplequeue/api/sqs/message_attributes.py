"""Message attributes on the SQS door: read from SendMessage(Batch) entries, answered by
ReceiveMessage as MessageAttributeNames asks, and MD5OfMessageAttributes, which the AWS SDKs for
Java and JavaScript check.

Both protocols carry a value as `{"DataType", "StringValue" | "BinaryValue"}` (the query protocol's
`MessageAttribute.N.Name` / `.Value.DataType` / ... arrive so, see protocol.from_form), a Binary
value in base64. The rules are the domain's (simplequeue.domain.attributes), whatever door an item
comes through; breaking one is InvalidParameterValue, as on SQS.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from simplequeue.api.sqs.errors import SqsError
from simplequeue.domain import (
    Attribute,
    InvalidAttributes,
    check_attributes,
    decode_attributes,
    split_system,
)
from simplequeue.domain.xml_chars import first_not_xml

_STRING, _BINARY = b"\x01", b"\x02"  # the transport types MD5OfMessageAttributes counts

SEQUENCE_DIGITS = 20  # SQS's sequence numbers are decimal strings this long

Asked = tuple[bool, frozenset[str], tuple[str, ...]]
"""What MessageAttributeNames asks for: (all, exact names, prefixes of `prefix.*`)."""


def _refused(reason: str) -> SqsError:
    return SqsError("InvalidParameterValue", reason)


def sent(params: dict[str, Any]) -> dict[str, Attribute] | None:
    """The MessageAttributes of a SendMessage or a batch entry, checked; None when it has none."""
    given = params.get("MessageAttributes")
    if not given:
        return None
    if not isinstance(given, dict):
        raise _refused("MessageAttributes must be a map of names to values.")
    attributes = {name: _attribute(name, value) for name, value in given.items()}
    try:
        check_attributes(attributes)
    except InvalidAttributes as exc:
        raise _refused(f"Message attributes are invalid: {exc.detail}.") from None
    return attributes


def _attribute(name: Any, value: Any) -> Attribute:
    if not isinstance(name, str) or not isinstance(value, dict):
        raise _refused(f"The message attribute {name!r} must be a map with a DataType and a value.")
    data_type = value.get("DataType")
    if not isinstance(data_type, str) or not data_type:
        raise _refused(f"The message attribute '{name}' must contain non-empty message attribute type.")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        raise _refused(f"The message attribute '{name}': list values are not supported.")
    binary = data_type.startswith("Binary")
    field = "BinaryValue" if binary else "StringValue"
    other = "StringValue" if binary else "BinaryValue"
    text = value.get(field)
    if value.get(other) is not None:
        raise _refused(f"The message attribute '{name}' with type '{data_type}' must use field '{field}'.")
    if not isinstance(text, str) or not text:
        raise _refused(
            f"Message (user) attribute '{name}' must contain a non-empty value of type '{data_type}'."
        )
    if not binary:
        return Attribute(data_type, text)
    try:
        return Attribute(data_type, base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        raise _refused(f"The message attribute '{name}': its BinaryValue is not base64.") from None


SENT_SYSTEM = ("AWSTraceHeader",)
"""The message system attributes a send may give (SQS takes only this one)."""
MAX_TRACE_HEADER = 1024


def sent_system(params: dict[str, Any]) -> dict[str, str]:
    """The MessageSystemAttributes of a send, checked: AWSTraceHeader, a String."""
    given = params.get("MessageSystemAttributes")
    if not given:
        return {}
    if not isinstance(given, dict):
        raise _refused("MessageSystemAttributes must be a map of names to values.")
    kept: dict[str, str] = {}
    for name, value in given.items():
        if name not in SENT_SYSTEM:
            raise _refused(f"Message system attribute name '{name}' is invalid.")
        attribute = _attribute(name, value)
        text = attribute.value
        if attribute.type != "String" or not isinstance(text, str):
            raise _refused(f"The message system attribute '{name}' must be of type String.")
        if len(text) > MAX_TRACE_HEADER or first_not_xml(text) is not None:
            raise _refused(f"The message system attribute '{name}' is not a valid trace header.")
        kept[name] = text
    return kept


def md5(text: str) -> str:
    """MD5OfMessageBody, MD5OfBody: of the body's UTF-8."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def sequence_number(seq: int) -> str:
    """A FIFO message's SequenceNumber: the store's insertion order, which a group's messages keep
    (larger for a later send), as SQS writes it."""
    return str(seq).zfill(SEQUENCE_DIGITS)


def system_md5(system: Mapping[str, str]) -> str:
    """MD5OfMessageSystemAttributes: as MD5OfMessageAttributes, over the system attributes sent."""
    return md5_of({name: Attribute("String", value) for name, value in system.items()})


def size_of(params: dict[str, Any]) -> int:
    """About the bytes an entry's attributes count toward a batch's limit (names, types, values),
    read leniently: an entry whose attributes are malformed is refused on its own later."""
    given = params.get("MessageAttributes")
    if not isinstance(given, dict):
        return 0
    size = 0
    for name, value in given.items():
        if isinstance(value, dict):
            size += sum(len(str(value.get(k) or "").encode()) for k in ("DataType", "StringValue"))
            size += len(str(value.get("BinaryValue") or "")) * 3 // 4
        size += len(str(name).encode())
    return size


def md5_of(attributes: Mapping[str, Attribute]) -> str:
    """MD5OfMessageAttributes: over the attributes sorted by name, each as its name, its type, one
    transport byte (1: String and Number, 2: Binary) and its value, every length-prefixed part a
    4-byte big-endian length and its bytes."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        attribute = attributes[name]
        for part in (name.encode(), attribute.type.encode()):
            digest.update(len(part).to_bytes(4, "big") + part)
        digest.update(_BINARY if attribute.base_type == "Binary" else _STRING)
        value = attribute.value_bytes
        digest.update(len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()


def wanted(names: Iterable[str]) -> Asked:
    """What MessageAttributeNames asks for (`All`, `.*` or `*`: every one; `prefix.*`: those whose
    name starts with `prefix`, as a regular expression reads it: SQS answers `Hello` and `Help.Me`
    to `Hel.*`). A name no attribute may have (`AWS.`, `..foo`) asks for nothing, as on SQS."""
    names = list(names)
    every = any(n in ("All", ".*", "*") for n in names)
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*") and n != ".*")
    return every, frozenset(names), prefixes


def system_of(attributes_json: str | None) -> dict[str, str]:
    """The system attributes an item was sent with (SenderId, AWSTraceHeader...)."""
    return split_system(decode_attributes(attributes_json))[1] if attributes_json else {}


def received(attributes_json: str | None, asked: Asked) -> dict[str, Any]:
    """A received message's MessageAttributes and MD5OfMessageAttributes, of those asked for."""
    every, exact, prefixes = asked
    if attributes_json is None or not (every or exact or prefixes):
        return {}
    own, _ = split_system(decode_attributes(attributes_json))
    chosen = {name: a for name, a in own.items() if every or name in exact or name.startswith(prefixes)}
    if not chosen:
        return {}
    return {
        "MessageAttributes": {name: _wire(a) for name, a in chosen.items()},
        "MD5OfMessageAttributes": md5_of(chosen),
    }


def _wire(attribute: Attribute) -> dict[str, str]:
    if isinstance(attribute.value, bytes):
        return {"DataType": attribute.type, "BinaryValue": base64.b64encode(attribute.value).decode()}
    return {"DataType": attribute.type, "StringValue": attribute.value}
