"""`simplequeue push | pop | stats` as a person runs them: the console script against a real serve."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from tests.test_e2e import free_port, serving, simplequeue_command

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('cli') / 'cli.db'}") as base:
        yield base


def run(url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*simplequeue_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={"SIMPLEQUEUE_URL": url, "PATH": "/usr/bin:/bin"},
    )


def test_push_pop_and_stats_print_json(url: str) -> None:
    pushed = run(url, "push", "--queue", "cli-a", '{"to": "ada@example.com"}')
    assert pushed.returncode == 0, pushed.stderr
    result = json.loads(pushed.stdout)
    assert (result["queue"], result["created"]) == ("cli-a", True)

    popped = run(url, "pop", "--queue", "cli-a", "--lease", "60")
    assert popped.returncode == 0, popped.stderr
    [line] = popped.stdout.splitlines()
    item = json.loads(line)
    assert (item["id"], item["payload"]) == (result["id"], {"to": "ada@example.com"})
    assert item["lease_token"]

    stats = json.loads(run(url, "stats", "--queue", "cli-a").stdout)
    assert (stats["name"], stats["leased"], stats["ready"]) == ("cli-a", 1, 0)
    every = json.loads(run(url, "stats").stdout)
    assert "cli-a" in [q["name"] for q in every]


def test_push_dash_reads_json_lines_in_batches(url: str) -> None:
    lines = "\n".join(json.dumps({"n": n}) for n in range(1200)) + "\n\n"
    pushed = run(url, "push", "--queue", "cli-b", "-", stdin=lines)
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout) == {"queue": "cli-b", "pushed": 1200}
    popped = run(url, "pop", "--queue", "cli-b", "--max", "100")
    assert [json.loads(line)["payload"]["n"] for line in popped.stdout.splitlines()] == list(range(100))


def test_push_again_with_its_id_pushes_nothing_even_after_it_was_processed(url: str) -> None:
    item_id = "8e0f8c1e-5b7a-4c44-9d0e-5b0c1f6a7d21"
    first = json.loads(run(url, "push", "--queue", "cli-id", "--id", item_id, "1").stdout)
    assert (first["id"], first["created"]) == (item_id, True)
    [line] = run(url, "pop", "--queue", "cli-id").stdout.splitlines()
    item = json.loads(line)
    httpx.delete(f"{url}/items/{item_id}", params={"lease_token": item["lease_token"]}).raise_for_status()
    again = run(url, "push", "--queue", "cli-id", "--id", item_id, "1")
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["id"], json.loads(again.stdout)["created"]) == (item_id, False)
    assert run(url, "pop", "--queue", "cli-id", "--wait", "0.2").returncode == 3  # nothing new


def test_pop_with_nothing_prints_nothing_and_exits_3(url: str) -> None:
    popped = run(url, "pop", "--queue", "cli-empty", "--wait", "0.2")
    assert (popped.returncode, popped.stdout) == (3, "")


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["push", "{not json"], "", "PAYLOAD is not JSON"),
        (["push", "-"], '{"ok": 1}\n{broken\n', "stdin line 2 is not JSON"),
        (["push", "--queue", "has space", "1"], "", "ValidationError"),
        (["stats", "--queue", "never-pushed-to"], "", "QueueNotFound"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(url: str, args: list[str], stdin: str, says: str) -> None:
    done = run(url, *args, stdin=stdin)
    assert done.returncode == 1, done
    [line] = done.stderr.strip().splitlines()
    assert says in line
    assert "Traceback" not in done.stderr


def test_an_unreachable_url_is_one_line_naming_it_and_exit_4(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    done = run(nowhere, "pop", "--queue", "q")
    assert done.returncode == 4, done
    [line] = done.stderr.strip().splitlines()
    assert nowhere in line
    assert "Traceback" not in done.stderr


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers any GET with an empty queue list, noting each request's Authorization header."""

    seen: ClassVar[list[str | None]] = []
    body: ClassVar[bytes] = b'{"queues": []}'

    def do_GET(self) -> None:
        Recorder.seen.append(self.headers.get("Authorization"))
        body = Recorder.body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet


def test_simplequeue_api_key_goes_as_a_bearer_token_and_nowhere_else() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with_key = subprocess.run(
            [*simplequeue_command(), "stats"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"SIMPLEQUEUE_URL": base, "SIMPLEQUEUE_API_KEY": "k-secret-42", "PATH": "/usr/bin:/bin"},
        )
        without = run(base, "stats")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert (with_key.returncode, with_key.stdout.strip()) == (0, "[]"), with_key.stderr
    assert without.returncode == 0, without.stderr
    assert Recorder.seen == ["Bearer k-secret-42", None]
    assert "k-secret-42" not in with_key.stderr + with_key.stdout


def test_a_url_that_is_not_simplequeue_is_one_line() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)  # [] is not a queue list
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Recorder.body = b"[]"
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        done = run(base, "stats")
    finally:
        Recorder.body = b'{"queues": []}'
        server.shutdown()
        server.server_close()
        thread.join()
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: {base} does not answer as simplequeue does")
