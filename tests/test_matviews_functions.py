"""Materialized views over the date/time and formatting functions (planner/functions/),
against PostgreSQL 15: the view is maintained by the engine with the same rewrite the
serving path uses, so extract/date_part/to_char give PostgreSQL's text there too, on the
backfill and on rows written after the view was created.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import pq

pytestmark = pytest.mark.oracle

ROWS = [
    "(1, '2001-02-16 20:38:40.123456', '2001-02-16', 1234.50)",
    "(2, '2024-12-30 08:05:09', '2024-12-30', -0.01)",
    "(3, '1999-12-31 23:59:59.5', '2000-01-01', 98765.43)",
]
LATER = [
    "(4, '2020-02-29 12:00:00', '2020-02-29', 7.00)",
    "(5, NULL, NULL, NULL)",
]
VIEWS = {
    "rows": (
        "SELECT id, extract(year FROM ts) AS y, extract(epoch FROM ts) AS ep,"
        " extract(second FROM ts) AS sec, date_part('dow', d) AS dow,"
        " extract(week FROM d) AS wk, to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS Dy') AS t,"
        " to_char(d, 'FMMonth DDth, YYYY') AS dd, to_char(amount, 'FM9,999,990.00') AS amt"
        " FROM {t}"
    ),
    "years": (
        "SELECT extract(year FROM d) AS y, count(*) AS n, sum(amount) AS total"
        " FROM {t} GROUP BY extract(year FROM d)"
    ),
}


def text_rows(conn: psycopg.Connection, sql: str) -> list[tuple[str | None, ...]]:
    """The rows as the server's text, sorted (what psql would show)."""
    res = conn.pgconn.exec_(sql.encode())
    assert res.status == pq.ExecStatus.TUPLES_OK, res.error_message
    rows = [
        tuple(
            None if (v := res.get_value(r, c)) is None else bytes(v).decode()
            for c in range(res.nfields)
        )
        for r in range(res.ntuples)
    ]
    return sorted(rows, key=lambda row: tuple((v is None, v or "") for v in row))


def _views_as_postgres(
    hw: psycopg.Connection, pg: psycopg.Connection, t: str, views: dict[str, str], steps: list[str]
) -> None:
    """Create `views` over table `t` as materialized views, then after the backfill and
    after each of `steps` (run on both) each view and a read of its query print as
    PostgreSQL's query does."""
    for name, sql in views.items():
        hw.execute(f"CREATE MATERIALIZED VIEW {t}_{name} AS {sql.format(t=t)}")
    for step in ["backfill", *steps]:
        if step != "backfill":
            for conn in (hw, pg):
                conn.execute(step.format(t=t))
        for name, sql in views.items():
            want = text_rows(pg, sql.format(t=t))
            assert text_rows(hw, f"SELECT * FROM {t}_{name}") == want, (name, step)
            assert text_rows(hw, sql.format(t=t)) == want, (name, step, "read")


@contextlib.contextmanager
def _table_on_both(
    hw_server: Any, pg_oracle: Any, prefix: str, columns: str, first: str
) -> Iterator[tuple[psycopg.Connection, psycopg.Connection, str]]:
    """A table `prefix_<random> (columns)` on Headwater and PostgreSQL with the rows of
    the statement `first` ({t} its name): the two connections and the name."""
    t = f"{prefix}_{secrets.token_hex(3)}"
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        hw.execute("SET headwater.freshness_timeout = '600s'")
        for conn in (hw, pg):
            conn.execute(f"CREATE TABLE {t} ({columns})")
            conn.execute(first.format(t=t))
        yield hw, pg, t


def test_matview_extract_to_char(hw_server: Any, pg_oracle: Any) -> None:
    columns = "id int PRIMARY KEY, ts timestamp, d date, amount numeric(10,2)"
    first = f"INSERT INTO {{t}} VALUES {', '.join(ROWS)}"
    with _table_on_both(hw_server, pg_oracle, "fmt", columns, first) as (hw, pg, t):
        for name, sql in VIEWS.items():
            hw.execute(f"CREATE MATERIALIZED VIEW {t}_{name} AS {sql.format(t=t)}")
            pg.execute(f"CREATE VIEW {t}_{name} AS {sql.format(t=t)}")
        for name in VIEWS:  # the backfill
            assert text_rows(hw, f"SELECT * FROM {t}_{name}") == text_rows(
                pg, f"SELECT * FROM {t}_{name}"
            ), name
        for conn in (hw, pg):
            conn.execute(f"INSERT INTO {t} VALUES {', '.join(LATER)}")
            conn.execute(f"UPDATE {t} SET amount = amount + 1 WHERE id = 2")
        for name in VIEWS:  # maintained incrementally
            got = text_rows(hw, f"SELECT * FROM {t}_{name}")
            assert got == text_rows(pg, f"SELECT * FROM {t}_{name}"), name
        assert text_rows(hw, f"SELECT * FROM {t}_rows")[0] == (
            "1", "2001", "982355920.123456", "40.123456", "5", "7",
            "2001-02-16 20:38:40.123 Fri", "February 16th, 2001", "1,234.50",
        )  # fmt: skip


