"""`simplequeue probe`: the container's HEALTHCHECK. It asks the service on this machine over HTTP
and reads the one setting it needs, SIMPLEQUEUE_PORT, itself: the settings module would bring
pydantic-settings and the store with it, half a second of CPU at every check.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

PORT = "SIMPLEQUEUE_PORT"
DEFAULT_PORT = 8000


def configured_port(environ: dict[str, str] | None = None, dotenv: Path = Path(".env")) -> int:
    """SIMPLEQUEUE_PORT as serve reads it: from the environment (its name in any case), else from
    ./.env, else 8000. A value that is no port is one line naming the variable (exit 1)."""
    environ = dict(os.environ) if environ is None else environ
    value = environ.get(PORT)
    if value is None:
        value = next((v for k, v in environ.items() if k.upper() == PORT), None)
    if value is None:
        value = _from_dotenv(dotenv)
    if value is None:
        return DEFAULT_PORT
    try:
        port = int(value.strip())
    except ValueError:
        raise click.ClickException(f"configuration: {PORT}: {value!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise click.ClickException(f"configuration: {PORT}: {port} is not between 0 and 65535")
    return port


_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def _from_dotenv(path: Path) -> str | None:
    """The last SIMPLEQUEUE_PORT=... line of a .env file (KEY=VALUE lines, quotes optional)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found: str | None = None
    for line in text.splitlines():
        matched = _DOTENV_LINE.match(line)
        if matched and matched.group(1).upper() == PORT:
            raw = matched.group(2)
            if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
                raw = raw[1:-1]
            else:
                raw = raw.split(" #", 1)[0].strip()
            found = raw
    return found


@click.command()
@click.option("--ready", is_flag=True, help="Check readiness (database reached and migrated), not only life.")
@click.option("--timeout", type=float, default=3.0, show_default=True, help="Seconds to wait for the answer.")
def probe(ready: bool, timeout: float) -> None:
    """Ask the service on this machine whether it is alive.

    With --ready, whether it is ready: its database reached and migrated. It asks
    127.0.0.1 at SIMPLEQUEUE_PORT (or ./.env's, or 8000), for a container's HEALTHCHECK.

    \b
    Exit status: 0 alive (or ready), printing the answer; 1 not, with one line
    saying why (never 2, which Docker reserves).
    """
    import httpx

    url = f"http://127.0.0.1:{configured_port()}/{'readyz' if ready else 'healthz'}"
    try:
        answer = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        raise click.ClickException(f"{url}: {type(exc).__name__}") from None
    if answer.status_code != 200:
        raise click.ClickException(f"{url}: {answer.status_code} {answer.text[:200]}")
    click.echo(answer.text)
