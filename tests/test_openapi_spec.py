"""The generated spec says what the service does, in JSON Schema's own words: generated clients and
schema-driven testers (schemathesis) read only what the spec says."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from simplequeue.main import create_app
from simplequeue.settings import Settings

SPEC: dict[str, Any] = create_app(Settings()).openapi()
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]
BODY_METHODS = ("post", "put", "patch")


def keys(node: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    """(place, key) for every key of every object in the spec, except the names of properties."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not where.endswith("/properties"):
                yield where, key
            yield from keys(value, f"{where}/{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from keys(value, f"{where}/{n}")


def test_bounds_are_json_schema_keywords() -> None:
    # pydantic writes its own ge/le/gt/lt when a validator comes before Field in Annotated; no JSON
    # Schema reader knows them, so such a bound is not in the spec at all.
    pydantic_words = [f"{where}/{key}" for where, key in keys(SPEC) if key in ("ge", "le", "gt", "lt")]
    assert pydantic_words == []


@pytest.mark.parametrize(
    ("schema", "field", "bounds"),
    [
        ("PushRequest", "priority", {"minimum": -(2**31), "maximum": 2**31 - 1}),
        ("BatchItem", "priority", {"minimum": -(2**31), "maximum": 2**31 - 1}),
        ("PopRequest", "lease_seconds", {"minimum": 1, "maximum": 43200}),
        ("FailRequest", "retry_after_seconds", {"minimum": 0, "maximum": 604800}),
        ("RedriveRequest", "rate_per_second", {"exclusiveMinimum": 0, "maximum": 1000000}),
    ],
)
def test_bounds_are_in_the_spec(schema: str, field: str, bounds: dict[str, int]) -> None:
    prop = SCHEMAS[schema]["properties"][field]
    [number] = [s for s in prop.get("anyOf", [prop]) if s.get("type") in ("integer", "number")]
    assert {k: number.get(k) for k in bounds} == bounds


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ("PushRequest", "group"),
        ("PushRequest", "dedup_key"),
        ("BatchItem", "group"),
        ("BatchItem", "dedup_key"),
        ("FailRequest", "error"),
    ],
)
def test_text_fields_say_nul_is_refused(schema: str, field: str) -> None:
    prop = SCHEMAS[schema]["properties"][field]
    [text] = [s for s in prop.get("anyOf", [prop]) if s.get("type") == "string"]
    pattern = re.compile(text["pattern"])
    assert pattern.search("ordinary text, é, 😀")
    assert not pattern.search("nul \x00 inside")


@pytest.mark.parametrize("schema", ["PushRequest", "BatchItem"])
def test_payload_description_says_nul_is_refused(schema: str) -> None:
    assert "NUL" in SCHEMAS[schema]["properties"]["payload"]["description"]


def test_every_operation_with_a_body_may_answer_413() -> None:
    # The body limit is checked before any route: every operation that takes a body can meet it.
    with_body = {
        (method.upper(), path): op["responses"]
        for path, item in SPEC["paths"].items()
        for method, op in item.items()
        if method in BODY_METHODS
    }
    assert len(with_body) == 8
    assert [op for op, responses in with_body.items() if "413" not in responses] == []


@pytest.mark.parametrize("path", ["/queues/{name}/dead", "/queues/{name}/history"])
def test_an_empty_cursor_is_outside_the_spec(path: str) -> None:
    [cursor] = [p for p in SPEC["paths"][path]["get"]["parameters"] if p["name"] == "cursor"]
    [text] = [s for s in cursor["schema"]["anyOf"] if s.get("type") == "string"]
    assert text["minLength"] == 1
