"""Generated columns (`GENERATED ALWAYS AS (expr) STORED`) against PostgreSQL 15: every
write computes them (INSERT, INSERT ... SELECT, UPDATE of what they read, ON CONFLICT DO
UPDATE, COPY; ALTER TABLE ADD COLUMN for the rows there are), a value of the
statement's own is refused (428C9), CHECKs see the
computed value; the catalog shows them (pg_attribute.attgenerated, information_schema,
psql's \\d); RENAME of a column they read follows, DROP of one is refused (2BP01).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb
import pytest
from headwater.catalog.objects import Check, Column, Table, from_json, to_json
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.types import INT2, INT4, INT8, NUMERIC, TEXT, ColumnType, numeric_typmod
from headwater.planner.pg_compat import install_functions
from headwater.server.batcher import fast_rows
from headwater.server.generated import fill_rows
from pglast import parse_sql

from headwater.errors import SQLError
from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_results_as_postgres, assert_same_as_postgres, psql_outputs

pytestmark = pytest.mark.oracle


def test_generated_columns_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(
        pg_oracle.dsn,
        hw_server.dsn,
        "gen_cols",
        [
            "CREATE TABLE items (id int PRIMARY KEY, price numeric(10,2), qty int,"
            " total numeric(12,2) GENERATED ALWAYS AS (price * qty) STORED, name text,"
            " slug text GENERATED ALWAYS AS (lower(replace(name, ' ', '-'))) STORED)",
            "INSERT INTO items (id, price, qty, name) VALUES (1, 2.50, 4, 'Big Thing'),"
            " (2, 1.00, NULL, 'x')",
            "INSERT INTO items VALUES (3, 1, 1, DEFAULT, 'A B', DEFAULT)",
            "INSERT INTO items VALUES (4, 1, 1, 5, 'A B', DEFAULT)",
            "INSERT INTO items (id, total) VALUES (5, 3)",
            "INSERT INTO items (id, price, qty, name) SELECT 6, 3, 3, 'Sel Ect'",
            "INSERT INTO items (id, slug) SELECT 7, 'x'",
            "SELECT * FROM items ORDER BY id",
            "UPDATE items SET qty = 10 WHERE id = 1",
            "UPDATE items SET total = 1 WHERE id = 1",
            "UPDATE items SET total = DEFAULT, name = 'New Name' WHERE id = 2",
            "INSERT INTO items (id, price, qty, name) VALUES (1, 9, 9, 'dup')"
            " ON CONFLICT (id) DO UPDATE SET qty = excluded.qty",
            "SELECT * FROM items ORDER BY id",
            "SELECT attname, attgenerated FROM pg_attribute"
            " WHERE attrelid = 'items'::regclass AND attnum > 0 ORDER BY attnum",
            "SELECT column_name, is_generated, column_default FROM information_schema.columns"
            " WHERE table_name = 'items' AND table_schema = current_schema"
            " ORDER BY ordinal_position",
            "CREATE TABLE g2 (a int, b int GENERATED ALWAYS AS (a + 1) STORED,"
            " c int GENERATED ALWAYS AS (b + 1) STORED)",
            "CREATE TABLE g3 (a int DEFAULT 1 GENERATED ALWAYS AS (2) STORED)",
            "CREATE TABLE g4 (a int, b int GENERATED ALWAYS AS (nosuch + 1) STORED)",
            "CREATE TABLE g5 (a int, b int GENERATED ALWAYS AS (a * 2) STORED CHECK (b < 10))",
            "INSERT INTO g5 (a) VALUES (3)",
            "INSERT INTO g5 (a) VALUES (6)",
            "ALTER TABLE g5 RENAME COLUMN a TO aa",
            "INSERT INTO g5 (aa) VALUES (4)",
            "ALTER TABLE g5 DROP COLUMN aa",
            "SELECT * FROM g5 ORDER BY aa",
            "ALTER TABLE g5 ADD COLUMN c int GENERATED ALWAYS AS (aa + b) STORED",
            "ALTER TABLE g5 ADD COLUMN d text GENERATED ALWAYS AS ('#' || aa) STORED",
            "ALTER TABLE g5 ADD COLUMN e int GENERATED ALWAYS AS (nosuch) STORED",
            "ALTER TABLE g5 ADD COLUMN f int DEFAULT 0 GENERATED ALWAYS AS (aa) STORED",
            "INSERT INTO g5 (aa) VALUES (1)",
            "UPDATE g5 SET aa = aa + 1",
            "SELECT * FROM g5 ORDER BY aa",
        ],
        ignore=("position",),
    )


def test_copy_and_psql(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """COPY FROM without a column list fills the other columns (PostgreSQL's default
    list leaves generated ones out); naming one is 428C9. psql's \\d shows them."""
    script = [
        "DROP TABLE IF EXISTS gen_copy",
        "CREATE TABLE gen_copy (a int, b int GENERATED ALWAYS AS (a * 10) STORED, c text)",
        "COPY gen_copy FROM STDIN\n1\tx\n2\t\\N\n",
        "COPY gen_copy (c, a) FROM STDIN\ny\t3\n",
        "COPY gen_copy (a, b) FROM STDIN\n4\t4\n",
        "SELECT * FROM gen_copy ORDER BY a",
    ]
    assert_results_as_postgres(hw_server.dsn, pg_oracle.dsn, script)
    setup = (
        "DROP TABLE IF EXISTS gen_psql; CREATE TABLE gen_psql (a int,"
        " b int GENERATED ALWAYS AS (a * 2) STORED, c text NOT NULL DEFAULT 'x');"
    )
    hw, pg = psql_outputs((hw_server.dsn, pg_oracle.dsn), setup, "\\d gen_psql\n")
    assert hw == pg
    assert "generated always as (a * 2) stored" in hw


