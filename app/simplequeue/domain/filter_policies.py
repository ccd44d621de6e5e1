"""Amazon SNS subscription filter policies: a FilterPolicy parsed and refused as SNS does, and a
message matched against it in its FilterPolicyScope (MessageAttributes, the default, or MessageBody).

Sources: AWS's SNS developer guide (the filter-policy pages, current versions) for behaviour; SNS's
recorded refusals (LocalStack's snapshots against AWS) and AWS's event-ruler, which SNS compiles
policies with, for the wording of errors.

- Operators: exact strings, numbers, true/false/null; prefix, suffix, equals-ignore-case;
  anything-but (a string, a number, a list of strings or of numbers, or {"prefix": ...}: SNS refuses
  {"suffix": ...} there); numeric (=, <, <=, >, >=, and > or >= then < or <=); exists; cidr; $or
  (two objects or more); nested objects in the body scope. Keys AND, a key's values OR.
- Limits: 5 keys (every key for attributes; top-level keys only for a body, as the current
  constraints page says); 150 combinations, counted as AWS's page does (each array's length times
  its nesting depth, multiplied; an $or adds its branches); 256 KB of UTF-8.
- Numbers: rounded to the 5 decimal places AWS documents, both sides, then compared.
- Attributes: String and Number values; String.Array elements each match as one value;
  Binary is ignored, as absent; a message with no attributes matches nothing (AWS's key-matching
  page); anything-but needs the key present (add {"exists": false} for absent keys) and, on a
  String.Array, none of its elements listed (the current string-matching page). As AWS documents, a
  policy must double-escape " and \\ to match them in a String value.
- Bodies: a JSON object, else nothing matches; a dotted key is the nested path ({"a.b": 1} is
  {"a": {"b": 1}}); an array matches when an element does; conditions inside one array of objects
  must hold in one element; exists: true needs a non-null value.

Where AWS is not followed, or says nothing and this chose:
- Errors lack the Jackson position AWS appends ("\\n at [Source: ...]"); malformed JSON and the size
  limit are worded here. "{}" matches every message (ruler alone would refuse it). Numbers past the
  documented +/-1e9 are not refused. anything-but lets through a value of another type (a number
  for a string list, a boolean, null). equals-ignore-case compares lower-cased text. Exact strings
  that look like IP addresses are compared as text (ruler compares them as addresses).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal
from itertools import count
from typing import Literal, TypeAlias

Scope: TypeAlias = Literal["MessageAttributes", "MessageBody"]
SCOPES: tuple[Scope, ...] = ("MessageAttributes", "MessageBody")

MAX_KEYS = 5
MAX_COMBINATIONS = 150
MAX_POLICY_BYTES = 256 * 1024
NUMBER_PLACES = 5
"""AWS documents numeric matching "with five digits of accuracy after the decimal point"."""

Leaf: TypeAlias = str | Decimal | bool | None
"""One value a condition is tested on: JSON's scalars, numbers as Decimal (never float: 0.1 stays
0.1, and a bool is never taken for a number)."""

_OR = "$or"
# Ruler's match-type names (and some it keeps for later) may not be keys inside an $or.
_RESERVED_IN_OR = frozenset(
    {"equals", "equals-ignore-case", "prefix", "suffix", "anything-but", "exists", "wildcard", "numeric"}
    | {"cidr", "=", "<", "<=", ">", ">="}
)
_QUANTUM = Decimal(1).scaleb(-NUMBER_PLACES)
_ROUNDING = Context(prec=60, rounding=ROUND_HALF_EVEN)
_NUMBER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_IPV4 = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_IPV6 = re.compile(r"[0-9a-fA-F:]*:[0-9a-fA-F:]*")


class FilterPolicyError(ValueError):
    """A filter policy SNS would refuse. ``str(error)`` is SetSubscriptionAttributes' message (AWS's
    InvalidParameter); ``subscribe_message`` is Subscribe's, which says "Attributes Reason:"."""

    code = "InvalidParameter"

    def __init__(self, reason: str, *, parameter: str | None = "FilterPolicy") -> None:
        self.reason = reason
        self.parameter = parameter
        self.detail = f"{parameter}: {reason}" if parameter else reason
        super().__init__(f"Invalid parameter: {self.detail}")

    @property
    def subscribe_message(self) -> str:
        return f"Invalid parameter: Attributes Reason: {self.detail}"