AVG_VIEWS = {
    # the linear aggregate rule (running sums): avg of integers and numerics exact
    "lin": "SELECT g, avg(i) AS ai, avg(n) AS an, avg(f) AS af, avg(i) FILTER (WHERE i > 1) AS fi,"
    " count(*) AS c, sum(n) AS sn FROM {t} GROUP BY g",
    # the general aggregate rule (touched groups recomputed): DISTINCT, and max beside avg
    "gen": "SELECT g, avg(DISTINCT i) AS di, avg(n) AS an, max(i) AS mi FROM {t} GROUP BY g",
    "all": "SELECT avg(i) AS ai, avg(n) AS an, sum(n) / count(*) AS q FROM {t}",
}
AVG_STEPS = [
    "INSERT INTO {t} VALUES (1, 1, 1.5, 1), (1, 2, 2.25, 2), (1, 2, 3, 3), (2, 7, NULL, NULL)",
    "INSERT INTO {t} VALUES (1, 5, 0.001, 1.5), (2, 8, 10, 2), (3, 2, 3.333, 0.1)",
    # (+ 2: the group's pair statistics come out the same in any order of its rows; with
    # + 1 they follow the order, PostgreSQL's heap order against an executor's list order)
    "UPDATE {t} SET i = i + 2, n = n * 3 - 1 WHERE g = 1 AND i < 3",
    "DELETE FROM {t} WHERE i = 8",
    "DELETE FROM {t} WHERE g = 3",
]


def test_matview_avg_prints_as_postgres(hw_server: Any, pg_oracle: Any) -> None:
    """avg in a view is PostgreSQL's exact numeric (1.6666666666666667, not a double's
    ...668) on the backfill and at every later write, as a read of the query gives it.
    (Not in the data: an avg whose first base-10000 digit is 1, e.g. avg(1.333) of one
    row, where PostgreSQL may show 4 more zeros than the value alone tells: see
    catalog/pgtypes/numeric.py quotient_scale.)"""
    with _table_on_both(
        hw_server, pg_oracle, "avg", "g int, i int, n numeric, f float8", AVG_STEPS[0]
    ) as (hw, pg, t):
        _views_as_postgres(hw, pg, t, AVG_VIEWS, AVG_STEPS[1:])


STATISTICS_VIEWS = {
    # integers and numerics: PostgreSQL's exact numeric, as reads give it; floats: float8
    "spread": "SELECT g, stddev(i) AS si, variance(n) AS vn, stddev_pop(n) AS pn,"
    " var_samp(f) AS vf, var_pop(i) FILTER (WHERE i > 1) AS fi, stddev(DISTINCT i) AS di"
    " FROM {t} GROUP BY g",
    # corr and regr_slope NULL where a variance is 0 (DuckDB: NaN); bit_* per group
    "pairs": "SELECT g, corr(f, i) AS c, covar_pop(f, i) AS cp, covar_samp(i, f) AS cs,"
    " regr_slope(f, i) AS rs, regr_intercept(f, i) AS ri, regr_count(f, i) AS rc,"
    " regr_sxx(f, i) AS sxx, regr_avgy(f, i) AS ay, bit_and(i) AS ba, bit_or(i) AS bo,"
    " bit_xor(i) AS bx FROM {t} GROUP BY g",
    "whole": "SELECT stddev(n) AS sn, variance(i) AS vi, regr_count(i, f) AS c FROM {t}",
    # PostgreSQL's interpolation, lo + p * (hi - lo) (DuckDB's: 54.995 for 9.99 and 100)
    "pct": "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY n) AS med,"
    " percentile_cont(0.3) WITHIN GROUP (ORDER BY f DESC) FILTER (WHERE i > 1) AS p3"
    " FROM {t} GROUP BY g",
}
STATISTICS_STEPS = [
    "INSERT INTO {t} VALUES (1, 1, 1.5, 1), (1, 3, 2.25, 2), (2, 7, 0.5, 0.5), (2, 7, 1, 4)",
    "INSERT INTO {t} VALUES (1, 5, 0.001, 3), (2, 9, 10, 2), (2, 5, 1, 1.5),"
    " (3, 2, 3.333, 0.25), (3, 2, 3.333, 0.25)",
    # (+ 2: the group's pair statistics come out the same in any order of its rows; with
    # + 1 they follow the order, PostgreSQL's heap order against an executor's list order)
    "UPDATE {t} SET i = i + 2, n = n * 3 - 1 WHERE g = 1 AND i < 3",
    "DELETE FROM {t} WHERE i = 9",
    "INSERT INTO {t} VALUES (2, 3, NULL, NULL), (3, 6, 4.5, 8)",
    "DELETE FROM {t} WHERE g = 3",
    "INSERT INTO {t} VALUES (4, 1, 9.99, 1), (4, 2, 100, 2)",
]


