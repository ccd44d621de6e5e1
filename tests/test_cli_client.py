"""`simplequeue push | pop | stats` as a person runs them: the console script against a real serve."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import threading
import time
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
        # PYTHONPATH, when set, names the checkout under test (a worktree's, not the installed one).
        env={"SIMPLEQUEUE_URL": url, "PATH": "/usr/bin:/bin"}
        | {k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
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


def test_stats_follows_the_pages_of_queues(url: str) -> None:
    # More queues than a page of GET /queues holds (1000): stats prints every one of them.
    names = [f"cli-many-{n:04}" for n in range(1001)]
    with httpx.Client(base_url=url, timeout=10) as http:
        for name in names:
            assert http.post("/push", json={"queue": name, "payload": 1}).status_code == 201
    done = run(url, "stats")
    assert done.returncode == 0, done.stderr
    listed = [q["name"] for q in json.loads(done.stdout)]
    assert [n for n in listed if n.startswith("cli-many-")] == names
    assert len(listed) == len(set(listed))


def test_push_dash_reads_json_lines_in_batches(url: str) -> None:
    lines = "\n".join(json.dumps({"n": n}) for n in range(1200)) + "\n\n"
    pushed = run(url, "push", "--queue", "cli-b", "-", stdin=lines)
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout) == {"queue": "cli-b", "pushed": 1200, "skipped": 0}
    popped = run(url, "pop", "--queue", "cli-b", "--max", "100")
    assert [json.loads(line)["payload"]["n"] for line in popped.stdout.splitlines()] == list(range(100))


def test_push_takes_a_fairness_key_for_one_payload_or_every_line(url: str) -> None:
    lines = "\n".join(json.dumps({"n": n}) for n in range(5)) + "\n"
    many = run(url, "push", "--queue", "cli-fair", "--fairness-key", "big", "-", stdin=lines)
    assert many.returncode == 0, many.stderr
    one = run(url, "push", "--queue", "cli-fair", "--fairness-key", "small", '"hi"')
    assert one.returncode == 0, one.stderr
    popped = run(url, "pop", "--queue", "cli-fair", "--max", "3")
    items = [json.loads(line) for line in popped.stdout.splitlines()]
    assert [(i["payload"], i["fairness_key"]) for i in items] == [
        ({"n": 0}, "big"),
        ("hi", "small"),
        ({"n": 1}, "big"),
    ]
    bad = run(url, "push", "--queue", "cli-fair", "--fairness-key", "", "1")
    assert bad.returncode == 1, bad


def ready(url: str, queue: str) -> int:
    count: int = httpx.get(f"{url}/queues/{queue}").json()["ready"]
    return count


def test_a_bad_line_says_what_was_pushed_and_the_fixed_input_pushes_only_the_rest(url: str) -> None:
    lines = [json.dumps({"n": n}) for n in range(1200)]
    broken = [*lines[:600], '{"n": 600', *lines[601:]]  # line 601 lost its brace
    done = run(url, "push", "--queue", "cli-rerun", "-", stdin="\n".join(broken))
    assert done.returncode == 1, done
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: stdin line 601 is not JSON: "), line
    assert "; 600 pushed before it (lines 1-600); rerun is safe" in line, line
    assert ready(url, "cli-rerun") == 600  # the lines before the bad one, all of them

    fixed = run(url, "push", "--queue", "cli-rerun", "-", stdin="\n".join(lines))
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout) == {"queue": "cli-rerun", "pushed": 600, "skipped": 600}
    assert ready(url, "cli-rerun") == 1200


def test_a_refused_batch_names_its_lines_and_what_was_pushed_before_it(url: str) -> None:
    lines = [json.dumps({"n": n}) for n in range(1200)]
    lines[699] = json.dumps({"n": "\u0000"})  # line 700: NUL, which the service refuses
    done = run(url, "push", "--queue", "cli-refused", "-", stdin="\n".join(lines))
    assert done.returncode == 1, done
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("Error: lines 501-1000 (one batch) not pushed: InvalidPayload: "), line
    assert line.endswith(
        "; 500 pushed before them (lines 1-500); rerun is safe: the same input again "
        "skips the lines already pushed"
    ), line
    assert ready(url, "cli-refused") == 500


def test_a_line_twice_is_two_items_and_a_rerun_skips_both_unless_no_dedupe(url: str) -> None:
    twice = '{"to": "ada@example.com"}\n{"to":  "ada@example.com"}\n'
    first = run(url, "push", "--queue", "cli-twice", "-", stdin=twice)
    assert json.loads(first.stdout) == {"queue": "cli-twice", "pushed": 2, "skipped": 0}, first.stderr
    spaced = twice.replace(": ", ":")  # the same JSON values, written otherwise: the same lines
    again = run(url, "push", "--queue", "cli-twice", "-", stdin=spaced)
    assert json.loads(again.stdout) == {"queue": "cli-twice", "pushed": 0, "skipped": 2}, again.stderr
    forced = run(url, "push", "--queue", "cli-twice", "--no-dedupe", "-", stdin=twice)
    assert json.loads(forced.stdout) == {"queue": "cli-twice", "pushed": 2, "skipped": 0}, forced.stderr
    elsewhere = run(url, "push", "--queue", "cli-twice-2", "-", stdin=twice)  # ids are the queue's own
    assert json.loads(elsewhere.stdout) == {"queue": "cli-twice-2", "pushed": 2, "skipped": 0}
    assert (ready(url, "cli-twice"), ready(url, "cli-twice-2")) == (4, 2)


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
    httpx.put(f"{url}/queues/cli-empty", json={}).raise_for_status()  # it exists, and is empty
    for wait in ("0", "0.2"):
        popped = run(url, "pop", "--queue", "cli-empty", "--wait", wait)
        assert (popped.returncode, popped.stdout, popped.stderr) == (3, "", "")


@pytest.mark.parametrize("args", [["pop"], ["pop", "--wait", "20"], ["stats"]])
def test_a_queue_nothing_was_pushed_to_is_one_line_and_exit_6(url: str, args: list[str]) -> None:
    started = time.monotonic()
    done = run(url, *args, "--queue", "never-pushed-to")
    assert (done.returncode, done.stdout) == (6, ""), done
    [line] = done.stderr.strip().splitlines()
    assert line == "Error: queue 'never-pushed-to' does not exist (nothing was ever pushed to it)"
    assert time.monotonic() - started < 15  # said at once, not after the 20 s long-poll (a bound)


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["push", "{not json"], "", "PAYLOAD is not JSON"),
        (["push", "-"], '{"ok": 1}\n{broken\n', "stdin line 2 is not JSON"),
        (["push", "--queue", "has space", "1"], "", "ValidationError"),
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


def run_with(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command with exactly this environment (and PATH)."""
    return subprocess.run(
        [*simplequeue_command(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


@pytest.mark.parametrize(
    "where", ["notaurl", "ftp://x", "http://", "http://127.0.0.1:99999", "127.0.0.1:8000"]
)
@pytest.mark.parametrize("args", [["push", "1"], ["pop"], ["stats"], ["work", "--", "true"]])
def test_an_invalid_url_is_a_usage_error_naming_url_and_simplequeue_url(where: str, args: list[str]) -> None:
    by_env = run(where, *args)
    by_option = run_with(args[0], "--url", where, *args[1:])
    for done in (by_env, by_option):
        assert done.returncode == 2, done
        said = done.stderr.strip().splitlines()[-1]
        assert said.startswith("Error: Invalid value for '--url' (env var: 'SIMPLEQUEUE_URL'):"), said
        assert f"{where!r} is not the service's URL" in said
        assert "does not answer" not in done.stderr


class Foreign(http.server.BaseHTTPRequestHandler):
    """Some other web server: an HTML page with the status `status`, whatever is asked."""

    status: ClassVar[int] = 404
    body: ClassVar[bytes] = b"<html><body><h1>Not here</h1></body></html>"
    content_type: ClassVar[str] = "text/html"

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = Foreign.body
        self.send_response(Foreign.status)
        self.send_header("Content-Type", Foreign.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def foreign_server(status: int) -> Iterator[str]:
    Foreign.status = status
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Foreign)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("status", "exit_status", "says"),
    [
        (404, 1, "answered 404 Not Found, not simplequeue's JSON: not a simplequeue service?"),
        (
            502,
            4,
            "answered 502 Bad Gateway, not simplequeue's JSON: a proxy whose simplequeue does not answer?",
        ),
    ],
)
def test_an_answer_that_is_not_simplequeue_is_named_as_such(status: int, exit_status: int, says: str) -> None:
    with foreign_server(status) as base:
        runs = [
            run(base, *args)
            for args in (["push", "1"], ["pop"], ["stats", "-q", "q"], ["work", "--", "true"])
        ]
    for done in runs:
        assert done.returncode == exit_status, done
        [line] = done.stderr.strip().splitlines()
        assert line == f"Error: {base} {says}"


def test_a_service_that_is_not_ready_is_exit_4_after_the_retries() -> None:
    Foreign.body = b'{"error": "DatabaseUnavailable", "detail": "the database does not answer"}'
    Foreign.content_type = "application/json"
    try:
        with foreign_server(503) as base:
            done = run(base, "stats")
    finally:
        Foreign.body = b"<html><body><h1>Not here</h1></body></html>"
        Foreign.content_type = "text/html"
    assert done.returncode == 4, done
    [line] = done.stderr.strip().splitlines()
    assert line == f"Error: {base} is not ready: DatabaseUnavailable: the database does not answer"


PRODUCER = "producer-key-for-jobs-0123"
CONSUMER = "consumer-key-for-all-4567"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    keys = [
        {"key": PRODUCER, "role": "producer", "queues": ["jobs.*"]},
        {"key": CONSUMER, "role": "consumer"},
    ]
    database = f"sqlite:///{tmp_path_factory.mktemp('keyed') / 'keyed.db'}"
    with serving(database, env={"SIMPLEQUEUE_API_KEYS": json.dumps(keys)}) as base:
        yield base


def test_api_key_option_or_environment(keyed: str) -> None:
    pushed = run_with("push", "--url", keyed, "--api-key", PRODUCER, "-q", "jobs.a", '{"n": 1}')
    assert pushed.returncode == 0, pushed.stderr
    # The option wins over the environment.
    popped = run_with(
        "pop", "--url", keyed, "--api-key", CONSUMER, "-q", "jobs.a", env={"SIMPLEQUEUE_API_KEY": PRODUCER}
    )
    assert popped.returncode == 0, popped.stderr
    assert json.loads(popped.stdout)["payload"] == {"n": 1}
    by_env = run_with("stats", "--url", keyed, "-q", "jobs.a", env={"SIMPLEQUEUE_API_KEY": CONSUMER})
    assert (by_env.returncode, json.loads(by_env.stdout)["leased"]) == (0, 1), by_env.stderr
    for done in (pushed, popped, by_env):
        assert PRODUCER not in done.stdout + done.stderr
        assert CONSUMER not in done.stdout + done.stderr


@pytest.mark.parametrize("args", [["push", "1"], ["pop"], ["stats"], ["work", "--", "true"]])
def test_a_missing_or_unknown_api_key_names_simplequeue_api_key_and_the_option(
    keyed: str, args: list[str]
) -> None:
    missing = run(keyed, *args)
    assert missing.returncode == 1, missing
    [line] = missing.stderr.strip().splitlines()
    assert line == f"Error: {keyed} wants an API key: set SIMPLEQUEUE_API_KEY or pass --api-key"
    unknown = run_with(args[0], "--url", keyed, "--api-key", "not-a-key-of-this-service", *args[1:])
    assert unknown.returncode == 1, unknown
    [line] = unknown.stderr.strip().splitlines()
    assert line == f"Error: {keyed} does not know this API key: check SIMPLEQUEUE_API_KEY or --api-key"
    assert "not-a-key-of-this-service" not in unknown.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["push", "-q", "mail", "1"],
            "this API key may not push to queue 'mail': this key may not use queue 'mail'",
        ),
        (
            ["pop", "-q", "jobs.a"],
            "this API key may not pop from queue 'jobs.a': a producer key may not consume",
        ),
        (
            ["work", "-q", "jobs.a", "--", "true"],
            "this API key may not work on queue 'jobs.a': a producer key may not consume",
        ),
    ],
)
def test_a_key_that_may_not_says_what_on_which_queue(keyed: str, args: list[str], says: str) -> None:
    done = run_with(*args, env={"SIMPLEQUEUE_URL": keyed, "SIMPLEQUEUE_API_KEY": PRODUCER})
    assert done.returncode == 1, done
    [line] = done.stderr.strip().splitlines()
    assert line == f"Error: {says}"
