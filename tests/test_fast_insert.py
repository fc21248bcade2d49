"""Autocommitted INSERTs the batcher takes in Python (server/batcher.py): with now(),
CURRENT_TIMESTAMP, LOCALTIMESTAMP and CURRENT_DATE, as values and as column defaults
(`_Clock`), and with a RETURNING list of columns (what ORMs send for a new row's key).

Before, each such INSERT ran a writing transaction of its own: ~170 INSERTs per second
against ~2,000 with 4 clients. The rows and results must be PostgreSQL's: one instant
per statement, a timestamp and a date are its wall time in the session's TimeZone;
RETURNING gives the stored values (a serial's new key, a numeric rounded to its scale)
with the types the general path reports."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest
from headwater.catalog.objects import Column, Key, Table
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.types import DATE, INT4, TEXT, TIMESTAMP, TIMESTAMPTZ, ColumnType
from headwater.server.batcher import constant, fast_rows, plain_value
from pglast import parse_sql

from tests.oracle_scripts import in_schema

ZONE = "Asia/Kathmandu"  # +05:45: a wrong zone or offset shows in every column
COLUMNS = (
    "id int, a timestamptz, b timestamp, c date, d timestamp,"
    " da timestamptz DEFAULT now(), db timestamp DEFAULT CURRENT_TIMESTAMP,"
    " dc date DEFAULT CURRENT_DATE, dd timestamp DEFAULT LOCALTIMESTAMP"
)
STATEMENTS = [  # each fills a, b, c, d (and the defaults)
    "INSERT INTO {t} (id, a, b, c, d) VALUES ({i}, now(), now(), now(), now())",
    "INSERT INTO {t} (id, a, b, c, d) VALUES"
    " ({i}, CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE, pg_catalog.now())",
    # (not statement_timestamp(): PostgreSQL takes it from the Execute message and the
    # transaction's start from Bind, microseconds apart in the extended protocol)
    "INSERT INTO {t} (id, a, b, c, d) VALUES"
    " ({i}, transaction_timestamp(), now(), LOCALTIMESTAMP, CURRENT_TIMESTAMP),"
    " ({i} + 1, now(), now(), now(), now())",
]
# true for every row on PostgreSQL: one instant per statement, in the session's zone
CHECKS = (
    "b = a AT TIME ZONE current_setting('TimeZone')",
    "d = b",
    "c = b::date",
    "da = a",
    "db = b",
    "dc = c",
    "dd = b",
)


def _table(*cols: tuple[str, object, str | None]) -> Table:
    return Table(1, "public", "t", tuple(Column(n, ColumnType(t), False, d) for n, t, d in cols))


def test_clock_calls_take_the_fast_path() -> None:
    """The batcher takes the rows, with the session's wall time where the column wants
    one; a clock value it cannot assign in Python (text) leaves it to the general path."""
    table = _table(
        ("a", TIMESTAMPTZ, None),
        ("b", TIMESTAMP, None),
        ("c", DATE, None),
        ("n", INT4, None),
        ("da", TIMESTAMPTZ, "now()"),
        ("dc", DATE, "CURRENT_DATE"),
    )
    fmt = SessionFormat(timezone=ZONE)
    stmt = parse_sql("INSERT INTO t (a, b, c, n) VALUES (now(), CURRENT_TIMESTAMP, now(), $1)")
    before = dt.datetime.now(dt.UTC)
    fast = fast_rows(stmt[0].stmt, table, [7], fmt)
    after = dt.datetime.now(dt.UTC)
    assert fast is not None and len(fast.rows) == 1
    a, b, c, n, da, dc = fast.rows[0]
    assert before <= a <= after and da == a and n == 7
    assert b == a.astimezone(fmt.tzinfo).replace(tzinfo=None)
    assert c == dc == b.date()
    text = _table(("s", TEXT, None))
    assert fast_rows(parse_sql("INSERT INTO t VALUES (now())")[0].stmt, text, [], fmt) is None
    # a function of that name in another schema is not the clock
    other = parse_sql("INSERT INTO t (a) VALUES (myschema.now())")[0].stmt
    assert fast_rows(other, table, [], fmt) is None


def _rows(conn: psycopg.Connection, table: str) -> list[tuple]:
    checks = ", ".join(CHECKS)
    return conn.execute(f"SELECT id, {checks} FROM {table} ORDER BY id").fetchall()


@pytest.mark.parametrize("prepared", [False, True])
def test_clock_values_as_postgres(hw_server, pg_oracle, table_name: str, prepared: bool) -> None:  # type: ignore[no-untyped-def]
    """The same INSERTs on both servers, literal and prepared (psycopg prepares a
    statement it runs 5 times): every check holds on both, each statement's instant
    lies between the client's clock before and after it, and statements differ."""
    table = f"{table_name}_{int(prepared)}"
    setup = [f"SET TimeZone = '{ZONE}'", f"CREATE TABLE {table} ({COLUMNS})"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as (hw, pg):
        windows = {}
        for c, side in ((hw, "hw"), (pg, "pg")):
            i = 0
            for sql in STATEMENTS:
                for _ in range(6 if prepared else 1):
                    before = dt.datetime.now(dt.UTC)
                    if prepared:
                        args = (i,) * sql.count("{i}")
                        c.execute(sql.format(t=table, i="%s"), args, prepare=True)
                    else:
                        c.execute(sql.format(t=table, i=i))
                    windows[side, i] = (before, dt.datetime.now(dt.UTC))
                    i += 2
        got, want = _rows(hw, table), _rows(pg, table)
        assert got == want
        assert all(all(r[1:]) for r in got), got
        for c, side in ((hw, "hw"), (pg, "pg")):
            stamps = c.execute(f"SELECT DISTINCT id - id % 2, a FROM {table}").fetchall()
            assert len({a for _, a in stamps}) == len(stamps)  # one instant per statement
            slack = dt.timedelta(milliseconds=5)  # the two machines' clocks are one
            for i, a in stamps:
                lo, hi = windows[side, i]
                assert lo - slack <= a <= hi + slack, (side, i, a, lo, hi)


RETURNING_COLUMNS = (
    "id serial PRIMARY KEY, name text, amount numeric(7,2), v varchar(4), d date,"
    " ts timestamptz, lt timestamp, ok boolean, f float8, big bigint, raw bytea"
)
RETURNING_STATEMENTS = [
    "INSERT INTO {t} (name, amount) VALUES ('a', 1.005) RETURNING id",
    "INSERT INTO {t} (name, amount, v, d) VALUES ('b', 2, 'xy', '2020-02-29') RETURNING *",
    "INSERT INTO {t} (ts, lt, ok, f, big, raw) VALUES ('2020-02-29 12:00+03',"
    " '2020-02-29 12:00', true, 1.5, 9007199254740993, '\\x00ff')"
    " RETURNING ts, lt, ok, f, big, raw",
    "INSERT INTO {t} (name) VALUES ('c'), ('d') RETURNING {t}.id, name AS n, amount",
    "INSERT INTO {t} AS x (name, v) VALUES ('e', 'ab  ') RETURNING x.id, x.v, id AS k",
    "INSERT INTO {t} (name) VALUES ('f') RETURNING id + 1 AS next, upper(name)",  # general
    "INSERT INTO {t} AS x (name) VALUES ('g') RETURNING {t}.id",  # 42P01, as PostgreSQL
    "INSERT INTO {t} (name) VALUES ('h') RETURNING nope",  # 42703
    "INSERT INTO {t} VALUES (100, 'i', 3.5) RETURNING *",  # the rest: their defaults
    "INSERT INTO {t} VALUES (101, 'j', 1, 'abcde')",  # 22001
    "INSERT INTO {t} VALUES (102, 'k'), (103)",  # 42601
    "INSERT INTO {t} VALUES (104, 'k', 1, 'a', '2020-01-01', now(), now(), true, 1, 1, '', 5)",
]


def test_returning_columns_take_the_fast_path() -> None:
    table = _table(("id", INT4, None), ("name", TEXT, None))
    fmt = SessionFormat()
    for sql, want in [
        ("INSERT INTO t (id, name) VALUES (1, 'a') RETURNING id", (("id", 0),)),
        (
            "INSERT INTO t AS x VALUES (1, 'a') RETURNING *, x.name AS n",
            (("id", 0), ("name", 1), ("n", 1)),
        ),
    ]:
        fast = fast_rows(parse_sql(sql)[0].stmt, table, [], fmt)
        assert fast is not None and fast.returning == want and fast.rows == [(1, "a")]
    for sql in [
        "INSERT INTO t VALUES (1, 'a') RETURNING id + 1",
        "INSERT INTO t AS x VALUES (1, 'a') RETURNING t.id",
        "INSERT INTO t VALUES (1, 'a') RETURNING nope",
    ]:
        assert fast_rows(parse_sql(sql)[0].stmt, table, [], fmt) is None, sql


def test_values_shorter_than_the_table_take_the_fast_path() -> None:
    """`INSERT INTO t VALUES (1)` fills the first columns, the rest take their defaults,
    as PostgreSQL's (it was a writing transaction each, ~9 ms); more values than
    columns stay general (42601)."""
    table = _table(("id", INT4, None), ("name", TEXT, None), ("n", INT4, "7"))
    fmt = SessionFormat()
    fast = fast_rows(parse_sql("INSERT INTO t VALUES (1), (2)")[0].stmt, table, [], fmt)
    assert fast is not None and fast.rows == [(1, None, 7), (2, None, 7)]
    for sql in ["INSERT INTO t VALUES (1, 'a', 2, 3)", "INSERT INTO t VALUES (1), (2, 'b')"]:
        assert fast_rows(parse_sql(sql)[0].stmt, table, [], fmt) is None, sql


def test_default_items_and_casts_take_the_fast_path() -> None:
    """`DEFAULT` in VALUES (ActiveRecord's and Django's multi-row INSERTs) and a
    constant or parameter cast to its column's type (`$1::numeric`, `'x'::text`,
    SQLAlchemy's `$1::VARCHAR`) are taken in Python: each was a writing transaction
    (~10-13 ms against ~1.8). A cast that changes the value (to another type, one that
    truncates) and DEFAULT for a column with a default in some rows only stay general."""
    table = _table(("id", INT4, None), ("name", TEXT, None), ("n", INT4, "7"))
    fmt = SessionFormat()

    def rows(sql: str, params: list[Any] | None = None) -> object:
        fast = fast_rows(parse_sql(sql)[0].stmt, table, params or [], fmt)
        return None if fast is None else fast.rows

    assert rows("INSERT INTO t VALUES (1, DEFAULT, DEFAULT), (2, 'b', DEFAULT)") == [
        (1, None, 7),
        (2, "b", 7),
    ]
    assert rows("INSERT INTO t (id, n) VALUES (DEFAULT, 3)") == [(None, None, 3)]
    assert rows(
        "INSERT INTO t VALUES ($1::int4, $2::varchar, $3::pg_catalog.int4), (2, 'x'::text, 1)",
        [1, "a", "5"],
    ) == [(1, "a", 5), (2, "x", 1)]
    for sql in [
        "INSERT INTO t VALUES (1, 'a', DEFAULT), (2, 'b', 3)",
        "INSERT INTO t VALUES (1::bigint, 'a', 2)",
        "INSERT INTO t VALUES (1, 'abc'::varchar(2), 2)",
        "INSERT INTO t VALUES (1, 'a'::int4, 2)",
    ]:
        assert rows(sql) is None, sql


DEFAULT_ITEMS = [
    "INSERT INTO {t} VALUES (1, DEFAULT, DEFAULT, DEFAULT, DEFAULT) RETURNING *",
    "INSERT INTO {t} VALUES (2, 'x', DEFAULT, 3.456, DEFAULT), (3, DEFAULT, 5, DEFAULT, 'y')"
    " RETURNING *",
    "INSERT INTO {t} (id, n) VALUES (4, DEFAULT)",
    "INSERT INTO {t} (id, req) VALUES (5, DEFAULT)",  # NOT NULL without a default: 23502
    "INSERT INTO {t} VALUES (DEFAULT, 'a')",  # a NULL key: 23502
    "INSERT INTO {t} VALUES (6, 'toolong'::varchar, 1)",  # 22001 at the assignment
    "INSERT INTO {t} VALUES (7, 'trunc'::varchar(3), 1) RETURNING s",  # truncated (general)
    "INSERT INTO {t} VALUES (8, '1'::text, '2.5'::numeric, '1.005'::numeric(8,2), 'z'::text)"
    " RETURNING *",
    "INSERT INTO {t} VALUES (9, 42::text, 2.5::int, 7::numeric, true::text) RETURNING *",
    "INSERT INTO {t} VALUES (10, 'q', 'x'::int)",  # 22P02
    "INSERT INTO {t} VALUES (11, 'q', 99999999999::int8)",  # 22003 into int (general)
    "INSERT INTO {t} VALUES ('12'::int4, NULL::text, NULL::int) RETURNING *",
    "INSERT INTO {t} VALUES (13, 'a'::char(3) || 'b')",  # an expression: general
    # numbers into text print as PostgreSQL's output functions print them (1e3 is 1000)
    "INSERT INTO {t} (id, req) VALUES (14, 1e3), (15, 2.50e0), (16, true) RETURNING req",
]


def test_default_items_and_casts_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Results, errors and rows of INSERTs with DEFAULT items and casts, as PostgreSQL's."""
    t = f"{table_name}_dc"
    cols = (
        "id int PRIMARY KEY, s varchar(3) DEFAULT 'dft', n int DEFAULT 7,"
        " m numeric(6,2) DEFAULT 1.5, req text NOT NULL DEFAULT 'r'"
    )
    setup = [f"CREATE TABLE {t} ({cols})", f"CREATE TABLE {t}_nn (id int, req text NOT NULL)"]
    statements = [sql.format(t=t) for sql in DEFAULT_ITEMS]
    statements.insert(4, f"INSERT INTO {t}_nn VALUES (1, DEFAULT)")
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, statements)
        for params in [(20, "ab", 5), (21, "abcd", 5), (22, "x", "1.5")]:
            sql = f"INSERT INTO {t} (id, s, m) VALUES (%s::int4, %s::varchar, %s::numeric)"
            got, want = [], []
            for c, out in ((hw, got), (pg, want)):
                try:
                    c.execute(sql, params, prepare=True)
                    out.append(None)
                except psycopg.Error as e:
                    out.append(e.sqlstate)
            assert got == want, params
        for c in (hw, pg):  # a float parameter into text: float8's output (1.0 is 1)
            c.execute(f"INSERT INTO {t} (id, req) VALUES (%s, %s)", (23, 1.0), prepare=True)
            c.execute(f"INSERT INTO {t} (id, req) VALUES (%s, %s)", (24, 1e15), prepare=True)
        rows = f"SELECT * FROM {t} ORDER BY id"
        assert hw.execute(rows).fetchall() == pg.execute(rows).fetchall()


