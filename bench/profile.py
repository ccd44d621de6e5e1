"""Where the time goes during a load.

- py-spy samples the server process, and the samples are summed by the library each innermost
  frame belongs to, and by function. py-spy needs to attach to the process (root, or ptrace
  allowed); when it cannot, the summary says so instead of failing the run.
- CpuMeter reads the CPU time (user + system, from /proc) that each side spent over a window:
  the load generator (this process), the server, and PostgreSQL's processes. Per item, that is
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


def postgres_seconds() -> float:
    """CPU time of every process named postgres (every database on the server: on a shared
    machine, whatever else it serves in the window is counted too)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as comm:
                    if comm.read().strip() != "postgres":
                        continue
            except OSError:
                continue
            total += cpu_seconds(int(entry))
    return total


class CpuMeter:
    """CPU seconds spent by the load generator, the server (if any) and PostgreSQL in a window."""

    def __init__(self, server_pid: int | None = None, postgres: bool = True) -> None:
        self.server_pid = server_pid
        self.postgres = postgres
        self.spent: dict[str, float] = {}
        self.count = 0  # operations done in the window (set by whoever counts them)
        self._at: dict[str, float] = {}

    def _now(self) -> dict[str, float]:
        now = {"load generator": time.process_time()}
        if self.server_pid is not None:
            now["server"] = cpu_seconds(self.server_pid)
        if self.postgres:
            now["postgres"] = postgres_seconds()
        return now

    def start(self) -> None:
        self._at = self._now()

    def stop(self) -> None:
        self.spent = {k: v - self._at[k] for k, v in self._now().items()}

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
