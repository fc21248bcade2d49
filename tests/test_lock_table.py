"""LOCK TABLE (server/transactions.py lock_table): PostgreSQL's errors outside a block
and for a missing table; in SHARE mode and above, another session's write waits until
the locking transaction ends (migration tools lock a table before they change it)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import in_schema


def test_errors_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    script = [
        "LOCK TABLE t",
        "BEGIN",
        "LOCK TABLE nosuch IN SHARE MODE",
        "ROLLBACK",
        "BEGIN",
        "LOCK TABLE t IN ACCESS SHARE MODE",
        "LOCK t, u IN EXCLUSIVE MODE NOWAIT",
        "INSERT INTO t VALUES (1)",
        "COMMIT",
        "SELECT * FROM t",
    ]
    setup = ["CREATE TABLE t (a int)", "CREATE TABLE u (b int)"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), "locks", setup) as (hw, pg):
        for sql in script:
            got = []
            for conn in (hw, pg):
                try:
                    cur = conn.execute(sql)
                    got.append((cur.statusmessage, cur.fetchall() if cur.description else None))
                except psycopg.Error as e:
                    got.append((e.sqlstate, e.diag.message_primary))
            assert got[0] == got[1], sql


def test_exclusive_lock_holds_off_other_writers(hw_server: HeadwaterServer) -> None:
    with in_schema((hw_server.dsn,), "locks_wait", ["CREATE TABLE t (a int)"]) as (locker,):
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE t IN EXCLUSIVE MODE")
        done = threading.Event()

        def write() -> None:
            with psycopg.connect(hw_server.dsn, autocommit=True) as other:
                other.execute("INSERT INTO locks_wait.t VALUES (2)")
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert not done.wait(1.5), "the INSERT did not wait for the lock"
        locker.execute("INSERT INTO t VALUES (1)")
        locker.execute("COMMIT")
        writer.join(60)
        assert done.is_set()
        rows = locker.execute("SELECT a FROM t ORDER BY a").fetchall()
        assert rows == [(1,), (2,)]