def test_generated_column_in_the_stored_catalog() -> None:
    """The expression is kept with the column (the catalog's JSON in the change log)."""
    t = Table(
        16400,
        "public",
        "g",
        (Column("a", ColumnType(INT4)), Column("b", ColumnType(INT4), generated="a * 2")),
    )
    assert from_json(to_json(t)) == t
    assert from_json(to_json(t)).columns[1].generated == "a * 2"


def test_an_insert_of_constants_computes_them_on_the_fast_path() -> None:
    """An INSERT of constants into a table with generated columns is taken by the
    batcher (server/batcher.py `fast_rows`), which has DuckDB compute them for its rows
    (server/generated.py `fill_rows`: one statement, ~1.6 ms of server CPU per INSERT
    against ~14 ms as a writing transaction each); NOT NULL and CHECKs see the computed
    values; a statement naming a generated column stays on the general path (428C9)."""
    cols = (
        Column("price", ColumnType(NUMERIC, numeric_typmod(10, 2))),
        Column("qty", ColumnType(INT4)),
        Column("total", ColumnType(NUMERIC, numeric_typmod(12, 2)), generated="price * qty"),
        Column("name", ColumnType(TEXT)),
        Column("slug", ColumnType(TEXT), True, generated="lower(replace(name, ' ', '-'))"),
    )
    table = Table(16401, "public", "g", cols, checks=(Check("g_total", "total < 100"),))
    cur = duckdb.connect()

    def computed(t: Table, rows: list[list[Any]]) -> list[Any]:
        fill_rows(t, rows, cur)
        return []  # (no unique index keys)

    def insert(sql: str, generate: Any = computed) -> Any:
        return fast_rows(parse_sql(sql)[0].stmt, table, [], SessionFormat(), generate=generate)

    fast = insert("INSERT INTO g (price, qty, name) VALUES (2.5, 4, 'Big Thing'), (1, NULL, 'x')")
    assert fast is not None
    assert fast.rows == [
        (Decimal("2.50"), 4, Decimal("10.00"), "Big Thing", "big-thing"),
        (Decimal("1.00"), None, None, "x", "x"),
    ]
    assert insert("INSERT INTO g (price, qty, name) VALUES (1, 1, 'a')", None) is None
    assert insert("INSERT INTO g (price, total) VALUES (1, 5)") is None  # (428C9 there)
    with pytest.raises(SQLError) as e:  # the computed total fails the CHECK
        insert("INSERT INTO g (price, qty, name) VALUES (50, 3, 'big')")
    assert e.value.sqlstate == "23514"
    with pytest.raises(SQLError) as e:  # slug is NOT NULL: computed NULL from a NULL name
        insert("INSERT INTO g (price, qty) VALUES (1, 1)")
    assert e.value.sqlstate == "23502" and '"slug"' in e.value.message


