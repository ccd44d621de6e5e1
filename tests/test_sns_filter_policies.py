"""SNS subscription filter policies (simplequeue.domain.filter_policies): what SNS refuses, with AWS's
words, and which messages a policy lets through, in both scopes.

The refusals' texts are the ones real SNS answered (LocalStack's recorded snapshots), less the
Jackson position AWS appends. The matching cases are the examples of AWS's filter-policy pages,
plus the edges those pages settle (absent keys, String.Array, Binary, nesting, arrays of objects).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simplequeue.domain.filter_policies import (
    MAX_POLICY_BYTES,
    FilterPolicy,
    FilterPolicyError,
    Scope,
    parse_filter_policy,
)

ATTRS: Scope = "MessageAttributes"
BODY: Scope = "MessageBody"


def policy(document: Any, scope: Scope = ATTRS) -> FilterPolicy:
    return parse_filter_policy(json.dumps(document), scope)


def refusal(text: str, scope: Scope = ATTRS) -> str:
    with pytest.raises(FilterPolicyError) as caught:
        parse_filter_policy(text, scope)
    return str(caught.value)


def s(value: str) -> tuple[str, str]:
    return ("String", value)


def n(value: str) -> tuple[str, str]:
    return ("Number", value)


def arr(*values: Any) -> tuple[str, str]:
    return ("String.Array", json.dumps(list(values)))


# Refusals --------------------------------------------------------------------------------------

P = "Invalid parameter: FilterPolicy: "

REFUSED: list[tuple[str, Any, Scope, str]] = [
    # Structure.
    ("rule not in a list", {"key_a": "value_one"}, ATTRS, P + '"key_a" must be an object or an array'),
    (
        "operator without a list",
        {"key": {"suffix": "value"}},
        BODY,
        P + '"suffix" must be an object or an array',
    ),
    ("empty rules", {"key": []}, ATTRS, P + "Empty arrays are not allowed"),
    ("empty nested object", {"key": {}}, BODY, P + "Empty objects are not allowed"),
    (
        "a list as a match value",
        {"key": [["value"]]},
        ATTRS,
        P + "Match value must be String, number, true, false, or null",
    ),
    (
        "an object nested in attributes",
        {"object": {"key": [{"prefix": "auto-"}]}},
        ATTRS,
        "Invalid parameter: Filter policy scope MessageAttributes does not support nested filter policy",
    ),
    (
        "nesting inside $or, attributes",
        {"$or": [{"a": ["1"]}, {"b": {"c": ["2"]}}]},
        ATTRS,
        "Invalid parameter: Filter policy scope MessageAttributes does not support nested filter policy",
    ),
    # Match expressions.
    (
        "unknown operator",
        {"key": [{"wrong-operator": True}]},
        ATTRS,
        P + "Unrecognized match type wrong-operator",
    ),
    (
        "two operators",
        {"key": [{"suffix": "value", "prefix": "value2"}]},
        ATTRS,
        P + "Only one key allowed in match expression",
    ),
    ("empty match expression", {"key": [{}]}, ATTRS, P + "Match expression name not found"),
    ("suffix a number", {"key": [{"suffix": 100}]}, ATTRS, P + "suffix match pattern must be a string"),
    ("suffix null", {"key": [{"suffix": None}]}, ATTRS, P + "suffix match pattern must be a string"),
    (
        "suffix a list",
        {"key": [{"suffix": ["test", "test2"]}]},
        ATTRS,
        P + "suffix match pattern must be a string",
    ),
    ("prefix a number", {"key": [{"prefix": 1}]}, ATTRS, P + "prefix match pattern must be a string"),
    (
        "equals-ignore-case a number",
        {"key": [{"equals-ignore-case": 1}]},
        ATTRS,
        P + "equals-ignore-case match pattern must be a string",
    ),
    (
        "exists null",
        {"key": [{"exists": None}]},
        ATTRS,
        P + "exists match pattern must be either true or false.",
    ),
    (
        "exists a string",
        {"key": [{"exists": "no"}]},
        ATTRS,
        P + "exists match pattern must be either true or false.",
    ),
    (
        "exists and another key",
        {"key": [{"exists": True, "prefix": "a"}]},
        ATTRS,
        P + "Only one key allowed in match expression",
    ),
    # anything-but.
    (
        "anything-but unknown",
        {"key": [{"anything-but": {"wrong-operator": None}}]},
        ATTRS,
        P + "Unsupported anything-but pattern: wrong-operator",
    ),
    (
        "anything-but suffix",
        {"key": [{"anything-but": {"suffix": "test"}}]},
        ATTRS,
        P + "Unsupported anything-but pattern: suffix",
    ),
    (
        "anything-but exists",
        {"key": [{"anything-but": {"exists": False}}]},
        ATTRS,
        P + "Unsupported anything-but pattern: exists",
    ),
    (
        "anything-but prefix not a string",
        {"key": [{"anything-but": {"prefix": False}}]},
        ATTRS,
        P + "prefix match pattern must be a string",
    ),
    (
        "anything-but prefix empty",
        {"key": [{"anything-but": {"prefix": ""}}]},
        ATTRS,
        P + "Null prefix/suffix not allowed",
    ),
    (
        "anything-but null",
        {"key": [{"anything-but": None}]},
        ATTRS,
        P + "Value of anything-but must be an array or single string/number value.",
    ),
    (
        "anything-but boolean in list",
        {"key": [{"anything-but": ["a", True]}]},
        ATTRS,
        P + "Inside anything but list, start|null|boolean is not supported.",
    ),
    (
        "anything-but mixed list",
        {"key": [{"anything-but": ["a", 1]}]},
        ATTRS,
        P + "Inside anything but list, either all values are number or string, mixed type is not supported",
    ),
    (
        "anything-but empty list",
        {"key": [{"anything-but": []}]},
        ATTRS,
        P + "Inside anything but list, either all values are number or string, mixed type is not supported",
    ),
    # numeric.
    ("numeric not a list", {"key": [{"numeric": ">"}]}, ATTRS, P + "Value of numeric must be an array."),
    ("numeric empty", {"key": [{"numeric": []}]}, ATTRS, P + "Invalid member in numeric match: ]"),
    (
        "numeric unknown operator",
        {"key": [{"numeric": ["operator"]}]},
        ATTRS,
        P + "Unrecognized numeric range operator: operator",
    ),
    (
        "numeric number first",
        {"key": [{"numeric": [1, "<="]}]},
        ATTRS,
        P + "Invalid member in numeric match: 1",
    ),
    (
        "numeric = a string",
        {"key": [{"numeric": ["=", "000"]}]},
        ATTRS,
        P + "Value of equals must be numeric",
    ),
    ("numeric >= no value", {"key": [{"numeric": [">="]}]}, ATTRS, P + "Value of >= must be numeric"),
    (
        "numeric < then >",
        {"key": [{"numeric": ["<", 100, ">", 10]}]},
        ATTRS,
        P + "Too many elements in numeric expression",
    ),
    (
        "numeric = then more",
        {"key": [{"numeric": ["=", 1, "<", 2]}]},
        ATTRS,
        P + "Too many elements in numeric expression",
    ),
    (
        "numeric >= then >",
        {"key": [{"numeric": [">=", 1, ">", 2]}]},
        ATTRS,
        P + "Bad numeric range operator: >",
    ),
    (
        "numeric bottom above top",
        {"key": [{"numeric": [">", 3, "<", 1]}]},
        ATTRS,
        P + "Bottom must be less than top",
    ),
    (
        "numeric bottom equals top",
        {"key": [{"numeric": [">=", 3, "<=", 3]}]},
        ATTRS,
        P + "Bottom must be less than top",
    ),
    (
        "numeric range no top",
        {"key": [{"numeric": [">", 20, "<="]}]},
        ATTRS,
        P + "Value of <= must be numeric",
    ),
    (
        "numeric range no operator",
        {"key": [{"numeric": [">", 20, 30]}]},
        ATTRS,
        P + "Bad value in numeric range: 30",
    ),
    (
        "numeric range bad operator",
        {"key": [{"numeric": [">", 20, "test"]}]},
        ATTRS,
        P + "Bad numeric range operator: test",
    ),
    (
        "numeric bottom a string",
        {"key": [{"numeric": [">", "20", "<", "30"]}]},
        ATTRS,
        P + "Value of > must be numeric",
    ),
    (
        "numeric top a string",
        {"key": [{"numeric": [">", 20, "<", "30"]}]},
        ATTRS,
        P + "Value of < must be numeric",
    ),
    (
        "numeric boolean value",
        {"key": [{"numeric": ["=", True]}]},
        ATTRS,
        P + "Value of equals must be numeric",
    ),
    (
        "numeric three terms",
        {"key": [{"numeric": [">", 20, "<", 30, "<", 50]}]},
        ATTRS,
        P + "Too many terms in numeric range expression",
    ),
    (
        "numeric and another key",
        {"key": [{"numeric": [">", 1], "prefix": "a"}]},
        ATTRS,
        P + "Too many elements in numeric expression",
    ),
    # cidr.
    ("cidr a list", {"key": [{"cidr": ["bad-filter"]}]}, ATTRS, P + "prefix match pattern must be a string"),
    ("cidr no slash", {"key": [{"cidr": "bad-filter"}]}, ATTRS, P + "Malformed CIDR, one '/' required"),
    (
        "cidr not an address",
        {"key": [{"cidr": "bad-filter/64"}]},
        ATTRS,
        P + "Nonstandard IP address: bad-filter",
    ),
    (
        "cidr mask not a number",
        {"key": [{"cidr": "bad-/64filter"}]},
        ATTRS,
        P + "Malformed CIDR, mask bits must be an integer",
    ),
    ("cidr bad v4", {"key": [{"cidr": "xx.11.xx/8"}]}, ATTRS, P + "Nonstandard IP address: xx.11.xx"),
    (
        "cidr bad v6",
        {"key": [{"cidr": "xxxx:db8:1234:1a00::/64"}]},
        ATTRS,
        P + "Nonstandard IP address: xxxx:db8:1234:1a00::",
    ),
    ("cidr v4 mask too wide", {"key": [{"cidr": "10.0.0.0/32"}]}, ATTRS, P + "IPv4 mask bits must be < 32"),
    # $or.
    ("$or not a list", {"$or": {"a": ["1"]}}, ATTRS, P + "It must be an Array followed with $or."),
    (
        "$or of a string",
        {"$or": ["a", {"b": ["1"]}]},
        ATTRS,
        P + "Only JSON object is allowed in array of $or relationship.",
    ),
    (
        "$or of one",
        {"$or": [{"a": ["1"]}]},
        ATTRS,
        P + "There must have at least 2 Objects in $or relationship.",
    ),
    (
        "$or reserved key",
        {"$or": [{"prefix": ["1"]}, {"b": ["2"]}]},
        ATTRS,
        P + "prefix is Ruler reserved fieldName which cannot be used inside $or.",
    ),
    # Keys and combinations.
    (
        "six keys",
        {f"key{i}": [f"value{i}"] for i in range(1, 7)},
        ATTRS,
        P + "Filter policy can not have more than 5 keys",
    ),
    (
        "six top-level keys, body",
        {f"key{i}": {"x": ["v"]} for i in range(1, 7)},
        BODY,
        P + "Filter policy can not have more than 5 keys",
    ),
    (
        "six keys across $or",
        {"a": ["1"], "b": ["1"], "c": ["1"], "$or": [{"d": ["1"]}, {"e": ["1"], "f": ["1"]}]},
        ATTRS,
        P + "Filter policy can not have more than 5 keys",
    ),
    ("151 values", {"key": [f"value{i}" for i in range(151)]}, ATTRS, P + "Filter policy is too complex"),
    (
        "100 x 51 values",
        {"key1": [f"v{i}" for i in range(100)], "key2": [f"v{i}" for i in range(51)]},
        ATTRS,
        P + "Filter policy is too complex",
    ),
    # (4 x 6) + (4 x 4 x 4) + (4 x 4 x 4) = 152, refused by SNS.
    (
        "$or summing to 152",
        {
            "source": ["aws.cloudwatch", "aws.events", "aws.test", "aws.test2"],
            "$or": [
                {"metricName": ["CPUUtilization", "ReadLatency", "t1", "t2", "t3", "t4"]},
                {
                    "metricType": ["MetricType", "TestType", "TestType2", "TestType3"],
                    "$or": [{"metricId": [1234, 4321, 5678, 9012]}, {"spaceId": [1, 2, 3, 4]}],
                },
            ],
        },
        ATTRS,
        P + "Filter policy is too complex",
    ),
    # Nested: each array's length times its depth, (3 x 4) x (2 x 3) x (1 x 3) = 216, refused by SNS.
    (
        "nested 216",
        {
            "key_a": {"key_b": {"key_c": ["value_one", "value_two", "value_three", "value_four"]}},
            "key_d": {"key_e": ["value_one", "value_two", "value_three"]},
            "key_f": ["value_one", "value_two", "value_three"],
        },
        BODY,
        P + "Filter policy is too complex",
    ),
    # (3 x 1 x 2 x 2) + (3 x 1 x 2 x 3 x 2) + (2 x ...) = 160 with depth weights, refused by SNS.
    (
        "nested $or 160",
        {
            "$or": [
                {"metricName": ["CPUUtilization", "ReadLatency", "TestValue"]},
                {"namespace": ["AWS/EC2", "AWS/ES"]},
            ],
            "detail": {
                "scope": ["Service", "Test"],
                "$or": [
                    {"source": ["aws.cloudwatch"]},
                    {"type": ["CloudWatch Alarm State Change", "TestValue", "TestValue2"]},
                ],
            },
        },
        BODY,
        P + "Filter policy is too complex",
    ),
]


@pytest.mark.parametrize(("case", "document", "scope", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refusals_carry_aws_messages(case: str, document: Any, scope: Scope, message: str) -> None:
    assert refusal(json.dumps(document), scope) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", P + "Malformed JSON: Expecting value (line 1, column 1)"),
        ('{"a": ["x"]', P + "Malformed JSON: Expecting ',' delimiter (line 1, column 12)"),
        (
            "{'a': ['x']}",
            P + "Malformed JSON: Expecting property name enclosed in double quotes (line 1, column 2)",
        ),
        ('{"a": [NaN]}', P + "Malformed JSON: Non-standard JSON token: NaN"),
        ('["a"]', P + "Filter is not an object"),
        ('"a"', P + "Filter is not an object"),
    ],
)
def test_malformed_json(text: str, message: str) -> None:
    assert refusal(text) == message


def test_subscribe_words_the_same_refusal_with_attributes_reason() -> None:
    with pytest.raises(FilterPolicyError) as caught:
        parse_filter_policy('{"key": [{"numeric": [">", 3, "<", 1]}]}')
    assert caught.value.subscribe_message == (
        "Invalid parameter: Attributes Reason: FilterPolicy: Bottom must be less than top"
    )
    assert caught.value.code == "InvalidParameter"
    assert caught.value.reason == "Bottom must be less than top"


def test_an_unknown_scope_is_refused_as_aws_words_it() -> None:
    assert refusal('{"a": ["b"]}', "RandomValue") == (  # type: ignore[arg-type]
        "Invalid parameter: FilterPolicyScope: Invalid value [RandomValue]."
        " Please use either MessageBody or MessageAttributes"
    )


ACCEPTED: list[tuple[str, Any, Scope]] = [
    ("five keys", {f"key{i}": [f"value{i}"] for i in range(1, 6)}, ATTRS),
    ("150 values", {"key": [f"value{i}" for i in range(150)]}, ATTRS),
    ("10 x 15 values", {"a": [str(i) for i in range(10)], "b": [str(i) for i in range(15)]}, ATTRS),
    # (3 x 6) + (3 x 4 x 4) + (3 x 4 x 7) = 150, accepted by SNS.
    (
        "$or summing to 150",
        {
            "source": ["aws.cloudwatch", "aws.events", "aws.test"],
            "$or": [
                {
                    "metricName": [
                        "CPUUtilization",
                        "ReadLatency",
                        "TestVal",
                        "TestVal2",
                        "TestVal3",
                        "TestVal4",
                    ]
                },
                {
                    "metricType": ["MetricType", "TestType", "TestType2", "TestType3"],
                    "$or": [{"metricId": [1234, 4321, 5678, 9012]}, {"spaceId": [1, 2, 3, 4, 5, 6, 7]}],
                },
            ],
        },
        ATTRS,
    ),
    # AWS's example: 3 x 4 x 2 x 3 = 72.
    (
        "nested 72",
        {
            "key_a": {"key_b": {"key_c": ["value_one", "value_two", "value_three", "value_four"]}},
            "key_d": {"key_e": ["value_one", "value_two", "value_three"]},
        },
        BODY,
    ),
    # AWS's key-counting example: nested keys don't count in the body scope (4 top-level keys).
    (
        "six leaves under four top-level keys",
        {
            "state": ["SUCCESS"],
            "severity": [{"exists": True}],
            "message": [{"exists": True}],
            "finding": {
                "standard_control": [{"exists": True}],
                "region": [{"exists": True}],
                "account": [{"exists": True}],
            },
        },
        BODY,
    ),
    ("every literal", {"key": ["a", 1, -2.5, True, False, None]}, ATTRS),
    (
        "anything-but forms",
        {
            "a": [{"anything-but": "x"}],
            "b": [{"anything-but": [1, 2]}],
            "c": [{"anything-but": {"prefix": "p"}}],
        },
        ATTRS,
    ),
    (
        "numeric forms",
        {"a": [{"numeric": ["=", 1]}, {"numeric": ["<", 0]}, {"numeric": [">=", 0, "<", 1e9]}]},
        ATTRS,
    ),
    ("cidr v6", {"a": [{"cidr": "2001:db8:1234:1a00::/64"}]}, ATTRS),
    ("a key named like an operator outside $or", {"prefix": ["x"]}, ATTRS),
    ("the empty policy", {}, ATTRS),
]


@pytest.mark.parametrize(("case", "document", "scope"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_policies_sns_accepts(case: str, document: Any, scope: Scope) -> None:
    assert isinstance(policy(document, scope), FilterPolicy)


def test_the_size_limit_is_256_kb_of_utf8() -> None:
    head, tail = '{"k": ["', '"]}'
    filler = MAX_POLICY_BYTES - len(head) - len(tail)
    assert isinstance(parse_filter_policy(head + "x" * filler + tail), FilterPolicy)
    over = head + "x" * (filler - 1) + "é" + tail  # é is two bytes: one byte over
    assert refusal(over) == P + "Filter policy can not be larger than 262144 bytes"


# Matching message attributes ---------------------------------------------------------------------

ATTRIBUTE_CASES: list[tuple[str, Any, dict[str, tuple[str, str]], bool]] = [
    # Exact strings: OR within a key.
    ("exact", {"customer_interests": ["rugby", "tennis"]}, {"customer_interests": s("rugby")}, True),
    (
        "exact, second value",
        {"customer_interests": ["rugby", "tennis"]},
        {"customer_interests": s("tennis")},
        True,
    ),
    (
        "exact, other value",
        {"customer_interests": ["rugby", "tennis"]},
        {"customer_interests": s("baseball")},
        False,
    ),
    ("exact is case-sensitive", {"k": ["Rugby"]}, {"k": s("rugby")}, False),
    ("exact, absent key", {"k": ["x"]}, {"other": s("x")}, False),
    (
        "String.Array, an element",
        {"customer_interests": ["rugby", "tennis"]},
        {"customer_interests": arr("rugby", "tennis")},
        True,
    ),
    (
        "String.Array, no element",
        {"customer_interests": ["rugby", "tennis"]},
        {"customer_interests": arr("baseball")},
        False,
    ),
    ("String.Array, empty", {"k": ["x"]}, {"k": arr()}, False),
    ("String.Array, not JSON", {"k": ["x"]}, {"k": ("String.Array", "[x")}, False),
    ("custom String type", {"k": ["x"]}, {"k": ("String.custom", "x")}, True),
    ("a string does not match a Number", {"k": ["5"]}, {"k": n("5")}, False),
    ("Binary never matches", {"k": ["eA=="]}, {"k": ("Binary", "eA==")}, False),
    # AND across keys.
    ("and, both", {"a": ["1"], "b": [{"numeric": [">", 100]}]}, {"a": s("1"), "b": n("101")}, True),
    ("and, one fails", {"a": ["1"], "b": [{"numeric": [">", 100]}]}, {"a": s("1"), "b": n("100")}, False),
    ("and, one absent", {"a": ["1"], "b": [{"numeric": [">", 100]}]}, {"a": s("1")}, False),
    # Numbers.
    ("exact number", {"price": [301.5]}, {"price": n("301.5")}, True),
    ("exact number, exponent", {"price": [301.5]}, {"price": n("3.015e2")}, True),
    ("exact number, other", {"price": [301.5]}, {"price": n("301.6")}, False),
    ("a number does not match a String", {"price": [5]}, {"price": s("5")}, False),
    ("a number in a String.Array", {"price": [5]}, {"price": arr("a", 5)}, True),
    ("numeric =", {"price_usd": [{"numeric": ["=", 301.5]}]}, {"price_usd": n("3.015e2")}, True),
    ("numeric < 0", {"p": [{"numeric": ["<", 0]}]}, {"p": n("-0.5")}, True),
    ("numeric < 0, zero", {"p": [{"numeric": ["<", 0]}]}, {"p": n("0")}, False),
    ("range (0, 150], 150", {"p": [{"numeric": [">", 0, "<=", 150]}]}, {"p": n("150")}, True),
    ("range (0, 150], 0", {"p": [{"numeric": [">", 0, "<=", 150]}]}, {"p": n("0")}, False),
    ("range [0, 150), 0", {"p": [{"numeric": [">=", 0, "<", 150]}]}, {"p": n("0")}, True),
    ("range [0, 150), 150", {"p": [{"numeric": [">=", 0, "<", 150]}]}, {"p": n("150")}, False),
    ("five decimal places", {"p": [{"numeric": ["=", 1.00001]}]}, {"p": n("1.00001")}, True),
    ("beyond five places is not seen", {"p": [{"numeric": ["=", 1]}]}, {"p": n("1.000001")}, True),
    ("the fifth place is seen", {"p": [{"numeric": ["=", 1]}]}, {"p": n("1.00001")}, False),
    ("numeric on a String", {"p": [{"numeric": [">", 0]}]}, {"p": s("5")}, False),
    ("numeric on a bad Number", {"p": [{"numeric": [">", 0]}]}, {"p": n("1_000")}, False),
    ("numeric on String.Array numbers", {"p": [{"numeric": [">", 10]}]}, {"p": arr(1, 11)}, True),
    # prefix, suffix, equals-ignore-case.
    ("prefix", {"k": [{"prefix": "bas"}]}, {"k": s("basketball")}, True),
    ("prefix, other", {"k": [{"prefix": "bas"}]}, {"k": s("rugby")}, False),
    ("prefix on a Number", {"k": [{"prefix": "1"}]}, {"k": n("12")}, False),
    ("prefix on String.Array", {"k": [{"prefix": "bas"}]}, {"k": arr("rugby", "baseball")}, True),
    ("suffix", {"k": [{"suffix": "ball"}]}, {"k": s("baseball")}, True),
    ("suffix, other", {"k": [{"suffix": "ball"}]}, {"k": s("rugby")}, False),
    ("equals-ignore-case", {"k": [{"equals-ignore-case": "RuGbY"}]}, {"k": s("rugby")}, True),
    ("equals-ignore-case, other", {"k": [{"equals-ignore-case": "RuGbY"}]}, {"k": s("rugby league")}, False),
    # anything-but.
    ("anything-but list", {"k": [{"anything-but": ["rugby", "tennis"]}]}, {"k": s("baseball")}, True),
    ("anything-but list, listed", {"k": [{"anything-but": ["rugby", "tennis"]}]}, {"k": s("tennis")}, False),
    ("anything-but single", {"k": [{"anything-but": "rugby"}]}, {"k": s("rugby")}, False),
    ("anything-but, absent key", {"k": [{"anything-but": "rugby"}]}, {"other": s("x")}, False),
    (
        "anything-but or absent",
        {"k": [{"anything-but": "rugby"}, {"exists": False}]},
        {"other": s("x")},
        True,
    ),
    ("anything-but numbers", {"price": [{"anything-but": [100, 500]}]}, {"price": n("100.1")}, True),
    ("anything-but numbers, listed", {"price": [{"anything-but": [100, 500]}]}, {"price": n("1e2")}, False),
    (
        "anything-but, String.Array with none listed",
        {"k": [{"anything-but": ["rugby", "tennis"]}]},
        {"k": arr("golf", "polo")},
        True,
    ),
    (
        "anything-but, String.Array with one listed",
        {"k": [{"anything-but": ["rugby", "tennis"]}]},
        {"k": arr("rugby", "golf")},
        False,
    ),
    ("anything-but prefix", {"k": [{"anything-but": {"prefix": "order-"}}]}, {"k": s("invoice-1")}, True),
    (
        "anything-but prefix, prefixed",
        {"k": [{"anything-but": {"prefix": "order-"}}]},
        {"k": s("order-1")},
        False,
    ),
    (
        "null does not match an absent key",
        {"k": [None, {"anything-but": "whatever"}]},
        {"other": n("1")},
        False,
    ),
    ("null in a String.Array", {"k": [None]}, {"k": arr("a", None)}, True),
    ("true in a String.Array", {"k": [True]}, {"k": arr(True)}, True),
    ("true is not the string", {"k": [True]}, {"k": s("true")}, False),
    # exists.
    ("exists true", {"store": [{"exists": True}]}, {"store": s("fans")}, True),
    ("exists true, Number", {"store": [{"exists": True}]}, {"store": n("99")}, True),
    ("exists true, absent", {"store": [{"exists": True}]}, {"other": s("fans")}, False),
    ("exists false, absent", {"store": [{"exists": False}]}, {"other": s("fans")}, True),
    ("exists false, present", {"store": [{"exists": False}]}, {"store": s("fans")}, False),
    ("exists false, no attributes at all", {"store": [{"exists": False}]}, {}, False),
    ("exists false, only a Binary", {"store": [{"exists": False}]}, {"store": ("Binary", "eA==")}, False),
    (
        "exists true, a Binary is not there",
        {"store": [{"exists": True}]},
        {"store": ("Binary", "eA=="), "x": s("1")},
        False,
    ),
    # cidr.
    ("cidr", {"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": s("10.0.0.255")}, True),
    ("cidr, outside", {"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": s("10.0.1.0")}, False),
    ("cidr, not an address", {"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": s("10.0.0.256")}, False),
    # $or across keys.
    ("$or, first", {"$or": [{"a": ["1"]}, {"b": ["2"]}]}, {"a": s("1")}, True),
    ("$or, second", {"$or": [{"a": ["1"]}, {"b": ["2"]}]}, {"b": s("2")}, True),
    ("$or, neither", {"$or": [{"a": ["1"]}, {"b": ["2"]}]}, {"a": s("2"), "b": s("1")}, False),
    ("$or and a key", {"c": ["3"], "$or": [{"a": ["1"]}, {"b": ["2"]}]}, {"b": s("2")}, False),
    (
        "$or and a key, both",
        {"c": ["3"], "$or": [{"a": ["1"]}, {"b": ["2"]}]},
        {"b": s("2"), "c": s("3")},
        True,
    ),
    # AWS: " and \\ must be double-escaped in a policy to match a String attribute.
    ("a quote, escaped in the policy", {"k": ['say \\"hi\\"']}, {"k": s('say "hi"')}, True),
    ("a quote, not escaped", {"k": ['say "hi"']}, {"k": s('say "hi"')}, False),
    ("a backslash, escaped", {"k": ["a\\\\b"]}, {"k": s("a\\b")}, True),
    # The empty policy lets everything through.
    ("empty policy", {}, {}, True),
]


@pytest.mark.parametrize(
    ("case", "document", "attributes", "expected"), ATTRIBUTE_CASES, ids=[c[0] for c in ATTRIBUTE_CASES]
)
def test_matching_message_attributes(
    case: str, document: Any, attributes: dict[str, tuple[str, str]], expected: bool
) -> None:
    assert policy(document).matches_attributes(attributes) is expected


# Matching message bodies -------------------------------------------------------------------------

BODY_CASES: list[tuple[str, Any, Any, bool]] = [
    ("exact", {"customer_interests": ["rugby", "tennis"]}, {"customer_interests": "rugby"}, True),
    ("exact, other", {"customer_interests": ["rugby", "tennis"]}, {"customer_interests": "baseball"}, False),
    ("exact number", {"price_usd": [301.5]}, {"price_usd": 3.015e2}, True),
    ("a number is not its string", {"price_usd": [301.5]}, {"price_usd": "301.5"}, False),
    ("numeric range", {"p": [{"numeric": [">", 0, "<=", 150]}]}, {"p": 150}, True),
    ("true", {"flag": [True]}, {"flag": True}, True),
    ("true is not 1", {"flag": [True]}, {"flag": 1}, False),
    ("1 is not true", {"n": [1]}, {"n": True}, False),
    ("null matches null", {"k": [None]}, {"k": None}, True),
    ("null does not match absent", {"k": [None]}, {"other": 1}, False),
    ("nested", {"object": {"key": [{"prefix": "auto-"}]}}, {"object": {"key": "auto-test"}}, True),
    ("nested, other", {"object": {"key": [{"prefix": "auto-"}]}}, {"object": {"key": "home-test"}}, False),
    (
        "nested, written dotted in the body",
        {"object": {"nested": ["string.value"]}},
        {"object.nested": "string.value"},
        True,
    ),
    ("dotted in the policy", {"object.nested": ["v"]}, {"object": {"nested": "v"}}, True),
    ("deep, mixed dots", {"object": {"nested": {"test": ["v"]}}}, {"object.nested": {"test": "v"}}, True),
    ("deep, dots inside", {"object": {"nested": {"test": ["v"]}}}, {"object": {"nested.test": "v"}}, True),
    ("a leaf path holding an object", {"a": ["x"]}, {"a": {"b": "x"}}, False),
    (
        "array of strings, any",
        {"headers": {"route-to": ["queue2"]}},
        {"headers": {"route-to": ["queue1", "queue2"]}},
        True,
    ),
    (
        "array of strings, none",
        {"headers": {"route-to": ["queue2"]}},
        {"headers": {"route-to": ["queue1"]}},
        False,
    ),
    (
        "nested arrays",
        {"s3": {"object": {"key": [{"prefix": "auto-"}]}}},
        {"s3": {"object": [[{"key": "auto-1.xml"}]]}},
        True,
    ),
    (
        "array of objects",
        {"Records": {"eventName": [{"prefix": "ObjectCreated:"}]}},
        {"Records": [{"eventName": "ObjectRemoved:Delete"}, {"eventName": "ObjectCreated:Put"}]},
        True,
    ),
    (
        "one element must hold both",
        {"Records": {"a": [1], "b": [4]}},
        {"Records": [{"a": 1, "b": 2}, {"a": 3, "b": 4}]},
        False,
    ),
    (
        "one element holds both",
        {"Records": {"a": [1], "b": [4]}},
        {"Records": [{"a": 3, "b": 2}, {"a": 1, "b": 4}]},
        True,
    ),
    (
        "different arrays combine freely",
        {"x": {"a": [1]}, "y": {"b": [4]}},
        {"x": [{"a": 1}], "y": [{"b": 3}, {"b": 4}]},
        True,
    ),
    (
        "a value outside the array agrees",
        {"id": ["7"], "Records": {"a": [1]}},
        {"id": "7", "Records": [{"a": 2}, {"a": 1}]},
        True,
    ),
    (
        "anything-but, a body array with one listed",
        {"k": [{"anything-but": ["rugby", "tennis"]}]},
        {"k": ["rugby", "baseball"]},
        True,
    ),
    (
        "anything-but, all listed",
        {"k": [{"anything-but": ["rugby", "tennis"]}]},
        {"k": ["rugby", "tennis"]},
        False,
    ),
    ("anything-but, absent", {"k": [{"anything-but": "x"}]}, {"other": "y"}, False),
    ("exists true", {"store": [{"exists": True}]}, {"store": "fans"}, True),
    ("exists true, null", {"store": [{"exists": True}]}, {"store": None}, False),
    ("exists true, empty array", {"store": [{"exists": True}]}, {"store": []}, False),
    ("exists true, an object is not a leaf", {"store": [{"exists": True}]}, {"store": {"a": 1}}, False),
    ("exists false, absent", {"store": [{"exists": False}]}, {"customer_interests": ["baseball"]}, True),
    ("exists false, present", {"store": [{"exists": False}]}, {"store": "fans"}, False),
    ("exists false, empty body", {"store": [{"exists": False}]}, {}, True),
    (
        "an empty string",
        {"detail": {"eventVersion": [""]}},
        {"resources": [], "detail": {"eventVersion": "", "x": None}},
        True,
    ),
    (
        "cidr",
        {"detail": {"ip": [{"cidr": "2001:db8:1234:1a00::/64"}]}},
        {"detail": {"ip": "2001:0db8:1234:1a00:0000:0000:0000:0000"}},
        True,
    ),
    (
        "cidr, outside",
        {"detail": {"ip": [{"cidr": "2001:db8:1234:1a00::/64"}]}},
        {"detail": {"ip": "2001:0db8:123f:1a01::"}},
        False,
    ),
    # The string escaping of attributes does not apply to a body.
    ("a quote in a body", {"k": ['say "hi"']}, {"k": 'say "hi"'}, True),
]


@pytest.mark.parametrize(("case", "document", "body", "expected"), BODY_CASES, ids=[c[0] for c in BODY_CASES])
def test_matching_message_bodies(case: str, document: Any, body: Any, expected: bool) -> None:
    assert policy(document, BODY).matches_body(json.dumps(body)) is expected


# The $or example of AWS's pages (as SNS was recorded answering it): 5 of 12 bodies pass.
OR_POLICY = {
    "$or": [{"metricName": ["CPUUtilization", "ReadLatency"]}, {"namespace": ["AWS/EC2", "AWS/ES"]}],
    "detail": {
        "scope": ["Service"],
        "$or": [{"source": ["aws.cloudwatch"]}, {"type": ["CloudWatch Alarm State Change"]}],
    },
}
OR_BODIES: list[tuple[Any, bool]] = [
    (
        {
            "metricName": "CPUUtilization",
            "detail": {"scope": "aws.cloudwatch", "type": "CloudWatch Alarm State Change"},
        },
        False,
    ),
    ({"metricName": "CPUUtilization", "detail": {"scope": "Service", "type": "CPUUtilization"}}, False),
    ({"metricName": "CPUUtilization", "detail": {"type": "CloudWatch Alarm State Change"}}, False),
    ({"metricName": "CPUUtilization", "detail": {"scope": "Service"}}, False),
    ({"metricName": "CPUUtilization", "scope": "Service"}, False),
    (
        {"metricName": "AWS/EC2", "detail": {"scope": "Service", "type": "CloudWatch Alarm State Change"}},
        False,
    ),
    (
        {
            "namespace": "CPUUtilization",
            "detail": {"scope": "Service", "type": "CloudWatch Alarm State Change"},
        },
        False,
    ),
    ({"metricName": "CPUUtilization", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}, True),
    ({"metricName": "ReadLatency", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}, True),
    ({"namespace": "AWS/EC2", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}, True),
    ({"namespace": "AWS/ES", "detail": {"scope": "Service", "source": "aws.cloudwatch"}}, True),
    (
        {
            "metricName": "CPUUtilization",
            "detail": {"scope": "Service", "type": "CloudWatch Alarm State Change"},
        },
        True,
    ),
]


@pytest.mark.parametrize(("body", "expected"), OR_BODIES)
def test_or_in_a_body_policy(body: Any, expected: bool) -> None:
    assert policy(OR_POLICY, BODY).matches_body(json.dumps(body)) is expected


@pytest.mark.parametrize(
    "body", ["not json", "[1, 2]", '"text"', "1", "", '{"k": NaN}', "[" * 5000 + "]" * 5000]
)
def test_a_body_that_is_not_a_json_object_matches_nothing(body: str) -> None:
    assert policy({"k": [{"exists": False}]}, BODY).matches_body(body) is False


def test_a_body_policy_ignores_attributes_and_the_other_way_round() -> None:
    by_body = policy({"k": ["v"]}, BODY)
    by_attributes = policy({"k": ["v"]}, ATTRS)
    assert by_body.matches({"k": s("v")}, '{"k": "w"}') is False
    assert by_body.matches({}, '{"k": "v"}') is True
    assert by_attributes.matches({"k": s("v")}, '{"k": "w"}') is True
    assert by_attributes.matches({}, '{"k": "v"}') is False


# Properties ---------------------------------------------------------------------------------------

PROPERTIES = settings(
    max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

names = st.text(st.characters(codec="utf-8", exclude_characters="."), min_size=1, max_size=8).filter(
    lambda name: name != "$or"
)
strings = st.text(st.characters(codec="utf-8"), max_size=12)
numbers = st.decimals(min_value=-(10**9), max_value=10**9, places=5, allow_nan=False, allow_infinity=False)
attribute = st.one_of(
    strings.map(lambda v: ("String", v)),
    numbers.map(lambda v: ("Number", str(v))),
    st.lists(st.one_of(strings, st.booleans(), st.none()), min_size=1, max_size=4).map(
        lambda v: ("String.Array", json.dumps(v))
    ),
)
attribute_sets = st.dictionaries(names, attribute, min_size=1, max_size=5)


def policy_from_attributes(attributes: dict[str, tuple[str, str]]) -> dict[str, list[Any]]:
    """A policy every key of which names the message's own value (escaped as AWS asks)."""
    document: dict[str, list[Any]] = {}
    for name, (data_type, value) in attributes.items():
        if data_type == "String":
            document[name] = [value.replace("\\", "\\\\").replace('"', '\\"')]
        elif data_type == "Number":
            document[name] = [{"numeric": ["=", float(value)]}]
        else:
            document[name] = [json.loads(value)[0]]
    return document