ARRAY_INSERTS = [
    "INSERT INTO {t} VALUES (1, '{{a,\"b c\",NULL,\"\"}}', '{{1,NULL,-3}}',"
    " '{{1.5,Infinity,-0}}', '{{t,f}}', '{{x}}') RETURNING *",
    "INSERT INTO {t} VALUES (2, '{{}}', '{{}}', NULL, '{{}}', '{{}}'),"
    " (3, NULL, '{{2147483647}}', '{{1e300}}', NULL, NULL) RETURNING *",
    "INSERT INTO {t} VALUES (4, '{{a}}', '{{2147483648}}')",  # 22003
    "INSERT INTO {t} VALUES (5, '{{a}}', '{{1.5}}')",  # 22P02
    "INSERT INTO {t} VALUES (7, '{{a', '{{1}}')",  # 22P02: malformed
    "INSERT INTO {t} (id) VALUES (8) RETURNING *",
    "INSERT INTO {t} VALUES (9, ARRAY['p', 'q'], ARRAY[1, 2]) RETURNING *",  # general
    "SELECT * FROM {t} ORDER BY id",
    "SELECT id, s[2], n[1] + 1, array_length(s, 1) FROM {t} WHERE s IS NOT NULL ORDER BY id",
]


def test_array_values_take_the_fast_path() -> None:
    """A one-dimensional array of booleans, integers, floats or texts (a literal or a
    list parameter) is taken in Python: each INSERT into a table with an array column
    was a writing transaction (~9-10 ms against ~1.7). Several dimensions, elements of
    another kind than the column's (text for integers), and an array in a key stay general."""
    from headwater.catalog.types import ARRAY_TYPES

    tags = ColumnType(ARRAY_TYPES["text"])
    nums = ColumnType(ARRAY_TYPES["int4"])
    table = _table(("id", INT4, None), ("s", tags.pg, None), ("n", nums.pg, None))
    fmt = SessionFormat()

    def rows(sql: str, params: list[Any] | None = None, on: Table = table) -> object:
        fast = fast_rows(parse_sql(sql)[0].stmt, on, params or [], fmt)
        return None if fast is None else fast.rows

    assert rows("INSERT INTO t VALUES (1, '{a,NULL}', '{1,2}')") == [(1, ["a", None], [1, 2])]
    assert rows("INSERT INTO t VALUES ($1, $2, $3)", [1, ["x"], [True]]) is None
    assert rows("INSERT INTO t VALUES ($1, $2, $3)", [1, ["x"], [5, None]]) == [
        (1, ["x"], [5, None])
    ]
    assert rows("INSERT INTO t VALUES (1, '{a}', '{{1},{2}}')") is None
    assert rows("INSERT INTO t VALUES ($1, $2, $3)", [1, [1], ["1"]]) is None
    keyed = Table(1, "public", "t", table.columns, keys=(Key("t_s", ("s",), primary=False),))
    assert rows("INSERT INTO t VALUES (1, '{a}', '{1}')", on=keyed) is None


@pytest.mark.parametrize("prepared", [False, True])
def test_array_values_as_postgres(hw_server, pg_oracle, table_name: str, prepared: bool) -> None:  # type: ignore[no-untyped-def]
    """Rows, RETURNING and errors of INSERTs of array values, literal and prepared, as
    PostgreSQL's; then a point UPDATE of the array and a view over the table."""
    t = f"{table_name}_a{int(prepared)}"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, s text[], n int[], f float8[], b bool[],"
        " v varchar[])"
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, [sql.format(t=t) for sql in ARRAY_INSERTS], (prepared,))
        for c in (hw, pg):
            c.execute(
                f"INSERT INTO {t} (id, s, n) VALUES (%s, %s, %s)", (20, ["u", None, "v w"], [7, 8])
            )
            c.execute(f"UPDATE {t} SET s = %s, n = %s WHERE id = %s", (["z"], [None, 1], 1))
        rows = f"SELECT * FROM {t} ORDER BY id"
        assert hw.execute(rows).fetchall() == pg.execute(rows).fetchall()


EXPRESSIONS = [
    "INSERT INTO {t} VALUES (1, lower('ABC') || '-' || upper('x'), 2 + 3 * 4, 10 / 4.0,"
    " ARRAY['a', 'b'], coalesce(NULL, 7)::text::int) RETURNING *",
    "INSERT INTO {t} (id, s, n) VALUES (2, concat('a', 1, NULL, true), abs(-5)),"
    " (3, CASE WHEN 1 > 2 THEN 'no' ELSE 'yes' END, greatest(1, 9, 3)) RETURNING id, s, n",
    "INSERT INTO {t} (id, n) VALUES (4, 2147483647 + 1)",  # 22003
    "INSERT INTO {t} (id, n) VALUES (5, 1 / 0)",  # 22012
    "INSERT INTO {t} (id, n) VALUES (6, 'x'::int + 1)",  # 22P02
    "INSERT INTO {t} (id, m) VALUES (7, 1.23456 * 100) RETURNING m",  # rounded to numeric(8,2)
    "INSERT INTO {t} (id, s) VALUES (8, repeat('ab', 3)::varchar(4)) RETURNING s",
    "INSERT INTO {t} (id, s) VALUES (9, length('héllo')::text || md5('a')) RETURNING s",
    "INSERT INTO {t} (id, n) VALUES (10, (SELECT max(id) FROM {t}))",  # a subquery: general
    "INSERT INTO {t} (id, n) VALUES (11, nextval('{t}_seq')), (12, nextval('{t}_seq'))",
    "INSERT INTO {t} (id, n) VALUES (13, id + 1)",  # 42703, from the general path
    "INSERT INTO {t} (id, s) VALUES (1, 'dup' || 'licate')",  # 23505
    "INSERT INTO {t} (id, tags) VALUES (14, string_to_array('x,y', ',')) RETURNING tags",
    "INSERT INTO {t} (id, n) VALUES (15, NULL + 1), (16, round(2.5)) RETURNING n",
    "INSERT INTO {t} (id, n) VALUES (17, max(5))",  # 42803
    "INSERT INTO {t} (id, n) VALUES (18, count(*) + 1)",  # 42803
    "INSERT INTO {t} (id, n) VALUES (19, row_number() OVER ())",  # 42P20
    "INSERT INTO {t} (id, n) VALUES (20, (SELECT max(id) FROM {t}))",  # (in a subquery: fine)
    "SELECT * FROM {t} ORDER BY id",
]


