"""pg_ivm 1.15 for the PostgreSQL 15 peer, built from source on first use.

pg_ivm (synchronous incremental view maintenance inside PostgreSQL) is not packaged for
Debian, so the bench builds it from the release tarball kept beside the repository
(../shared/peers/pg_ivm-1.15.tar.gz; --pg-ivm-tarball or PG_IVM_TARBALL elsewhere) with
`make USE_PGXS=1 install`, against the PostgreSQL whose binaries the bench starts.
The build needs PostgreSQL's server headers: postgresql-server-dev-15, installed with
apt-get at the version of the installed postgresql-15 (so that the server itself is not
upgraded under the other users of this machine). Every step is skipped when its result
is already there, so this costs a few file checks once pg_ivm is installed.

A server using it starts with `shared_preload_libraries = pg_ivm` (PRELOAD) and runs
`CREATE EXTENSION pg_ivm`; an IMMV is `SELECT pgivm.create_immv(name, query)`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

try:
    from bench import common
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]

VERSION = "1.15"
TARBALL = f"pg_ivm-{VERSION}.tar.gz"
PRELOAD = "shared_preload_libraries=pg_ivm"  # a postgres_server setting
DEV_PACKAGE = "postgresql-server-dev-15"
SERVER_PACKAGE = "postgresql-15"


def default_tarball() -> Path:
    """PG_IVM_TARBALL, else ../shared/peers/ relative to the repository's root."""
    env = os.environ.get("PG_IVM_TARBALL")
    return Path(env) if env else common.REPO.parent / "shared" / "peers" / TARBALL


def _pg_config(pg_bin: Path, *flags: str) -> list[str]:
    out = subprocess.run(
        [str(pg_bin / "pg_config"), *flags], check=True, capture_output=True, text=True
    )
    return out.stdout.split("\n")[: len(flags)]


def installed(pg_bin: Path) -> bool:
    """pg_ivm VERSION's library and extension files are in this PostgreSQL's directories."""
    libdir, sharedir = _pg_config(pg_bin, "--pkglibdir", "--sharedir")
    control = Path(sharedir) / "extension" / "pg_ivm.control"
    return (
        (Path(libdir) / "pg_ivm.so").exists()
        and control.exists()
        and f"default_version = '{VERSION}'" in control.read_text()
    )


def _as_root(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return cmd
    if shutil.which("sudo"):
        return ["sudo", "-n", *cmd]
    raise PermissionError(f"installing pg_ivm needs root (no sudo): {' '.join(cmd)}")


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    """Run quietly; on failure raise with the command's output."""
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        out = (proc.stdout + proc.stderr).strip().splitlines()
        raise RuntimeError(f"failed ({proc.returncode}): {' '.join(cmd)}\n" + "\n".join(out[-30:]))


def _ensure_server_headers(pg_bin: Path) -> None:
    includedir, pgxs = _pg_config(pg_bin, "--includedir-server", "--pgxs")
    if (Path(includedir) / "postgres.h").exists() and Path(pgxs).exists():
        return
    if not shutil.which("apt-get"):
        raise RuntimeError(
            f"PostgreSQL's server headers are missing ({includedir}) and apt-get is not"
            f" available: install {DEV_PACKAGE} (or your system's equivalent) to build pg_ivm"
        )
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", SERVER_PACKAGE], capture_output=True, text=True
    ).stdout.strip()
    package = f"{DEV_PACKAGE}={version}" if version else DEV_PACKAGE
    common.log(f"pg_ivm: installing {package} (server headers for the build) with apt-get")
    apt = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", "DPkg::Lock::Timeout=600"]
    try:
        _run(_as_root([*apt, "install", "-y", "--no-install-recommends", package]))
    except RuntimeError:  # a stale package list: refresh it once
        _run(_as_root([*apt, "update"]))
        _run(_as_root([*apt, "install", "-y", "--no-install-recommends", package]))


def ensure_installed(pg_bin: Path, tarball: Path | None = None) -> None:
    """Build and install pg_ivm VERSION into the PostgreSQL of `pg_bin` unless it is there."""
    if installed(pg_bin):
        return
    tarball = tarball or default_tarball()
    if not tarball.exists():
        raise FileNotFoundError(
            f"pg_ivm is not installed and its source {tarball} is missing"
            " (pass --pg-ivm-tarball or set PG_IVM_TARBALL)"
        )
    _ensure_server_headers(pg_bin)
    common.log(f"pg_ivm: building {tarball.name} (make USE_PGXS=1 install)")
    with tempfile.TemporaryDirectory(prefix="hw-bench-pg-ivm-") as tmp:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        src = next(p for p in Path(tmp).iterdir() if p.is_dir())
        make = ["make", "-s", "USE_PGXS=1", f"PG_CONFIG={pg_bin / 'pg_config'}"]
        _run(["nice", *make], cwd=src)
        _run(_as_root([*make, "install"]), cwd=src)
    if not installed(pg_bin):
        raise RuntimeError("pg_ivm: `make install` succeeded but its files are not in place")
    common.log(f"pg_ivm {VERSION} installed")
