"""Multi-row INSERT ... VALUES of constants (planner/dml.py): 8 rows or more are handed
to DuckDB as one Arrow table cast once per column; fewer as SQL. Both give the rows
and errors a row at a time gives, and PostgreSQL's rows. So does the batcher's fast
path (server/batcher.py fast_rows, each column's items read by one specialized
function from 16 rows on), which takes the table whose defaults are constants."""

from __future__ import annotations

import psycopg
import pytest

COLUMNS = (
    "a int, b numeric(7,2), c text, d boolean, e jsonb, f timestamp, g bigint, "
    "h varchar(4), i double precision, j date, k int DEFAULT {k}"
)
DEFAULTS = {"general": "40 + 2", "fast": "42"}  # an expression default: the general path
CASES = [  # (target columns, rows)
    (
        "a, b, c",
        ["(1, 1.5, 'x')", "(2, -0.005, 'it''s')", "(NULL, NULL, NULL)", "(3, 123.456, '')"],
    ),
    ("a, g, c", ["(-5, 5000000000, 'ü 日本語 🎉')", "(2147483647, -9223372036854775808, 'a\\b')"]),
    ("b, i", ["(99999.99, 1.5)", "(0.001, 2.25)", "(12, 3)"]),
    ("b, i", ["(0.06, 0.5)", "(0.03, 1e2)", "(NULL, 0.25)"]),  # no digit before the point
    ("d, c", ["(true, 'yes')", "(false, 'no')", "(NULL, 't')"]),
    ("d", ["('yes')", "('no')", "(NULL)"]),
    (
        "e, f, j",
        [
            "('{\"z\": 1, \"a\": [true]}', '2020-02-29 01:02:03.456789', '2020-01-01')",
            "(NULL, '1999-12-31 23:59:59', '0001-01-01')",
            "('[]', NULL, NULL)",
        ],
    ),
    ("c", ["(1)", "(2)"]),  # integers into text
    ("a, b", ["('7', '2.345')", "('8', '-1.005')"]),  # strings into numbers
    ("h", ["('abcd')", "('ab  ')"]),
    ("a", ["(1)", "(2147483648)"]),  # integer out of range
    ("b", ["(1.5)", "(123456.78)"]),  # numeric field overflow
    ("a", ["(1)", "('x')"]),  # invalid input syntax
    ("h", ["('abcdef')"]),  # value too long
    ("a, c", ["(1, 'x')", "(2.5, 'y')"]),  # mixed kinds: as SQL
    ("b, g, i", ["(-0.0, -0, -0.0)", "(0.004, 0, 0.0)", "(-0.004, 1, -1)"]),  # signs of zero
    ("g", ["(1)", "(9223372036854775808)"]),  # past bigint: a numeric constant
    ("e, c", ["('{\"a\": 1}', E'tab\\there')", "('\"x\"', U&'\\00e9')"]),
    ("k, a", ["(7, DEFAULT)", "(DEFAULT, 8)"]),
]
# the fast path only: the general one casts text in DuckDB, which knows no 'epoch' or
# 'today' and says 22P02 for a bad timestamp (PostgreSQL: 22007)
FAST_CASES = [
    ("f, j", ["('2020-01-01', '2020-01-02')", "('epoch', 'today')"]),
    ("f", ["('2020-01-01')", "('not a time')"]),  # invalid input syntax
]


def _outcome(conn: psycopg.Connection, sql: str) -> str | None:
    try:
        with conn.transaction():
            conn.execute(sql)
    except psycopg.Error as e:
        return e.sqlstate
    return None


def _contents(conn: psycopg.Connection, table: str) -> list[tuple]:
    cols = "a, b, c, d, e::text, f::text, g, h, i, j::text, k"
    return conn.execute(f"SELECT {cols} FROM {table} ORDER BY {cols}").fetchall()


@pytest.mark.parametrize(
    ("path", "case"),
    [(p, c) for p in DEFAULTS for c in range(len(CASES))]
    + [("fast", len(CASES) + c) for c in range(len(FAST_CASES))],
)
def test_many_rows_as_one_at_a_time_and_postgres(
    hw_server, pg_oracle, table_name: str, case: int, path: str
) -> None:  # type: ignore[no-untyped-def]
    cols, rows = (CASES + FAST_CASES)[case]
    many = f"{table_name}_m{case}{path}"
    single = f"{table_name}_s{case}{path}"
    columns = COLUMNS.format(k=DEFAULTS[path])
    with (
        psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for c, names in ((hw, (many, single)), (pg, (many,))):
            for name in names:
                c.execute(f"DROP TABLE IF EXISTS {name}")
                c.execute(f"CREATE TABLE {name} ({columns})")
        values = ", ".join(rows * 8)  # 8 rows or more: the Arrow form
        statement = f"INSERT INTO {many} ({cols}) VALUES {values}"
        got = _outcome(hw, statement)
        one_by_one = None
        for row in rows * 8:
            one_by_one = one_by_one or _outcome(hw, f"INSERT INTO {single} ({cols}) VALUES {row}")
        assert got == one_by_one
        if got is None:
            assert _contents(hw, many) == _contents(hw, single)
            assert _outcome(pg, statement) is None
            assert _contents(hw, many) == _contents(pg, many)
        else:
            assert _contents(hw, many) == []
            assert _outcome(pg, statement) == got
