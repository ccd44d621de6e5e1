"""Schemathesis over the committed spec (openapi/openapi.json) against a real `simplequeue serve`.

Every phase runs (examples, coverage, fuzzing, stateful) with a fixed seed, on SQLite and on a
fresh PostgreSQL database, and must find nothing. The checks: no 5xx; status codes, content types
and bodies as the spec documents them; schema-valid requests accepted and schema-invalid ones
refused; 405 for methods the spec does not list. Only responses slower than a hung request could be
are failures, so that no figure of this machine's speed decides the outcome.

Size: SIMPLEQUEUE_SCHEMATHESIS_EXAMPLES examples per operation and phase (default small, for every
run of the suite; the long run uses 100 or more).

What the spec cannot say are adjusted in generated requests, each keeping a valid request
valid and an invalid one invalid:
- a pop's wait_seconds is capped at WAIT_CAP: most generated queues are empty, and a long-poll
  on one waits out its wait_seconds (up to 20 s) by design;
- a cursor of valid length becomes one this service could have handed out: a cursor is opaque, and
  any other text is 422 InvalidCursor, as documented;
- a key (group, dedup_key) that the schema allows is cut to 128 UTF-16 code units: the schema's
  maxLength counts characters, and a character beyond U+FFFF takes two units in SQL Server's
  NVARCHAR(128), so the service refuses such keys past 64 characters on every engine (422, as the
  field's description says). A full run on a loaded machine once generated one;
- a message attribute the schema allows whose type is a Number or a Binary gets a value its type
  takes ("1", "AA=="): the schema says what any value may hold, not what a number or base64 is;
- a queue's dead_letter_queue that is a valid queue name becomes null (none): the service takes only
  another queue that exists (else 422 naming the field, as documented), which no schema can say;
  invalid names stay, so that their refusal is still checked;
- a queue's rate_burst without a rate_per_second becomes null: a burst is the size of a rate's
  bucket (else 422 naming rate_burst, as documented), which the schema does not say;
- a topic's FIFO attributes agree with its name (FifoTopic says whether it ends in .fifo;
  ContentBasedDeduplication only on a FIFO topic), and a subscription's FilterPolicy and
  RedrivePolicy text, and a topic's or subscription's DeliveryPolicy, become a valid policy: SNS's
  rules the service applies (422 InvalidTopic, InvalidSubscription), which no schema can say; a
  publish's attributes fit their types as a push's, and its group and dedup key its topic (a FIFO
  topic's publication has both, another's neither);
- a subscription's endpoint that the schema allows fits its protocol: a URL (at a host that never
  resolves, `hooks.invalid`) for http and https, a queue's name for sqs;
- a schedule's timing that the schema allows becomes one the domain takes: one of every_seconds, cron
  (a valid expression) and at (one to come), in a zone that exists.
NUL characters are not generated: the service refuses them in stored text (the spec's patterns and
the payload's description say so), and a payload's NUL cannot be written as a schema.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema
from schemathesis.hooks import HookContext
from simplequeue.api.topics.schemas import ENDPOINT_URL_PATTERN
from simplequeue.domain.names import QUEUE_NAME_PATTERN, is_queue_name
from simplequeue.store.cursors import encode_cursor, encode_name_cursor, encode_topic_cursor
from simplequeue.store.schedules import encode_schedule_cursor

from tests.engines import postgres_database
from tests.test_e2e import serving

pytestmark = pytest.mark.e2e

SPEC = Path(__file__).parent.parent / "openapi" / "openapi.json"
EXAMPLES = int(os.environ.get("SIMPLEQUEUE_SCHEMATHESIS_EXAMPLES", "10"))
SEED = 20261123
WAIT_CAP = 0.05
A_CURSOR = encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), 1)
A_QUEUE_CURSOR = encode_name_cursor("default")  # GET /queues pages by name
A_TOPIC_CURSOR = encode_topic_cursor("default")  # GET /topics too
A_SCHEDULE_CURSOR = encode_schedule_cursor("default")  # and GET /schedules
A_KEY_CURSOR = encode_name_cursor("default", "k:")  # and GET /queues/{name}/keys, by key
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "unsupported_method",
]
# Well above the longest wait a request may have (a 20 s long-poll, a 5 s database timeout): only a
# request that hung fails it, never a slow machine.
HUNG_SECONDS = 30


def config(base_url: str) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "base-url": base_url,
            "workers": 1,
            "request-timeout": HUNG_SECONDS + 10,
            "cache": {"enabled": False},
            "generation": {"max-examples": EXAMPLES, "allow-x00": False, "database": "none"},
            "phases": {name: {"enabled": True} for name in ("examples", "coverage", "fuzzing", "stateful")},
            "checks": {
                "enabled": False,
                **{name: {"enabled": True} for name in CHECKS},
                "max_response_time": HUNG_SECONDS,
            },
        }
    )


def _fitting(key: Any) -> Any:
    """A key the schema allows (1..128 characters, no NUL, no space at its end) cut to 128 UTF-16
    code units, still one the schema allows; any other value as it is."""
    if not isinstance(key, str) or not 1 <= len(key) <= 128 or "\x00" in key or key.endswith(" "):
        return key
    while len(key.encode("utf-16-le")) > 256:
        key = key[:-1]
    return key.rstrip(" ") or "k"


def _fitting_attribute(attribute: Any) -> Any:
    """A Number's or Binary's attribute the schema allows with a value its type takes."""
    if not isinstance(attribute, dict) or set(attribute) != {"type", "value"}:
        return attribute
    kind, value = attribute["type"], attribute["value"]
    if not isinstance(kind, str) or not isinstance(value, str) or not value or len(kind) > 256:
        return attribute
    for prefix, fitting in (("Number", "1"), ("Binary", "AA==")):
        if kind == prefix or kind.startswith(prefix + "."):
            return {"type": kind, "value": fitting}
    return attribute


def _fitting_keys(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    fitted = {k: _fitting(v) if k in ("group", "dedup_key") else v for k, v in item.items()}
    attributes = fitted.get("attributes")
    if isinstance(attributes, dict):
        fitted["attributes"] = {name: _fitting_attribute(a) for name, a in attributes.items()}
    return fitted


def adjust(context: HookContext, case: Any) -> Any:
    """The map_case hook: see the module's docstring."""
    body, query = case.body, case.query
    if case.operation.label == "POST /push" and isinstance(body, dict):
        case.body = body = _fitting_keys(body)
    items = body.get("items") if isinstance(body, dict) else None
    if case.operation.label == "POST /push/batch" and isinstance(items, list):
        case.body = body = {**body, "items": [_fitting_keys(item) for item in items]}
    if case.operation.label == "POST /pop" and isinstance(body, dict):
        wait = body.get("wait_seconds")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and WAIT_CAP < wait <= 20:
            case.body = {**body, "wait_seconds": WAIT_CAP}
    named = isinstance(body, dict) and is_queue_name(body.get("dead_letter_queue"))
    if case.operation.label == "PUT /queues/{name}" and named:
        case.body = body = {**body, "dead_letter_queue": None}
    unrated = (
        isinstance(body, dict) and body.get("rate_burst") is not None and body.get("rate_per_second") is None
    )
    if case.operation.label == "PUT /queues/{name}" and unrated:
        case.body = body = {**body, "rate_burst": None}
    if isinstance(query, dict):
        cursor = query.get("cursor")
        label = case.operation.label
        longest = 400 if label == "GET /topics" else 200  # a topic's name is up to 256 characters
        if (
            isinstance(cursor, str)
            and 1 <= len(cursor) <= longest
            and label != "GET /topics/{name}/subscriptions"
        ):
            mine = {
                "GET /queues": A_QUEUE_CURSOR,
                "GET /topics": A_TOPIC_CURSOR,
                "GET /schedules": A_SCHEDULE_CURSOR,
                "GET /queues/{name}/keys": A_KEY_CURSOR,
            }.get(label, A_CURSOR)
            case.query = {**query, "cursor": mine}
    if isinstance(body, dict):
        case.body = _fitting_topic_body(case.operation.label, case.path_parameters or {}, body)
    if case.operation.label == "PUT /schedules/{name}" and isinstance(body, dict):
        case.body = _fitting_schedule(body)
    return case


