"""Long IN lists of constants (planner/constant_lists.py) against PostgreSQL 15: UPDATE,
DELETE and SELECT with 5,000 constants of ints (an array of keys: planner/dml.py), of
text with quotes and backslashes, of mixed kinds and with NULL (printed once). The tags,
RETURNING's rows, the errors' SQLSTATEs and the table afterwards must agree; the
unique-key check an UPDATE that keeps its keys skips must still catch one that moves
them onto each other."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import in_schema

pytestmark = pytest.mark.oracle

SCHEMA = "long_in_lists"
ROWS = 6000
_rng = random.Random(5000)


def _row(i: int) -> str:
    s = f"it''s {i}" if i % 3 else f"back\\slash {i}"
    return f"({i}, {i * 3_000_000}, {i / 4:.2f}, '{s}', {i / 8})"


SETUP = (
    "CREATE TABLE ki (id int PRIMARY KEY, b bigint, n numeric(12,2), s text, f float8)",
    "INSERT INTO ki VALUES " + ", ".join(_row(i) for i in range(ROWS)),
)


def _ints(n: int = 5000) -> str:
    """Present and absent keys, negative ones too."""
    return ", ".join(str(k) for k in _rng.sample(range(-500, ROWS + 2000), n))


def _texts() -> str:
    return ", ".join(
        "'" + (f"it's {i}" if i % 3 else f"back\\slash {i}").replace("'", "''") + "'"
        for i in _rng.sample(range(ROWS + 500), 5000)
    )


def _mixed() -> str:
    kinds = [lambda i: str(i), lambda i: f"{i / 4:.2f}", lambda i: "NULL", lambda i: f"{i}.0"]
    return ", ".join(_rng.choice(kinds)(i) for i in _rng.sample(range(ROWS), 5000))


def _bigints() -> str:
    return ", ".join(str(i * 3_000_000) for i in _rng.sample(range(ROWS), 5000))


CASES = [
    f"UPDATE ki SET s = s || '!' WHERE id IN ({_ints()}) RETURNING id, s",
    f"UPDATE ki AS k SET f = f + 1 WHERE k.id IN ({_ints()}) AND k.id > 10",
    f"DELETE FROM ki WHERE id NOT IN ({_ints()}) RETURNING *",
    f"DELETE FROM ki WHERE id IN ({_ints()}, NULL)",
    f"DELETE FROM ki WHERE id NOT IN ({_ints()}, NULL)",
    f"UPDATE ki SET f = 0 WHERE s IN ({_texts()}) RETURNING id, f",
    f"DELETE FROM ki WHERE s NOT IN ({_texts()})",
    f"UPDATE ki SET s = 'm' WHERE n IN ({_mixed()}) RETURNING id",
    f"DELETE FROM ki WHERE n IN ({_ints()})",
    f"UPDATE ki SET b = b + 1 WHERE b IN ({_bigints()}) RETURNING id, b",
    f"UPDATE ki SET f = -f WHERE f IN ({_ints()}) OR id IN ({_ints()})",
    f"SELECT count(*), sum(id) FROM ki WHERE id IN ({_ints()}) AND s NOT IN ({_texts()})",
    f"SELECT id, id IN ({_ints()}), s IN ({_texts()}) FROM ki ORDER BY id",
    f"UPDATE ki SET id = id + 100000 WHERE id IN ({_ints()}) RETURNING id",
    f"UPDATE ki SET id = id + 1 WHERE id IN ({_ints()})",  # 23505: moved onto each other
    f"UPDATE ki SET id = 7 WHERE id IN ({_ints()})",  # 23505
]


@pytest.fixture(scope="module")
def conns(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[list[Any]]:
    with in_schema((hw_server.dsn, pg_oracle.dsn), SCHEMA, SETUP) as both:
        yield both


def _effect(c: psycopg.Connection, sql: str) -> tuple[Any, ...]:
    """Tag and rows (or the error's SQLSTATE), and the table after the statement (the
    transaction is rolled back)."""
    c.execute("BEGIN")
    try:
        try:
            cur = c.execute(sql)
        except psycopg.Error as e:
            return ("error", e.sqlstate)
        rows = sorted(map(repr, cur.fetchall())) if cur.description else None
        after = c.execute("SELECT * FROM ki ORDER BY id").fetchall()
        return cur.statusmessage, rows, after
    finally:
        c.execute("ROLLBACK")


@pytest.mark.parametrize("sql", CASES, ids=range(len(CASES)))
def test_long_in_list_as_postgresql(conns: tuple[Any, Any], sql: str) -> None:
    hw, pg = conns
    assert _effect(hw, sql) == _effect(pg, sql)


def test_long_in_list_committed(conns: tuple[Any, Any]) -> None:
    """Autocommitted (each its own epoch), then read back."""
    hw, pg = conns
    for sql in (
        f"UPDATE ki SET s = 'u' WHERE id IN ({_ints()})",
        f"DELETE FROM ki WHERE id IN ({_ints()})",
        f"UPDATE ki SET n = n + 1 WHERE id IN ({_ints()}) AND s = 'u'",
    ):
        assert hw.execute(sql).rowcount == pg.execute(sql).rowcount
    read = "SELECT * FROM ki ORDER BY id"
    assert hw.execute(read).fetchall() == pg.execute(read).fetchall()