def test_matview_statistics_as_postgres(hw_server: Any, pg_oracle: Any) -> None:
    """stddev/variance (exact numerics of integers and numerics), corr, covar_*, regr_*
    and bit_* in views, on the backfill and after every write, print as PostgreSQL's
    query does. (Not in the data: var_pop/stddev_pop of one value or of equal values,
    which PostgreSQL prints as 0 and Headwater, in reads too, as 0.000...; floats
    whose sums of squares round, where PostgreSQL's Youngs-Cramer sums and DuckDB's
    differ in the last digit; and an UPDATE whose group's pair statistics depend on the
    order of its rows: PostgreSQL accumulates in heap order, the updated row last, and
    the Spark executor's list of the group's rows has another order.)"""
    with _table_on_both(
        hw_server, pg_oracle, "stat", "g int, i int, n numeric, f float8", STATISTICS_STEPS[0]
    ) as (hw, pg, t):
        _views_as_postgres(hw, pg, t, STATISTICS_VIEWS, STATISTICS_STEPS[1:])


SRF_VIEWS = {
    # a function in FROM reads the earlier items' columns (LATERAL is implicit)
    "tag_counts": "SELECT tag, count(*) AS n FROM {t}, unnest({t}.tags) AS tag GROUP BY tag",
    "by_author": "SELECT author, u.x, count(*) AS c FROM {t} CROSS JOIN LATERAL unnest(tags)"
    " AS u(x) GROUP BY author, u.x",
    "series": "SELECT p.id, g FROM {t} p JOIN generate_series(1, p.n) AS g ON g <> 2",
    "consts": "SELECT g, g * 2 AS d FROM generate_series(1, 4) AS g",
    # in the SELECT list: one row per element, several calls in lockstep (NULL-padded)
    "rows": "SELECT id, unnest(tags) AS tag, upper(unnest(tags)) AS up,"
    " generate_series(1, n) AS k FROM {t}",
    "distinct_tags": "SELECT DISTINCT unnest(tags) AS tag FROM {t}",
    # the unnested column unread above: it still repeats the row
    "ids": "SELECT id FROM (SELECT id, unnest(tags) AS tag FROM {t}) s",
    "grouped": "SELECT a, generate_series(1, c) AS k FROM (SELECT author AS a, count(*) AS c"
    " FROM {t} GROUP BY author) s",
}
SRF_STEPS = [
    "INSERT INTO {t} VALUES (1, 'ann', '{{sql,stream}}', 2), (2, 'bob', '{{sql}}', 0),"
    " (3, 'ann', NULL, 3), (4, 'cid', '{{}}', 1)",
    "INSERT INTO {t} VALUES (5, 'bob', '{{stream,rust,sql}}', 2), (6, 'dan', '{{a,b,c,d}}', NULL)",
    "UPDATE {t} SET tags = array_append(tags, 'go'), n = n + 1 WHERE id IN (1, 3)",
    "DELETE FROM {t} WHERE id = 2",
    "UPDATE {t} SET author = 'bob' WHERE id = 4",
]


