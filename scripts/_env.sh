# Shared by scripts/serve and scripts/test: a project virtualenv that installs what it needs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

apt_install() {
    # Debian packages, installed once; `apt-get update` only when something is missing.
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]}" >&2
    as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
}

ensure_venv() {
    # $1: the extras to install, e.g. "" or "[dev]". Reinstalls when pyproject.toml changes.
    local extras="${1:-}"
    if ! python3 -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
        echo "simplequeue needs Python 3.11 or newer as python3" >&2; exit 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV" 2>/dev/null || { apt_install python3-venv && python3 -m venv "$VENV"; }
    fi
    local stamp="$VENV/.installed${extras//[^a-z]/-}"
    local want
    want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT$extras"
        echo "$want" > "$stamp"
    fi
}

postgres_answers() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }

ensure_postgres() {
    [ -n "${SIMPLEQUEUE_TEST_POSTGRES_URL:-}" ] && return 0   # the caller brings its own server
    postgres_answers && return 0
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
        apt_install postgresql || { echo "cannot install PostgreSQL (no root?)" >&2; return 0; }
        # A fresh cluster only for tests on this machine: trust loopback, as the dev machines do.
        local hba
        hba="$(ls /etc/postgresql/*/main/pg_hba.conf | head -n 1)"
        grep -q "simplequeue-tests" "$hba" || as_root sed -i \
            '1i host all all 127.0.0.1/32 trust # simplequeue-tests\nhost all all ::1/128 trust # simplequeue-tests' "$hba"
    fi
    local version
    version="$(ls /etc/postgresql | sort -V | tail -n 1)"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 30); do postgres_answers && return 0; sleep 1; done
    echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
}
