"""UPDATE ... FROM and DELETE ... USING against PostgreSQL 15: the same statements on
both servers, from the same data; the command tags (rows affected), RETURNING's rows
and the resulting tables must agree. The FROM items are tables, aliases, joins,
subqueries and VALUES; a target row matched several times changes once."""

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

SCHEMA = "dml_from"
SETUP = (
    "CREATE TABLE ut (id int, v int, s text)",
    "CREATE TABLE uu (id int, w int)",
    "CREATE TABLE uv (id int, tag text)",
    "INSERT INTO ut VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c'), (4, NULL, 'd')",
    "INSERT INTO uu VALUES (1, 100), (2, 200), (2, 201), (5, 500), (NULL, 7)",
    "INSERT INTO uv VALUES (1, 'one'), (3, 'three'), (4, NULL)",
)

# each case runs in a transaction that is rolled back: all start from SETUP's rows
CASES = [
    "UPDATE ut SET v = uu.w FROM uu WHERE ut.id = uu.id AND uu.w < 150",
    "UPDATE ut SET v = uu.w FROM uu WHERE ut.id = uu.id AND uu.w < 150 RETURNING ut.*, uu.w",
    "UPDATE ut t SET v = t.v + u.w FROM uu u WHERE t.id = u.id AND u.id = 1 RETURNING *",
    "UPDATE ut SET s = q.x FROM (SELECT id, 'z' || w AS x FROM uu WHERE w > 300) q "
    "WHERE q.id = ut.id OR ut.id = 3 RETURNING ut.id, ut.s, q.x",
    "UPDATE ut SET v = -1 FROM uu JOIN uv ON uu.id = uv.id WHERE ut.id = uv.id "
    "RETURNING ut.id, ut.v, uv.tag",
    "UPDATE ut SET s = uv.tag FROM uu LEFT JOIN uv USING (id) WHERE ut.id = uu.id "
    "RETURNING ut.id, ut.s",
    "UPDATE ut SET v = x.n FROM (VALUES (1, 11), (3, 33)) AS x(id, n) WHERE ut.id = x.id "
    "RETURNING ut.v, x.n",
    "UPDATE ut SET v = v + w FROM uu WHERE ut.id = uu.id RETURNING s, w, v",
    "UPDATE ut SET v = 0 FROM uu WHERE uu.w > 1000",
    "UPDATE ut SET v = 0 FROM uu",
    "UPDATE ut SET v = ut.v * 2 FROM uu AS a, uv AS b WHERE ut.id = a.id AND a.id = b.id "
    "RETURNING ut.v, a.w, b.tag",
    "UPDATE ut SET v = 1 FROM uu WHERE ut.id = uu.id AND EXISTS "
    "(SELECT 1 FROM uv WHERE uv.id = uu.id) RETURNING ut.id",
    "DELETE FROM ut USING uu WHERE ut.id = uu.id AND uu.w = 500 RETURNING *",
    "DELETE FROM ut USING uu WHERE ut.id = uu.id RETURNING *",
    "DELETE FROM ut t USING uu u JOIN uu u2 USING (id) WHERE t.id = u.id AND u2.w = 100 "
    "RETURNING t.id, u.w",
    "DELETE FROM ut USING (SELECT id FROM uv WHERE tag IS NULL) z WHERE ut.id = z.id",
    "DELETE FROM ut USING uu, uv WHERE ut.id = uu.id AND ut.id = uv.id RETURNING ut.s, uv.tag",
    "DELETE FROM ut USING uu WHERE uu.w > 1000",
]


@pytest.fixture(scope="module")
def conns(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[list[Any]]:
    with in_schema((hw_server.dsn, pg_oracle.dsn), SCHEMA, SETUP) as both:
        yield both


def _effect(c: psycopg.Connection, sql: str, params: tuple = ()) -> tuple[Any, ...]:
    """Tag, RETURNING's columns and rows, and the target table after the statement (the
    transaction is rolled back)."""
    c.execute("BEGIN")
    try:
        cur = c.execute(sql, params or None)
        names = [d.name for d in cur.description] if cur.description else None
        rows = sorted(map(repr, cur.fetchall())) if cur.description else None
        after = c.execute("SELECT * FROM ut ORDER BY id").fetchall()
        return cur.statusmessage, names, rows, after
    finally:
        c.execute("ROLLBACK")


@pytest.mark.parametrize("sql", CASES)
def test_dml_from_as_postgresql(conns: tuple[Any, Any], sql: str) -> None:
    hw, pg = conns
    assert _effect(hw, sql) == _effect(pg, sql)


def test_dml_from_with_parameters(conns: tuple[Any, Any]) -> None:
    """Through the extended protocol (Parse, Bind, Describe, Execute)."""
    hw, pg = conns
    sql = "UPDATE ut SET v = %s FROM uu WHERE ut.id = uu.id AND uu.w > %s RETURNING ut.id, uu.w"
    assert _effect(hw, sql, (7, 150)) == _effect(pg, sql, (7, 150))
    sql = "DELETE FROM ut USING uv WHERE ut.id = uv.id AND uv.tag = %s RETURNING uv.tag"
    assert _effect(hw, sql, ("one",)) == _effect(pg, sql, ("one",))


def test_dml_from_changes_are_durable_and_visible(conns: tuple[Any, Any]) -> None:
    """Committed: a second connection reads the result."""
    hw, pg = conns
    for c in (hw, pg):
        c.execute("CREATE TABLE uw (id int, v int)")
        c.execute("INSERT INTO uw VALUES (1, 1), (2, 2), (3, 3)")
        c.execute("UPDATE uw SET v = uu.w FROM uu WHERE uw.id = uu.id AND uu.w < 200")
        c.execute("DELETE FROM uw USING uv WHERE uw.id = uv.id AND uv.tag = 'three'")
    read = "SELECT * FROM uw ORDER BY id"
    assert hw.execute(read).fetchall() == pg.execute(read).fetchall() == [(1, 100), (2, 2)]


class _Undo(Exception):
    """Ends a case's transaction with a rollback."""


def test_dml_from_returning_described(
    conns: tuple[Any, Any], hw_server: HeadwaterServer, pg_oracle: Any
) -> None:
    """asyncpg describes a statement before it runs it: RETURNING's columns from the
    FROM items must be known then."""
    cases = [
        ("UPDATE ut SET v = $1 FROM uu WHERE ut.id = uu.id AND uu.w > $2 RETURNING ut.id, uu.w",)
        + (7, 150),
        ("UPDATE ut SET v = $1 FROM uu WHERE ut.id = uu.id AND uu.w > $2 RETURNING *", 7, 150),
        ("DELETE FROM ut USING uu u WHERE ut.id = u.id AND u.w < $1 RETURNING u.*, s", 150),
    ]

    async def run(host: str, port: int, user: str, database: str) -> list[Any]:
        c = await asyncpg.connect(host=host, port=port, user=user, database=database)
        try:
            await c.execute(f"SET search_path = {SCHEMA}")
            out = []
            for sql, *args in cases:
                try:
                    async with c.transaction():
                        rows = await c.fetch(sql, *args)
                        out.append(sorted(tuple(r.items()) for r in rows))
                        raise _Undo
                except _Undo:
                    pass
            return out
        finally:
            await c.close()

    hw = asyncio.run(run(hw_server.host, hw_server.port, "headwater", "headwater"))
    pg = asyncio.run(run(pg_oracle.host, pg_oracle.port, pg_oracle.user, pg_oracle.dbname))
    assert hw == pg and all(hw)