def _refuse(reason: str) -> FilterPolicyError:
    return FilterPolicyError(reason)


# Numbers ----------------------------------------------------------------------------------------


def _canonical(number: Decimal) -> Decimal:
    """The number as SNS compares it: rounded to NUMBER_PLACES. Past 1e24 a fraction is below the
    rounding's reach; such numbers stay as they are (rounding is monotonic, so order holds)."""
    if number.adjusted() >= 24:
        return number
    return number.quantize(_QUANTUM, context=_ROUNDING)


def _number_from_text(text: str) -> Decimal | None:
    """A Number attribute's value, or None when it is not a finite number."""
    text = text.strip()
    if _NUMBER_TEXT.fullmatch(text) is None:
        return None
    return Decimal(text)


def _not_a_constant(name: str) -> Decimal:
    # JSON has no NaN or Infinity; Python's parser would take them.
    raise ValueError(f"Non-standard JSON token: {name}")


def _load_json(text: str) -> object:
    return json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_not_a_constant)


def _json_text(value: object) -> str:
    """How ruler names a token in a message: scalars as JSON, containers by their opening bracket."""
    if isinstance(value, dict):
        return "{"
    if isinstance(value, list):
        return "["
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value)


# Conditions ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Equals:
    """An exact string, number (to NUMBER_PLACES), true, false or null."""

    value: Leaf

    def test(self, leaf: Leaf) -> bool:
        if self.value is None or isinstance(self.value, bool):
            return leaf is self.value
        if isinstance(self.value, Decimal):
            return isinstance(leaf, Decimal) and _canonical(leaf) == self.value
        return isinstance(leaf, str) and leaf == self.value


@dataclass(frozen=True, slots=True)
class Prefix:
    prefix: str

    def test(self, leaf: Leaf) -> bool:
        return isinstance(leaf, str) and leaf.startswith(self.prefix)


@dataclass(frozen=True, slots=True)
class Suffix:
    suffix: str

    def test(self, leaf: Leaf) -> bool:
        return isinstance(leaf, str) and leaf.endswith(self.suffix)


@dataclass(frozen=True, slots=True)
class EqualsIgnoreCase:
    value: str

    def test(self, leaf: Leaf) -> bool:
        return isinstance(leaf, str) and leaf.lower() == self.value.lower()


@dataclass(frozen=True, slots=True)
class Numeric:
    """A numeric range; ``=`` is the closed range of one number. A missing bound is unbounded."""

    low: Decimal | None = None
    low_open: bool = False
    high: Decimal | None = None
    high_open: bool = False

    def test(self, leaf: Leaf) -> bool:
        if not isinstance(leaf, Decimal):
            return False
        number = _canonical(leaf)
        if self.low is not None and (number <= self.low if self.low_open else number < self.low):
            return False
        return self.high is None or (number < self.high if self.high_open else number <= self.high)


@dataclass(frozen=True, slots=True)
class AnythingBut:
    """Any value but the strings or numbers listed."""

    strings: frozenset[str] = frozenset()
    numbers: frozenset[Decimal] = frozenset()

    def test(self, leaf: Leaf) -> bool:
        if isinstance(leaf, str):
            return leaf not in self.strings
        if isinstance(leaf, Decimal):
            return _canonical(leaf) not in self.numbers
        return True


@dataclass(frozen=True, slots=True)
class AnythingButPrefix:
    prefix: str

    def test(self, leaf: Leaf) -> bool:
        return not (isinstance(leaf, str) and leaf.startswith(self.prefix))


@dataclass(frozen=True, slots=True)
class Cidr:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network

    def test(self, leaf: Leaf) -> bool:
        if not isinstance(leaf, str):
            return False
        try:
            address = ipaddress.ip_address(leaf)
        except ValueError:
            return False
        return address.version == self.network.version and address in self.network


@dataclass(frozen=True, slots=True)
class Exists:
    """Whether the key is there (for a body: has a non-null value); tested on the key, not a value."""

    present: bool

    def test(self, leaf: Leaf) -> bool:
        return self.present and leaf is not None


Condition: TypeAlias = (
    Equals | Prefix | Suffix | EqualsIgnoreCase | Numeric | AnythingBut | AnythingButPrefix | Cidr | Exists
)
Conjunction: TypeAlias = tuple[tuple[str, tuple[Condition, ...]], ...]
"""Paths (a body's nested keys joined by dots) each with the conditions one of which must hold."""


