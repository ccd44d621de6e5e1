"""The generated spec says what the service does, in JSON Schema's own words: generated clients and
schema-driven testers (schemathesis) read only what the spec says."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate
from simplequeue import __version__
from simplequeue.api.errors import HTTP_CODES, ErrorCode, codes_of, domain_errors
from simplequeue.main import create_app
from simplequeue.settings import Settings

COMMITTED = Path(__file__).parent.parent / "openapi" / "openapi.json"
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
    assert len(with_body) == 22
    assert [op for op, responses in with_body.items() if "413" not in responses] == []


@pytest.mark.parametrize("path", ["/queues/{name}/dead", "/queues/{name}/history"])
def test_an_empty_cursor_is_outside_the_spec(path: str) -> None:
    [cursor] = [p for p in SPEC["paths"][path]["get"]["parameters"] if p["name"] == "cursor"]
    [text] = [s for s in cursor["schema"]["anyOf"] if s.get("type") == "string"]
    assert text["minLength"] == 1


def test_the_committed_spec_is_valid_openapi_3_1() -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert committed["openapi"].startswith("3.1.")
    validate(committed)  # raises on the first violation


def test_the_root_says_where_it_is_served_and_how_callers_authenticate() -> None:
    # A Bearer key, or nothing (a service without keys): at the root, so generated clients may
    # call either way; the health checks need nothing, whatever the service's keys.
    assert SPEC["security"] == [{"apiKey": []}, {}]
    assert SPEC["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert SPEC["paths"]["/healthz"]["get"]["security"] == []
    assert SPEC["paths"]["/readyz"]["get"]["security"] == []
    others = [
        op
        for path, ops in SPEC["paths"].items()
        if path not in ("/healthz", "/readyz")
        for op in ops.values()
    ]
    assert all("security" not in op and {"401", "403"} <= set(op["responses"]) for op in others)
    assert SPEC["servers"] == [{"url": "http://127.0.0.1:8000", "description": "simplequeue serve's default"}]
    assert SPEC["info"]["license"]["identifier"] == "MIT"


def schemas_reached(node: Any, seen: set[str]) -> set[str]:
    """The names of the component schemas that node refers to, directly or through others."""
    if isinstance(node, dict):
        ref = node.get("$ref", "")
        if ref.startswith("#/components/schemas/") and (name := ref.rsplit("/", 1)[1]) not in seen:
            seen.add(name)
            schemas_reached(SCHEMAS[name], seen)
        for value in node.values():
            schemas_reached(value, seen)
    elif isinstance(node, list):
        for value in node:
            schemas_reached(value, seen)
    return seen


OPERATIONS = [(method, path, op) for path, item in SPEC["paths"].items() for method, op in item.items()]
REQUEST_SCHEMAS = schemas_reached([op.get("requestBody", {}) for _, _, op in OPERATIONS], set())
RESPONSE_SCHEMAS = schemas_reached([op["responses"] for _, _, op in OPERATIONS], set())


def test_request_and_response_schemas_are_apart() -> None:
    # A shared schema cannot both let a caller omit a field and promise the field in an answer.
    assert REQUEST_SCHEMAS.isdisjoint(RESPONSE_SCHEMAS)
    assert {"PushRequest", "PopRequest", "QueueSettingsRequest", "BackoffRequest"} <= REQUEST_SCHEMAS


def test_request_schemas_have_no_default_keyword() -> None:
    # openapi-typescript makes a property with a `default` required; the default is in words instead.
    defaults = [
        f"{name}{where}" for name in REQUEST_SCHEMAS for where, key in keys(SCHEMAS[name]) if key == "default"
    ]
    assert defaults == []
    assert "Default: 1." in SCHEMAS["PopRequest"]["properties"]["max_items"]["description"]


def test_responses_require_every_field_they_always_carry() -> None:
    optional = {
        f"{name}.{prop}"
        for name in RESPONSE_SCHEMAS
        for prop in SCHEMAS[name].get("properties", {})
        if prop not in SCHEMAS[name].get("required", [])
    }
    assert optional == {"ErrorBody.fields"}  # only a ValidationError names fields


def test_every_operation_has_a_tag_and_error_answers_in_the_envelope() -> None:
    for method, path, op in OPERATIONS:
        assert op.get("tags") in (["items"], ["queues"], ["topics"], ["schedules"], ["health"]), (
            method,
            path,
        )
        errors = {status: r for status, r in op["responses"].items() if int(status) >= 400}
        assert {"408", "500"} <= set(errors), (method, path)
        for response in errors.values():
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)


def test_the_error_code_is_an_enum_of_every_code_the_service_answers() -> None:
    assert SCHEMAS["ErrorBody"]["properties"]["error"] == {"$ref": "#/components/schemas/ErrorCode"}
    domain = {cls.__name__ for cls in domain_errors()}
    http = {code for codes in HTTP_CODES.values() for code in codes}
    assert set(SCHEMAS["ErrorCode"]["enum"]) == {c.value for c in ErrorCode} == domain | http
    assert {"MalformedJSON", "UnsupportedMediaType", "ValidationError", "RequestTimeout"} <= http
    assert codes_of(409) == [
        "Conflict",
        "ItemExists",
        "LeaseMismatch",
        "LeaseExpired",
        "ItemDead",
        "QueueInUse",
        "TooManyQueues",
        "TopicExists",
    ]


def test_generated_names_read_well() -> None:
    # Named enums, not inline ones a generator would name CompleteResultResult or ItemStatus_.
    assert SCHEMAS["CompleteResult"]["properties"]["result"] == {
        "$ref": "#/components/schemas/CompleteOutcome"
    }
    assert SCHEMAS["Item"]["properties"]["status"]["$ref"] == "#/components/schemas/ItemStatus"
    assert {"Queue", "QueueList", "Item", "QueueSettings", "DeadItemPage", "HealthStatus"} <= set(SCHEMAS)
    assert {"QueueResponse", "QueuesResponse", "ItemResponse", "StatusResponse"}.isdisjoint(SCHEMAS)


def test_one_version_is_answered_everywhere() -> None:
    """pyproject.toml's, through the package's metadata: `--version`, the spec, /healthz's schema."""
    version = tomllib.loads((COMMITTED.parent.parent / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"
    ]["version"]
    assert __version__ == version
    assert SPEC["info"]["version"] == version
    shown = subprocess.run(
        [sys.executable, "-m", "simplequeue", "--version"], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == f"simplequeue, version {version}"
    assert "version" in SPEC["components"]["schemas"]["HealthStatus"]["required"]
