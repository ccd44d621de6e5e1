"""MkDocs hook: the HTTP API reference page, written from the committed spec (openapi/openapi.json)
at build time, so the page cannot drift from what the service serves (a test holds the committed
spec equal to the app's). A page asks for it with the line `<!-- openapi-reference -->`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARKER = "<!-- openapi-reference -->"
SPEC = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
METHODS = ("get", "post", "put", "delete", "patch")


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(json.loads(SPEC.read_text(encoding="utf-8"))))


def render(spec: dict[str, Any]) -> str:
    schemas = spec["components"]["schemas"]
    out: list[str] = []
    for tag in spec.get("tags", []):
        out.append(f"## {tag['name']}\n\n{tag.get('description', '')}\n")
        for path, operations in spec["paths"].items():
            for method in METHODS:
                operation = operations.get(method)
                if operation is None or tag["name"] not in operation.get("tags", []):
                    continue
                out.append(_operation(method, path, operation, schemas))
    out.append("## Schemas\n\nThe bodies above refer to these; every error answer is an `ErrorBody`.\n")
    for name in sorted(schemas):
        out.append(_schema(name, schemas[name]))
    return "\n".join(out)


def _operation(method: str, path: str, operation: dict[str, Any], schemas: dict[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}`", ""]
    lines.append(f"*{operation.get('summary', '')}* · operationId `{operation['operationId']}`\n")
    lines.append(operation.get("description", "").strip() + "\n")
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | meaning |", "|---|---|---|---|"]
        for p in parameters:
            required = " (required)" if p.get("required") else ""
            lines.append(
                f"| `{p['name']}`{required} | {p['in']} | {_type(p.get('schema', {}))} "
                f"| {_cell(p.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body:
        lines.append(f"Body: {_type(body['schema'])}\n")
    lines += ["| status | answer | when |", "|---|---|---|"]
    for status, response in operation["responses"].items():
        content = response.get("content", {}).get("application/json")
        shape = _type(content["schema"]) if content else "no body"
        lines.append(f"| {status} | {shape} | {_cell(response.get('description', ''))} |")
    return "\n".join(lines) + "\n"


def _schema(name: str, schema: dict[str, Any]) -> str:
    lines = [f'### {name} {{ #schema-{name.lower()} }}', ""]
    if schema.get("description"):
        lines.append(schema["description"].strip() + "\n")
    if "enum" in schema:
        lines.append("One of: " + ", ".join(f"`{v}`" for v in schema["enum"]) + "\n")
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | meaning |", "|---|---|---|"]
        for field, spec in properties.items():
            mark = " (required)" if field in required else ""
            lines.append(f"| `{field}`{mark} | {_type(spec)} | {_cell(spec.get('description', ''))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "null":
        return "null"
    if kind is None:
        return "any JSON"
    text = str(kind)
    if schema.get("format"):
        text += f" ({schema['format']})"
    return text


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