# Parsing ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Leaf:
    path: str
    top: str
    depth: int
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class _All:
    parts: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Any:
    branches: tuple[_All, ...]


_Node: TypeAlias = _Leaf | _All | _Any


def _combinations(node: _Node) -> int:
    if isinstance(node, _Leaf):
        return len(node.conditions) * node.depth
    if isinstance(node, _All):
        product = 1
        for part in node.parts:
            product *= _combinations(part)
        return product
    return sum(_combinations(branch) for branch in node.branches)


def _leaves(node: _Node) -> Iterator[_Leaf]:
    if isinstance(node, _Leaf):
        yield node
    elif isinstance(node, _All):
        for part in node.parts:
            yield from _leaves(part)
    else:
        for branch in node.branches:
            yield from _leaves(branch)


def _alternatives(node: _Node) -> list[dict[str, tuple[Condition, ...]]]:
    """The policy as OR of ANDs. Called once the combinations are known to be at most 150, which
    bounds the count of alternatives (each adds at least 1)."""
    if isinstance(node, _Leaf):
        return [{node.path: node.conditions}]
    if isinstance(node, _Any):
        return [alternative for branch in node.branches for alternative in _alternatives(branch)]
    result: list[dict[str, tuple[Condition, ...]]] = [{}]
    for part in node.parts:
        # A key written twice keeps its last rules, as ruler's compiler does.
        result = [{**left, **right} for left in result for right in _alternatives(part)]
    return result


def _has_nested_object(policy: Mapping[str, object]) -> bool:
    for key, value in policy.items():
        if key != _OR:
            if isinstance(value, dict):
                return True
        elif isinstance(value, list) and any(isinstance(b, dict) and _has_nested_object(b) for b in value):
            return True
    return False


class _Compiler:
    def compile_object(
        self, obj: Mapping[str, object], prefix: str | None, top: str | None, depth: int, in_or: bool
    ) -> _All:
        if not obj:
            raise _refuse("Empty objects are not allowed")
        parts: list[_Node] = []
        for key, value in obj.items():
            if key == _OR:
                parts.append(self.any_of(value, prefix, top, depth))
                continue
            if in_or and key in _RESERVED_IN_OR:
                raise _refuse(f"{key} is Ruler reserved fieldName which cannot be used inside $or.")
            path = key if prefix is None else f"{prefix}.{key}"
            if isinstance(value, dict):
                parts.append(self.compile_object(value, path, top or key, depth + 1, in_or))
            elif isinstance(value, list):
                parts.append(_Leaf(path, top or key, depth, self.rules(value)))
            else:
                raise _refuse(f'"{key}" must be an object or an array')
        return _All(tuple(parts))

    def any_of(self, value: object, prefix: str | None, top: str | None, depth: int) -> _Any:
        if not isinstance(value, list):
            raise _refuse("It must be an Array followed with $or.")
        branches: list[_All] = []
        for branch in value:
            if not isinstance(branch, dict):
                raise _refuse("Only JSON object is allowed in array of $or relationship.")
            branches.append(self.compile_object(branch, prefix, top, depth, True))
        if len(branches) < 2:
            raise _refuse("There must have at least 2 Objects in $or relationship.")
        return _Any(tuple(branches))

    def rules(self, values: Sequence[object]) -> tuple[Condition, ...]:
        conditions: list[Condition] = []
        for value in values:
            if isinstance(value, dict):
                conditions.append(_match_expression(value))
            elif isinstance(value, Decimal):
                conditions.append(Equals(_canonical(value)))
            elif value is None or isinstance(value, str | bool):
                conditions.append(Equals(value))
            else:
                raise _refuse("Match value must be String, number, true, false, or null")
        if not conditions:
            raise _refuse("Empty arrays are not allowed")
        return tuple(conditions)


def _only_key(
    expression: Mapping[str, object], reason: str = "Only one key allowed in match expression"
) -> None:
    if len(expression) > 1:
        raise _refuse(reason)


_TOO_MANY_ELEMENTS = "Too many elements in numeric expression"