_ISO_TEXT = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d.*")


def _fitting_schedule(body: dict[str, Any]) -> dict[str, Any]:
    """A schedule's body whose timing the schema allows, made one the domain takes: one of
    every_seconds, cron and at, a cron expression, an IANA zone, an `at` to come."""
    every, cron, at, zone = (body.get(k) for k in ("every_seconds", "cron", "at", "timezone"))
    if not all(
        [
            every is None
            or (isinstance(every, int | float) and not isinstance(every, bool) and every % 1 == 0),
            cron is None or (isinstance(cron, str) and 1 <= len(cron) <= 256),
            at is None or (isinstance(at, str) and _ISO_TEXT.fullmatch(at) is not None),
            zone is None or (isinstance(zone, str) and 1 <= len(zone) <= 64),
        ]
    ):
        return body  # invalid as it is: refused by the schema's own checks
    fitted = {k: v for k, v in body.items() if k not in ("every_seconds", "cron", "at")}
    if zone is not None:
        fitted["timezone"] = "Europe/Berlin"
    if cron is not None:
        fitted["cron"] = "*/5 * * * *"
    elif at is not None:
        fitted["at"] = "2999-01-01T00:00:00Z"
    else:
        fitted["every_seconds"] = every if every is not None else 60
    return {**fitted, "group": _fitting(body["group"])} if "group" in body else fitted


