"""pgbench, the benchmark PostgreSQL ships and users point at anything that speaks its
protocol: `pgbench -i` (COPY ... WITH (FREEZE ON) after TRUNCATE in one transaction, or
server-side generation; primary and foreign keys; VACUUM) and its TPC-B-like, simple
update and select-only scripts against Headwater, with the balances checked after.
COPY FREEZE's rule is PostgreSQL's: only into a table created or truncated in the
current (sub)transaction, else 55000."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.oracle_scripts import in_schema


def _pgbench(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    from tests.pg_oracle import ensure_postgres_installed

    try:
        exe = ensure_postgres_installed() / "pgbench"
    except RuntimeError as e:
        pytest.skip(str(e))
    if not Path(exe).is_file():
        pytest.skip("pgbench is not installed")
    p = dict(kv.split("=") for kv in dsn.split())
    cmd = [str(exe), "-h", p["host"], "-p", p["port"], "-U", p["user"], *args, p["dbname"]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))


def _balances(conn: psycopg.Connection) -> tuple[int, ...]:
    row = conn.execute(
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts),"
        " (SELECT sum(tbalance) FROM pgbench_tellers),"
        " (SELECT sum(bbalance) FROM pgbench_branches),"
        " (SELECT sum(delta) FROM pgbench_history),"
        " (SELECT count(*) FROM pgbench_history),"
        " (SELECT count(*) FROM pgbench_accounts)"
    ).fetchone()
    assert row is not None
    return tuple(int(v or 0) for v in row)


@pytest.mark.parametrize("init", [["-q"], ["-I", "dtGvpf"]], ids=["copy-freeze", "server-fk"])
def test_pgbench_initializes_and_runs(hw_server, init: list[str]) -> None:  # type: ignore[no-untyped-def]
    """pgbench -i, then 40 TPC-B-like transactions from 2 clients, 40 simple updates and
    40 select-only ones: no failed transaction, and the balances add up to each run's
    history of deltas (each transaction's writes all there)."""
    out = _pgbench(hw_server.dsn, "-i", "-s", "1", *init)
    assert out.returncode == 0, out.stderr
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        for script in ([], ["-N"], ["-S"]):
            run = _pgbench(hw_server.dsn, "-c", "2", "-t", "20", *script)
            assert run.returncode == 0, run.stderr
            assert "number of failed transactions: 0" in run.stdout, run.stdout
            # (each run first truncates the history, as pgbench does)
            a, t, b, h, n, accounts = _balances(c)
            if not script:  # TPC-B: all four balances move together
                assert a == t == b == h and n == 40 and accounts == 100_000, (a, t, b, h, n)
                before = a
            elif script == ["-N"]:  # accounts and the history only
                assert t == b == before and a == before + h and n == 40, (a, t, b, h, n)
                before = a
            else:  # select-only
                assert a == before and h == n == 0, (a, h, n)
        for table in ("history", "tellers", "accounts", "branches"):
            c.execute(f"DROP TABLE pgbench_{table} CASCADE")


def _copy(conn: psycopg.Connection, sql: str) -> str:
    try:
        with conn.cursor() as cur:
            with cur.copy(sql) as copy:
                copy.write("1\n")
            return cur.statusmessage or ""
    except psycopg.Error as e:
        return f"{e.sqlstate}: {e.diag.message_primary}"


def test_copy_freeze_as_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    """COPY ... (FREEZE) into a table created or truncated in the current subtransaction
    only: autocommitted, after a SAVEPOINT, or into an older table, 55000."""
    script = [
        "COPY f FROM STDIN (FREEZE)",  # autocommit, an older table
        "BEGIN",
        "TRUNCATE f",
        "COPY f FROM STDIN WITH (FREEZE ON)",
        "COMMIT",
        "BEGIN",
        "CREATE TABLE g (a int)",
        "COPY g FROM STDIN (FREEZE true)",
        "SAVEPOINT s",
        "COPY g FROM STDIN (FREEZE)",  # created before the savepoint
        "ROLLBACK",
        "COPY f FROM STDIN (FREEZE false)",
        "SELECT count(*) FROM f",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), "copy_freeze", ["CREATE TABLE f (a int)"]) as (
        hw,
        pg,
    ):
        got, want = [], []
        for conns, out in (((hw,), got), ((pg,), want)):
            (c,) = conns
            for sql in script:
                if sql.startswith("COPY"):
                    out.append(_copy(c, sql))
                else:
                    try:
                        cur = c.execute(sql)
                        out.append((cur.statusmessage, cur.fetchall() if cur.description else None))
                    except psycopg.Error as e:
                        out.append(f"{e.sqlstate}: {e.diag.message_primary}")
        assert got == want