def _match_expression(expression: Mapping[str, object]) -> Condition:
    """One ``{"operator": value}`` of a rules array, checked in ruler's order: the operator and its
    value first, then any second key."""
    if not expression:
        raise _refuse("Match expression name not found")
    operator, value = next(iter(expression.items()))
    condition: Condition
    if operator in ("prefix", "suffix", "equals-ignore-case"):
        if not isinstance(value, str):
            raise _refuse(f"{operator} match pattern must be a string")
        condition = (
            Prefix(value)
            if operator == "prefix"
            else Suffix(value)
            if operator == "suffix"
            else EqualsIgnoreCase(value)
        )
    elif operator == "numeric":
        if not isinstance(value, list):
            raise _refuse("Value of numeric must be an array.")
        condition = _numeric(value)
        _only_key(expression, _TOO_MANY_ELEMENTS)
    elif operator == "anything-but":
        condition = _anything_but(value)
        _only_key(expression, _TOO_MANY_ELEMENTS)
    elif operator == "exists":
        if not isinstance(value, bool):
            raise _refuse("exists match pattern must be either true or false.")
        condition = Exists(value)
    elif operator == "cidr":
        condition = _cidr(value)
    else:
        raise _refuse(f"Unrecognized match type {operator}")
    _only_key(expression)
    return condition


def _anything_but(value: object) -> AnythingBut | AnythingButPrefix:
    if isinstance(value, dict):
        if not value:
            raise _refuse("Anything-But expression name not found")
        inner, prefix = next(iter(value.items()))
        if inner != "prefix":
            raise _refuse(f"Unsupported anything-but pattern: {inner}")
        if not isinstance(prefix, str):
            raise _refuse("prefix match pattern must be a string")
        if not prefix:
            raise _refuse("Null prefix/suffix not allowed")
        _only_key(value, _TOO_MANY_ELEMENTS)
        return AnythingButPrefix(prefix)
    if isinstance(value, str):
        return AnythingBut(strings=frozenset({value}))
    if isinstance(value, Decimal):
        return AnythingBut(numbers=frozenset({_canonical(value)}))
    if not isinstance(value, list):
        raise _refuse("Value of anything-but must be an array or single string/number value.")
    strings: set[str] = set()
    numbers: set[Decimal] = set()
    for member in value:
        if isinstance(member, str):
            strings.add(member)
        elif isinstance(member, Decimal):
            numbers.add(_canonical(member))
        else:
            raise _refuse("Inside anything but list, start|null|boolean is not supported.")
    if bool(strings) == bool(numbers):
        raise _refuse(
            "Inside anything but list, either all values are number or string, mixed type is not supported"
        )
    return AnythingBut(frozenset(strings), frozenset(numbers))


def _bound(terms: Sequence[object], at: int, operator: str) -> Decimal:
    bound = terms[at] if at < len(terms) else None
    if not isinstance(bound, Decimal):
        raise _refuse(f"Value of {'equals' if operator == '=' else operator} must be numeric")
    return _canonical(bound)


def _numeric(terms: Sequence[object]) -> Numeric:
    if not terms or not isinstance(terms[0], str):
        raise _refuse(f"Invalid member in numeric match: {_json_text(terms[0]) if terms else ']'}")
    operator = terms[0]
    if operator not in ("=", "<", "<=", ">", ">="):
        raise _refuse(f"Unrecognized numeric range operator: {operator}")
    number = _bound(terms, 1, operator)
    if operator in ("=", "<", "<=") and len(terms) > 2:
        raise _refuse(_TOO_MANY_ELEMENTS)
    if operator == "=":
        return Numeric(low=number, high=number)
    if operator in ("<", "<="):
        return Numeric(high=number, high_open=operator == "<")
    if len(terms) == 2:
        return Numeric(low=number, low_open=operator == ">")
    top_operator = terms[2]
    if not isinstance(top_operator, str):
        raise _refuse(f"Bad value in numeric range: {_json_text(top_operator)}")
    if top_operator not in ("<", "<="):
        raise _refuse(f"Bad numeric range operator: {top_operator}")
    high = _bound(terms, 3, top_operator)
    if len(terms) > 4:
        raise _refuse("Too many terms in numeric range expression")
    if high <= number:
        raise _refuse("Bottom must be less than top")
    return Numeric(low=number, low_open=operator == ">", high=high, high_open=top_operator == "<")