def test_common_generation_expressions_are_computed_in_python() -> None:
    """+, -, * of integer and numeric columns and constants (in PostgreSQL's types), ||
    of text and lower()/upper() of ASCII text are computed in Python
    (server/fast_generated.py): the values, and the errors of an integer out of range,
    are DuckDB's for random rows; other shapes are left to DuckDB."""
    import random

    from headwater.server import fast_generated

    cols = (
        Column("i2", ColumnType(INT2)),
        Column("i4", ColumnType(INT4)),
        Column("i8", ColumnType(INT8)),
        Column("n", ColumnType(NUMERIC, numeric_typmod(10, 3))),
        Column("s", ColumnType(TEXT)),
    )
    exprs = {
        "g1": ("i4 * 2 + i2", ColumnType(INT8)),
        "g2": ("i2 * i2", ColumnType(INT4)),
        "g3": ("n * i4 - 1.5", ColumnType(NUMERIC, numeric_typmod(20, 2))),
        "g4": ("-i8 + 3000000000", ColumnType(INT8)),
        "g5": ("lower(s) || '-' || upper(s)", ColumnType(TEXT)),
        "g6": ("(i4 - n) * 2", ColumnType(INT4)),
    }
    table = Table(
        16406,
        "public",
        "g",
        (*cols, *(Column(k, t, generated=e) for k, (e, t) in exprs.items())),
    )
    assert fast_generated.compiled(table) is not None
    rng = random.Random(7)

    def value(col: Column) -> Any:
        if rng.random() < 0.15:
            return None
        pg = col.type.pg
        if pg is NUMERIC:
            return Decimal(rng.randint(-(10**9), 10**9)) / 1000
        if pg is TEXT:
            return "".join(rng.choice("aBc -Z9") for _ in range(rng.randint(0, 6)))
        bits = {INT2: 15, INT4: 31, INT8: 63}[pg]
        edge = rng.choice([1, 2**8, 2 ** (bits - 1) // 3, 2**bits - 1])
        return rng.randint(-edge, edge)

    cur = duckdb.connect()
    install_functions(cur)  # (the server's DuckDB functions: hw_text of ||)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        row = [value(c) for c in cols] + [None] * len(exprs)
        try:
            mine: Any = [row.copy()]
            fast_generated.fill(table, mine, SessionFormat())
            mine = mine[0]
        except SQLError as e:
            mine = e.sqlstate
        try:
            theirs: Any = [row.copy()]
            fill_rows(table, theirs, cur)
            theirs = theirs[0]
        except SQLError as e:
            theirs = e.sqlstate
        assert mine == theirs, row
        outcomes["error" if isinstance(mine, str) else "ok"] += 1
    assert outcomes["ok"] > 100 and outcomes["error"] > 10, outcomes
    for other in ("i4 / 2", "abs(i4)", "i4::text", "replace(s, 'a', 'b')", "s || i4"):
        t = Table(16407, "public", "h", (*cols, Column("x", ColumnType(TEXT), generated=other)))
        assert fast_generated.compiled(t) is None, other
    unicode = [[1, 1, 1, Decimal(1), "Ünï"] + [None] * len(exprs)]
    assert fast_generated.fill(table, unicode, SessionFormat()) is False