def test_values_expressions_take_the_fast_path() -> None:
    """An INSERT whose VALUES items are expressions of constants and parameters is
    computed by DuckDB, then taken by the batcher (server/value_exprs.py): before, a
    writing transaction (~12 ms against ~2-3). Columns, subqueries, sequence calls and
    the clock inside an expression stay on the general path."""
    from headwater.server import value_exprs

    table = _table(("id", INT4, None), ("name", TEXT, None), ("n", INT4, None))

    def todo(sql: str) -> object:
        found = value_exprs.items(parse_sql(sql)[0].stmt, table)
        return None if found is None else [(r, i) for r, i, _ in found]

    assert todo("INSERT INTO t VALUES ($1, lower($2), $3 + 1)") == [(0, 1), (0, 2)]
    assert todo("INSERT INTO t (n, id) VALUES (1, 1), (2, abs(-2))") == [(1, 1)]
    assert todo("INSERT INTO t VALUES (1, 'x', 2)") is None  # nothing to compute
    assert todo("INSERT INTO t VALUES (1, now()::text, CURRENT_DATE - DATE '2000-01-01')") == [
        (0, 1),
        (0, 2),
    ]
    for sql in [
        "INSERT INTO t VALUES (1, 'x', id + 1)",
        "INSERT INTO t VALUES (1, 'x', (SELECT 1))",
        "INSERT INTO t VALUES (nextval('s'), 'x', 1)",
        "INSERT INTO t VALUES (1, clock_timestamp()::text || 'x', 1)",
        "INSERT INTO t VALUES (1, statement_timestamp()::text, 1)",
        "INSERT INTO t VALUES (1, CURRENT_TIMESTAMP(0)::text, 1)",
        "INSERT INTO t VALUES (1, CURRENT_USER || 'x', 1)",
        "INSERT INTO t VALUES (1, 'x', count(*))",
        "INSERT INTO t VALUES (1, 'x', max(2))",  # (42803)
        "INSERT INTO t VALUES (1, 'x', generate_series(1, 2))",  # (two rows)
    ]:
        assert todo(sql) is None, sql


@pytest.mark.parametrize("prepared", [False, True])
def test_values_expressions_as_postgres(
    hw_server, pg_oracle, table_name: str, prepared: bool
) -> None:  # type: ignore[no-untyped-def]
    """Rows, RETURNING and errors of INSERTs whose VALUES are expressions, literal and
    prepared, in and out of a transaction block, as PostgreSQL's."""
    t = f"{table_name}_e{int(prepared)}"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, s varchar(40), n int, m numeric(8,2),"
        " tags text[], k int)",
        f"CREATE SEQUENCE {t}_seq",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, [sql.format(t=t) for sql in EXPRESSIONS], (prepared,))
        for c in (hw, pg):
            c.execute(f"INSERT INTO {t} (id, s, n) VALUES (%s, lower(%s), %s * 2)", (30, "AB", 21))
            # a prepared statement's computed items follow SET and DDL between executions
            named = f"INSERT INTO {t} (id, s, m) VALUES (%s, current_setting('TimeZone') || %s,"
            named += " %s / 3.0)"
            c.execute(named, (40, "-a", 1), prepare=prepared)
            c.execute("SET TimeZone = 'Asia/Tokyo'")
            c.execute(named, (41, "-b", 1), prepare=prepared)
            c.execute(f"ALTER TABLE {t} ALTER COLUMN m TYPE numeric(8,4)")
            c.execute(named, (42, "-c", 1), prepare=prepared)
            c.execute("RESET TimeZone")
            with c.transaction():
                c.execute(f"INSERT INTO {t} (id, s) VALUES (%s, %s || 'z')", (31, "y"))
                c.execute(f"INSERT INTO {t} (id, n) VALUES (32, 1 + 1)")
        rows = f"SELECT * FROM {t} ORDER BY id"
        assert hw.execute(rows).fetchall() == pg.execute(rows).fetchall()


SELECTS = [  # INSERT ... SELECT of constants (server/values_select.py)
    "INSERT INTO {t} (id, n, s, b) SELECT 1, '2', 'a', 'on' RETURNING *",
    "INSERT INTO {t} (id, s, n) SELECT p0::INTEGER, p1::VARCHAR, p2::INTEGER FROM (VALUES"
    " (3::INTEGER, 'u3'::VARCHAR, 30::INTEGER, 1), (2::INTEGER, 'u2'::VARCHAR, 20::INTEGER, 0))"
    " AS imp_sen(p0, p1, p2, sen_counter) ORDER BY sen_counter RETURNING {t}.id, {t}.id AS id__1",
    "INSERT INTO {t} (id, n) SELECT x, y FROM (VALUES (4, 1), (5, 2.5)) v(x, y) RETURNING n",
    "INSERT INTO {t} (id, s) SELECT x, y FROM (VALUES (6, 1), (7, 2)) v(x, y) RETURNING s",
    "INSERT INTO {t} (id, s, n) SELECT a, upper(b), a * 10 FROM (VALUES (8, 'q'), (9, 'r')) w(a, b)"
    " RETURNING s, n",
    "INSERT INTO {t} (id, s) SELECT a, b FROM (VALUES (10, 'too long for it')) w(a, b)",  # 22001
    "INSERT INTO {t} (id, s) SELECT a, b::varchar(3) FROM (VALUES (11, 'abcdef')) w(a, b)"
    " RETURNING s",
    "INSERT INTO {t} (id, m) SELECT column1, column2 FROM (VALUES (12, 1.5), (13, 2.255)) v"
    " RETURNING m",
    "INSERT INTO {t} (id) SELECT w.a FROM (VALUES (15), (14)) w(a) ORDER BY w.a RETURNING id",
    "INSERT INTO {t} (id, n) SELECT a, b FROM (VALUES (16, 5), (17, NULL)) w(a, b) RETURNING n",
    "INSERT INTO {t} (id, b) SELECT a, c FROM (VALUES (18, true), (19, false)) w(a, c) RETURNING b",
    "INSERT INTO {t} (id) SELECT 1",  # 23505
    "INSERT INTO {t} (id, n) SELECT 20",  # 42601
    "INSERT INTO {t} (id) SELECT 21, 1",  # 42601
    "INSERT INTO {t} (id, s) SELECT a, b FROM (VALUES (22, 'x'), (22, 'y')) w(a, b)",  # 23505
    "INSERT INTO {t} (id, n) SELECT a, b::int FROM (VALUES (24, '7')) w(a, b) RETURNING n",
    "INSERT INTO {t} (id, n) SELECT a, b FROM (VALUES (25, 1)) w(a, b) WHERE b > 0",  # general
    "INSERT INTO {t} (id) SELECT generate_series(26, 28) RETURNING id",  # rows: general
    "INSERT INTO {t} (id, n) SELECT 29, max(5) RETURNING n",
    "SELECT * FROM {t} ORDER BY id",
]


def test_insert_selects_of_constants_take_the_fast_path() -> None:
    """An INSERT ... SELECT of constants (SQLAlchemy's ORM flush of several objects,
    `INSERT INTO t SELECT 1, 'x'`) reads as the INSERT ... VALUES it amounts to, in its
    ORDER BY's order (server/values_select.py): before, a writing transaction (~14 ms
    against ~3). What PostgreSQL types otherwise stays general."""
    from headwater.server.values_select import as_values

    table = _table(("id", INT4, None), ("name", TEXT, None), ("n", INT4, None))

    def values(sql: str) -> object:
        got, cols = as_values(parse_sql(sql)[0].stmt, table), table.columns
        if got is None:
            return None
        return [
            [constant(plain_value(i, c), [10, 20]) for i, c in zip(r, cols, strict=True)]
            for r in got.selectStmt.valuesLists
        ]

    assert (
        values(
            "INSERT INTO t SELECT p0::INTEGER, p1::TEXT, p2 FROM (VALUES ($1::INTEGER, 'b'::TEXT,"
            " 2, 1), (3::INTEGER, 'a'::TEXT, $2, 0)) AS imp_sen(p0, p1, p2, sen_counter)"
            " ORDER BY sen_counter"
        )
        is None
    )  # (p2's items: a number and a parameter)
    assert values(
        "INSERT INTO t SELECT p0::INTEGER, p1::TEXT, p2::INT4 FROM (VALUES ($1::INTEGER, 'b'::TEXT,"
        " $2::INT4, 1), (3::INTEGER, 'a'::TEXT, 4::INT4, 0)) AS imp_sen(p0, p1, p2, sen_counter)"
        " ORDER BY sen_counter"
    ) == [[3, "a", 4], [10, "b", 20]]
    assert values("INSERT INTO t SELECT 1, 'x', $1") == [[1, "x", 10]]
    orm = as_values(
        parse_sql(
            "INSERT INTO t (name, n) SELECT p0::VARCHAR, p1::INTEGER FROM (VALUES ($1::VARCHAR,"
            " $2::INTEGER, 0), ($3::VARCHAR, $4::INTEGER, 1)) AS imp_sen(p0, p1, sen_counter)"
            " ORDER BY sen_counter RETURNING t.id, t.id AS id__1"
        )[0].stmt,
        table,
    )
    assert orm is not None
    fast = fast_rows(orm, table, ["a", 1, "b", 2], SessionFormat())
    assert fast is not None and fast.rows == [(None, "a", 1), (None, "b", 2)]
    assert fast.returning == (("id", 0), ("id__1", 0))
    assert values("INSERT INTO t SELECT a, b, 7 FROM (VALUES (1, 'x'), (2, 'y')) v(a, b)") == [
        [1, "x", 7],
        [2, "y", 7],
    ]
    for sql in [
        "INSERT INTO t SELECT a, b, c FROM (VALUES (1, 'x', '3')) v(a, b, c)",  # '3': text
        "INSERT INTO t SELECT a, b, c FROM (VALUES (1, 'x', NULL)) v(a, b, c)",  # text
        "INSERT INTO t SELECT a, b, c FROM (VALUES (1, 'x', $1)) v(a, b, c)",  # text
        "INSERT INTO t SELECT a, b, c FROM (VALUES (1, 'x', 1), (2, 'y', 2.5)) v(a, b, c)",
        "INSERT INTO t SELECT a, 'x', 1 FROM (VALUES (1)) v(a) WHERE a > 0",
        "INSERT INTO t SELECT a, 'x', 1 FROM (VALUES (1)) v(a) ORDER BY a DESC",
        "INSERT INTO t SELECT a, 'x', 1 FROM (VALUES (1)) v(a), u",
        "INSERT INTO t SELECT id, name, n FROM u",
        "INSERT INTO t SELECT * FROM (VALUES (1, 'x', 2)) v",
        "INSERT INTO t SELECT 1, 'x', 2 UNION ALL SELECT 2, 'y', 3",
        "INSERT INTO t SELECT DISTINCT 1, 'x', 2",
    ]:
        assert values(sql) is None, sql