def _cidr(value: object) -> Cidr:
    if not isinstance(value, str):
        raise _refuse("prefix match pattern must be a string")
    parts = value.split("/")
    while len(parts) > 1 and not parts[-1]:
        parts.pop()  # Java's split drops trailing empty strings: "10.0.0.0/" has no mask
    if len(parts) != 2:
        raise _refuse("Malformed CIDR, one '/' required")
    address, mask_text = parts
    try:
        mask = int(mask_text, 10)
    except ValueError:
        raise _refuse("Malformed CIDR, mask bits must be an integer") from None
    if mask < 0:
        raise _refuse("Malformed CIDR, mask bits must not be negative")
    if _IPV4.fullmatch(address) is None and _IPV6.fullmatch(address) is None:
        raise _refuse(f"Nonstandard IP address: {address}")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise _refuse(f"Invalid IP address: {address}") from None
    if ip.version == 4 and mask > 31:
        raise _refuse("IPv4 mask bits must be < 32")
    if ip.version == 6 and mask > 127:
        raise _refuse("IPv6 mask bits must be < 128")
    return Cidr(ipaddress.ip_network(f"{ip}/{mask}", strict=False))


def parse_filter_policy(text: str, scope: Scope = "MessageAttributes") -> FilterPolicy:
    """The policy ``text`` as SNS takes it for a subscription of ``scope``; FilterPolicyError with
    AWS's message for what SNS refuses. (An empty FilterPolicy, which removes a subscription's
    policy in AWS, is the caller's to handle: it is not JSON.)"""
    if scope not in SCOPES:
        raise FilterPolicyError(
            f"Invalid value [{scope}]. Please use either MessageBody or MessageAttributes",
            parameter="FilterPolicyScope",
        )
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        raise _refuse(f"Filter policy can not be larger than {MAX_POLICY_BYTES} bytes")
    try:
        document = _load_json(text)
    except json.JSONDecodeError as error:
        raise _refuse(f"Malformed JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    except (ValueError, RecursionError) as error:
        raise _refuse(f"Malformed JSON: {error}") from None
    if not isinstance(document, dict):
        raise _refuse("Filter is not an object")
    if not document:
        return FilterPolicy(scope=scope, alternatives=())
    if scope == "MessageAttributes" and _has_nested_object(document):
        raise FilterPolicyError(
            "Filter policy scope MessageAttributes does not support nested filter policy", parameter=None
        )
    root = _Compiler().compile_object(document, None, None, 1, False)
    leaves = list(_leaves(root))
    keys = {leaf.path for leaf in leaves} if scope == "MessageAttributes" else {leaf.top for leaf in leaves}
    if len(keys) > MAX_KEYS:
        raise _refuse(f"Filter policy can not have more than {MAX_KEYS} keys")
    if _combinations(root) > MAX_COMBINATIONS:
        raise _refuse("Filter policy is too complex")
    alternatives = tuple(tuple(alternative.items()) for alternative in _alternatives(root))
    return FilterPolicy(scope=scope, alternatives=alternatives)


# Matching -----------------------------------------------------------------------------------------

Membership: TypeAlias = tuple[tuple[int, int], ...]
"""Which element of which array (by an id per array in the body) a body value sits in."""


def _escaped(text: str) -> str:
    # AWS: with attribute-based filtering, a policy must double-escape " and \ to match them.
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _attribute_values(data_type: str, value: str) -> tuple[tuple[Leaf, ...], bool] | None:
    """An attribute's values and whether it is a String.Array; None for what SNS does not filter on
    (Binary, an unknown type)."""
    if data_type == "String.Array":
        try:
            parsed = _load_json(value)
        except (ValueError, RecursionError):
            return (), True
        members = parsed if isinstance(parsed, list) else [parsed]
        return tuple(m for m in members if m is None or isinstance(m, str | bool | Decimal)), True
    base = data_type.split(".", 1)[0]
    if base == "String":
        return (_escaped(value),), False
    if base == "Number":
        number = _number_from_text(value)
        return ((number,) if number is not None else ()), False
    return None


def _holds_on_attribute(condition: Condition, values: tuple[tuple[Leaf, ...], bool] | None) -> bool:
    if isinstance(condition, Exists):
        return (values is not None) == condition.present
    if values is None:
        return False
    leaves, is_array = values
    if is_array and isinstance(condition, AnythingBut | AnythingButPrefix):
        return bool(leaves) and all(condition.test(leaf) for leaf in leaves)
    return any(condition.test(leaf) for leaf in leaves)


def _body_leaves(
    document: Mapping[str, object], paths: frozenset[str]
) -> dict[str, list[tuple[Leaf, Membership]]]:
    """The body's values at the policy's paths. Only the branches that lead to a path are walked."""
    prefixes = {path[:i] for path in paths for i, char in enumerate(path) if char == "."}
    found: dict[str, list[tuple[Leaf, Membership]]] = {}
    arrays = count()

    def walk(value: object, path: str, membership: Membership) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                child_path = f"{path}.{key}"
                if child_path in paths or child_path in prefixes:
                    walk(child, child_path, membership)
        elif isinstance(value, list):
            array = next(arrays)
            for index, element in enumerate(value):
                walk(element, path, (*membership, (array, index)))
        elif path in paths and (value is None or isinstance(value, str | bool | Decimal)):
            found.setdefault(path, []).append((value, membership))

    for key, child in document.items():
        if key in paths or key in prefixes:
            walk(child, key, ())
    return found


def _consistent(choices: list[list[Membership]], chosen: dict[int, int]) -> bool:
    """Whether one membership per path can be picked with no array at two different elements."""
    if not choices:
        return True
    for membership in choices[0]:
        agrees = all(chosen.get(array, index) == index for array, index in membership)
        if agrees and _consistent(choices[1:], {**chosen, **dict(membership)}):
            return True
    return False


def _holds_on_body(conjunction: Conjunction, found: Mapping[str, list[tuple[Leaf, Membership]]]) -> bool:
    choices: list[list[Membership]] = []
    for path, conditions in conjunction:
        values = found.get(path, [])
        if any(isinstance(c, Exists) and not c.present for c in conditions) and all(
            leaf is None for leaf, _ in values
        ):
            continue
        memberships = {membership for leaf, membership in values if any(c.test(leaf) for c in conditions)}
        if not memberships:
            return False
        if () in memberships:
            continue  # a value outside any array agrees with every choice
        choices.append(sorted(memberships))
    return all(_consistent(sorted(group, key=len), {}) for group in _independent(choices))


def _independent(choices: list[list[Membership]]) -> list[list[list[Membership]]]:
    """The paths' choices in groups that share no array: each group is solved alone, so that a dead
    end in one never makes the search walk another's choices again."""
    groups: list[tuple[set[int], list[list[Membership]]]] = []
    for choice in choices:
        arrays = {array for membership in choice for array, _ in membership}
        joined = [group for group in groups if group[0] & arrays]
        for group in joined:
            groups.remove(group)
            arrays |= group[0]
        groups.append((arrays, [choice, *(c for group in joined for c in group[1])]))
    return [group[1] for group in groups]


@dataclass(frozen=True, slots=True)
class FilterPolicy:
    """A parsed policy: OR over ``alternatives``, each an AND over paths. No alternatives: ``{}``,
    which matches every message."""

    scope: Scope
    alternatives: tuple[Conjunction, ...]

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(path for alternative in self.alternatives for path, _ in alternative)

    def matches(self, attributes: Mapping[str, tuple[str, str]], body: str) -> bool:
        """Whether a message passes, read in the policy's scope."""
        if self.scope == "MessageBody":
            return self.matches_body(body)
        return self.matches_attributes(attributes)

    def matches_attributes(self, attributes: Mapping[str, tuple[str, str]]) -> bool:
        """``attributes``: name -> (DataType, StringValue), as SNS's MessageAttributes carry them."""
        if not self.alternatives:
            return True
        values: dict[str, tuple[tuple[Leaf, ...], bool]] = {}
        for name, (data_type, value) in attributes.items():
            read = _attribute_values(data_type, value)
            if read is not None:
                values[name] = read
        if not values:
            return False
        return any(
            all(
                any(_holds_on_attribute(c, values.get(path)) for c in conditions)
                for path, conditions in alternative
            )
            for alternative in self.alternatives
        )

    def matches_body(self, body: str) -> bool:
        """``body``: the message as published; a body that is not a JSON object matches nothing."""
        if not self.alternatives:
            return True
        try:
            document = _load_json(body)
            if not isinstance(document, dict):
                return False
            found = _body_leaves(document, self.paths)
            return any(_holds_on_body(alternative, found) for alternative in self.alternatives)
        except (ValueError, RecursionError):
            return False
