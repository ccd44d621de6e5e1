"""Where the server's time goes during a load: py-spy samples the server process, and the
samples are summed by the library each innermost frame belongs to, and by function.

py-spy needs to attach to the process (root, or ptrace allowed); when it cannot, the summary
says so instead of failing the run.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import tempfile
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