@PROPERTIES
@given(attribute_sets)
def test_a_policy_built_from_a_messages_attributes_matches_it(attributes: dict[str, tuple[str, str]]) -> None:
    assert policy(policy_from_attributes(attributes)).matches_attributes(attributes)


@PROPERTIES
@given(attribute_sets)
def test_anything_but_a_messages_own_strings_never_matches_it(attributes: dict[str, tuple[str, str]]) -> None:
    excluded = {
        name: [{"anything-but": value.replace("\\", "\\\\").replace('"', '\\"')}]
        for name, (data_type, value) in attributes.items()
        if data_type == "String"
    }
    if excluded:
        assert not policy(excluded).matches_attributes(attributes)


json_scalars = st.one_of(
    strings, st.booleans(), st.none(), numbers.map(lambda d: float(d) if d % 1 else int(d))
)
bodies = st.recursive(
    st.dictionaries(names, json_scalars, min_size=1, max_size=4),
    lambda inner: st.dictionaries(
        names, st.one_of(json_scalars, inner, st.lists(inner, max_size=3)), min_size=1, max_size=4
    ),
    max_leaves=12,
)


def first_leaf_path(body: dict[str, Any]) -> tuple[list[str], Any] | None:
    for key, value in body.items():
        if isinstance(value, dict):
            found = first_leaf_path(value)
            if found:
                return [key, *found[0]], found[1]
        elif isinstance(value, list):
            for element in value:
                found = first_leaf_path(element)
                if found:
                    return [key, *found[0]], found[1]
        else:
            return [key], value
    return None


