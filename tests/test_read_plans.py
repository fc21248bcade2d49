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