@pytest.mark.parametrize("prepared", [False, True])
def test_insert_selects_of_constants_as_postgres(
    hw_server, pg_oracle, table_name: str, prepared: bool
) -> None:  # type: ignore[no-untyped-def]
    """Rows, RETURNING (in the ORDER BY's order) and errors of INSERT ... SELECTs of
    constants, literal and prepared, as PostgreSQL's; and an SQLAlchemy ORM flush."""
    t = f"{table_name}_s{int(prepared)}"
    setup = [f"CREATE TABLE {t} (id int PRIMARY KEY, s varchar(6), n int, m numeric(8,2), b bool)"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, [sql.format(t=t) for sql in SELECTS], (prepared,))
        for c in (hw, pg):
            with c.transaction():
                c.execute(f"INSERT INTO {t} (id, s) SELECT %s, %s::text", (30, "blk"))
        rows = f"SELECT * FROM {t} ORDER BY id"
        assert hw.execute(rows).fetchall() == pg.execute(rows).fetchall()


def test_parameter_types_of_insert_selects_as_postgres(
    hw_server, pg_oracle, table_name: str
) -> None:  # type: ignore[no-untyped-def]
    """`INSERT INTO t SELECT $1, $2`: the SELECT's bare parameters take their columns'
    types (asyncpg encodes by them: a bigint key was refused as text); those of a VALUES
    in FROM or under a cast keep theirs."""
    import asyncio

    import asyncpg

    t = f"{table_name}_pt"
    statements = [
        f"INSERT INTO {t} (id, name, n) SELECT $1, $2, $3",
        f"INSERT INTO {t} (n, id) SELECT $1, $2::int8 + 1",
        f"INSERT INTO {t} (id, name) SELECT $1, x FROM (VALUES ($2)) v(x)",
        f"INSERT INTO {t} SELECT $1, $2",
    ]

    async def types(dsn: str) -> list[list[str]]:
        conn = await asyncpg.connect(dsn, ssl=False)
        try:
            await conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, name text, n numeric)")
            out = []
            for sql in statements:
                stmt = await conn.prepare(sql)
                out.append([p.name for p in stmt.get_parameters()])
            await conn.execute(statements[0], 7, "x", 1)
            await conn.execute(f"DROP TABLE {t}")
            return out
        finally:
            await conn.close()

    def url(dsn: str) -> str:
        kv = dict(part.split("=", 1) for part in dsn.split())
        return f"postgresql://{kv['user']}@{kv['host']}:{kv['port']}/{kv['dbname']}"

    got, want = (asyncio.run(types(url(d))) for d in (hw_server.dsn, pg_oracle.dsn))
    assert got == want
    assert want[0] == ["int8", "text", "numeric"]


def test_an_orm_flush_of_several_objects(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """SQLAlchemy 2's unit of work inserts new objects with server-generated keys in one
    INSERT ... SELECT ... ORDER BY sen_counter RETURNING: each object gets its own key."""
    from sqlalchemy import Column as SaColumn
    from sqlalchemy import Integer, String, create_engine
    from sqlalchemy.orm import DeclarativeBase, Session

    class Base(DeclarativeBase):
        pass

    class Item(Base):  # (no Mapped[] annotations: this module's are strings)
        __tablename__ = f"{table_name}_orm"
        id = SaColumn(Integer, primary_key=True)
        name = SaColumn(String(20))
        qty = SaColumn(Integer)

    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(hw_server.dsn))
    try:
        Base.metadata.create_all(engine)
        with Session(engine) as session:
            items = [Item(name=f"item{i}", qty=i * i) for i in range(7)]
            session.add_all(items)
            session.flush()
            assert [(o.id, o.name) for o in items] == [(i + 1, f"item{i}") for i in range(7)]
            session.commit()
            stored = session.query(Item.id, Item.name, Item.qty).order_by(Item.id).all()
            assert stored == [(i + 1, f"item{i}", i * i) for i in range(7)]
        Base.metadata.drop_all(engine)
    finally:
        engine.dispose()


CLOCKED = [  # expressions of the clock: one instant with bare now() and DEFAULT now()
    "INSERT INTO {t} VALUES (1, now() + interval '1 day', LOCALTIMESTAMP - interval '1 hour',"
    " CURRENT_DATE + 7, DEFAULT, now(), (now() - transaction_timestamp())::text)",
    "INSERT INTO {t} (id, a, b, c, e) VALUES (2, date_trunc('hour', now()), now()::timestamp,"
    " (CURRENT_TIMESTAMP + interval '30 days')::date, CURRENT_TIMESTAMP)",
    "INSERT INTO {t} (id, a, f) VALUES (3, now() - interval '1 minute',"
    " to_char(now(), 'YYYY-MM-DD HH24:MI:SS.US'))",
]
CLOCK_CHECKS = (  # what each row says about the instant it read (its DEFAULT now(): d)
    "SELECT id, CASE WHEN id <> 2 THEN a - d END, b - (d AT TIME ZONE current_setting('TimeZone')),"
    " c - (d AT TIME ZONE current_setting('TimeZone'))::date, e = d,"
    " date_trunc('hour', d) = a OR id <> 2,"
    " f IS NULL OR f = to_char(d, 'YYYY-MM-DD HH24:MI:SS.US') OR f = '00:00:00'"
    " FROM {t} ORDER BY id"
)


@pytest.mark.parametrize("prepared", [False, True])
def test_clock_in_expressions_as_postgres(
    hw_server, pg_oracle, table_name: str, prepared: bool
) -> None:  # type: ignore[no-untyped-def]
    """`now() + interval '1 day'`, `CURRENT_DATE + 7`, `LOCALTIMESTAMP - ...` in VALUES
    read the instant the statement's bare now() and DEFAULT now() columns have, in the
    session's TimeZone, in and out of a block (server/value_exprs.py: the instant is a
    parameter to DuckDB and the batcher's clock)."""
    t = f"{table_name}_k{int(prepared)}"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, a timestamptz, b timestamp, c date,"
        " d timestamptz DEFAULT now(), e timestamptz, f text)",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        for c in (hw, pg):
            c.execute(f"SET TimeZone = '{ZONE}'")
            for sql in CLOCKED:
                c.execute(sql.format(t=t), prepare=prepared)
            with c.transaction():
                c.execute(f"INSERT INTO {t} (id, e) VALUES (4, now())")
                c.execute(
                    f"INSERT INTO {t} (id, a, c) VALUES (5, now() + %s::interval, CURRENT_DATE)",
                    ("2 hours",),
                    prepare=prepared,
                )
            c.execute(f"UPDATE {t} SET d = (SELECT d FROM {t} WHERE id = 4) WHERE id = 5")
        checks = CLOCK_CHECKS.format(t=t)
        assert hw.execute(checks).fetchall() == pg.execute(checks).fetchall()


TIMES = [
    "INSERT INTO {t} VALUES (1, '10:11:12.5', '1 year 2 mons 3 days 04:05:06.789') RETURNING *",
    "INSERT INTO {t} VALUES (2, '00:00', '-1 day +02:00'), (3, NULL, '0') RETURNING *",
    "INSERT INTO {t} VALUES (4, '24:00:00', '1 month')",  # 24:00: the general path
    "INSERT INTO {t} VALUES (5, '25:00', NULL)",  # 22008
    "INSERT INTO {t} VALUES (6, NULL, 'abc')",  # 22007
    "INSERT INTO {t} VALUES (7, '23:59:59.9999994', '178000000 years')",  # rounded down
    # casts whose modifiers round or truncate: PostgreSQL's values (general path)
    "INSERT INTO {t} VALUES (8, '10:00:00.6'::time(0), interval '1' minute),"
    " (9, NULL, interval '2' day) RETURNING *",
    "SELECT id, t::text, iv, iv + interval '1 day', t + interval '1 hour' FROM {t} ORDER BY id",
]


@pytest.mark.parametrize("prepared", [False, True])
def test_time_and_interval_values_as_postgres(
    hw_server, pg_oracle, table_name: str, prepared: bool
) -> None:  # type: ignore[no-untyped-def]
    """time and interval values take the fast path (each INSERT was a writing
    transaction, ~9 ms): rows, RETURNING and errors as PostgreSQL's, then a point
    UPDATE of them."""
    t = f"{table_name}_ti{int(prepared)}"
    setup = [f"CREATE TABLE {t} (id int PRIMARY KEY, t time, iv interval)"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, [sql.format(t=t) for sql in TIMES], (prepared,))
        for c in (hw, pg):
            c.execute(
                f"INSERT INTO {t} VALUES (%s, %s, %s)",
                (10, dt.time(1, 2, 3), dt.timedelta(days=2, microseconds=5)),
            )
            c.execute(f"UPDATE {t} SET iv = %s WHERE id = %s", (dt.timedelta(hours=-3), 1))
        rows = f"SELECT id, t::text, iv FROM {t} ORDER BY id"
        assert hw.execute(rows).fetchall() == pg.execute(rows).fetchall()


def _run(conn: psycopg.Connection, sql: str, prepared: bool) -> object:
    try:
        cur = conn.execute(sql, prepare=prepared)
    except psycopg.Error as e:
        return e.sqlstate
    if cur.description is None:
        return cur.statusmessage
    types = [(d.name, d.type_code, d.precision, d.scale) for d in cur.description]
    return types, cur.fetchall()


