#!/usr/bin/env bash
# Idempotent installer for Headwater on Debian 12 (bookworm).
#
#   scripts/setup.sh                full: server + test prerequisites
#   scripts/setup.sh --server-only  only what `headwater start` needs (Java 17 + venv)
#   scripts/setup.sh --venv-only    only the Python virtualenv (e.g. for `make lint`)
#
# System packages are installed only when missing (one `apt-get update`, then
# `apt-get install -y --no-install-recommends`). The virtualenv `.venv` is created if
# missing, and `pip install -e '.[test,bench]'` runs only when pyproject.toml changed since the
# last successful install (its sha256 is kept in .venv/.headwater-setup-stamp).
# When everything is present this takes about a second.
set -euo pipefail

MODE=full
for arg in "$@"; do
    case "$arg" in
        --server-only) MODE=server ;;
        --venv-only) MODE=venv ;;
        -h|--help)
            sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "setup: unknown option: $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO/.venv"
STAMP="$VENV/.headwater-setup-stamp"
PYTHON="${PYTHON:-python3.11}"

say() { echo "setup: $*"; }

# quietly CMD...: runs CMD with its output kept in a log that is shown only on failure.
quietly() {
    local log rc=0
    log="$(mktemp)"
    "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$log" >&2
        echo "setup: failed ($rc): $*" >&2
        rm -f "$log"
        exit "$rc"
    fi
    rm -f "$log"
}

# Run as root directly; otherwise through sudo when it exists.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "setup: need root to run: $* (no sudo available)" >&2
        exit 1
    fi
}

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

APT_UPDATED=0
apt_install() {
    # apt_install PKG... : installs those of PKG that are not installed yet.
    local missing=()
    local pkg
    for pkg in "$@"; do
        installed "$pkg" || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: missing ${missing[*]} and apt-get is not available" >&2
        exit 1
    fi
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        quietly as_root env DEBIAN_FRONTEND=noninteractive apt-get update
        APT_UPDATED=1
    fi
    say "installing ${missing[*]}"
    quietly as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends "${missing[@]}"
}

# --- system packages ---------------------------------------------------------------
if [ "$MODE" != venv ]; then
    if command -v dpkg-query >/dev/null 2>&1; then
        # Java 17 runtime (Spark). The test suite also compiles a pgjdbc smoke test,
        # so the full mode installs the headless JDK (javac) as well.
        apt_install openjdk-17-jre-headless
        if [ "$MODE" = full ]; then
            apt_install openjdk-17-jdk-headless
        fi
        say "java: $(java -version 2>&1 | head -n1)"
        if [ "$MODE" = full ]; then
            # PostgreSQL 15 is the test oracle and the benchmark peer; pgjdbc for JDBC.
            apt_install postgresql-15 postgresql-client-15 libpostgresql-jdbc-java
            # headless Chromium loads the status page in tests/test_status_page.py
            apt_install chromium
            say "chromium: $(chromium --version 2>/dev/null | head -n1)"
            say "postgresql: $(/usr/lib/postgresql/15/bin/postgres --version)"
            if [ -f /usr/share/java/postgresql.jar ]; then
                say "pgjdbc: /usr/share/java/postgresql.jar"
            else
                echo "setup: /usr/share/java/postgresql.jar is missing" >&2
                exit 1
            fi
        fi
    else
        say "not a Debian system: skipping system packages (install Java 17 yourself;" \
            "tests also need javac, PostgreSQL 15, pgjdbc and chromium)"
    fi
fi

# --- Python virtualenv -------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    if ! command -v "$PYTHON" >/dev/null 2>&1 \
        || ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        apt_install python3.11 python3.11-venv
    fi
    say "creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
    rm -f "$STAMP"
fi

HASH="$( (cat "$REPO/pyproject.toml"; "$VENV/bin/python" --version 2>&1) | sha256sum | cut -d' ' -f1)"
# tpchgen-cli (a test dependency) generates TPC-H data for tests and benchmarks.
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ] && [ -x "$VENV/bin/headwater" ] \
    && [ -x "$VENV/bin/tpchgen-cli" ]; then
    say "venv up to date ($VENV)"
else
    say "pip install -e '.[test,bench]' (pyproject.toml changed or first install)"
    rm -f "$STAMP"
    quietly "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$REPO[test,bench]"
    echo "$HASH" >"$STAMP"
    say "venv ready"
fi