def test_matview_set_returning_functions_as_postgres(hw_server: Any, pg_oracle: Any) -> None:
    """unnest() and generate_series() in a view's FROM (correlated or not) and SELECT
    list give one row per element, maintained through inserts, updates and deletes as
    PostgreSQL's query gives them; a view reading the rows without the element column
    still repeats them, and an aggregate's groups repeated are read as repeated."""
    with _table_on_both(
        hw_server,
        pg_oracle,
        "srf",
        "id int PRIMARY KEY, author text, tags text[], n int",
        SRF_STEPS[0],
    ) as (hw, pg, t):
        _views_as_postgres(hw, pg, t, SRF_VIEWS, SRF_STEPS[1:])
        why = hw.execute(
            "SELECT executor_reason FROM headwater_catalog.views WHERE name = %s", (f"{t}_rows",)
        ).fetchone()
        assert why is not None and "set-returning function" in why[0]
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="WITH ORDINALITY"):
            hw.execute(f"CREATE MATERIALIZED VIEW {t}_o AS SELECT * FROM {t}, unnest(tags)"
                       " WITH ORDINALITY AS u(x, i)")  # fmt: skip


JSONB_VIEWS = {
    # a jsonb column's operators, as a cast to jsonb has them (they failed on a bare
    # column: DuckDB has no @> for JSON, and `?` is its parameter marker)
    "ops": "SELECT id, j -> 'b' AS b, j ? 'a' AS has_a, j @> '{{\"a\": 1}}' AS a1,"
    " j - 'a' AS rest, j #> '{{b,c}}' AS bc, j #>> '{{b,d}}' AS bd, j || '{{\"z\": 1}}' AS z"
    " FROM {t}",
    "keyed": "SELECT j ->> 'a' AS a, count(*) AS n FROM {t} WHERE j ?| array['a', 'q']"
    " GROUP BY j ->> 'a'",
    "renamed": "SELECT s.id FROM (SELECT id, j AS doc FROM {t}) s"
    ' WHERE s.doc @> \'{{"t": ["x"]}}\' OR \'{{"q": 0}}\' <@ s.doc',
}
JSONB_STEPS = [
    """INSERT INTO {t} VALUES (1, '{{"a": 1, "b": {{"c": [1, 2], "d": "x"}}, "e": null}}'),"""
    """ (2, '{{"a": 2, "t": ["x", "y"]}}'), (3, NULL)""",
    """UPDATE {t} SET j = j || '{{"q": 0}}' WHERE j @> '{{"a": 2}}'""",
    "DELETE FROM {t} WHERE j ? 'e'",
    """INSERT INTO {t} VALUES (4, '{{"a": 1, "t": ["x"]}}'), (5, '[1, 2]')""",
    "UPDATE {t} SET j = j #- '{{t,0}}' WHERE j ?& array['a', 't'] AND id = 4",
]


def test_jsonb_columns_as_postgres(hw_server: Any, pg_oracle: Any) -> None:
    """@>, <@, ?, ?|, ?&, ->, ->>, #>, #>>, ||, - and #- on a jsonb column (not only on a
    cast to jsonb) in reads, views, and UPDATE/DELETE conditions, as PostgreSQL's."""
    with _table_on_both(
        hw_server, pg_oracle, "jb", "id int PRIMARY KEY, j jsonb", JSONB_STEPS[0]
    ) as (hw, pg, t):
        _views_as_postgres(hw, pg, t, JSONB_VIEWS, JSONB_STEPS[1:])
        assert text_rows(hw, f"SELECT * FROM {t}") == text_rows(pg, f"SELECT * FROM {t}")


TYPED_VIEWS = {
    # rewrites that need an operand's type, from the table's columns (they saw only
    # casts): real op integer is double precision (DuckDB: real), time - time an
    # interval, timestamptz::time in the session's zone, bytea's functions, a
    # numeric(12,2)'s scale in json
    "typed": "SELECT id, price / 3 AS third, price * qty AS total, qty / price AS per,"
    " price + 0.1 AS more, t - time '00:00:01' AS before, t - t AS zero, d - d AS days,"
    " created::time AS tod, length(b) AS len, substring(b from 2 for 2) AS mid,"
    " json_build_object('amount', amount)::text AS doc FROM {t}",
    # json_agg of json values keeps each one's text (PostgreSQL's spacing, 1234.50),
    # ", " between them (not a composite's line break)
    "totals": "SELECT count(*) AS n, json_agg(json_build_object('id', id, 'amount', amount)"
    " ORDER BY id) AS docs FROM {t}",
}
TYPED_STEPS = [
    "INSERT INTO {t} VALUES (1, 2.5, 3, 1234.50, '12:00:01', '2024-03-10',"
    " '2024-03-10 12:34:56.789+00', '\\xdeadbeef'), (2, 0.1, 7, -0.5, '00:00:00',"
    " '2023-12-31', '2023-12-31 23:59:59+00', NULL), (3, NULL, NULL, NULL, NULL, NULL, NULL, '')",
    "UPDATE {t} SET price = price * 3, qty = qty + 1, amount = amount * 2 WHERE id = 1",
    "INSERT INTO {t} VALUES (4, 1e-3, 11, 0.01, '23:59:59.5', '2020-02-29',"
    " '2020-02-29 23:00:00-05', '\\x00ff')",
    "DELETE FROM {t} WHERE id = 2",
]


