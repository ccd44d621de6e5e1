"""However a test run ends, what its tests started ends with it.

- SIGTERM and SIGHUP stop pytest as Ctrl-C does: KeyboardInterrupt, so that the fixtures'
  finalizers run (stop the services and the private PostgreSQL cluster, drop the test databases,
  remove their folders). By default either signal kills pytest at once and leaves all of that.
- Once stopping, a further signal (Ctrl-C pressed again, because the first seemed to do nothing
  for seconds) no longer interrupts the finalizers, which it would leave half done: it is answered
  on stderr. They are bounded; SIGQUIT (Ctrl-\\) still ends pytest at once.
- Last, when pytest ends: a process of the run still running (a finalizer that failed, or never
  ran) is terminated, then killed, and a folder registered here is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import FrameType

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
QUIT_NOW = r"Ctrl-\ ends pytest now, and leaves them running"
GRACE_SECONDS = 10  # for what is left at the end, after SIGTERM and before SIGKILL

_folders: list[Path] = []
_stopping = False


def install() -> None:
    """Call from the main thread, before any test runs."""
    for signum in STOPPING:
        signal.signal(signum, _stop)


def _stop(signum: int, frame: FrameType | None) -> None:
    global _stopping
    name = signal.Signals(signum).name
    if _stopping:
        sys.stderr.write(f"\n{name}: still stopping what the tests started ({QUIT_NOW})\n")
        return
    _stopping = True
    sys.stderr.write(f"\n{name}: stopping the processes and databases the tests started\n")
    raise KeyboardInterrupt(f"stopped by {name}")


def remove_at_end(folder: Path) -> None:
    """A folder of the run's own (not under pytest's basetemp) that must not outlive it."""
    _folders.append(folder)


def end_what_is_left() -> None:
    """Terminate, then kill, every process this one started that still runs; remove the folders."""
    left = descendants(os.getpid())
    if left:
        names = ", ".join(sorted({command_of(pid) for pid in left}))
        sys.stderr.write(f"\nstopping {len(left)} processes the tests left running: {names}\n")
        for signum, grace in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, GRACE_SECONDS)):
            send(left, signum)
            left = wait_gone(left, grace)
            if not left:
                break
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)


def send(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    """The pids still running after up to `seconds` (our own children are reaped)."""
    deadline = time.monotonic() + seconds
    while True:
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        running = [pid for pid in pids if state_of(pid) not in ("", "Z")]
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def state_of(pid: int) -> str:
    """The process's state letter (Z: a zombie), or "" when there is no such process."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def command_of(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "comm").read_text().strip()
    except OSError:
        return str(pid)


def descendants(parent: int) -> list[int]:
    """Every live descendant of parent (in its own session or not), read from /proc."""
    by_parent: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
        if fields[0] != "Z":
            by_parent[int(fields[1])].append(int(entry.name))
    found: list[int] = []
    todo = [parent]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