def _fitting_topic_body(label: str, path: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A topic's, subscription's or publish's body with what SNS's rules need (see the docstring)."""
    fifo = str(path.get("name", "")).endswith(".fifo")
    if label in ("PUT /topics/{name}", "PATCH /topics/{name}"):
        field = "attributes" if label.startswith("PUT") else "set_attributes"
        attributes = body.get(field)
        if isinstance(attributes, dict):
            fitted = dict(attributes)
            if isinstance(fitted.get("DeliveryPolicy"), str) and fitted["DeliveryPolicy"]:
                fitted["DeliveryPolicy"] = '{"http": {"defaultHealthyRetryPolicy": {"numRetries": 2}}}'
            if "FifoTopic" in fitted and fitted["FifoTopic"] in ("true", "false"):
                fitted["FifoTopic"] = "true" if fifo else "false"
            if not fifo and fitted.get("ContentBasedDeduplication") == "true":
                fitted["ContentBasedDeduplication"] = "false"
            body = {**body, field: fitted}
    if label in ("POST /topics/{name}/subscriptions", "PATCH /topics/{name}/subscriptions/{subscription_id}"):
        field = "attributes" if label.startswith("POST") else "set_attributes"
        attributes = body.get(field)
        if isinstance(attributes, dict):
            fitted = dict(attributes)
            if isinstance(fitted.get("FilterPolicy"), str):
                fitted["FilterPolicy"] = '{"a": ["b"]}'
            if isinstance(fitted.get("RedrivePolicy"), str):
                fitted["RedrivePolicy"] = '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:dlq"}'
            if isinstance(fitted.get("DeliveryPolicy"), str) and fitted["DeliveryPolicy"]:
                fitted["DeliveryPolicy"] = '{"healthyRetryPolicy": {"numRetries": 2}}'
            body = {**body, field: fitted}
        body = _fitting_endpoint(body, fifo)
    if label in ("POST /topics/{name}/publish",):
        body = _fitting_publication(_fitting_keys(body), fifo)
    if label == "POST /topics/{name}/publish/batch" and isinstance(body.get("messages"), list):
        body = {**body, "messages": [_fitting_publication(_fitting_keys(m), fifo) for m in body["messages"]]}
    return body


def _fitting_publication(message: Any, fifo: bool) -> Any:
    """A FIFO topic's publication has a group and a dedup key; another's has neither."""
    if not isinstance(message, dict):
        return message
    if fifo:
        given = {k: v for k in ("group", "dedup_key") if (v := message.get(k)) is not None}
        return {**message, "group": "g", "dedup_key": "d", **given}
    return {k: v for k, v in message.items() if k not in ("group", "dedup_key")}


def _fitting_endpoint(body: dict[str, Any], fifo: bool) -> dict[str, Any]:
    endpoint, protocol = body.get("endpoint"), body.get("protocol", "sqs")
    if not isinstance(endpoint, str) or protocol not in ("sqs", "http", "https"):
        return body
    if re.fullmatch(QUEUE_NAME_PATTERN, endpoint) or re.fullmatch(ENDPOINT_URL_PATTERN, endpoint):
        queue = "q.fifo" if fifo else "q"  # a FIFO topic delivers to FIFO queues only
        endpoint = queue if protocol == "sqs" else f"{protocol}://hooks.invalid/sns"
    return {**body, "endpoint": endpoint}


@dataclass
class Findings:
    cases: Counter[str] = field(default_factory=Counter)  # per phase
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        phases = ", ".join(f"{phase} {n}" for phase, n in sorted(self.cases.items()))
        return (
            f"{sum(self.cases.values())} cases ({phases}), {len(self.failures)} failures, "
            f"{len(self.errors)} errors, {self.seconds:.0f} s at {EXAMPLES} examples, seed {SEED}"
        )


def run(base_url: str) -> Findings:
    schema = schemathesis.openapi.from_path(SPEC, config=config(base_url))
    schema.hook("map_case")(adjust)
    found = Findings()
    started = time.monotonic()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            recorder = event.recorder
            found.cases[str(getattr(event, "phase", "fuzz"))] += len(recorder.cases)
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        failure = check.failure_info.failure
                        found.failures.append(
                            f"{recorder.label} [{case_id}] {check.name}: {failure.title}\n"
                            f"{failure.message}\n{check.failure_info.code_sample}\n"
                            f"{answered(recorder.interactions.get(case_id))}"
                        )
        elif isinstance(event, events.NonFatalError):
            found.errors.append(f"{event.label}: {event.info.title}: {event.info}")
        elif isinstance(event, events.FatalError):
            found.errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            found.failures += [f"after run: {f.title}\n{f.message}" for f in event.failures]
    found.seconds = time.monotonic() - started
    return found


def answered(interaction: Any) -> str:
    """What the service said, and to what: schemathesis shows keys' values as [Filtered]."""
    response = getattr(interaction, "response", None)
    if response is None:
        return "no response"
    sent = interaction.request.body or b""
    return f"sent: {sent[:2000]!r}\nanswered {response.status_code}: {response.content[:500]!r}"


def assert_nothing_found(engine: str, found: Findings, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():  # the figures show in every run, not only with -s
        print(f"\nschemathesis on {engine}: {found.summary()}")
    assert sum(found.cases.values()) > 0
    shown = "\n\n".join([*found.errors, *found.failures][:10])
    assert not found.errors, f"{found.summary()}\n\n{shown}"
    assert not found.failures, f"{found.summary()}\n\n{shown}"


def test_schemathesis_finds_nothing_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serving(f"sqlite:///{tmp_path / 'st.db'}") as base:
        assert_nothing_found("sqlite", run(base), capsys)


def test_schemathesis_finds_nothing_on_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    with postgres_database() as url, serving(url) as base:
        assert_nothing_found("postgresql", run(base), capsys)