def test_operators_by_column_types_as_postgres(hw_server: Any, pg_oracle: Any) -> None:
    """Operators and functions whose translation depends on an operand's type, on
    columns of the table (planner/scope.py `column_types`), in a view and a read, as
    PostgreSQL's: `1::real / 3` was 0.33333334 for a real column where PostgreSQL's is
    0.3333333333333333, `t - t` and `tstz::time` errors, `length(b)` an error."""
    columns = (
        "id int PRIMARY KEY, price real, qty int, amount numeric(12,2), t time, d date,"
        " created timestamptz, b bytea"
    )
    with _table_on_both(hw_server, pg_oracle, "ty", columns, TYPED_STEPS[0]) as (hw, pg, t):
        _views_as_postgres(hw, pg, t, TYPED_VIEWS, TYPED_STEPS[1:])
        for conn in (hw, pg):
            conn.execute("SET TimeZone = 'Asia/Tokyo'")
        q = f"SELECT id, created::time, created::date FROM {t}"
        assert text_rows(hw, q) == text_rows(pg, q)


# numbers whose text DuckDB (and Spark) print otherwise: '0.0', '1000000000000000.0',
# 'nan', 'inf', a float4's digits, 16 decimals of an unconstrained numeric
NUMBER_ROWS = [
    "(1, 0, 0, 1.5, 3)",
    "(2, 1e15, 1e6, 2, 4)",
    "(3, 'NaN', 'Infinity', NULL, NULL)",
    "(4, '-0', '-0', 0.125, 0)",
    "(5, 1234567890123456, 123456789, 1, 1)",
    "(6, 1e-5, 0.1, 100, -7)",
    "(7, '-Infinity', 16777217, 12345.5, 2)",
    "(8, 9007199254740993, 3.4e38, -2.5, 5)",
]
NUMBER_LATER = [
    "INSERT INTO {t} VALUES (9, 1e16, 1.5e-5, 7, 6), (10, 0.1, 1e-45, 3, 1),"
    " (11, -0.0, -0.0, 1, 1)",
    "UPDATE {t} SET d = d * 2, r = r / 4 WHERE id IN (1, 2, 5, 6)",
]
NUMBER_VIEWS = {
    "texts": (
        "SELECT id, d::text AS dt, CAST(r AS varchar) AS rt, n::text AS nt, (n / 7)::text AS q,"
        " 'd=' || d || ', r=' || r AS cat, (d * 2)::text AS d2, (i::float8 / 8)::text AS f"
        " FROM {t}"
    ),
    "joined": "SELECT i % 2 AS k, string_agg(d::text, ',' ORDER BY id) AS ds FROM {t}"
    " GROUP BY i % 2",
}


def test_numbers_as_text_as_postgres(hw_server: Any, pg_oracle: Any) -> None:
    """float8, real and numeric values cast to text or concatenated with text print as
    PostgreSQL prints them (not DuckDB's '0.0', '1000000000000000.0', 'nan', 'inf', nor
    an unconstrained numeric's 16 decimals), in reads and in views maintained by the
    engine, with the output column names PostgreSQL gives casts of casts."""
    columns = "id int PRIMARY KEY, d float8, r real, n numeric, i int"
    first = f"INSERT INTO {{t}} VALUES {', '.join(NUMBER_ROWS)}"
    with _table_on_both(hw_server, pg_oracle, "ntext", columns, first) as (hw, pg, t):
        _views_as_postgres(hw, pg, t, NUMBER_VIEWS, NUMBER_LATER)
        consts = (
            "SELECT 0.0::float8::text, 'nan'::float8::text, 1e15::float8::text,"
            " 1.5::real::text, 100::float8::text, 2.50::numeric::text, 1::int::text"
        )
        for conn in (hw, pg):
            conn.execute(consts)
        got = hw.execute(consts)
        assert [d.name for d in got.description] == ["text"] * 7
        assert got.fetchall() == pg.execute(consts).fetchall()
