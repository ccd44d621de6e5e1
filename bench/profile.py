"""Where the time goes during a load.

- py-spy samples the server process, and the samples are summed by the library each innermost
  frame belongs to, and by function. py-spy needs to attach to the process (root, or ptrace
  allowed); when it cannot, the summary says so instead of failing the run.
- CpuMeter reads the CPU time (user + system, from /proc) that each side spent over a window:
  the load generator (this process), the server, and PostgreSQL's processes (those of the
  server holding the bench's databases, without other databases' backends). Per item, that is
  what a ratio between two loops on a machine of few cores comes down to.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# The first match of a frame's file path (py-spy writes it from the package: "asyncpg/connection.py")
# names its part; order matters.
PARTS = [
    ("simplequeue: store", r"simplequeue/store/"),
    ("simplequeue: service", r"simplequeue/service/"),
    ("simplequeue: api", r"simplequeue/api/"),
    ("simplequeue: other", r"simplequeue/"),
    ("fastapi", r"(^|/)fastapi/"),
    ("starlette", r"(^|/)starlette/"),
    ("uvicorn", r"(^|/)uvicorn/"),
    ("httptools", r"(^|/)httptools/"),
    ("pydantic", r"(^|/)pydantic"),
    ("asyncpg", r"(^|/)asyncpg/"),
    ("sqlite (aiosqlite, sqlite3)", r"(^|/)(aiosqlite|sqlite3)/"),
    ("asyncio, uvloop", r"(^|/)(asyncio|uvloop)/"),
    ("json", r"(^|/)json/"),
]
FRAME = re.compile(r"^(?P<function>.*) \((?P<path>[^()]*):\d+\)$")


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return found if Path(found).exists() else None


async def record(pid: int, seconds: float) -> Counter[str] | str:
    """Collapsed stacks of `pid` over `seconds` (raw format: 'frame;frame;... count'), or why not."""
    binary = py_spy()
    if binary is None:
        return "py-spy is not installed (pip install py-spy)"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "stacks.txt"
        command = [binary, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds)))]
        command += ["--rate", "250", "--format", "raw", "--output", str(out), "--nonblocking"]
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, error = await asyncio.wait_for(process.communicate(), timeout=seconds + 60)
        if process.returncode != 0 or not out.exists():
            line = (error.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            return f"py-spy could not sample the server: {line}"
        stacks: Counter[str] = Counter()
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks[stack] += int(count)
        return stacks


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


# A client backend's command line: "postgres: [cluster: ]user database host(port) state".
_BACKEND = re.compile(r"^postgres: (?:\S+: )?\S+ (\S+) (?:\S+\(\d+\)|\[local\])")
BENCH_DATABASES = "sq_bench_"


def _postgres() -> dict[int, tuple[int, str]]:
    """Every process named postgres: its parent's id and its command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as comm:
                    if comm.read().strip() != "postgres":
                        continue
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline") as cmdline:
                    found[int(entry)] = (parent, cmdline.read().replace("\0", " ").strip())
            except (OSError, ValueError, IndexError):
                continue
    return found


def postgres_processes() -> dict[int, float]:
    """CPU time so far, by process, of the PostgreSQL server that holds the bench's databases: its
    postmaster, its own processes (checkpointer, WAL writer, autovacuum…) and the backends of the
    bench's databases (sq_bench_*). Backends of other databases and other clusters on the machine
    (other test runs) are left out; with no bench database open, every postgres
    process counts."""
    every = _postgres()
    servers = set()
    for parent, command in every.values():
        match = _BACKEND.match(command)
        if match is not None and match[1].startswith(BENCH_DATABASES):
            servers.add(parent)
    counted = {}
    for pid, (parent, command) in every.items():
        if servers and pid not in servers:
            if parent not in servers:
                continue
            match = _BACKEND.match(command)
            if match is not None and not match[1].startswith(BENCH_DATABASES):
                continue
        counted[pid] = cpu_seconds(pid)
    return counted


def postgres_seconds() -> float:
    """CPU time so far of the processes postgres_processes() counts."""
    return sum(postgres_processes().values())


class CpuMeter:
    """CPU seconds spent by the load generator, the server (if any) and PostgreSQL in a window."""

    def __init__(self, server_pid: int | None = None, postgres: bool = True) -> None:
        self.server_pid = server_pid
        self.postgres = postgres
        self.spent: dict[str, float] = {}
        self.count = 0  # operations done in the window (set by whoever counts them)
        self._at: dict[str, float] = {}
        self._postgres_at: dict[int, float] = {}

    def _now(self) -> dict[str, float]:
        now = {"load generator": time.process_time()}
        if self.server_pid is not None:
            now["server"] = cpu_seconds(self.server_pid)
        return now

    def start(self) -> None:
        self._at = self._now()
        self._postgres_at = postgres_processes() if self.postgres else {}

    def stop(self) -> None:
        self.spent = {k: v - self._at[k] for k, v in self._now().items()}
        if self.postgres:
            # By process: one that started in the window counts from 0, one that ended in it is
            # left out (summing them all would go down, even below 0, when a process exits).
            later = postgres_processes()
            self.spent["postgres"] = sum(v - self._postgres_at.get(pid, 0.0) for pid, v in later.items())

    def per_operation(self) -> dict[str, float]:
        """Microseconds of CPU per operation, by side, and their total."""
        each = {k: 1e6 * v / max(self.count, 1) for k, v in self.spent.items()}
        return each | {"total": sum(each.values())}


def cpu_table(title: str, rows: dict[str, dict[str, float]]) -> str:
    """A table of CPU per operation for several loops measured in one run."""
    sides = ["load generator", "server", "postgres", "total"]
    lines = [f"### {title}", "", "| loop | " + " | ".join(sides) + " | cores' worth per 1,000/s |"]
    lines.append("|---" * (len(sides) + 2) + "|")
    for name, per in rows.items():
        cells = [f"{per[s]:,.0f} µs" if s in per else "-" for s in sides]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {per['total'] / 1000:.2f} |")
    return "\n".join(lines) + "\n"


def part_of(frame: str) -> str:
    match = FRAME.match(frame)
    path = match["path"] if match else frame
    for name, pattern in PARTS:
        if re.search(pattern, path):
            return name
    return "other"


def summary(stacks: Counter[str] | str, title: str, top: int = 12) -> str:
    """Own time (the innermost frame) by part and by function, as shares of all samples."""
    if isinstance(stacks, str):
        return f"## {title}\n\n{stacks}\n"
    total = sum(stacks.values())
    if not total:
        return f"## {title}\n\nno samples\n"
    by_part: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    for stack, count in stacks.items():
        innermost = stack.rsplit(";", 1)[-1]
        by_part[part_of(innermost)] += count
        by_function[innermost] += count
    lines = [f"## {title}", "", f"{total:,} samples of the server's busy threads (py-spy, 250 Hz)", ""]
    lines += ["| part (own time) | share |", "|---|---|"]
    lines += [f"| {name} | {100 * n / total:.1f}% |" for name, n in by_part.most_common()]
    lines += ["", "| function (own time) | share |", "|---|---|"]
    lines += [f"| `{name[:100]}` | {100 * n / total:.1f}% |" for name, n in by_function.most_common(top)]
    return "\n".join(lines) + "\n"
