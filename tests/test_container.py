"""What can be checked of the container without a Docker engine: hadolint passes the Dockerfile,
`simplequeue probe`, the image's HEALTHCHECK, tells ready from not, and compose.yaml's profiles
hold together (the replicas' pools fit PostgreSQL's connections; HAProxy accepts its configuration)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from simplequeue import __version__

from tests.test_e2e import free_port, serving, simplequeue_command

ROOT = Path(__file__).parent.parent


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    done = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def probe(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*simplequeue_command(), "probe", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.environ["PATH"], "SIMPLEQUEUE_PORT": str(port)},
    )


@pytest.mark.e2e
def test_probe_says_ready_or_not(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'probe.db'}"
    with serving(database) as base:
        port = int(base.rsplit(":", 1)[1])
        ready = probe(port, "--ready")
        assert ready.returncode == 0, ready.stderr
        assert json.loads(ready.stdout) == {"status": "ready", "version": __version__}
        assert probe(port).returncode == 0
    nobody = free_port()
    down = probe(nobody, "--ready")
    assert down.returncode == 1
    [line] = down.stderr.strip().splitlines()
    assert f"http://127.0.0.1:{nobody}/readyz" in line


# -- compose.yaml: what can be checked of it without a Docker engine ----------------------------


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    return loaded


def profile(name: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in compose()["services"].items() if name in v.get("profiles", [])}


def test_compose_runs_each_setup_in_a_profile_of_its_own() -> None:
    services = compose()["services"]
    # A service without a profile would start with every profile: each belongs to exactly one.
    assert all(len(s.get("profiles", [])) == 1 for s in services.values()), services
    for name, service in services.items():
        mine = service["profiles"][0]
        depends = service.get("depends_on", [])
        for other in depends if isinstance(depends, list) else depends.keys():
            assert other in services, f"{name} depends on {other}, which is not a service"
            assert mine in services[other]["profiles"], f"{name} ({mine}) needs {other}: not in its profile"
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
    assert set(profile("sqlserver")) == {"sqlserver", "create-database", "simplequeue"}
    # Compose interpolates every service whichever profile runs: a variable required (${VAR:?})
    # must be one that every profile uses, or the other profile could not start without it.
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    required = set(re.findall(r"\$\{(\w+):\?", text))
    assert required == {"SIMPLEQUEUE_API_KEYS"}
    for name in ("sqlserver", "replicas"):
        used = set(re.findall(r"\$\{(\w+)", yaml.safe_dump(profile(name))))
        assert required <= used, f"profile {name} does not use {required - used}"
    # A password with `@`, `:` or `/` would break a URL it is interpolated into: each goes apart,
    # in SIMPLEQUEUE_DATABASE_PASSWORD, which the service percent-encodes into the URL itself.
    for name, service in compose()["services"].items():
        env = service.get("environment", {})
        if "SIMPLEQUEUE_DATABASE_URL" in env:
            assert "${" not in env["SIMPLEQUEUE_DATABASE_URL"], name
            assert env["SIMPLEQUEUE_DATABASE_PASSWORD"].startswith("${"), name


def test_compose_replicas_share_one_postgres_behind_a_load_balancer() -> None:
    services = profile("replicas")
    replicas = {k: v for k, v in services.items() if k.startswith("replica-")}
    assert len(replicas) >= 2, services.keys()
    for name, replica in replicas.items():
        env = replica["environment"]
        assert replica["build"] == ".", name
        assert env["SIMPLEQUEUE_DATABASE_URL"].startswith("postgresql://"), name
        assert "@postgres:5432/" in env["SIMPLEQUEUE_DATABASE_URL"], name
        assert env["SIMPLEQUEUE_API_KEYS"].startswith("${SIMPLEQUEUE_API_KEYS:?"), name  # 0.0.0.0 needs keys
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy", name
        assert "ports" not in replica, f"{name} is reached through the load balancer only"
    assert len({str(sorted(r["environment"].items())) for r in replicas.values()}) == 1, "replicas differ"

    # docs/operations.md, Replicas: (replicas + 1) x (pool + 1) + admin (5) + superuser_reserved (3),
    # the + 1 replica being a rolling deploy's replacement and the + 1 connection LISTEN's.
    command = services["postgres"]["command"]
    max_connections = int(command[command.index("-c") + 1].split("=")[1])
    pool = int(next(iter(replicas.values()))["environment"]["SIMPLEQUEUE_POOL_SIZE"])
    assert (len(replicas) + 1) * (pool + 1) + 5 + 3 <= max_connections

    balancer = services["lb"]
    assert set(balancer["depends_on"]) == set(replicas)
    config = haproxy_config()
    servers = re.findall(r"^\s*server\s+(\S+)\s+(\S+):8000\b", config, re.M)
    assert sorted(name for name, _ in servers) == sorted(replicas), "every replica is a server, no other"
    assert all(name == host for name, host in servers)
    assert re.search(r"^\s*balance roundrobin$", config, re.M)
    assert re.search(r"^\s*http-check send meth GET uri /readyz$", config, re.M), "health by /readyz"
    assert re.search(r"^\s*default-server check\b", config, re.M)
    # A long-poll waits up to 20 s: the balancer must wait longer for an answer.
    timeout = re.search(r"^\s*timeout server (\d+)s$", config, re.M)
    assert timeout is not None
    assert int(timeout[1]) > 20


def haproxy_config() -> str:
    [mount] = profile("replicas")["lb"]["configs"]
    assert mount["target"] == "/usr/local/etc/haproxy/haproxy.cfg"
    content: str = compose()["configs"][mount["source"]]["content"]
    return content


def test_compose_haproxy_config_is_valid(tmp_path: Path) -> None:
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if haproxy is None:
        pytest.skip("no haproxy binary (Debian's haproxy package) to check the configuration with")
    path = tmp_path / "haproxy.cfg"
    path.write_text(haproxy_config(), encoding="utf-8")
    done = subprocess.run([haproxy, "-c", "-f", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    # Outside Docker the replicas' names do not resolve (init-addr none lets it start anyway);
    # nothing else may be warned about.
    warnings = [line for line in done.stderr.splitlines() if "[WARNING]" in line or "[ALERT]" in line]
    assert all("could not resolve address" in line for line in warnings), warnings
