"""PREPARE/EXECUTE/DEALLOCATE, VACUUM/ANALYZE, SELECT ... FOR UPDATE/SHARE and
LISTEN/NOTIFY against PostgreSQL 15: the same rows, tags, notices and SQLSTATEs.

Each script runs on one fresh connection to each server, in a schema of its own;
every statement's outcome must be identical (a statement marked `!` is set-up: run,
not compared). The concurrent scenarios (row locks, notifications between sessions,
psycopg's `notifies()` and asyncpg's `add_listener`) run on both servers too and
must observe the same thing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_same_as_postgres, outcome

SCRIPTS: dict[str, list[str]] = {
    "prepare": [
        "!CREATE TABLE t (a int, b text)",
        "PREPARE p1 AS SELECT $1",
        "EXECUTE p1(1)",
        "EXECUTE p1('x')",
        "PREPARE p1 AS SELECT 2",
        "PREPARE p2 (int, text) AS INSERT INTO t VALUES ($1, $2)",
        "EXECUTE p2(1, 'a')",
        "EXECUTE p2('1', 'b')",
        "EXECUTE p2(1)",
        "EXECUTE p2(1, 'a', 3)",
        "EXECUTE p2(now(), 'a')",
        "EXECUTE p2(1.5, 'a')",
        "EXECUTE p2(1+1, 'c'||'d')",
        "EXECUTE nosuch",
        "EXECUTE nosuch(1)",
        "PREPARE p3 AS SELECT * FROM t WHERE a = $1 ORDER BY b",
        "EXECUTE p3(1)",
        "EXECUTE p3",
        "PREPARE p4 AS UPDATE t SET b = $2 WHERE a = $1",
        "EXECUTE p4(1, 'z')",
        "PREPARE p5 AS DELETE FROM t WHERE a = $1 RETURNING *",
        "EXECUTE p5(2)",
        "PREPARE p6 AS SELECT $2",
        "PREPARE p7 (int) AS SELECT $1, $2",
        "EXECUTE p7(1, 'two')",
        "PREPARE p8 (nosuchtype) AS SELECT $1",
        "PREPARE p9 AS SELECT * FROM nosuch",
        "PREPARE p9 AS INSERT INTO nosuch VALUES ($1)",
        "PREPARE p9 AS DELETE FROM nosuch",
        "PREPARE p10 AS SELECT $1 + 1",
        "EXECUTE p10(2)",
        "PREPARE p12 (int) AS SELECT $1",
        "EXECUTE p12($1)",
        "EXECUTE p12('7')",
        "EXECUTE p12(NULL)",
        "PREPARE p17 (bigint, numeric(6, 2)) AS SELECT $1, $2",
        "EXECUTE p17(1, 2.345)",
        "PREPARE p13 AS CREATE TABLE x (a int)",
        "PREPARE p15 AS SELECT $1::int",
        "EXECUTE p15('12')",
        "EXECUTE p15(12.5)",
        "PREPARE p16 (numeric, date) AS SELECT $1 * 2, $2 + 1",
        "EXECUTE p16(1.25, '2024-01-31')",
        "BEGIN",
        "EXECUTE p2(7, 'tx')",
        "EXECUTE p3(7)",
        "ROLLBACK",
        "EXECUTE p3(7)",
        "SELECT name, parameter_types::text[], from_sql FROM pg_prepared_statements ORDER BY name",
        "DEALLOCATE p1",
        "DEALLOCATE p1",
        "EXECUTE p1(1)",
        "DEALLOCATE PREPARE p2",
        "DEALLOCATE ALL",
        "EXECUTE p3(1)",
        "DEALLOCATE PREPARE ALL",
        "SELECT count(*) FROM pg_prepared_statements",
        "PREPARE p1 AS SELECT 'again'",
        "EXECUTE p1",
        "DISCARD ALL",
        "EXECUTE p1",
    ],
    "vacuum": [
        "!CREATE TABLE t (a int, b text)",
        "!CREATE VIEW v AS SELECT * FROM t",
        "!CREATE MATERIALIZED VIEW mv AS SELECT a FROM t",
        "!CREATE SEQUENCE sq",
        "VACUUM",
        "ANALYZE",
        "VACUUM t",
        "VACUUM FULL t",
        "VACUUM ANALYZE t",
        "VACUUM FULL ANALYZE t",
        "VACUUM (ANALYZE) t (a)",
        "VACUUM t (a)",
        "ANALYZE t",
        "ANALYZE t (a, b)",
        "ANALYZE t (nosuch)",
        "ANALYZE nosuch",
        "VACUUM nosuch",
        "VACUUM v",
        "ANALYZE v",
        "ANALYZE sq",
        "VACUUM mv",
        "ANALYZE mv",
        "VACUUM t, nosuch",
        "VACUUM (FREEZE, VERBOSE false) t",
        "VACUUM (nosuchopt) t",
        "ANALYZE (nosuchopt) t",
        "ANALYZE pg_class",
        "BEGIN",
        "VACUUM t",
        "ROLLBACK",
        "BEGIN",
        "ANALYZE t",
        "COMMIT",
        "BEGIN",
        "VACUUM",
        "ROLLBACK",
    ],
    "for_update": [
        "!CREATE TABLE t (a int PRIMARY KEY, b text)",
        "!INSERT INTO t VALUES (1, 'x'), (2, 'y')",
        "!CREATE VIEW v AS SELECT * FROM t",
        "!CREATE MATERIALIZED VIEW mv AS SELECT a FROM t",
        "!CREATE SEQUENCE sq",
        "SELECT * FROM t ORDER BY a FOR UPDATE",
        "SELECT * FROM t WHERE a = 1 FOR SHARE",
        "SELECT * FROM t ORDER BY a FOR NO KEY UPDATE NOWAIT",
        "SELECT * FROM t ORDER BY a FOR KEY SHARE SKIP LOCKED",
        "SELECT * FROM t AS x ORDER BY a FOR UPDATE OF x",
        "SELECT * FROM t AS x FOR UPDATE OF t",
        "SELECT * FROM t FOR UPDATE OF nosuch",
        "SELECT * FROM t FOR UPDATE OF public.t",
        "SELECT count(*) FROM t FOR UPDATE",
        "SELECT a FROM t GROUP BY a FOR UPDATE",
        "SELECT DISTINCT a FROM t FOR SHARE",
        "SELECT a FROM t UNION SELECT a FROM t FOR UPDATE",
        "SELECT a, row_number() OVER () FROM t FOR UPDATE",
        "SELECT a, generate_series(1, 2) FROM t FOR UPDATE",
        "SELECT 1 FROM t HAVING true FOR UPDATE",
        "SELECT sum(a) FROM t FOR KEY SHARE",
        "SELECT * FROM v ORDER BY a FOR UPDATE",
        "SELECT * FROM mv FOR UPDATE",
        "SELECT * FROM sq FOR UPDATE",
        "SELECT 1 FOR UPDATE",
        "SELECT * FROM (SELECT a FROM t) s ORDER BY a FOR UPDATE",
        "SELECT * FROM (SELECT count(*) FROM t) s FOR UPDATE",
        "SELECT * FROM t, generate_series(1, 1) g FOR UPDATE OF g",
        "SELECT t.a, u.b FROM t JOIN t AS u USING (a) ORDER BY a FOR UPDATE OF u",
        "SELECT * FROM t ORDER BY a LIMIT 1 FOR UPDATE",
        "SELECT * FROM t ORDER BY a FOR UPDATE FOR SHARE",
        "WITH c AS (SELECT * FROM t) SELECT * FROM c ORDER BY a FOR UPDATE",
        "WITH c AS (SELECT * FROM t) SELECT * FROM c FOR UPDATE OF c",
        "SELECT * FROM (SELECT count(*) FROM t FOR UPDATE) s",
        "SELECT * FROM (SELECT a FROM t FOR UPDATE) s ORDER BY a FOR UPDATE OF s",
        "SELECT * FROM (SELECT a FROM t GROUP BY a) s, (SELECT a FROM t FOR SHARE) u FOR UPDATE",
        "BEGIN",
        "SELECT * FROM (SELECT * FROM t WHERE a = 2 FOR UPDATE) s",
        "DECLARE c CURSOR FOR SELECT * FROM t ORDER BY a FOR UPDATE",
        "FETCH ALL c",
        "ROLLBACK",
        "BEGIN",
        "SELECT * FROM t WHERE a = 1 FOR UPDATE",
        "UPDATE t SET b = 'z' WHERE a = 1",
        "SELECT * FROM t ORDER BY a",
        "COMMIT",
        "SELECT * FROM t ORDER BY a",
    ],
    "listen": [
        "LISTEN c1",
        "LISTEN c1",
        'LISTEN "Mixed"',
        "SELECT * FROM pg_listening_channels() ORDER BY 1",
        "SELECT pg_listening_channels() AS ch ORDER BY 1",
        "SELECT count(*) FROM pg_listening_channels() AS l(c) WHERE c LIKE 'c%'",
        "NOTIFY c1",
        "NOTIFY c1, 'payload'",
        "NOTIFY c1, ''",
        "SELECT pg_notify('c1', 'via function')",
        "SELECT pg_notify('c1', NULL)",
        "SELECT pg_notify(NULL, 'x')",
        "SELECT pg_notify('', 'x')",
        "SELECT pg_notify(repeat('x', 64), 'x')",
        "SELECT pg_notify('c1', repeat('x', 8000))",
        "SELECT pg_notify('c1', repeat('x', 7999))",
        "SELECT pg_notify('c' || g, g::text) AS sent, g::int FROM generate_series(1, 2) g",
        "UNLISTEN c1",
        "UNLISTEN nosuch",
        "SELECT * FROM pg_listening_channels()",
        "UNLISTEN *",
        "SELECT count(*) FROM pg_listening_channels()",
        "BEGIN",
        "LISTEN c2",
        "SELECT * FROM pg_listening_channels()",
        "COMMIT",
        "SELECT * FROM pg_listening_channels()",
        "BEGIN",
        "UNLISTEN *",
        "LISTEN c3",
        "ROLLBACK",
        "SELECT * FROM pg_listening_channels()",
        "BEGIN",
        "LISTEN c4",
        "SELECT 1/0",
        "COMMIT",
        "SELECT * FROM pg_listening_channels()",
        "DISCARD ALL",
        "SELECT * FROM pg_listening_channels()",
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_same_as_postgres(name: str, hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, f"pgstmt_{name}", SCRIPTS[name])


def test_protocol_and_sql_share_prepared_statements(hw_server: HeadwaterServer) -> None:
    """A statement PREPAREd in SQL binds through the protocol; names collide (42P05)."""
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute("PREPARE shared (int) AS SELECT $1 * 2 AS doubled")
        pg = conn.pgconn
        pg.send_query_prepared(b"shared", [b"21"])
        res = pg.get_result()
        assert res.get_value(0, 0) == b"42"
        while pg.get_result() is not None:
            pass
        res = pg.prepare(b"shared", b"SELECT 1")
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"42P05"
        assert (
            pg.prepare(b"proto", b"SELECT $1::int + 1").status == psycopg.pq.ExecStatus.COMMAND_OK
        )
        assert conn.execute("EXECUTE proto(1)").fetchall() == [(2,)]
        listed = conn.execute(
            "SELECT name, from_sql, parameter_types::text[] FROM pg_prepared_statements "
            "ORDER BY name"
        ).fetchall()
        assert listed == [("proto", False, ["integer"]), ("shared", True, ["integer"])]
        conn.execute("DEALLOCATE proto")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute("EXECUTE proto(1)")


def _privileges_at_execute(dsn: str) -> list[Any]:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS prep_secret")
        admin.execute("DROP ROLE IF EXISTS prep_reader")
        admin.execute("CREATE ROLE prep_reader LOGIN")
        admin.execute("CREATE TABLE prep_secret (a int)")
    out: list[Any] = []
    reader = dsn.replace("user=headwater", "user=prep_reader")
    with psycopg.connect(reader, autocommit=True) as conn:
        for sql in ("PREPARE ps AS SELECT * FROM prep_secret", "EXECUTE ps"):
            out.append(outcome(conn, sql, []))
    return out


def test_privileges_checked_at_execute(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """PREPARE needs no privilege on what the statement reads; EXECUTE does (42501)."""
    want = _privileges_at_execute(pg_oracle.dsn)
    assert want[1][1] == "42501"
    assert _privileges_at_execute(hw_server.dsn) == want


async def _asyncpg_prepared_execute(dsn: str) -> list[Any]:
    conn = await asyncpg.connect(_asyncpg_dsn(dsn))
    try:
        await conn.execute("PREPARE ap (int, text) AS SELECT $1 AS n, $2 AS s")
        return [tuple(r) for r in await conn.fetch("EXECUTE ap(5, 'five')")]
    finally:
        await conn.close()


def test_execute_through_asyncpg(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """EXECUTE described and run through the extended protocol (asyncpg's fetch)."""
    want = asyncio.run(_asyncpg_prepared_execute(pg_oracle.dsn))
    assert want == [(5, "five")]
    assert asyncio.run(_asyncpg_prepared_execute(hw_server.dsn)) == want


# -- row locks -------------------------------------------------------------------------
def _row_locks(dsn: str) -> dict[str, Any]:
    """Session A locks row 1; B's UPDATE waits until A commits, NOWAIT and SKIP LOCKED
    do not wait."""
    seen: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS locked_rows")
        setup.execute("CREATE TABLE locked_rows (a int PRIMARY KEY, b text)")
        setup.execute("INSERT INTO locked_rows VALUES (1, 'x'), (2, 'y')")
    a = psycopg.connect(dsn, autocommit=True)
    b = psycopg.connect(dsn, autocommit=True)
    try:
        a.execute("BEGIN")
        seen["locked"] = a.execute("SELECT * FROM locked_rows WHERE a = 1 FOR UPDATE").fetchall()
        b.execute("BEGIN")
        try:
            b.execute("SELECT * FROM locked_rows WHERE a = 1 FOR UPDATE NOWAIT")
            seen["nowait"] = "ok"
        except psycopg.Error as e:
            seen["nowait"] = (e.sqlstate, e.diag.message_primary)
        b.execute("ROLLBACK")
        b.execute("BEGIN")
        seen["skip"] = b.execute(
            "SELECT * FROM locked_rows WHERE a = 1 FOR UPDATE SKIP LOCKED"
        ).fetchall()
        b.execute("ROLLBACK")
        done = threading.Event()

        def update() -> None:
            b.execute("UPDATE locked_rows SET b = 'from b' WHERE a = 1")
            done.set()

        writer = threading.Thread(target=update)
        writer.start()
        time.sleep(1.0)
        seen["waited"] = not done.is_set()
        seen["a reads"] = a.execute("SELECT b FROM locked_rows WHERE a = 1").fetchall()
        a.execute("UPDATE locked_rows SET b = 'from a' WHERE a = 1")
        a.execute("COMMIT")
        writer.join(10)
        seen["after"] = a.execute("SELECT b FROM locked_rows ORDER BY a").fetchall()
    finally:
        a.close()
        b.close()
    return seen


def test_row_locks_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    want = _row_locks(pg_oracle.dsn)
    assert want["waited"] and want["after"] == [("from b",), ("y",)]
    assert _row_locks(hw_server.dsn) == want


# -- notifications ---------------------------------------------------------------------
def _psycopg_notifications(dsn: str) -> dict[str, Any]:
    listener = psycopg.connect(dsn, autocommit=True)
    notifier = psycopg.connect(dsn, autocommit=True)
    out: dict[str, Any] = {}
    try:
        npid = notifier.info.backend_pid
        listener.execute("LISTEN a")
        listener.execute("LISTEN b")
        notifier.execute("NOTIFY a, 'x'")
        notifier.execute("BEGIN")
        for sql in ("NOTIFY a, 'y'", "NOTIFY a, 'y'", "NOTIFY b, 'z'", "NOTIFY c, 'no'"):
            notifier.execute(sql)
        notifier.execute("NOTIFY a, 'x'")
        notifier.execute("COMMIT")
        notifier.execute("BEGIN")
        notifier.execute("NOTIFY a, 'rolled back'")
        notifier.execute("ROLLBACK")
        notifier.execute("SELECT pg_notify('a', 'function')")
        # the listener is idle: the notifications arrive without a query
        got = listener.notifies(timeout=5.0, stop_after=5)
        out["idle"] = [(n.channel, n.payload, n.pid == npid) for n in got]
        # inside a transaction block they wait for its end
        received: list[Any] = []
        listener.add_notify_handler(lambda n: received.append((n.channel, n.payload)))
        listener.execute("BEGIN")
        notifier.execute("NOTIFY a, 'while in a block'")
        listener.execute("SELECT 1")
        out["in block"] = list(received)
        listener.execute("COMMIT")
        out["after block"] = list(received)
        # the notifier listening gets its own, before its ReadyForQuery
        own: list[Any] = []
        notifier.add_notify_handler(lambda n: own.append((n.channel, n.payload, n.pid == npid)))
        notifier.execute("LISTEN b")
        notifier.execute("NOTIFY b, 'self'")
        out["self"] = list(own)
    finally:
        listener.close()
        notifier.close()
    return out


def test_psycopg_notifies_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    want = _psycopg_notifications(pg_oracle.dsn)
    assert want["idle"] == [
        ("a", "x", True),
        ("a", "y", True),
        ("b", "z", True),
        ("a", "x", True),
        ("a", "function", True),
    ]
    assert _psycopg_notifications(hw_server.dsn) == want


def _asyncpg_dsn(dsn: str) -> str:
    parts = dict(p.split("=", 1) for p in dsn.split())
    return f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"


async def _asyncpg_notifications(dsn: str) -> list[Any]:
    url = _asyncpg_dsn(dsn)
    listener = await asyncpg.connect(url)
    notifier = await asyncpg.connect(url)
    got: list[Any] = []
    arrived = asyncio.Event()

    def on_notify(conn: Any, pid: int, channel: str, payload: str) -> None:
        got.append((channel, payload, pid == notifier.get_server_pid()))
        if len(got) == 3:
            arrived.set()

    try:
        await listener.add_listener("jobs", on_notify)
        await notifier.execute("NOTIFY jobs, 'one'")
        async with notifier.transaction():
            await notifier.execute("SELECT pg_notify('jobs', $1)", "two")
            await notifier.execute("NOTIFY other, 'not listened'")
        await notifier.execute("SELECT pg_notify($1, $2)", "jobs", "three")
        await asyncio.wait_for(arrived.wait(), 5.0)
        await listener.remove_listener("jobs", on_notify)
        await notifier.execute("NOTIFY jobs, 'after remove'")
        await asyncio.sleep(0.3)
    finally:
        await listener.close()
        await notifier.close()
    return got


def test_asyncpg_add_listener_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    want = asyncio.run(_asyncpg_notifications(pg_oracle.dsn))
    assert want == [("jobs", "one", True), ("jobs", "two", True), ("jobs", "three", True)]
    assert asyncio.run(_asyncpg_notifications(hw_server.dsn)) == want
