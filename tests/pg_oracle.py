"""A throwaway PostgreSQL 15 cluster used as the correctness oracle in tests.

    with start_postgres() as pg:
        psycopg.connect(pg.dsn)

The cluster lives in a fresh temp dir (data, unix socket, log), listens on a free
loopback port with trust auth and fsync on, and is deleted by ``stop()``.
Running as root works: initdb refuses root, so the binaries run as the
``postgres`` OS user and the temp dir is chowned to it.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALL_HINT = (
    "PostgreSQL 15 server binaries (initdb, postgres) were not found on PATH nor in "
    "/usr/lib/postgresql/15/bin. Install them with: "
    "apt-get update && apt-get install -y postgresql-15"
)

_CANDIDATE_DIRS = ("/usr/lib/postgresql/15/bin",)


def ensure_postgres_installed() -> Path:
    """Return the directory holding ``initdb`` and ``postgres``; raise if missing.

    PostgreSQL 15 is preferred: /usr/lib/postgresql/15/bin first, then PATH.
    """
    dirs = [Path(d) for d in _CANDIDATE_DIRS]
    on_path = shutil.which("initdb")
    if on_path:
        # PATH often holds symlinks into the versioned dir: resolve to find postgres beside it.
        dirs.append(Path(on_path).resolve().parent)
        dirs.append(Path(on_path).parent)
    for d in dirs:
        if (d / "initdb").is_file() and (d / "postgres").is_file():
            return d
    raise RuntimeError(INSTALL_HINT)


_PREFIX = "pg-oracle-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap_orphans(tmp_root: str) -> None:
    """Stop and delete clusters whose owning test process died without ``stop()``.

    A SIGKILLed test run cannot clean up; its postgres would otherwise run forever
    on a machine that is reused. Clusters of live owners are left alone.
    """
    for base in Path(tmp_root).glob(_PREFIX + "*"):
        try:
            owner = int((base / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being set up
        if _alive(owner):
            continue
        try:
            postmaster = int((base / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(postmaster, signal.SIGQUIT)  # immediate shutdown: nothing to keep
            for _ in range(50):
                if not _alive(postmaster):
                    break
                time.sleep(0.1)
        except (OSError, ValueError, IndexError):
            pass
        shutil.rmtree(base, ignore_errors=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as_kwargs() -> dict[str, Any]:
    """Popen kwargs that drop to the ``postgres`` OS user when we are root."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError as exc:
        raise RuntimeError(
            "running as root, but there is no 'postgres' OS user to run initdb as "
            "(it comes with the postgresql-15 package): " + INSTALL_HINT
        ) from exc
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, gid)


@dataclass
class PgOracle:
    """A running throwaway cluster. ``stop()`` is idempotent and also runs at exit."""

    host: str
    port: int
    user: str
    dbname: str
    base_dir: Path
    bin_dir: Path
    version: str
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def dsn(self) -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={self.dbname}"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "postgres.log"

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # SIGINT = "fast" shutdown: aborts sessions, checkpoints, exits cleanly.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> PgOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_postgres(
    *,
    user: str = "postgres",
    dbname: str = "postgres",
    settings: dict[str, str] | None = None,
    startup_timeout: float = 60.0,
) -> PgOracle:
    """initdb a fresh cluster in a temp dir and start it on a free 127.0.0.1 port.

    ``user`` is the bootstrap superuser; ``dbname`` is created if it is not ``postgres``.
    ``settings`` are extra ``-c name=value`` server options.
    """
    bin_dir = ensure_postgres_installed()
    run_as = _run_as_kwargs()
    tmp_root = "/tmp" if run_as else tempfile.gettempdir()
    _reap_orphans(tmp_root)
    # Not under pytest's tmp_path: as root that lives in a 0700 dir postgres cannot enter.
    base = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=tmp_root))
    try:
        (base / "sock").mkdir()
        (base / "owner.pid").write_text(str(os.getpid()))
        if run_as:
            _chown_tree(base, run_as["user"], run_as["group"])
        version = subprocess.run(
            [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        init = subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(base / "data"),
                "-U",
                user,
                "-A",
                "trust",
                "-E",
                "UTF8",
                # C collation: ORDER BY on text matches byte order, as SQLite's BINARY does.
                "--locale=C",
                # Only initdb skips fsync (speed); the server below runs with fsync on.
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            cwd=base,
            **run_as,
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}):\n{init.stdout}\n{init.stderr}")
        opts = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(base / "sock"),
            "fsync": "on",
            "timezone": "UTC",
            "max_connections": "50",
            # Planner-only settings (results unchanged): select5.test joins up to 64
            # tables, and JIT plus a thorough GEQO search made it 5x slower.
            "jit": "off",
            "geqo_effort": "1",
        }
        opts.update(settings or {})
        last_error = ""
        for _attempt in range(5):  # retry: the free port can be taken before we bind it
            port = _free_port()
            pg = _launch(bin_dir, base, port, user, opts, version, run_as)
            err = _wait_ready(pg, startup_timeout)
            if err is None:
                if dbname != "postgres":
                    _create_db(pg, dbname)
                pg.dbname = dbname
                atexit.register(pg.stop)
                return pg
            last_error = err
            if pg._proc is not None and pg._proc.poll() is None:
                pg._proc.kill()
                pg._proc.wait()
            if "could not bind" not in err and "already in use" not in err:
                break
        raise RuntimeError(f"postgres did not start: {last_error}")
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


def _launch(
    bin_dir: Path,
    base: Path,
    port: int,
    user: str,
    opts: dict[str, str],
    version: str,
    run_as: dict[str, Any],
) -> PgOracle:
    args = [str(bin_dir / "postgres"), "-D", str(base / "data"), "-p", str(port)]
    for k, v in opts.items():
        args += ["-c", f"{k}={v}"]
    log = open(base / "postgres.log", "ab")  # the child keeps its own copy of the fd
    try:
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=base,
            # Same process group as the tests: a Ctrl-C or a CI timeout that signals the
            # group stops postgres too instead of leaving it orphaned.
            **run_as,
        )
    finally:
        log.close()
    return PgOracle("127.0.0.1", port, user, "postgres", base, bin_dir, version, proc)


def _wait_ready(pg: PgOracle, timeout: float) -> str | None:
    """None once a TCP connection succeeds, else an error text with the log tail."""
    import psycopg  # local: importing this module must not need psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert pg._proc is not None
        if pg._proc.poll() is not None:
            return f"exited with {pg._proc.returncode}:\n{pg.log_tail()}"
        try:
            psycopg.connect(pg.dsn, connect_timeout=2).close()
            return None
        except psycopg.OperationalError:
            time.sleep(0.05)
    return f"not ready after {timeout}s:\n{pg.log_tail()}"


def _create_db(pg: PgOracle, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))


if __name__ == "__main__":  # manual check: python -m tests.pg_oracle
    with start_postgres() as _pg:
        print(_pg.version, _pg.dsn)