@PROPERTIES
@given(bodies)
def test_a_body_policy_built_from_one_of_its_values_matches_it(body: dict[str, Any]) -> None:
    found = first_leaf_path(body)
    if found is None:
        return
    path, value = found
    document: Any = [value]
    for key in reversed(path):
        document = {key: document}
    assert policy(document, BODY).matches_body(json.dumps(body))


@PROPERTIES
@given(
    st.dictionaries(names, st.one_of(st.text(max_size=6), st.binary(max_size=4).map(str)), max_size=4), bodies
)
def test_matching_never_raises(raw: dict[str, str], body: dict[str, Any]) -> None:
    attributes = {
        name: (("Number", "String.Array", "Binary")[len(name) % 3], value) for name, value in raw.items()
    }
    checked = policy({"k": ["x", 1, None, {"numeric": [">", 0]}, {"anything-but": "y"}, {"exists": False}]})
    checked.matches_attributes(attributes)
    policy({"k": [{"prefix": "a"}]}, BODY).matches_body(json.dumps(body))


def test_numbers_are_kept_as_decimals_so_a_bool_is_never_a_number() -> None:
    parsed = policy({"k": [1]})
    assert parsed.alternatives[0][0][1][0].value == Decimal(1)  # type: ignore[union-attr]
    assert not parsed.matches_attributes({"k": arr(True)})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"p": 1e99999}', True),
        ('{"p": -1e99999}', False),
        ('{"p": 1e-99999}', False),
        ('{"p": 0.000016}', True),
        ('{"p": 0.000006}', False),  # 0.00001 at five places: not above it
    ],
)
def test_numbers_of_any_size_compare_in_order(body: str, expected: bool) -> None:
    assert policy({"p": [{"numeric": [">", 0.00001]}]}, BODY).matches_body(body) is expected
    assert policy({"p": [{"numeric": [">", 1e9]}]}).matches_attributes({"p": n("1e30")})