def _assert_as_postgres(
    hw: psycopg.Connection,
    pg: psycopg.Connection,
    statements: list[str],
    prepared: tuple[bool, ...] = (False,),
    tags: bool = False,
) -> None:
    """Each statement's result (or SQLSTATE) and columns are PostgreSQL's, run once per
    `prepared`; `tags`: a RETURNING statement run again gives PostgreSQL's tag."""
    for sql in statements:
        for p in prepared:
            got, want = (_run(c, sql, p) for c in (hw, pg))
            assert got == want, sql
        if tags and "RETURNING" in sql:
            got, want = (c.execute(sql).statusmessage for c in (hw, pg))
            assert got == want, sql


@pytest.mark.parametrize("prepared", [False, True])
def test_returning_as_postgres(hw_server, pg_oracle, table_name: str, prepared: bool) -> None:  # type: ignore[no-untyped-def]
    """Every statement's result (or SQLSTATE) and columns equal PostgreSQL's, literal
    and prepared, and the rows stored are the same."""
    table = f"{table_name}_r{int(prepared)}"
    setup = [f"CREATE TABLE {table} ({RETURNING_COLUMNS})"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as (hw, pg):
        for sql in RETURNING_STATEMENTS:
            for _ in range(2 if prepared else 1):
                got, want = (_run(c, sql.format(t=table), prepared) for c in (hw, pg))
                assert got == want, sql
        rows = f"SELECT * FROM {table} ORDER BY id"
        assert hw.execute(rows).fetchall() == pg.execute(rows).fetchall()


def test_serial_keys_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """A serial's keys, returned, across PostgreSQL's log-ahead points (every 33 values;
    the fast path takes them on the event loop while the durable record covers them, on
    a thread when a write is due), one row and many rows a statement, and the sequence
    after."""
    table = f"{table_name}_k"
    setup = [f"CREATE TABLE {table} (id serial PRIMARY KEY, v int)"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as (hw, pg):
        got: dict[str, list] = {}
        for c, side in ((hw, "hw"), (pg, "pg")):
            keys = []
            for i in range(40):
                keys += c.execute(
                    f"INSERT INTO {table} (v) VALUES (%s) RETURNING id", (i,)
                ).fetchall()
            many = ", ".join(f"({i})" for i in range(45))
            keys += c.execute(f"INSERT INTO {table} (v) VALUES {many} RETURNING id, v").fetchall()
            keys += c.execute(f"INSERT INTO {table} (v) VALUES (1) RETURNING *").fetchall()
            seq = c.execute(f"SELECT last_value, log_cnt, is_called FROM {table}_id_seq").fetchall()
            got[side] = [keys, seq, c.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()]
        assert got["hw"] == got["pg"]


# -- INSERTs in a transaction block: staged until COMMIT (server/batcher.py StagedWrites)
BLOCK_COLUMNS = "id serial PRIMARY KEY, k int UNIQUE, v text, at timestamptz DEFAULT now()"
BLOCK_SCRIPT = [
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (1, 'a') RETURNING id, k, v",
    "SELECT nextval('{t}_id_seq'), 1 AS one",  # reads no table: the rows stay staged
    "INSERT INTO {t} (k, v) VALUES (2, 'b'), (3, 'c') RETURNING {t}.id, v AS w",
    "SELECT id, k, v FROM {t} ORDER BY id",  # the block reads its own rows
    "INSERT INTO {t} (k, v) VALUES (4, 'd') RETURNING id",  # then writes in a transaction
    "COMMIT",
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (5, 'e')",
    "SAVEPOINT s1",
    "INSERT INTO {t} (k, v) VALUES (6, 'f')",
    "ROLLBACK TO SAVEPOINT s1",  # takes back what was staged since
    "INSERT INTO {t} (k, v) VALUES (7, 'g'), (6, 'f2')",
    "COMMIT",
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (8, 'h')",
    "INSERT INTO {t} (k, v) VALUES (1, 'dup')",  # a committed key: 23505 now
    "INSERT INTO {t} (k, v) VALUES (9, 'i')",  # 25P02
    "COMMIT",  # ROLLBACK
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (10, 'j'), (10, 'k')",
    "ROLLBACK",
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (11, 'l')",
    "INSERT INTO {t} (k, v) VALUES (11, 'm')",  # a key staged in the block
    "ROLLBACK",
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (12, 'n'), (NULL, 'null'), (NULL, 'null')",
    "ROLLBACK",
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (13, 'o')",
    "SAVEPOINT s2",
    "INSERT INTO {t} (k, v) VALUES (14, 'p')",
    "INSERT INTO {t} (k, v) VALUES (13, 'dup')",
    "ROLLBACK TO SAVEPOINT s2",  # out of the failed state; 14 goes, its key is free
    "INSERT INTO {t} (k, v) VALUES (14, 'q'), (NULL, 'r'), (NULL, 's') RETURNING k, v",
    "COMMIT",
    "SELECT id, k, v FROM {t} ORDER BY id",
    # one instant per block: now() is the transaction's start
    "SELECT count(DISTINCT at) FROM {t} WHERE k IN (5, 6, 7)",
    "SELECT count(DISTINCT at) FROM {t} WHERE k = 13 OR v IN ('q', 'r', 's')",
    "SELECT last_value, is_called FROM {t}_id_seq",
]


@pytest.mark.parametrize("prepared", [False, True])
def test_block_inserts_as_postgres(hw_server, pg_oracle, table_name: str, prepared: bool) -> None:  # type: ignore[no-untyped-def]
    """A transaction block of INSERTs: RETURNING, reading its own rows, savepoints,
    unique violations against committed and staged keys, ROLLBACK and the failed state
    give what PostgreSQL gives, statement by statement, and the same rows are stored."""
    table = f"{table_name}_b{int(prepared)}"
    setup = [f"CREATE TABLE {table} ({BLOCK_COLUMNS})"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as (hw, pg):
        for sql in BLOCK_SCRIPT:
            sql = sql.format(t=table)
            got, want = (_run(c, sql, prepared and sql.startswith("INSERT")) for c in (hw, pg))
            assert got == want, sql


def test_block_clock_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """In a block, now() and its kin are the block's start, statement_timestamp() each
    statement's time."""
    table = f"{table_name}_c"
    setup = [
        f"CREATE TABLE {table} (n int, a timestamptz DEFAULT now(),"
        " s timestamptz DEFAULT statement_timestamp(), d date DEFAULT CURRENT_DATE)"
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as conns:
        for c in conns:
            before = dt.datetime.now(dt.UTC)
            c.execute("BEGIN")
            began = dt.datetime.now(dt.UTC)
            first = c.execute(f"INSERT INTO {table} (n) VALUES (1) RETURNING a, s").fetchone()
            c.execute("SELECT pg_sleep(0.02)") if c is conns[1] else None
            second = c.execute(
                f"INSERT INTO {table} (n, a) VALUES (2, transaction_timestamp()),"
                " (3, CURRENT_TIMESTAMP) RETURNING a, s"
            ).fetchall()
            c.execute("COMMIT")
            assert first is not None and before <= first[0] <= began <= first[1]
            assert all(a == first[0] and s > first[1] for a, s in second)


def _staged_setup(conn: psycopg.Connection, table: str) -> None:
    conn.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v text)")
    conn.execute(f"CREATE TABLE {table}_2 (k int PRIMARY KEY, v text)")


def test_staged_block_holds_no_lock_and_commits_as_one(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """A block of INSERTs holds no write lock while the client thinks (another session
    writes meanwhile), is invisible until COMMIT, and commits all its tables together;
    a key another session takes first fails the COMMIT as a whole (23505, as a
    DEFERRABLE INITIALLY DEFERRED key does in PostgreSQL); ROLLBACK leaves nothing."""
    table = f"{table_name}_s"
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as a,
        psycopg.connect(hw_server.dsn, autocommit=True) as b,
    ):
        _staged_setup(a, table)
        a.execute("BEGIN")
        a.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'a')")
        a.execute(f"INSERT INTO {table}_2 VALUES (1, 'a')")
        a.execute("SELECT 1, now()")  # (reads no table: the block stays staged)
        # a general writing transaction of another session runs now (before, it waited
        # for the write lock until this block ended)
        b.execute("SET statement_timeout = '20s'")
        b.execute("BEGIN")
        b.execute(f"INSERT INTO {table}_2 VALUES (7, 'b') ON CONFLICT DO NOTHING")
        b.execute("COMMIT")
        assert b.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
        a.execute("COMMIT")
        assert b.execute(f"SELECT k FROM {table} ORDER BY k").fetchall() == [(1,), (2,)]
        assert b.execute(f"SELECT k FROM {table}_2 ORDER BY k").fetchall() == [(1,), (7,)]

        a.execute("BEGIN")
        a.execute(f"INSERT INTO {table} VALUES (3, 'a')")
        a.execute(f"INSERT INTO {table}_2 VALUES (3, 'a')")
        b.execute(f"INSERT INTO {table}_2 VALUES (3, 'b')")  # first to commit the key
        with pytest.raises(psycopg.errors.UniqueViolation) as e:
            a.execute("COMMIT")
        assert e.value.diag.message_detail == "Key (k)=(3) already exists."
        assert a.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert a.execute(f"SELECT k FROM {table} ORDER BY k").fetchall() == [(1,), (2,)]
        assert a.execute(f"SELECT v FROM {table}_2 WHERE k = 3").fetchall() == [("b",)]

        a.execute("BEGIN")
        a.execute(f"INSERT INTO {table} VALUES (4, 'a')")
        a.execute("ROLLBACK")
        a.execute("BEGIN")
        a.execute(f"INSERT INTO {table} VALUES (5, 'a')")
        a.close()  # the session ends with its block open: nothing of it stays
        assert b.execute(f"SELECT k FROM {table} ORDER BY k").fetchall() == [(1,), (2,)]
        b.execute(f"INSERT INTO {table} VALUES (4, 'b'), (5, 'b')")  # the keys are free


BLOCK_CLOCK_CHECKS = (  # each true on PostgreSQL, inside a block, after the first read
    "now() = %(n)s",
    "statement_timestamp() > %(s)s",
    "CURRENT_TIMESTAMP = now() AND transaction_timestamp() = now()",
    "pg_catalog.now() = now()",
    "LOCALTIMESTAMP = now() AT TIME ZONE current_setting('TimeZone')",
    "CURRENT_DATE = (now() AT TIME ZONE current_setting('TimeZone'))::date",
    "CURRENT_TIMESTAMP(0) <= now() + interval '1 second'",
)


def test_now_is_the_block_start_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """now() and its kin are one value for a whole transaction block, in reads, staged
    INSERTs and general writes alike; statement_timestamp() moves on; outside a block
    each statement has its own now()."""
    table = f"{table_name}_n"
    setup = [f"CREATE TABLE {table} (k int, a timestamptz DEFAULT now(), b timestamptz)"]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as conns:
        results = []
        for c in conns:
            c.execute("SET TimeZone = 'Asia/Kathmandu'")
            c.execute("BEGIN")
            row = c.execute("SELECT now(), statement_timestamp()").fetchone()
            assert row is not None
            at = {"n": row[0], "s": row[1]}
            c.execute("SELECT pg_sleep(0.01)")
            checks = [c.execute(f"SELECT {q}", at).fetchone() for q in BLOCK_CLOCK_CHECKS]
            c.execute(f"INSERT INTO {table} (k) VALUES (1)")  # staged (Headwater)
            c.execute(f"INSERT INTO {table} (k, a) SELECT 2, now()")  # a writing transaction
            c.execute(f"UPDATE {table} SET b = CURRENT_TIMESTAMP")
            stored = c.execute(
                f"SELECT bool_and(a = %(n)s AND b = %(n)s), count(*) FROM {table}", at
            ).fetchone()
            c.execute("COMMIT")
            after = c.execute("SELECT now() > %(n)s, pg_sleep(0.01)", at).fetchone()
            again = c.execute(f"SELECT bool_and(a = %(n)s) FROM {table}", at).fetchone()
            results.append((checks, stored, after, again))
        assert results[0] == results[1]
        assert all(row == (True,) for row in results[0][0]), results[0][0]


def test_a_view_over_rows_written_in_a_zone(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Change rows of a session outside UTC, from writing transactions and from the
    batcher, in one engine batch: their timestamptz columns carry different Arrow zone
    labels, which the engine could not concatenate (the view stalled)."""
    table = f"{table_name}_z"
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute(f"CREATE TABLE {table} (k int, at timestamptz)")
        c.execute(
            f"CREATE MATERIALIZED VIEW {table}_v AS"
            f" SELECT k, count(*) AS n, max(at) AS m FROM {table} GROUP BY k"
        )
        c.execute("SET TimeZone = 'Asia/Kathmandu'")
        c.execute("SET headwater.freshness_timeout = '60s'")
        for _ in range(10):
            c.execute(f"INSERT INTO {table} SELECT 1, now()")
            c.execute(f"INSERT INTO {table} VALUES (2, now())")
        got = c.execute(f"SELECT k, n, m FROM {table}_v ORDER BY k").fetchall()
        want = c.execute(f"SELECT k, count(*), max(at) FROM {table} GROUP BY k ORDER BY k")
        assert got == want.fetchall()
        c.execute(f"DROP MATERIALIZED VIEW {table}_v")


# -- ROLLBACK TO SAVEPOINT after writes the block made in its writing transaction (a
# statement the fast paths do not take: a non-key UPDATE, INSERT ... SELECT, a DELETE
# with CASCADE), before and after staged ones (server/transactions.py undo_writes)
SAVEPOINT_SETUP = [
    "CREATE TABLE {t} (id serial PRIMARY KEY, k int UNIQUE, v text)",
    "CREATE TABLE {t}_c (id int PRIMARY KEY, p int REFERENCES {t} ON DELETE CASCADE)",
    "INSERT INTO {t} (k, v) VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "INSERT INTO {t}_c VALUES (10, 1), (20, 2), (21, 2)",
]
SAVEPOINT_SCRIPT = [
    # staged before and after a savepoint, then a general write, then back
    "BEGIN",
    "INSERT INTO {t} (k, v) VALUES (4, 'd')",
    "SAVEPOINT a",
    "INSERT INTO {t} (k, v) VALUES (5, 'e')",
    "UPDATE {t} SET v = v || '!' WHERE v IN ('a', 'e')",  # the general path
    "SELECT k, v FROM {t} ORDER BY k",
    "ROLLBACK TO SAVEPOINT a",
    "SELECT k, v FROM {t} ORDER BY k",
    "INSERT INTO {t} (k, v) SELECT k + 10, v FROM {t} WHERE k < 3",
    "COMMIT",
    "SELECT k, v FROM {t} ORDER BY k",
    # in the writing transaction: nested savepoints, a failed statement, RELEASE
    "BEGIN",
    "UPDATE {t} SET v = 'u' WHERE k > 10",
    "SAVEPOINT a",
    "DELETE FROM {t} WHERE v = 'u'",
    "SAVEPOINT b",
    "UPDATE {t} SET k = k + 100 WHERE k < 4",
    "INSERT INTO {t} (k, v) SELECT 101, 'dup'",  # 23505 after the UPDATE above
    "SELECT 1",  # 25P02
    "ROLLBACK TO SAVEPOINT b",
    "SELECT k, v FROM {t} ORDER BY k",
    "ROLLBACK TO SAVEPOINT a",
    "SELECT k, v FROM {t} ORDER BY k",
    "SAVEPOINT c",
    "UPDATE {t} SET v = 'w' WHERE k = 11",
    "RELEASE SAVEPOINT c",
    "ROLLBACK TO SAVEPOINT a",  # takes back what followed c too
    "UPDATE {t} SET v = 'x' WHERE k = 12",
    "COMMIT",
    "SELECT k, v FROM {t} ORDER BY k",
    # point writes staged on both sides of a savepoint (one row twice), then back
    "BEGIN",
    "UPDATE {t} SET v = 'p' WHERE id = 1",
    "SAVEPOINT a",
    "UPDATE {t} SET v = 'q' WHERE id = 1",
    "DELETE FROM {t} WHERE id = 3",
    "UPDATE {t} SET v = v || '?' WHERE k > 0",
    "ROLLBACK TO SAVEPOINT a",
    "SELECT id, k, v FROM {t} ORDER BY id",
    "COMMIT",
    # a referenced row's DELETE cascades; back, then again
    "BEGIN",
    "SAVEPOINT a",
    "DELETE FROM {t} WHERE k = 2",
    "SELECT * FROM {t}_c ORDER BY id",
    "ROLLBACK TO SAVEPOINT a",
    "SELECT * FROM {t}_c ORDER BY id",
    "DELETE FROM {t} WHERE k = 1",
    "COMMIT",
    "SELECT id, k, v FROM {t} ORDER BY id",
    "SELECT * FROM {t}_c ORDER BY id",
    "SELECT last_value, is_called FROM {t}_id_seq",
]


def test_rollback_to_savepoint_after_writes_as_postgres(
    hw_server, pg_oracle, table_name: str
) -> None:  # type: ignore[no-untyped-def]
    """ROLLBACK TO SAVEPOINT takes back what a block wrote since the savepoint in its
    writing transaction as in PostgreSQL (it was 0A000), statement by statement; a
    materialized view over the table follows what was committed."""
    t = f"{table_name}_sp"
    setup = [sql.format(t=t) for sql in SAVEPOINT_SETUP]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        view = f"SELECT k % 2 AS odd, count(*), string_agg(v, ',' ORDER BY v) FROM {t} GROUP BY 1"
        hw.execute(f"CREATE MATERIALIZED VIEW {t}_mv AS {view}")
        for sql in SAVEPOINT_SCRIPT:
            sql = sql.format(t=t)
            got, want = (_run(c, sql, False) for c in (hw, pg))
            assert got == want, sql
        assert hw.execute(f"SELECT * FROM {t}_mv ORDER BY 1").fetchall() == (
            pg.execute(f"{view} ORDER BY 1").fetchall()
        )


def test_rollback_to_savepoint_refusals(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """What cannot be taken back is 0A000 naming why, and the block then takes ROLLBACK:
    a schema change since the savepoint; a statement DuckDB failed (its transaction
    takes nothing more). Nothing of the block is committed."""
    t = f"{table_name}_spr"
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v text)")
        c.execute(f"INSERT INTO {t} VALUES (1, 'a')")
        cases = [
            (f"CREATE TABLE {t}_x (a int)", None, "schema change"),
            (f"UPDATE {t} SET v = (k / 0)::text WHERE v = 'b'", "22012", "failed statement"),
        ]
        for statement, fails, why in cases:
            c.execute("BEGIN")
            c.execute(f"UPDATE {t} SET v = 'b' WHERE v = 'a'")
            c.execute("SAVEPOINT a")
            if fails:
                with pytest.raises(psycopg.Error) as err:
                    c.execute(statement)
                assert err.value.sqlstate == fails
            else:
                c.execute(statement)
            with pytest.raises(psycopg.errors.FeatureNotSupported, match=why):
                c.execute("ROLLBACK TO SAVEPOINT a")
            with pytest.raises(psycopg.errors.InFailedSqlTransaction):
                c.execute("SELECT 1")
            c.execute("ROLLBACK")
            assert c.execute(f"SELECT * FROM {t}").fetchall() == [(1, "a")]
        assert c.execute(f"SELECT to_regclass('{t}_x')").fetchone() == (None,)


DEFAULTS_COLUMNS = (
    "id int PRIMARY KEY, n int DEFAULT 0, b boolean DEFAULT true, s text DEFAULT '',"
    " v varchar(10) DEFAULT 'new', m numeric(6,2) DEFAULT 1.5, neg int DEFAULT -3,"
    " big bigint DEFAULT '42', f float8 DEFAULT 2.5, d date DEFAULT '2020-01-02',"
    " j jsonb DEFAULT '{}', ts timestamptz DEFAULT '2020-01-01 00:00:00+00',"
    " i2 int DEFAULT 1.6, c char(3) DEFAULT 'ab', u uuid DEFAULT gen_random_uuid()"
)


def test_constant_defaults_take_the_fast_path() -> None:
    """A column left out whose default is a constant (pg_get_expr's `0`, `''::text`,
    `'new'::character varying`) or gen_random_uuid() is filled in Python: before, such
    an INSERT was a writing transaction (~9 ms against ~1.7 for one client)."""
    table = _table(
        ("id", INT4, None),
        ("n", INT4, "0"),
        ("s", TEXT, "''::text"),
        ("neg", INT4, "'-3'::integer"),
    )
    fast = fast_rows(parse_sql("INSERT INTO t (id) VALUES (1)")[0].stmt, table, [], SessionFormat())
    assert fast is not None and fast.rows == [(1, 0, "", -3)]
    other = _table(("id", INT4, None), ("s", TEXT, "'x'::character varying || 'y'::text"))
    assert (
        fast_rows(parse_sql("INSERT INTO t (id) VALUES (1)")[0].stmt, other, [], SessionFormat())
        is None
    )
    uuids = _table(("id", TEXT, "gen_random_uuid()"), ("n", INT4, None))
    fast = fast_rows(
        parse_sql("INSERT INTO t (n) VALUES (1), (2)")[0].stmt, uuids, [], SessionFormat()
    )
    assert fast is not None and len({r[0] for r in fast.rows}) == 2


def test_constant_defaults_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """The rows stored, a RETURNING of the defaults, and the errors of a default that
    does not fit (22001, 22003) or is NULL for a NOT NULL column (23502) are PostgreSQL's."""
    table = f"{table_name}_d"
    setup = [
        f"CREATE TABLE {table} ({DEFAULTS_COLUMNS})",
        f"CREATE TABLE {table}_v (id int, v varchar(3) DEFAULT 'toolong')",
        f"CREATE TABLE {table}_s (id int, n smallint DEFAULT 70000)",
        f"CREATE TABLE {table}_n (id int, n int NOT NULL DEFAULT NULL)",
    ]
    statements = [
        f"INSERT INTO {table} (id) VALUES (1), (2)",
        f"INSERT INTO {table} (id, n) VALUES (3, 7) RETURNING n, b, s, v, m, neg, big, f, d, j,"
        " ts, i2, c",
        f"INSERT INTO {table}_v (id) VALUES (1)",
        f"INSERT INTO {table}_s (id) VALUES (1)",
        f"INSERT INTO {table}_n (id) VALUES (1)",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), table, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, statements)
        cols = "id, n, b, s, v, m, neg, big, f, d, j, ts, i2, c, u IS NOT NULL"
        got, want = (
            c.execute(f"SELECT {cols} FROM {table} ORDER BY id").fetchall() for c in (hw, pg)
        )
        assert got == want
        assert hw.execute(f"SELECT count(DISTINCT u) FROM {table}").fetchone() == (3,)


def test_on_conflict_do_nothing_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """An autocommitted INSERT ... ON CONFLICT DO NOTHING of constants takes the fast
    path (before: a writing transaction, ~11 ms for one client against ~1.2 now): rows
    colliding on its arbiter (any key without a target, the key its columns or
    ON CONSTRAINT name) with a live row or an earlier row of the statement are left out,
    of the command tag and RETURNING too, without their FOREIGN KEYs checked; a
    collision on another key is PostgreSQL's 23505."""
    t = f"{table_name}_oc"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, email text UNIQUE, n int DEFAULT 0)",
        f"CREATE UNIQUE INDEX {t}_lower ON {t} (lower(email))",
        f"CREATE TABLE {t}_c (id int PRIMARY KEY, p int REFERENCES {t} (id))",
        f"INSERT INTO {t} (id, email) VALUES (1, 'a@x.com'), (2, 'b@x.com')",
        f"INSERT INTO {t}_c VALUES (1, 1)",
    ]
    statements = [
        f"INSERT INTO {t} (id, email) VALUES (3, 'A@x.com') ON CONFLICT DO NOTHING RETURNING id",
        f"INSERT INTO {t} (id, email) VALUES (3, 'c@x.com'), (3, 'd@x.com'), (4, 'c@x.com'),"
        " (5, 'e@x.com') ON CONFLICT DO NOTHING RETURNING id, email, n",
        f"INSERT INTO {t} (id, email) VALUES (6, NULL), (7, NULL) ON CONFLICT DO NOTHING",
        f"INSERT INTO {t} (id, email) VALUES (1, 'f@x.com') ON CONFLICT (id) DO NOTHING",
        f"INSERT INTO {t} (id, email) VALUES (8, 'a@x.com') ON CONFLICT (id) DO NOTHING",
        f"INSERT INTO {t} (id, email) VALUES (8, 'a@x.com') ON CONFLICT (email) DO NOTHING",
        f"INSERT INTO {t} (id, email) VALUES (8, 'A@x.com') ON CONFLICT ON CONSTRAINT"
        f" {t}_pkey DO NOTHING",
        f"INSERT INTO {t}_c VALUES (1, 99), (2, 2) ON CONFLICT DO NOTHING RETURNING *",
        f"INSERT INTO {t}_c VALUES (3, 99) ON CONFLICT DO NOTHING",
        f"SELECT * FROM {t} ORDER BY id",
        f"SELECT * FROM {t}_c ORDER BY id",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        # (prepared, the second run: nothing new to insert)
        _assert_as_postgres(hw, pg, statements, (False, True), tags=True)


def test_on_conflict_targets_the_fast_path_takes() -> None:
    """DO NOTHING with no target, a key's columns or ON CONSTRAINT; DO UPDATE of the
    primary key's conflicts setting no key column, to EXCLUDED's value, a constant or
    t.c + k; the rest (an expression or partial index's inference, a WHERE) stays on
    the general path."""
    table = Table(
        1,
        "public",
        "t",
        (
            Column("id", ColumnType(INT4), True),
            Column("e", ColumnType(TEXT)),
            Column("n", ColumnType(INT4)),
        ),
        (Key("t_pkey", ("id",), True), Key("t_e_key", ("e",), False)),
    )
    fmt = SessionFormat()

    def fast(clause: str) -> Any:
        sql = f"INSERT INTO t VALUES (1, 'a', 5) ON CONFLICT {clause}"
        return fast_rows(parse_sql(sql)[0].stmt, table, [], fmt)

    for clause, skip in [
        ("DO NOTHING", "*"),
        ("(id) DO NOTHING", "t_pkey"),
        ("(e) DO NOTHING", "t_e_key"),
        ("ON CONSTRAINT t_e_key DO NOTHING", "t_e_key"),
    ]:
        got = fast(clause)
        assert got is not None and got.skip == skip and got.upsert is None, clause
    for clause, sets in [
        ("(id) DO UPDATE SET n = EXCLUDED.n", ((2, "excluded", 2),)),
        ("(id) DO UPDATE SET n = t.n - 2", ((2, "add", (2, -1, 2)),)),
        ("ON CONSTRAINT t_pkey DO UPDATE SET n = 7", ((2, "value", 7),)),
    ]:
        got = fast(clause)
        assert got is not None and got.upsert == sets, clause
    for clause in [
        "(id) DO UPDATE SET e = 'b'",
        "(e) DO UPDATE SET n = 1",
        "(id) DO UPDATE SET n = n + 1",
        "(id) DO UPDATE SET n = 1 WHERE t.n > 0",
        "(lower(e)) DO NOTHING",
        "(e) WHERE id > 0 DO NOTHING",
        "(id, e) DO NOTHING",
    ]:
        assert fast(clause) is None, clause


def test_upserts_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """An autocommitted INSERT of one row ... ON CONFLICT (primary key) DO UPDATE SET
    c = EXCLUDED.c / a constant / t.c + k is a point write (before: a writing
    transaction, ~12 ms for one client against ~1.7 now): inserted or updated, its
    RETURNING, its errors (another key taken, a CHECK, NOT NULL, a FOREIGN KEY, a sum
    out of range) and the rows are PostgreSQL's; several rows, a WHERE, and a block keep
    the general path."""
    t = f"{table_name}_up"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, email text UNIQUE, name text,"
        " n int NOT NULL DEFAULT 0, s smallint DEFAULT 0, CHECK (n < 100))",
        f"CREATE TABLE {t}_c (id int PRIMARY KEY, p int REFERENCES {t} (id))",
    ]
    up = f"INSERT INTO {t} AS t (id, email, name) VALUES"
    statements = [
        f"{up} (1, 'a@x.com', 'Ann') ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name"
        " RETURNING *",
        f"{up} (1, 'zz@x.com', 'Anne') ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name"
        " RETURNING id, email, name, n",
        f"{up} (1, 'a@x.com', 'x') ON CONFLICT (id) DO UPDATE SET n = t.n + 1 RETURNING n",
        f"{up} (1, 'a@x.com', 'x') ON CONFLICT (id) DO UPDATE SET n = t.n + 10, name = 'c'",
        f"{up} (1, 'a@x.com', 'x') ON CONFLICT (id) DO UPDATE SET n = t.n + 100",
        f"{up} (1, 'a@x.com', 'x') ON CONFLICT (id) DO UPDATE SET s = t.s + 40000",
        f"{up} (1, 'a@x.com', 'x') ON CONFLICT ON CONSTRAINT {t}_pkey DO UPDATE SET name = NULL",
        f"{up} (1, 'a@x.com', 'x') ON CONFLICT (id) DO UPDATE SET n = NULL",
        f"{up} (2, 'a@x.com', 'dup') ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name",
        f"{up} (3, 'c@x.com', 'C'), (3, 'd@x.com', 'D') ON CONFLICT (id)"
        " DO UPDATE SET name = EXCLUDED.name",
        f"{up} (1, 'f@x.com', 'F') ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name"
        " WHERE t.n > 100 RETURNING *",
        f"INSERT INTO {t}_c VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET p = EXCLUDED.p",
        f"INSERT INTO {t}_c VALUES (2, 99) ON CONFLICT (id) DO UPDATE SET p = EXCLUDED.p",
        f"DELETE FROM {t} WHERE id = 3",
        f"{up} (3, 'c@x.com', 'C2') ON CONFLICT (id) DO UPDATE SET n = t.n + 1 RETURNING *",
        f"SELECT * FROM {t} ORDER BY id",
        f"SELECT * FROM {t}_c ORDER BY id",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, statements)


