"""The client side of `simplequeue` starts without the server: --version, --help, push, pop, stats,
work and probe import no web framework, no driver, no settings and none of the server's modules
(an import-linter contract holds the imports one sees; this holds what a run loads, the lazy
command loading included). Each run prints the modules it loaded when it exits, whatever its exit
status: against a closed port the commands fail, against a live serve they succeed."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from simplequeue.cli import COMMANDS, main
from simplequeue.cli.probe import configured_port

from tests.test_e2e import free_port, serving, simplequeue_command

SERVER = (
    "fastapi",
    "starlette",
    "uvicorn",
    "asyncpg",
    "aiosqlite",
    "aioodbc",
    "pyodbc",
    "prometheus_client",
    "pydantic",
    "pydantic_settings",
    "simplequeue.api",
    "simplequeue.main",
    "simplequeue.store",
    "simplequeue.service",
    "simplequeue.settings",
    "simplequeue.domain",
    "simplequeue.cli.server",
)
COMMAND_MODULES = ("simplequeue.cli.", "simplequeue.client", "httpx")
SPARK = ("pyspark", "py4j", "pyarrow", "simplequeue.spark", "simplequeue.reports", "simplequeue.cli.spark")
"""What the Spark commands load: never the client side, nor `simplequeue spark --help` (but its own
module and the HTTP checks of simplequeue.spark.options); PySpark only when a job runs."""

# The console script's target, run as the script runs it; the modules it loaded go to a file at exit.
RUN = """\
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
from simplequeue.cli import main
sys.argv[0] = "simplequeue"
main()
"""


def run(
    tmp_path: Path, *args: str, env: dict[str, str], stdin: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "MODULES_OUT": str(out), **env},
    )
    assert out.exists(), done.stderr
    return done, json.loads(out.read_text())


def among(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules that are one of `names` or inside one (a name ending in "." is a prefix)."""
    return [
        m
        for m in modules
        if any(m.startswith(n) if n.endswith(".") else m == n or m.startswith(f"{n}.") for n in names)
    ]


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["--version"], 0),
        (["--help"], 0),
        (["push", '{"n": 1}'], 4),
        (["push", "-"], 4),
        (["pop"], 4),
        (["pop", "--wait", "1"], 4),
        (["stats"], 4),
        (["stats", "--queue", "q"], 4),
        (["work", "--", "true"], 4),
        (["work", "--exit-when-empty", "--", "true"], 4),
        (["probe"], 1),
        (["probe", "--ready"], 1),
    ],
)
def test_the_client_side_loads_nothing_of_the_server(tmp_path: Path, args: list[str], status: int) -> None:
    nobody = free_port()
    env = {"SIMPLEQUEUE_URL": f"http://127.0.0.1:{nobody}", "SIMPLEQUEUE_PORT": str(nobody)}
    done, modules = run(tmp_path, *args, env=env, stdin='{"n": 1}\n')
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    assert among(modules, SERVER) == []
    assert among(modules, SPARK) == []


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["serve", "--help"]])
def test_version_and_help_load_no_command_of_the_client(tmp_path: Path, args: list[str]) -> None:
    done, modules = run(tmp_path, *args, env={})
    assert done.returncode == 0, done.stderr
    loaded = among(modules, COMMAND_MODULES)
    assert loaded == (["simplequeue.cli.server"] if args[0] == "serve" else [])
    # serve --help loads serve's module, which imports the server only to serve.
    assert [m for m in among(modules, SERVER) if m != "simplequeue.cli.server"] == []
    assert among(modules, SPARK) == []


def test_spark_help_loads_the_spark_command_and_not_pyspark(tmp_path: Path) -> None:
    done, modules = run(tmp_path, "spark", "ingest", "--help", env={})
    assert done.returncode == 0, done.stderr
    assert "simplequeue.cli.spark" in modules  # the command was loaded, lazily: this is what ran
    assert among(modules, ("pyspark", "py4j", "pyarrow", "simplequeue.reports")) == []
    assert among(modules, SERVER) == []


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('startup') / 'startup.db'}") as base:
        yield base


@pytest.mark.e2e
def test_the_client_side_loads_nothing_of_the_server_when_it_works(url: str, tmp_path: Path) -> None:
    env = {"SIMPLEQUEUE_URL": url, "SIMPLEQUEUE_PORT": url.rsplit(":", 1)[1]}
    steps = [
        (["push", "--queue", "startup", '{"n": 1}'], 0),
        (["push", "--queue", "startup", "-"], 0),
        (["stats", "--queue", "startup"], 0),
        (["stats"], 0),
        (["pop", "--queue", "startup", "--wait", "1"], 0),
        (["work", "--queue", "startup", "--exit-when-empty", "--", "true"], 0),
        (["pop", "--queue", "startup"], 3),
        (["probe", "--ready"], 0),
    ]
    for args, status in steps:
        done, modules = run(tmp_path, *args, env=env, stdin='{"n": 2}\n')
        assert done.returncode == status, (args, done.stderr)
        assert among(modules, SERVER) == [], args


def test_the_console_script_and_python_m_print_the_version() -> None:
    for command in (simplequeue_command(), [sys.executable, "-m", "simplequeue"]):
        done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("simplequeue, version ")


def test_help_lists_every_command_with_its_own_first_sentence(tmp_path: Path) -> None:
    done, _ = run(tmp_path, "--help", env={})
    listed = dict(
        line.strip().split(maxsplit=1) for line in done.stdout.split("Commands:\n", 1)[1].splitlines()
    )
    assert sorted(listed) == sorted(COMMANDS)
    for name, entry in COMMANDS.items():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert isinstance(command, click.Command)
        assert command.get_short_help_str(limit=1000) == entry.help, name  # the list says what --help does
        assert entry.help.startswith(listed[name].removesuffix("...")), name  # (cut to the width)


def test_an_unknown_command_is_a_usage_error() -> None:
    done = CliRunner().invoke(main, ["nope"])
    assert done.exit_code == 2
    assert "No such command 'nope'" in done.output


def test_probe_reads_simplequeue_port_from_the_environment_then_dotenv(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    assert configured_port({}, dotenv) == 8000
    dotenv.write_text("# serve's settings\nSIMPLEQUEUE_HOST=0.0.0.0\nexport SIMPLEQUEUE_PORT='9100'\n")
    assert configured_port({}, dotenv) == 9100
    assert configured_port({"SIMPLEQUEUE_PORT": "9200"}, dotenv) == 9200
    assert configured_port({"simplequeue_port": "9300"}, dotenv) == 9300
    for wrong in ("eighty", "70000"):
        with pytest.raises(click.ClickException, match="SIMPLEQUEUE_PORT"):
            configured_port({"SIMPLEQUEUE_PORT": wrong}, dotenv)
