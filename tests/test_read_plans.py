"""SELECTs bound once per prepared statement (or repeated query text) and run many times
(executor.plans, server/reads.py): every execution still reads one epoch, sees the
session's own writes, follows DDL, search_path and privileges, as PostgreSQL does."""

from __future__ import annotations

import asyncio

import asyncpg
import psycopg
import pytest
from psycopg import errors


def _aconnect(hw_server, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("user", "headwater")
    return asyncpg.connect(
        host=hw_server.host, port=hw_server.port, database="headwater", ssl=False, **kw
    )


def test_prepared_read_sees_own_writes_every_time(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        c = await _aconnect(hw_server)
        try:
            await c.execute(f"CREATE TABLE {table_name} (k int PRIMARY KEY, v int)")
            read = await c.prepare(f"SELECT count(*), sum(v) FROM {table_name} WHERE k <= $1")
            for i in range(1, 61):
                await c.execute(f"INSERT INTO {table_name} VALUES ($1, $2)", i, i * 10)
                assert tuple(await read.fetchrow(1000)) == (i, 10 * i * (i + 1) // 2)
            assert await read.fetchval(0) == 0
        finally:
            await c.close()

    asyncio.run(run())


def test_prepared_read_follows_ddl(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        c = await _aconnect(hw_server)
        try:
            await c.execute(f"CREATE TABLE {table_name} (k int, v int)")
            await c.execute(f"INSERT INTO {table_name} VALUES (1, 10)")
            read = await c.prepare(f"SELECT * FROM {table_name} WHERE k = $1")
            assert [tuple(r) for r in await read.fetch(1)] == [(1, 10)]
            await c.execute(f"DROP TABLE {table_name}")
            with pytest.raises(asyncpg.UndefinedTableError):
                await read.fetch(1)
            await c.execute(f"CREATE TABLE {table_name} (k int, v int)")
            await c.execute(f"INSERT INTO {table_name} VALUES (1, 20), (1, 30)")
            assert sorted(tuple(r) for r in await read.fetch(1)) == [(1, 20), (1, 30)]
        finally:
            await c.close()

    asyncio.run(run())


def test_repeated_text_follows_search_path(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    schema = f"{table_name}_s"
    with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
        c.execute(f"CREATE TABLE {table_name} (v text)")
        c.execute(f"INSERT INTO {table_name} VALUES ('public')")
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE TABLE {schema}.{table_name} (v text)")
        c.execute(f"INSERT INTO {schema}.{table_name} VALUES ('other')")
        q = f"SELECT v FROM {table_name}"
        for _ in range(3):  # simple protocol, then the same text again (a remembered tree)
            assert c.execute(q, prepare=False).fetchall() == [("public",)]
        c.execute(f"SET search_path = {schema}, public")
        for _ in range(3):
            assert c.execute(q, prepare=False).fetchall() == [("other",)]
        c.execute("SET search_path = public")
        for _ in range(3):  # extended protocol, unnamed statement each time
            assert c.execute(q + " WHERE v = %s", ["public"]).fetchall() == [("public",)]


def test_prepared_read_in_a_writing_transaction(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        c = await _aconnect(hw_server)
        try:
            await c.execute(f"CREATE TABLE {table_name} (k int)")
            read = await c.prepare(f"SELECT count(*) FROM {table_name} WHERE k > $1")
            assert await read.fetchval(0) == 0
            tr = c.transaction()
            await tr.start()
            await c.execute(f"INSERT INTO {table_name} VALUES (1), (2)")
            assert await read.fetchval(0) == 2  # the transaction's own rows
            await tr.rollback()
            assert await read.fetchval(0) == 0
        finally:
            await c.close()

    asyncio.run(run())


def test_prepared_read_checks_privileges_every_time(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    role = f"{table_name}_r"
    with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
        c.execute(f"CREATE TABLE {table_name} (k int)")
        c.execute(f"INSERT INTO {table_name} VALUES (1)")
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"GRANT SELECT ON {table_name} TO {role}")

    async def run() -> None:
        r = await _aconnect(hw_server, user=role)
        try:
            read = await r.prepare(f"SELECT k FROM {table_name} WHERE k = $1")
            assert await read.fetchval(1) == 1
            assert await read.fetchval(1) == 1
            with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
                c.execute(f"REVOKE SELECT ON {table_name} FROM {role}")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await read.fetchval(1)
        finally:
            await r.close()

    asyncio.run(run())


def test_repeated_catalog_query_is_fresh(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
        q = "SELECT count(*) FROM pg_class WHERE relname LIKE %s"
        pattern = f"{table_name}%"
        assert c.execute(q, [pattern]).fetchone() == (0,)
        assert c.execute(q, [pattern]).fetchone() == (0,)
        c.execute(f"CREATE TABLE {table_name} (k int)")
        assert c.execute(q, [pattern]).fetchone() == (1,)
        c.execute(f"CREATE TABLE {table_name}_b (k int)")
        assert c.execute(q, [pattern]).fetchone() == (2,)
        with pytest.raises(errors.UndefinedTable):
            c.execute(f"SELECT * FROM {table_name}_missing WHERE k = %s", [1])


# -- a bound read's last result, reused while nothing under it changed (server/result_cache.py)
REUSE_SETUP = [
    "CREATE TABLE {t} (k int PRIMARY KEY, g int, v numeric(10,2), at timestamptz)",
    "CREATE TABLE {t}_u (k int PRIMARY KEY, x int)",
    "INSERT INTO {t} SELECT i, i % 3, i * 1.5, '2026-11-29 23:30+00' FROM generate_series(1, 9) i",
    "CREATE VIEW {t}_pv AS SELECT g, v FROM {t} WHERE k > 2",
]
REUSE_READS = [
    ("SELECT * FROM {t}_mv ORDER BY g", ()),
    ("SELECT sum(n) FROM {t}_mv WHERE g >= %s", (1,)),
    ("SELECT sum(n) FROM {t}_mv WHERE g >= %s", (2,)),
    ("SELECT count(*), sum(v) FROM {t}_pv", ()),
    ("SELECT m.g, m.n, u.x FROM {t}_mv m JOIN {t}_u u ON u.k = m.g ORDER BY 1", ()),
    ("SELECT k, at::date FROM {t} WHERE k < 3 ORDER BY k", ()),  # follows TimeZone
]
REUSE_WRITES = [
    "INSERT INTO {t} VALUES (10, 1, 2.5, now())",
    "UPDATE {t} SET v = v + 1 WHERE k = 4",
    "INSERT INTO {t}_u VALUES (1, 100), (2, 200)",  # only the join follows it
    "UPDATE {t} SET g = 2 WHERE v > 10",  # the general path
    "SET TimeZone = 'Asia/Tokyo'",
    "DELETE FROM {t} WHERE k = 1",
    "BEGIN; INSERT INTO {t} VALUES (11, 0, 1, now()); COMMIT",  # staged until COMMIT
    "ALTER TABLE {t}_u ADD COLUMN y int",
    "UPDATE {t}_u SET x = 1",
]


def test_reused_results_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Prepared reads of materialized views, plain views and tables, run three times
    after each kind of write (to the tables under them and to others; fast, point and
    general; in a block; DDL; a TimeZone change): every answer is PostgreSQL's, whose
    view is a plain view over the same tables."""
    from tests.oracle_scripts import in_schema

    t = f"{table_name}_ru"
    setup = [sql.format(t=t) for sql in REUSE_SETUP]
    mv = f"{t}_mv AS SELECT g, count(*) AS n, sum(v) AS s FROM {t} GROUP BY g"
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        hw.execute(f"CREATE MATERIALIZED VIEW {mv}")
        pg.execute(f"CREATE VIEW {mv}")
        for write in ["SELECT 1", *REUSE_WRITES]:
            for c in (hw, pg):
                c.execute(write.format(t=t))
            for sql, args in REUSE_READS:
                for _ in range(3):
                    got, want = (
                        c.execute(sql.format(t=t), args, prepare=True).fetchall() for c in (hw, pg)
                    )
                    assert got == want, (write, sql, args)


def test_results_shared_by_connections_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Three connections on each server (one in another TimeZone) take turns running
    the same prepared reads after each kind of write: a result one connection read is
    reused by the others while it holds (server/result_cache.py: one cache for the
    instance), never across TimeZones, parameters or a change under it; every answer is
    PostgreSQL's."""
    from tests.oracle_scripts import in_schema

    t = f"{table_name}_sh"
    setup = [sql.format(t=t) for sql in REUSE_SETUP]
    mv = f"{t}_mv AS SELECT g, count(*) AS n, sum(v) AS s FROM {t} GROUP BY g"
    dsns = (hw_server.dsn, pg_oracle.dsn)
    with (
        in_schema(dsns, t, setup) as (hw, pg),
        in_schema(dsns, f"{t}_2") as (hw2, pg2),
        in_schema(dsns, f"{t}_3") as (hw3, pg3),
    ):
        hw.execute(f"CREATE MATERIALIZED VIEW {mv}")
        pg.execute(f"CREATE VIEW {mv}")
        for c in (hw2, pg2, hw3, pg3):
            c.execute(f"SET search_path = {t}")
        for c in (hw3, pg3):
            c.execute("SET TimeZone = 'Asia/Tokyo'")
        pairs = [(hw, pg), (hw2, pg2), (hw3, pg3)]
        writes = [w for w in REUSE_WRITES if not w.startswith(("SET", "ALTER"))]
        for write in ["SELECT 1", *writes]:
            hw.execute(write.format(t=t))
            pg.execute(write.format(t=t))
            for sql, args in REUSE_READS:
                for h, p in [*pairs, *reversed(pairs)]:
                    got, want = (c.execute(sql.format(t=t), args, prepare=True) for c in (h, p))
                    assert got.fetchall() == want.fetchall(), (write, sql, args)


def test_volatile_and_temporary_reads_are_not_reused(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """A read calling a volatile function runs each time; so does one of a temporary
    table (its writes are not epochs); parameters equal but printed otherwise (0.0,
    -0.0) are not the same."""
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute(f"CREATE TABLE {table_name} (k int PRIMARY KEY)")
        c.execute(f"INSERT INTO {table_name} VALUES (1)")
        c.execute(
            f"CREATE MATERIALIZED VIEW {table_name}_mv AS SELECT count(*) AS n FROM {table_name}"
        )
        for sql in (
            f"SELECT n, clock_timestamp() FROM {table_name}_mv",
            f"SELECT n, random() FROM {table_name}_mv",
        ):
            seen = {c.execute(sql, prepare=True).fetchone() for _ in range(3)}
            assert len(seen) == 3, sql
        # equal parameters that print otherwise: each its own result
        read = f"SELECT n, %s::float8::text AS x FROM {table_name}_mv"
        for v in (0.0, -0.0, 0.0):
            shown = c.execute(read, (v,), prepare=True).fetchone()[1]
            assert shown.startswith("-") == (str(v)[0] == "-"), (v, shown)
        c.execute(f"CREATE TEMP TABLE {table_name}_tmp (k int)")
        for i in range(3):
            c.execute(f"INSERT INTO {table_name}_tmp VALUES (%s)", (i,))
            got = c.execute(f"SELECT count(*) FROM {table_name}_tmp", prepare=True).fetchone()
            assert got == (i + 1,)