def test_block_upserts_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """One row's ON CONFLICT (primary key) DO UPDATE in a transaction block (what
    SQLAlchemy and psycopg sessions send) is staged like the block's point writes and
    INSERTs, under the key's row lock: each result, error and the rows are PostgreSQL's
    (the key live, updated or inserted earlier in the block, deleted in it, another
    unique key taken, NOT NULL, a CHECK, ROLLBACK, a savepoint rolled back); and the
    block holds no write lock (before: a writing transaction from its first upsert,
    ~12 ms, other sessions' writes waiting for its COMMIT)."""
    t = f"{table_name}_bu"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, email text UNIQUE, name text,"
        " n int NOT NULL DEFAULT 0, CHECK (n < 100))",
        f"INSERT INTO {t} VALUES (1, 'a@x.com', 'Ann', 0), (2, 'b@x.com', 'Bob', 5)",
    ]
    up = f"INSERT INTO {t} AS t (id, email, name) VALUES"
    bump = "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, n = t.n + 1"
    rows = f"SELECT * FROM {t} ORDER BY id"
    statements = [
        "BEGIN",
        f"{up} (1, 'a@x.com', 'Anne') {bump} RETURNING *",
        f"{up} (1, 'a@x.com', 'Anna') {bump} RETURNING n, name",
        f"{up} (3, 'c@x.com', 'Cy') {bump} RETURNING *",
        f"{up} (3, 'c@x.com', 'Cyd') {bump} RETURNING *",  # inserted in the block
        f"{up} (4, 'd@x.com', 'Di') ON CONFLICT (id) DO UPDATE SET n = t.n - 1",
        rows,
        "COMMIT",
        rows,
        "BEGIN",
        f"{up} (2, 'q@x.com', 'Q') ON CONFLICT (id) DO UPDATE SET n = t.n + 50",
        "SAVEPOINT s",
        f"{up} (2, 'q@x.com', 'Q') ON CONFLICT (id) DO UPDATE SET n = t.n + 1",
        "ROLLBACK TO SAVEPOINT s",
        f"{up} (5, 'e@x.com', 'E') {bump}",
        "COMMIT",
        rows,
        "BEGIN",
        f"{up} (2, 'b@x.com', 'B') ON CONFLICT (id) DO UPDATE SET n = t.n + 100",  # CHECK
        "ROLLBACK",
        "BEGIN",
        f"{up} (1, 'a@x.com', 'A') ON CONFLICT (id) DO UPDATE SET n = NULL",
        "ROLLBACK",
        "BEGIN",
        f"{up} (6, 'a@x.com', 'dup') {bump}",  # another key taken: 23505
        "ROLLBACK",
        "BEGIN",
        f"DELETE FROM {t} WHERE id = 4",
        f"{up} (4, 'd2@x.com', 'D2') {bump} RETURNING *",  # deleted in the block
        f"UPDATE {t} SET name = 'x' WHERE id = 5",
        f"{up} (5, 'e@x.com', 'E2') {bump} RETURNING *",  # updated in the block
        "COMMIT",
        "BEGIN",
        f"{up} (7, 'g@x.com', 'G') {bump}",
        "ROLLBACK",
        "BEGIN",  # plain INSERTs after the block's point writes of the table
        f"{up} (2, 'b@x.com', 'B3') {bump}",
        f"INSERT INTO {t} VALUES (11, 'k@x.com', 'K') RETURNING *",
        f"INSERT INTO {t} VALUES (12, 'b@x.com', 'dup')",  # 23505
        "ROLLBACK",
        "BEGIN",
        f"{up} (2, 'b@x.com', 'B3') {bump}",
        f"INSERT INTO {t} VALUES (11, 'k@x.com', 'K')",
        f"UPDATE {t} SET n = n + 1 WHERE id = 11",
        "COMMIT",
        rows,
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, statements, prepared=(True,))
        with psycopg.connect(hw_server.dsn, autocommit=True) as other:
            other.execute(f"SET search_path = {t}")
            hw.execute("BEGIN")
            hw.execute(f"{up} (1, 'a@x.com', 'held') {bump}", prepare=True)
            hw.execute(f"{up} (8, 'h@x.com', 'H') {bump}", prepare=True)
            # another session's INSERT and UPDATE do not wait for this block (they waited
            # for its writing transaction's write lock); a general writer still waits for
            # its row locks, as for any block's point writes (server/key_locks.py drain)
            other.execute("SET statement_timeout = '5s'")
            other.execute(f"INSERT INTO {t} VALUES (9, 'i@x.com', 'I')")
            other.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 9")
            assert other.execute(f"SELECT name FROM {t} WHERE id IN (1, 8)").fetchall() == [
                ("Anna",)
            ]
            hw.execute("COMMIT")
            assert other.execute(
                f"SELECT id, name FROM {t} WHERE id IN (1, 8, 9) ORDER BY id"
            ).fetchall() == [(1, "held"), (8, "H"), (9, "I")]


