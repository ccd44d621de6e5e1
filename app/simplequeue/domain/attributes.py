"""Message attributes: typed values an item carries beside its payload (SQS's MessageAttributes),
with SQS's limits, the same wherever an item comes in (the HTTP API, the SQS door).

An attribute has a name, a type and a value. The type is String, Number or Binary, or one of them
with a custom label after a period (``Number.float``, ``String.json``, ``Binary.png``). String and
Number values are text (a Number's text is kept as given: ``"1.50"`` stays ``"1.50"``); Binary
values are bytes. The store keeps an item's attributes as one JSON text, the HTTP API's shape,
``{"name": {"type": "String", "value": "..."}}``, names sorted, a Binary value in base64.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from simplequeue.domain.errors import InvalidAttributes
from simplequeue.domain.xml_chars import NOT_XML

MAX_ATTRIBUTES = 10
MAX_NAME_CHARS = 256
MAX_TYPE_CHARS = 256
BASE_TYPES = ("String", "Number", "Binary")
MAX_NUMBER_DIGITS = 38
NUMBER_LOW = Decimal("-1e128")
NUMBER_HIGH = Decimal("1e126")

NAME_CHARS = r"[^\x00-\x2c\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f\ufffe\uffff]"
"""A name's characters: A-Z, a-z, 0-9, underscore, hyphen and period, and any character beyond
ASCII (SQS takes letters of other scripts, `héllo`; which others it takes is not documented, so
every one XML can carry is taken). Written as the ASCII it excludes, so that the one class means
the same to ECMA-262 (the spec's readers, astral characters as surrogate pairs) and to Python."""
NAME_PATTERN = r"^(?![Aa][Ww][Ss]\.|[Aa][Mm][Aa][Zz][Oo][Nn]\.|\.)(?!.*\.\.)(?!.*\.$)" + NAME_CHARS + "+$"
"""Every rule of a name but its length, as one pattern (for the HTTP API's spec); the checks below
say which rule a name breaks."""
TYPE_PATTERN = r"^(String|Number|Binary)(\.[ -~]+)?$"
VALUE_PATTERN = "^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]+$"
"""What a value's text may not hold, as a pattern: control characters but tab, newline and carriage
return, and U+FFFE and U+FFFF (nor lone surrogates, which JSON's UTF-8 cannot carry)."""

_NAME = re.compile(NAME_CHARS + "+")
_TYPE = re.compile(TYPE_PATTERN)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute's type and value: bytes for a Binary type, text for String and Number."""

    type: str
    value: str | bytes

    @property
    def base_type(self) -> str:
        """String, Number or Binary: the type without its custom label."""
        return self.type.split(".", 1)[0]

    @property
    def value_bytes(self) -> bytes:
        return self.value if isinstance(self.value, bytes) else self.value.encode("utf-8")


Attributes = Mapping[str, Attribute]


def attribute_of(name: str, type_: str, text: str) -> Attribute:
    """An attribute given as text (a Binary type's value in base64), checked; InvalidAttributes
    names what is wrong."""
    if not isinstance(type_, str) or not _TYPE.fullmatch(type_):
        raise InvalidAttributes(
            f"attribute {name!r}: its type must be String, Number or Binary, optionally with a "
            "custom label of printable ASCII after a period (Number.float)"
        )
    if not isinstance(text, str):
        raise InvalidAttributes(f"attribute {name!r}: its value must be text")
    if type_.startswith("Binary"):
        try:
            return Attribute(type_, base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError):
            raise InvalidAttributes(f"attribute {name!r}: a Binary value must be base64") from None
    return Attribute(type_, text)


def check_attributes(attributes: Attributes) -> int:
    """Raise InvalidAttributes unless SQS would take these attributes; answer their size, which
    counts toward the payload's limit: each name's, type's and value's bytes."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidAttributes(
            f"an item carries at most {MAX_ATTRIBUTES} attributes; {len(attributes)} were given"
        )
    size = 0
    for name, attribute in attributes.items():
        _check_name(name)
        _check_value(name, attribute)
        size += len(name.encode()) + len(attribute.type.encode()) + len(attribute.value_bytes)
    return size


def _check_name(name: str) -> None:
    if not name or len(name) > MAX_NAME_CHARS or not _NAME.fullmatch(name):
        raise InvalidAttributes(
            f"attribute name {name[:300]!r}: 1 to {MAX_NAME_CHARS} characters of A-Z, a-z, 0-9, "
            "underscore, hyphen and period, or letters beyond ASCII"
        )
    if name.lower().startswith(("aws.", "amazon.")):
        raise InvalidAttributes(f"attribute name {name!r}: names starting with AWS. or Amazon. are reserved")
    if name.startswith(".") or name.endswith(".") or ".." in name:
        raise InvalidAttributes(
            f"attribute name {name!r}: must not start or end with a period, nor hold two in a row"
        )


def _check_value(name: str, attribute: Attribute) -> None:
    type_ = attribute.type
    if len(type_) > MAX_TYPE_CHARS or not _TYPE.fullmatch(type_) or NOT_XML.search(type_):
        raise InvalidAttributes(
            f"attribute {name!r}: its type must be String, Number or Binary, optionally with a "
            f"custom label of printable ASCII after a period, {MAX_TYPE_CHARS} characters at most"
        )
    value = attribute.value
    if isinstance(value, bytes) != (attribute.base_type == "Binary"):
        raise InvalidAttributes(f"attribute {name!r}: a {attribute.base_type} value must be {_kind(type_)}")
    if not value:
        raise InvalidAttributes(f"attribute {name!r}: its value must not be empty")
    if isinstance(value, str):
        if NOT_XML.search(value):
            raise InvalidAttributes(
                f"attribute {name!r}: its value holds a character SQS does not allow (valid: #x9, "
                "#xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD, #x10000 to #x10FFFF)"
            )
        if attribute.base_type == "Number":
            _check_number(name, value)


def _kind(type_: str) -> str:
    return "bytes" if type_.startswith("Binary") else "text"


def _check_number(name: str, text: str) -> None:
    problem = f"attribute {name!r}: {text[:100]!r} is not a number SQS takes"
    if not _NUMBER.fullmatch(text.strip()):
        raise InvalidAttributes(f"{problem} (digits, an optional sign, point and exponent)")
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise InvalidAttributes(problem) from None
    digits = "".join(map(str, number.as_tuple().digits)).strip("0")  # not normalize(): it rounds
    if len(digits) > MAX_NUMBER_DIGITS:
        raise InvalidAttributes(f"{problem} (at most {MAX_NUMBER_DIGITS} significant digits)")
    if not NUMBER_LOW <= number <= NUMBER_HIGH:
        raise InvalidAttributes(f"{problem} (from -10^128 to 10^126)")


SYSTEM_PREFIX = "AWS."
"""Where an item's system attributes are kept among its attributes: a prefix the name rule refuses
to every producer, so that neither can be taken for the other."""


def encode_attributes(attributes: Attributes | None, system: Mapping[str, str] | None = None) -> str | None:
    """The JSON text the store keeps, names sorted, the system attributes as Strings under
    SYSTEM_PREFIX; None for no attributes."""
    every = dict(attributes or {}) | {
        SYSTEM_PREFIX + k: Attribute("String", v) for k, v in (system or {}).items()
    }
    if not every:
        return None
    shaped = {name: {"type": a.type, "value": _text(a.value)} for name, a in sorted(every.items())}
    return json.dumps(shaped, ensure_ascii=False, separators=(",", ":"))


def message_attributes_json(attributes_json: str | None) -> str | None:
    """The stored text without the system attributes: what the HTTP API answers as an item's
    attributes, which a push may give back as they are. Only an item that has system attributes
    (one sent through the SQS door) is decoded and written again."""
    if attributes_json is None or f'"{SYSTEM_PREFIX}' not in attributes_json:
        return attributes_json
    own, _ = split_system(decode_attributes(attributes_json))
    return encode_attributes(own)


def split_system(attributes: Mapping[str, Attribute]) -> tuple[dict[str, Attribute], dict[str, str]]:
    """(the message attributes, the system attributes by their own names) of decoded attributes."""
    own = {k: a for k, a in attributes.items() if not k.startswith(SYSTEM_PREFIX)}
    system = {
        k[len(SYSTEM_PREFIX) :]: str(a.value) for k, a in attributes.items() if k.startswith(SYSTEM_PREFIX)
    }
    return own, system


def _text(value: str | bytes) -> str:
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value


def decode_attributes(text: str | None) -> dict[str, Attribute]:
    """What encode_attributes wrote (a Binary value back to bytes); {} for None."""
    if not text:
        return {}
    return {
        name: Attribute(
            a["type"], base64.b64decode(a["value"]) if a["type"].startswith("Binary") else a["value"]
        )
        for name, a in json.loads(text).items()
    }
