"""Read-only transactions against PostgreSQL 15: BEGIN READ ONLY, START TRANSACTION
... READ ONLY, SET TRANSACTION READ ONLY / READ WRITE, SET default_transaction_read_only
and SET SESSION CHARACTERISTICS; a write in a read-only transaction fails with 25006
naming the command, before it changes anything; temporary tables may still be
written. The same script on both servers: every statement's tag or SQLSTATE, rows
and notices must agree. Then asyncpg's read-only transactions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import in_schema

pytestmark = pytest.mark.oracle

SCHEMA = "read_only_tx"
SCRIPT = """
CREATE TABLE ro (a int);
CREATE SEQUENCE ro_seq;
CREATE TEMP TABLE ro_temp (a int);
BEGIN READ ONLY;
SHOW transaction_read_only;
SELECT count(*) FROM ro;
INSERT INTO ro VALUES (1);
ROLLBACK;
SHOW transaction_read_only;
START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY;
SHOW transaction_read_only;
UPDATE ro SET a = 1;
ROLLBACK;
BEGIN;
SET TRANSACTION READ ONLY;
DELETE FROM ro;
ROLLBACK;
BEGIN READ ONLY;
INSERT INTO ro_temp VALUES (1);
UPDATE ro_temp SET a = 2;
SELECT * FROM ro_temp;
COMMIT;
SET TRANSACTION READ ONLY;
SHOW transaction_read_only;
INSERT INTO ro VALUES (1);
SET transaction_read_only = on;
SHOW transaction_read_only;
INSERT INTO ro VALUES (2);
SET default_transaction_read_only = on;
SHOW transaction_read_only;
SHOW default_transaction_read_only;
SELECT * FROM ro ORDER BY a;
INSERT INTO ro VALUES (3);
UPDATE ro SET a = 0;
DELETE FROM ro;
TRUNCATE ro;
CREATE TABLE ro2 (a int);
DROP TABLE ro;
CREATE VIEW ro_v AS SELECT 1;
CREATE MATERIALIZED VIEW ro_m AS SELECT 1;
CREATE INDEX ON ro (a);
ALTER TABLE ro ADD COLUMN b int;
COMMENT ON TABLE ro IS 'x';
CREATE SCHEMA ro_schema;
SELECT nextval('ro_seq');
SELECT * FROM ro FOR UPDATE;
CREATE TABLE ro3 AS SELECT 1;
SELECT 1 INTO ro4;
BEGIN;
SHOW transaction_read_only;
SET TRANSACTION READ WRITE;
INSERT INTO ro VALUES (4);
COMMIT;
BEGIN READ WRITE;
INSERT INTO ro VALUES (5);
SET TRANSACTION READ ONLY;
INSERT INTO ro VALUES (6);
ROLLBACK;
BEGIN READ ONLY;
SHOW transaction_read_only;
SET TRANSACTION READ WRITE;
SHOW transaction_read_only;
ROLLBACK;
BEGIN READ ONLY;
SELECT 1;
SET TRANSACTION READ WRITE;
ROLLBACK;
SET default_transaction_read_only = off;
BEGIN;
SET TRANSACTION READ ONLY;
COMMIT;
SHOW transaction_read_only;
SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY;
SHOW default_transaction_read_only;
INSERT INTO ro VALUES (7);
SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;
INSERT INTO ro VALUES (8);
SET default_transaction_read_only = maybe;
SELECT * FROM ro ORDER BY a
"""


def _script(c: psycopg.Connection) -> list[tuple[Any, ...]]:
    notices: list[str] = []
    c.add_notice_handler(lambda d: notices.append(f"{d.severity_nonlocalized} {d.sqlstate}"))
    out = []
    for sql in SCRIPT.strip().split(";\n"):
        notices.clear()
        try:
            cur = c.execute(sql)
            rows = cur.fetchall() if cur.description else None
            out.append((sql, cur.statusmessage, rows, list(notices)))
        except psycopg.Error as e:
            out.append((sql, e.sqlstate, str(e).splitlines()[0]))
    return out


@pytest.fixture
def conns(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[list[Any]]:
    with in_schema((hw_server.dsn, pg_oracle.dsn), SCHEMA) as both:
        yield both
        for c in both:
            c.execute("RESET default_transaction_read_only")


def test_read_only_as_postgresql(conns: tuple[Any, Any]) -> None:
    hw, pg = conns
    expected = _script(pg)
    got = _script(hw)
    for e, g in zip(expected, got, strict=True):
        assert g == e
    # the script's writes that PostgreSQL refused changed nothing
    assert hw.execute("SELECT * FROM ro ORDER BY a").fetchall() == [(1,), (2,), (4,), (8,)]


def test_asyncpg_read_only_transaction(hw_server: HeadwaterServer) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(
            host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
        )
        try:
            await conn.execute("CREATE TABLE ro_async (a int)")
            with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError) as e:
                async with conn.transaction(readonly=True):
                    assert await conn.fetchval("SHOW transaction_read_only") == "on"
                    await conn.execute("INSERT INTO ro_async VALUES (1)")
            assert str(e.value) == "cannot execute INSERT in a read-only transaction"
            async with conn.transaction():
                await conn.execute("INSERT INTO ro_async VALUES (2)")
            assert await conn.fetch("SELECT a FROM ro_async") == [(2,)]
        finally:
            await conn.execute("DROP TABLE IF EXISTS ro_async")
            await conn.close()

    asyncio.run(run())
