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