def test_block_do_nothing_as_postgres(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """ON CONFLICT DO NOTHING on the primary key in a transaction block is staged, each
    new key locked until the block ends: results, errors and rows are PostgreSQL's
    (live, staged and repeated keys skipped, RETURNING of the rows inserted, another
    unique key taken, a FOREIGN KEY, a savepoint, keys the block deleted); a second
    session's DO NOTHING of a key a block staged waits for that block and then skips
    the row (it committed) or inserts it (it rolled back), as with PostgreSQL."""
    import threading

    t = f"{table_name}_dn"
    setup = [
        f"CREATE TABLE {t} (id int PRIMARY KEY, email text UNIQUE, name text)",
        f"CREATE TABLE {t}_p (id int PRIMARY KEY, name text)",
        f"CREATE TABLE {t}_c (id int PRIMARY KEY, p int REFERENCES {t}_p (id))",
        f"INSERT INTO {t} VALUES (1, 'a@x.com', 'A'), (2, 'b@x.com', 'B')",
        f"INSERT INTO {t}_p VALUES (1, 'one')",
    ]
    ins = f"INSERT INTO {t} VALUES"
    rows = f"SELECT * FROM {t} ORDER BY id"
    statements = [
        "BEGIN",
        f"{ins} (1, 'z@x.com', 'dup') ON CONFLICT (id) DO NOTHING",
        f"{ins} (20, 't@x.com', 'T'), (20, 'u@x.com', 'U') ON CONFLICT (id) DO NOTHING",
        f"{ins} (21, 'v@x.com', 'V') ON CONFLICT (id) DO NOTHING RETURNING *",
        f"{ins} (20, 'w@x.com', 'W') ON CONFLICT (id) DO NOTHING RETURNING id",
        f"INSERT INTO {t}_p VALUES (2, 'two'), (1, 'uno') ON CONFLICT DO NOTHING RETURNING *",
        "SAVEPOINT s",
        f"INSERT INTO {t}_p VALUES (3, 'three') ON CONFLICT DO NOTHING",
        "ROLLBACK TO SAVEPOINT s",
        rows,
        "COMMIT",
        rows,
        f"SELECT * FROM {t}_p ORDER BY id",
        "BEGIN",
        f"{ins} (30, 'a@x.com', 'taken') ON CONFLICT (id) DO NOTHING",  # 23505
        "ROLLBACK",
        "BEGIN",
        f"{ins} (31, 'a@x.com', 'skip') ON CONFLICT (email) DO NOTHING",  # (general)
        f"{ins} (32, 'c@x.com', 'C') ON CONFLICT DO NOTHING",
        f"INSERT INTO {t}_c VALUES (1, 99) ON CONFLICT DO NOTHING",  # 23503
        "ROLLBACK",
        "BEGIN",
        f"DELETE FROM {t}_p WHERE id = 2",
        f"INSERT INTO {t}_p VALUES (2, 'again') ON CONFLICT DO NOTHING RETURNING *",
        f"INSERT INTO {t}_c VALUES (1, 1) ON CONFLICT DO NOTHING",
        "COMMIT",
        f"SELECT * FROM {t}_p ORDER BY id",
        f"SELECT * FROM {t}_c ORDER BY id",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), t, setup) as (hw, pg):
        _assert_as_postgres(hw, pg, statements, prepared=(True,))
        with (
            psycopg.connect(hw_server.dsn, autocommit=True) as other,
            psycopg.connect(hw_server.dsn, autocommit=True) as third,
        ):
            other.execute(f"SET search_path = {t}")
            third.execute(f"SET search_path = {t}")
            for end, want in (("COMMIT", "INSERT 0 0"), ("ROLLBACK", "INSERT 0 1")):
                key = 40 if end == "COMMIT" else 41
                hw.execute("BEGIN")
                hw.execute(f"INSERT INTO {t}_p VALUES ({key}, 'block') ON CONFLICT DO NOTHING")
                # the block holds no write lock: other sessions' writes go on (they
                # waited for the block's writing transaction to end)
                writer = threading.Thread(
                    target=lambda k=key: third.execute(
                        f"INSERT INTO {t} VALUES ({k}, 'q{k}@x.com', 'q')"
                    )
                )
                writer.start()
                writer.join(5.0)
                wrote = not writer.is_alive()
                got: list[str] = []
                sql = f"INSERT INTO {t}_p VALUES ({key}, 'other') ON CONFLICT DO NOTHING"
                waiter = threading.Thread(
                    target=lambda sql=sql, got=got: got.append(
                        str(other.execute(sql).statusmessage)
                    )
                )
                waiter.start()
                waiter.join(1.0)
                waited = not got
                hw.execute(end)  # (first: a failed check must not leave the block open)
                writer.join(10)
                waiter.join(10)
                assert wrote, "a write of another session waited for the block"
                assert waited, "the second inserter of the key did not wait for the block"
                assert got == [want], end
            names = f"SELECT id, name FROM {t}_p WHERE id >= 40 ORDER BY id"
            assert other.execute(names).fetchall() == [(40, "block"), (41, "other")]


def test_concurrent_upserts_of_few_keys(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """8 clients upsert counters of 5 keys at once: every increment counts once."""
    import asyncio

    import asyncpg

    t = f"{table_name}_cu"
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, n int NOT NULL)")

    async def client(i: int) -> None:
        conn = await asyncpg.connect(
            host=hw_server.host,
            port=hw_server.port,
            user="headwater",
            database="headwater",
            ssl=False,
        )
        sql = f"INSERT INTO {t} AS t VALUES ($1, 1) ON CONFLICT (k) DO UPDATE SET n = t.n + 1"
        for j in range(50):
            await conn.execute(sql, (i + j) % 5)
        await conn.close()

    async def run() -> None:
        await asyncio.gather(*(client(i) for i in range(8)))

    asyncio.run(run())
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        assert c.execute(f"SELECT count(*), sum(n) FROM {t}").fetchone() == (5, 400)
        c.execute(f"DROP TABLE {t}")
