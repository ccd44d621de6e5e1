"""Processes for the fault-injection suite: `simplequeue serve`, a private PostgreSQL cluster, sizes
read from the environment, and the checks several tests share.

Everything started here is started by us and tracked by its Popen handle, so that only those
processes are ever signalled (never anything found by name)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import stopping
from tests.test_e2e import free_port, simplequeue_command

REQUIRED = os.environ.get("CI", "").lower() == "true" or os.environ.get("SIMPLEQUEUE_REQUIRE_FAULTS") == "1"

# Every database call of a request is bounded by this (SIMPLEQUEUE_DB_TIMEOUT_SECONDS); a request
# must then answer 503 within it plus MARGIN (generous: a shared, noisy 2-core machine).
DB_TIMEOUT = float(os.environ.get("SIMPLEQUEUE_FAULT_DB_TIMEOUT", "2"))
MARGIN = float(os.environ.get("SIMPLEQUEUE_FAULT_MARGIN", "3"))
ANSWER_BOUND = DB_TIMEOUT + MARGIN
RECOVERY_BOUND = 5.0  # after the database is back, a push answers 201 within this

# What a client must never read in an error body: the driver's words.
DRIVER_TEXT = (
    "asyncpg",
    "aiosqlite",
    "sqlite3",
    "Errno",
    "PostgreSQL:",
    "DETAIL",
    "Connection",
    "Error:",
    "refused",
    "Traceback",
    "Exception",
    "TimeoutError",
    "OSError",
    "127.0.0.1",
)

HERE = Path(__file__).resolve().parent
WORKER_SCRIPT = HERE / "worker.py"


# -- sizes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """How big a run is. `quick` runs in the normal test run (CI); `long` behind scripts/faults.
    Each value can be overridden by its environment variable, for whichever variant runs."""

    variant: str
    items: int  # drain: items pushed and drained by 32 workers
    workers: int  # drain: concurrent async workers
    kill_items: int  # worker kill -9: items
    kill_workers: int  # worker kill -9: worker processes alive at a time
    worker_kills: int  # worker kill -9: how many workers are SIGKILLed holding leases
    service_kills: int  # service kill -9: cycles of push load, SIGKILL, restart
    pushers: int  # service kill -9: concurrent single-push clients
    outage_cycles: int  # PostgreSQL stop/start and freeze/thaw cycles
    stale_rounds: int  # stale-token scenarios, each round all cases
    retry_items: int  # retried pushes: items pushed with their own ids through the lossy proxy
    retry_kills: int  # retried pushes: cycles of one replica kill -9'd and another SIGTERMed
    replica_items: int  # replicas: items pushed by 8 producers through the round-robin proxy
    replica_cycles: int  # replicas: cycles of one replica kill -9'd and restarted, another SIGTERMed


_DEFAULTS = {
    "quick": dict(
        items=2_000,
        workers=32,
        kill_items=1_000,
        kill_workers=8,
        worker_kills=6,
        service_kills=3,
        pushers=16,
        outage_cycles=1,
        stale_rounds=1,
        retry_items=800,
        retry_kills=1,
        replica_items=1_000,
        replica_cycles=1,
    ),
    "long": dict(
        items=20_000,
        workers=32,
        kill_items=10_000,
        kill_workers=8,
        worker_kills=30,
        service_kills=8,
        pushers=16,
        outage_cycles=5,
        stale_rounds=10,
        retry_items=10_000,
        retry_kills=5,
        replica_items=10_000,
        replica_cycles=3,
    ),
}

_ENV = {
    "items": "SIMPLEQUEUE_FAULT_ITEMS",
    "workers": "SIMPLEQUEUE_FAULT_WORKERS",
    "kill_items": "SIMPLEQUEUE_FAULT_KILL_ITEMS",
    "kill_workers": "SIMPLEQUEUE_FAULT_KILL_WORKERS",
    "worker_kills": "SIMPLEQUEUE_FAULT_WORKER_KILLS",
    "service_kills": "SIMPLEQUEUE_FAULT_SERVICE_KILLS",
    "pushers": "SIMPLEQUEUE_FAULT_PUSHERS",
    "outage_cycles": "SIMPLEQUEUE_FAULT_OUTAGE_CYCLES",
    "stale_rounds": "SIMPLEQUEUE_FAULT_STALE_ROUNDS",
    "retry_items": "SIMPLEQUEUE_FAULT_RETRY_ITEMS",
    "retry_kills": "SIMPLEQUEUE_FAULT_RETRY_KILLS",
    "replica_items": "SIMPLEQUEUE_FAULT_REPLICA_ITEMS",
    "replica_cycles": "SIMPLEQUEUE_FAULT_REPLICA_CYCLES",
}


def sizes(variant: str) -> Sizes:
    values = dict(_DEFAULTS[variant])
    for key, var in _ENV.items():
        if os.environ.get(var):
            values[key] = int(os.environ[var])
    return Sizes(variant=variant, **values)


# -- processes -----------------------------------------------------------------------------------


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Service:
    """One `simplequeue serve` process on 127.0.0.1, restartable on the same port and database."""

    def __init__(self, database_url: str, log_dir: Path, name: str, env: Mapping[str, str] | None = None):
        self.database_url = database_url
        self.log_dir = log_dir
        self.name = name
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = log_dir / f"{name}.log"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SIMPLEQUEUE_DATABASE_URL": self.database_url,
            "SIMPLEQUEUE_HOST": "127.0.0.1",
            "SIMPLEQUEUE_PORT": str(self.port),
            "SIMPLEQUEUE_DB_TIMEOUT_SECONDS": str(DB_TIMEOUT),
            "SIMPLEQUEUE_LOG_LEVEL": "warning",
            "SIMPLEQUEUE_REAP_INTERVAL_SECONDS": "0.5",
            "SIMPLEQUEUE_MIGRATE_ON_START": "true",
            **self.extra_env,
        }

    def start(self, ready_timeout: float | None = 60) -> Service:
        """Start serving; wait until ready (None: only until it answers /healthz)."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts} ---\n".encode())
            log.flush()
            # cwd: a directory of ours, so that no .env file of the checkout is read.
            self.process = subprocess.Popen(
                [*simplequeue_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                env=self.env(),
                cwd=self.log_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if ready_timeout is None:
            self.wait_ready(60, path="/healthz")
        else:
            self.wait_ready(ready_timeout)
        return self

    def wait_ready(self, timeout: float, path: str = "/readyz") -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited early ({self.process.returncode}):\n{self.logs()}")
            try:
                if httpx.get(f"{self.base}{path}", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not ready within {timeout} s:\n{self.logs()}")
            time.sleep(0.1)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=30)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM (a graceful stop), SIGKILL when it does not stop within timeout."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

    def logs(self) -> str:
        return tail(self.log_path)


class PrivatePostgres:
    """A PostgreSQL cluster of this test session only: initdb in a temp dir, on a free port of
    127.0.0.1, its socket in that dir. As root, initdb and the server run as the `postgres` user."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="sq-faults-pg-"))
        stopping.remove_at_end(self.root)  # should destroy() never run
        self.data = self.root / "data"
        self.log_path = self.root / "postgres.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen: list[int] = []
        self.as_root = os.geteuid() == 0
        try:
            if self.as_root:
                import pwd

                entry = pwd.getpwnam("postgres")  # KeyError: no such user
                os.chown(self.root, entry.pw_uid, entry.pw_gid)
            os.chmod(self.root, 0o700)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _user(self) -> dict[str, Any]:
        return {"user": "postgres", "group": "postgres", "extra_groups": []} if self.as_root else {}

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "LC_ALL": "C", "LANG": "C"},
            **self._user(),
        )

    def init(self) -> None:
        done = self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# simplequeue fault-injection suite\n"
                "listen_addresses = '127.0.0.1'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "max_connections = 100\n"
                "shared_buffers = 32MB\n"
                "logging_collector = off\n"
                "log_min_messages = warning\n"
            )

    def start(self, timeout: float = 60) -> None:
        assert self.process is None or self.process.poll() is not None, "postgres already runs"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data)],
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "LC_ALL": "C", "LANG": "C"},
                start_new_session=True,
                **self._user(),
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.process.returncode}):\n{tail(self.log_path)}")
            ready = subprocess.run(
                [str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "2"],
                check=False,
                timeout=30,
            )
            if ready.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres not ready within {timeout} s:\n{tail(self.log_path)}")
            time.sleep(0.1)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pids(self) -> list[int]:
        """The postmaster and every process it forked (backends, checkpointer, walwriter, ...)."""
        if not self.running():
            return []
        assert self.process is not None
        postmaster = self.process.pid
        return [postmaster, *children_of(postmaster)]

    def freeze(self) -> int:
        """SIGSTOP the postmaster first (so it forks no more), then its children until none is new."""
        assert self.running(), "postgres is not running"
        seen: set[int] = set()
        for _ in range(20):
            new = [p for p in self.pids() if p not in seen]
            if not new:
                break
            for pid in new:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                seen.add(pid)
                self.frozen.append(pid)
            time.sleep(0.02)
        return len(seen)

    def thaw(self) -> None:
        for pid in [*self.frozen, *self.pids()]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []

    def stop(self) -> None:
        """pg_ctl stop -m immediate (SIGCONT first if frozen), and reap the postmaster."""
        if self.frozen:
            self.thaw()
        if not self.running():
            return
        assert self.process is not None
        done = self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # pg_ctl could not stop it: SIGQUIT is the postmaster's own immediate shutdown.
            self.process.send_signal(signal.SIGQUIT)
            self.process.wait(timeout=30)
        if done.returncode != 0 and self.running():
            raise RuntimeError(f"pg_ctl stop failed: {done.stderr.strip()}")

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=30)
            shutil.rmtree(self.root, ignore_errors=True)


def children_of(parent: int) -> list[int]:
    """Every descendant of parent, read from /proc."""
    by_parent: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        by_parent[ppid].append(int(entry.name))
    found: list[int] = []
    todo = [parent]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def postgres_bindir() -> Path | None:
    if os.environ.get("SIMPLEQUEUE_FAULT_PG_BIN"):
        return Path(os.environ["SIMPLEQUEUE_FAULT_PG_BIN"])
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for bindir in reversed(candidates):
        if (bindir / "initdb").exists() and (bindir / "postgres").exists():
            return bindir
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        bindir = Path(out.stdout.strip())
        if (bindir / "initdb").exists():
            return bindir
    return None


# -- checks --------------------------------------------------------------------------------------


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass
class Pop:
    """One lease as a worker received it."""

    id: str
    token: str
    expires: datetime
    worker: str


def early_redeliveries(pops: Iterable[Pop], lease_seconds: float) -> list[tuple[Pop, Pop, float]]:
    """Leases that began while an earlier lease of the same item still held.

    A lease's start is its expiry less lease_seconds (both from the database's clock), so no
    client clock takes part. Returns (earlier, later, seconds of overlap)."""
    by_id: dict[str, list[Pop]] = defaultdict(list)
    for pop in pops:
        by_id[pop.id].append(pop)
    found: list[tuple[Pop, Pop, float]] = []
    for leases in by_id.values():
        leases.sort(key=lambda p: p.expires)
        for earlier, later in itertools.pairwise(leases):
            overlap = (earlier.expires - later.expires).total_seconds() + lease_seconds
            if overlap > 0.001:  # microsecond timestamps; a millisecond of rounding is forgiven
                found.append((earlier, later, overlap))
    return found


def driver_text_in(text: str, extra: Iterable[str] = ()) -> list[str]:
    return [word for word in (*DRIVER_TEXT, *extra) if word in text]


@dataclass
class Answer:
    """One request's outcome, timed from when it was sent (or from a reference moment)."""

    what: str
    status: int | None  # None: no answer (transport error or client timeout)
    seconds: float
    body: Any = None
    text: str = ""
    retry_after: str | None = None
    error: str = ""

    def describe(self) -> str:
        got = f"{self.status} {self.text[:300]}" if self.status is not None else f"no answer ({self.error})"
        return f"{self.what}: {got} after {self.seconds:.2f} s"


def json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def history_ids(base: str, queue: str, outcome: str | None = None, limit_pages: int = 10_000) -> list[str]:
    """Every id in a queue's history (paged), with repeats if the service wrote any twice."""
    ids: list[str] = []
    cursor: str | None = None
    with httpx.Client(base_url=base, timeout=30) as http:
        for _ in range(limit_pages):
            params: dict[str, str | int] = {"limit": 1000}
            if outcome:
                params["outcome"] = outcome
            if cursor:
                params["cursor"] = cursor
            response = http.get(f"/queues/{queue}/history", params=params)
            assert response.status_code == 200, response.text
            page = response.json()
            ids.extend(entry["id"] for entry in page["items"])
            cursor = page["next_cursor"]
            if not cursor:
                break
    return ids


@dataclass
class Figures:
    """What a test reports: a title and key/value figures, printed as one line."""

    title: str
    values: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        parts = []
        for key, value in self.values.items():
            if isinstance(value, float):
                value = f"{value:.2f}"
            elif isinstance(value, int) and not isinstance(value, bool):
                value = f"{value:,}"
            parts.append(f"{key}={value}")
        return f"{self.title}: " + ", ".join(parts)

    def json(self) -> str:
        return json.dumps({"test": self.title, **self.values}, default=str)


# -- fixtures' types ---------------------------------------------------------------------------


@dataclass
class Engine:
    name: str
    url: str
    sqlite_path: Path | None = None
    cluster: PrivatePostgres | None = None


ServiceFactory = Callable[..., Service]


FIGURES_PROPERTY = "fault-injection figures"
"""The name under which a test's figures ride on its report (user_properties), which reaches the
run's summary from a pytest-xdist worker too."""


class Reporter:
    def __init__(self, config: pytest.Config, node: pytest.Item) -> None:
        self.config = config
        self.node = node
        self.nodeid = node.nodeid
        self.started = time.monotonic()

    def _write(self, text: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if terminal is None:
            return
        if capture is not None:
            with capture.global_and_fixture_disabled():
                terminal.write_line(text)
        else:
            terminal.write_line(text)

    def progress(self, message: str) -> None:
        """A line at once (long runs), not kept for the summary."""
        self._write(f"  [{time.monotonic() - self.started:7.1f} s] {message}")

    def figures(self, title: str, **values: object) -> Figures:
        figures = Figures(f"{title} [{self.nodeid.split('::')[-1]}]", dict(values))
        self.node.user_properties.append((FIGURES_PROPERTY, figures.line()))
        self._write("\n" + figures.line())
        path = os.environ.get("SIMPLEQUEUE_FAULT_REPORT")
        if path:
            with open(path, "a") as out:
                out.write(figures.json() + "\n")
        return figures


# -- variants ------------------------------------------------------------------------------------

# Each test runs in two sizes: `quick` (marker faults: the normal run, so CI) and `long` (marker
# faults_long: excluded by default, run by scripts/faults).
VARIANTS = [
    pytest.param("quick", marks=pytest.mark.faults, id="quick"),
    pytest.param("long", marks=pytest.mark.faults_long, id="long"),
]
