"""End to end through psycopg: DDL, DML, transactions, errors."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from psycopg import errors


def test_create_insert_select(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, name text NOT NULL, amount numeric(10,2))")
    cur = conn.execute(f"INSERT INTO {t} VALUES (1, 'a', 1.5), (2, 'b', NULL)")
    assert cur.statusmessage == "INSERT 0 2"
    rows = conn.execute(f"SELECT id, name, amount FROM {t} ORDER BY id").fetchall()
    assert rows == [(1, "a", Decimal("1.50")), (2, "b", None)]


def test_update_delete_returning(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
    conn.execute(f"INSERT INTO {t} SELECT x, x * 10 FROM generate_series(1, 5) AS g(x)")
    cur = conn.execute(f"UPDATE {t} SET v = v + 1 WHERE id <= 2 RETURNING id, v")
    assert sorted(cur.fetchall()) == [(1, 11), (2, 21)]
    assert cur.statusmessage == "UPDATE 2"
    cur = conn.execute(f"DELETE FROM {t} WHERE id > 3")
    assert cur.statusmessage == "DELETE 2"
    assert conn.execute(f"SELECT sum(v) FROM {t}").fetchone() == (62,)


def test_errors_keep_connection(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, name text NOT NULL)")
    conn.execute(f"INSERT INTO {t} VALUES (1, 'a')")
    with pytest.raises(errors.UniqueViolation):
        conn.execute(f"INSERT INTO {t} VALUES (1, 'b')")
    with pytest.raises(errors.NotNullViolation):
        conn.execute(f"INSERT INTO {t} VALUES (2, NULL)")
    with pytest.raises(errors.UndefinedTable):
        conn.execute("SELECT * FROM no_such_table")
    with pytest.raises(errors.UndefinedColumn):
        conn.execute(f"SELECT no_such_column FROM {t}")
    with pytest.raises(errors.DivisionByZero):
        conn.execute("SELECT 1/0")
    with pytest.raises(errors.InvalidTextRepresentation):
        conn.execute(f"INSERT INTO {t} VALUES ('abc', 'x')")
    assert conn.execute(f"SELECT count(*) FROM {t}").fetchone() == (1,)


def test_transaction_rollback_and_failed_block(hw_server, table_name: str) -> None:
    t = table_name
    with psycopg.connect(hw_server.dsn) as c:  # psycopg opens a transaction block itself
        c.execute(f"CREATE TABLE {t} (id int)")
        c.commit()
        c.execute(f"INSERT INTO {t} VALUES (1)")
        assert c.execute(f"SELECT count(*) FROM {t}").fetchone() == (1,)
        c.rollback()
        assert c.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,)
        c.execute(f"INSERT INTO {t} VALUES (2)")
        with pytest.raises(errors.DivisionByZero):
            c.execute("SELECT 1/0")
        with pytest.raises(errors.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        c.execute(f"INSERT INTO {t} VALUES (3)")
        c.commit()
        assert c.execute(f"SELECT id FROM {t}").fetchall() == [(3,)]


def test_other_session_sees_commit_only_after_commit(hw_server, table_name: str) -> None:
    t = table_name
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as a,
        psycopg.connect(hw_server.dsn, autocommit=True) as b,
    ):
        a.execute(f"CREATE TABLE {t} (id int)")
        a.execute("BEGIN")
        a.execute(f"INSERT INTO {t} VALUES (1)")
        assert b.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,)
        a.execute("COMMIT")
        assert b.execute(f"SELECT count(*) FROM {t}").fetchone() == (1,)


def test_views(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (id int, g text)")
    conn.execute(f"INSERT INTO {t} VALUES (1, 'x'), (2, 'x'), (3, 'y')")
    conn.execute(f"CREATE VIEW {t}_v AS SELECT g, count(*) AS n FROM {t} GROUP BY g")
    conn.execute(f"CREATE VIEW {t}_vv AS SELECT * FROM {t}_v WHERE n > 1")
    assert conn.execute(f"SELECT g, n FROM {t}_vv").fetchall() == [("x", 2)]
    with pytest.raises(errors.DependentObjectsStillExist):
        conn.execute(f"DROP TABLE {t}")
    conn.execute(f"DROP TABLE {t} CASCADE")
    with pytest.raises(errors.UndefinedTable):
        conn.execute(f"SELECT * FROM {t}_vv")


def test_on_conflict(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v text)")
    conn.execute(f"INSERT INTO {t} VALUES (1, 'a')")
    cur = conn.execute(f"INSERT INTO {t} VALUES (1, 'b'), (2, 'c') ON CONFLICT DO NOTHING")
    assert cur.statusmessage == "INSERT 0 1"
    conn.execute(
        f"INSERT INTO {t} VALUES (1, 'z') ON CONFLICT (k) DO UPDATE SET v = excluded.v || {t}.v"
    )
    assert conn.execute(f"SELECT k, v FROM {t} ORDER BY k").fetchall() == [(1, "za"), (2, "c")]


def test_copy_in_and_out(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (id int, name text, d date)")
    with conn.cursor().copy(f"COPY {t} FROM STDIN") as cp:
        cp.write("1\ta\\tb\t2024-01-02\n2\t\\N\t\\N\n")
    with conn.cursor().copy(f"COPY {t} (id, name) FROM STDIN WITH (FORMAT csv)") as cp:
        cp.write('3,"x,y"\n4,""\n5,\n')
    rows = conn.execute(f"SELECT id, name FROM {t} ORDER BY id").fetchall()
    assert rows == [(1, "a\tb"), (2, None), (3, "x,y"), (4, ""), (5, None)]
    out = bytearray()
    with conn.cursor().copy(
        f"COPY (SELECT id, name, d FROM {t} WHERE id <= 2 ORDER BY id) TO STDOUT"
    ) as cp:
        for chunk in cp:
            out += chunk
    assert bytes(out) == b"1\ta\\tb\t2024-01-02\n2\t\\N\t\\N\n"


def test_indexes(conn: psycopg.Connection, table_name: str) -> None:
    t = table_name
    conn.execute(f"CREATE TABLE {t} (a int, b text)")
    conn.execute(f"INSERT INTO {t} VALUES (1, 'x'), (2, 'x')")
    conn.execute(f"CREATE INDEX {t}_b ON {t} (b)")
    with pytest.raises(errors.UniqueViolation):
        conn.execute(f"CREATE UNIQUE INDEX {t}_bu ON {t} (b)")
    conn.execute(f"CREATE UNIQUE INDEX {t}_au ON {t} (a)")
    with pytest.raises(errors.UniqueViolation):
        conn.execute(f"INSERT INTO {t} VALUES (1, 'y')")
    conn.execute(f"DROP INDEX {t}_au")
    conn.execute(f"INSERT INTO {t} VALUES (1, 'y')")
    conn.execute(f"DROP INDEX {t}_b")
    assert conn.execute(f"SELECT count(*) FROM {t}").fetchone() == (3,)


def test_expression_and_partial_indexes(conn: psycopg.Connection, table_name: str) -> None:
    """Expression, partial and GIN indexes (migrations create them) are catalog entries,
    shown by pg_get_indexdef as PostgreSQL shows them; a missing column is 42703 (UNIQUE
    ones are enforced: tests/test_unique_indexes.py)."""
    t = table_name
    conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, email text, data jsonb, at date)")
    conn.execute(f"CREATE INDEX {t}_lower ON {t} (lower(email))")
    conn.execute(f"CREATE INDEX {t}_recent ON {t} (at) WHERE email IS NOT NULL")
    conn.execute(f"CREATE INDEX {t}_gin ON {t} USING gin (data)")
    conn.execute(f"CREATE INDEX ON {t} (upper(email))")
    defs = dict(
        conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (t,)
        ).fetchall()
    )
    assert defs[f"{t}_lower"] == f"CREATE INDEX {t}_lower ON public.{t} USING btree (lower(email))"
    assert defs[f"{t}_recent"] == (
        f"CREATE INDEX {t}_recent ON public.{t} USING btree (at) WHERE (email IS NOT NULL)"
    )
    assert defs[f"{t}_gin"] == f"CREATE INDEX {t}_gin ON public.{t} USING gin (data)"
    assert f"{t}_upper_idx" in defs
    with pytest.raises(errors.UndefinedColumn):
        conn.execute(f"CREATE INDEX {t}_bad ON {t} (lower(nosuch))")
    conn.execute(f"INSERT INTO {t} VALUES (1, 'A@x', '{{}}', '2024-01-01')")
    assert conn.execute(f"SELECT id FROM {t} WHERE lower(email) = 'a@x'").fetchall() == [(1,)]
    conn.execute(f"DROP INDEX {t}_lower")


def test_acknowledged_writes_visible_to_other_sessions(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    import asyncpg

    async def run() -> None:
        async def connect() -> asyncpg.Connection:
            return await asyncpg.connect(
                host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
            )

        admin = await connect()
        await admin.execute(f"CREATE TABLE {table_name} (id int PRIMARY KEY)")
        writers = [await connect() for _ in range(8)]
        reader = await connect()
        for round_ in range(20):
            ids = [round_ * 8 + i for i in range(8)]
            await asyncio.gather(
                *(
                    w.execute(f"INSERT INTO {table_name} VALUES ($1)", i)
                    for w, i in zip(writers, ids, strict=True)
                )
            )
            # every acknowledged insert is visible to a session that did not write it
            assert await reader.fetchval(f"SELECT count(*) FROM {table_name}") == len(ids) * (
                round_ + 1
            )
        for c in [admin, reader, *writers]:
            await c.close()

    asyncio.run(run())


def test_returning_with_bound_parameters(conn: psycopg.Connection, table_name: str) -> None:
    """Parameters used only by RETURNING, or not by it, bind by number (DuckDB takes
    exactly those a statement names); the session stays usable."""
    conn.execute(f"CREATE TABLE {table_name} (id int PRIMARY KEY, v int)")
    assert conn.execute(
        f"INSERT INTO {table_name} VALUES (%s, %s) RETURNING id", (1, 5)
    ).fetchall() == [(1,)]
    assert conn.execute(
        f"INSERT INTO {table_name} VALUES (%s, %s) RETURNING id + %s", (2, 5, 10)
    ).fetchall() == [(12,)]
    assert conn.execute(
        f"UPDATE {table_name} SET v = %s WHERE id = %s RETURNING v", (7, 1)
    ).fetchall() == [(7,)]
    assert conn.execute(f"DELETE FROM {table_name} WHERE id = %s RETURNING *", (2,)).fetchall() == [
        (2, 5)
    ]
    assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_columns_named_like_duckdb_keywords(conn: psycopg.Connection, table_name: str) -> None:
    """`at`, `qualify`, `semi` are plain identifiers in PostgreSQL, reserved in DuckDB."""
    conn.execute(f"CREATE TABLE {table_name} (at int, qualify text, semi int)")
    conn.execute(f"INSERT INTO {table_name} VALUES (1, 'x', 2)")
    cur = conn.execute(f"SELECT at, qualify, semi + at FROM {table_name} WHERE at = 1")
    assert cur.fetchall() == [(1, "x", 3)]
    assert [d.name for d in cur.description] == ["at", "qualify", "?column?"]


# ---------------------------------------------------------------------------
# Differential checks: the same statements on Headwater and on PostgreSQL 15 give the
# same text output, result column types (RowDescription OIDs) and SQLSTATEs.


@pytest.fixture(scope="module")
def pg(pg_oracle) -> Iterator[psycopg.Connection]:  # type: ignore[no-untyped-def]
    with psycopg.connect(pg_oracle.dsn, autocommit=True) as c:
        yield c


def _outcome(conn: psycopg.Connection, sql: str) -> object:
    """(column type OIDs, rows as the server's text) or the error's SQLSTATE."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
    except psycopg.Error as e:
        return f"ERROR {e.sqlstate}"
    if cur.description is None or cur.pgresult is None:
        return cur.statusmessage
    res = cur.pgresult
    types = [d.type_code for d in cur.description]
    cells = [[res.get_value(r, c) for c in range(res.nfields)] for r in range(res.ntuples)]
    rows = [tuple(None if v is None else v.decode() for v in row) for row in cells]
    return types, rows


def assert_same_as_postgres(
    conn: psycopg.Connection, pg: psycopg.Connection, statements: list[str]
) -> None:
    failures = []
    for sql in statements:
        want, got = _outcome(pg, sql), _outcome(conn, sql)
        if got != want:
            failures.append(f"{sql}\n    PostgreSQL: {want}\n    Headwater:  {got}")
    assert not failures, "\n".join(failures)


def test_interval_times_and_divided_by_numbers(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            "SELECT interval '1 hour' / 2, interval '10 days' / 3, interval '1 day' * 1.5",
            "SELECT interval '1 mon' / 3, interval '1 mon' / 7, interval '1 hour' / 2.5",
            "SELECT interval '1 hour' / 2::bigint, interval '1 hour' / 2::smallint, "
            "interval '1 hour' / 3.0::float4, interval '1 day' / 1.5::numeric",
            "SELECT interval '1 mon 3 days 01:02:03.123456' / 0.37, "
            "interval '-1 mon 3 days -01:02:03.123456' / 7, interval '1 year 2 mons' * 0.3",
            "SELECT interval '1' second / 20, 2 * interval '1 day', 1.5 * interval '1 day'",
            "SELECT interval '1 hour' / NULL, NULL::interval / 2, 7 / 2, -7 / 2",
            "SELECT interval '1 hour' / 0",
            f"CREATE TABLE {t} (n numeric, i int, d float8, v interval, n2 numeric(10,2))",
            f"INSERT INTO {t} VALUES (1.5, 3, 0.5, '1 day 02:00', 2.25), (1, 7, 2, '1 mon', 1), "
            "(2, 2, 4, NULL, 3)",
            f"SELECT v / n, v / i, v / d, v / n2, v * n, n * v, v * i FROM {t} ORDER BY i",
            f"SELECT max(v) / count(*), max(v / i) FROM {t}",
            f"SELECT count(*) FROM {t} WHERE v / i < interval '10 hours'",
        ],
    )


def test_brace_constants_are_text_unless_arrays(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """'{1,2}' is text where PostgreSQL types it text; an array where it must be one."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            "SELECT '{1,2}', '{1,2}'::text, 'x' || '{1,2}', upper('{a,b}'), '{1,2}' = '{1,2}'",
            "SELECT '{1,2}'::int[], CAST('{1,2}' AS bigint[]), '{-1, 2 }'::int[], '{}'::int[]",
            "SELECT '{a,b}'::text[], '{\"a b\",NULL,\"NULL\",c}'::text[], '{1.5,2}'::numeric[]",
            "SELECT '{NULL,2}'::int[], '{t,f}'::bool[], ARRAY[1,2] = '{1,2}'",
            "SELECT ARRAY[1,2] <@ '{1,2,3}', '{1}' <@ ARRAY[1,2], ARRAY[3] && '{1,3}'",
            f"CREATE TABLE {t} (id int, s text)",
            f"INSERT INTO {t} VALUES (1, '{{1,2}}'), (2, '{{a,b}}'), (3, 'z')",
            f"SELECT id, s FROM {t} WHERE s = '{{a,b}}'",
            f"SELECT s, s || '{{x}}' FROM {t} ORDER BY id",
        ],
    )


def test_any_all_with_null_arrays(conn, pg) -> None:  # type: ignore[no-untyped-def]
    assert_same_as_postgres(
        conn,
        pg,
        [
            "SELECT 1 = ANY(NULL::int[]), 1 = ALL(NULL::int[]), 1 <> ALL(NULL::int[]), "
            "NOT (1 = ANY(NULL::int[])), 1 = SOME(NULL::int[]), 1 = ANY(NULL)",
            "SELECT 1 = ANY('{2,NULL}'::int[]), 2 = ANY('{2,NULL}'::int[]), "
            "1 = ALL('{1,NULL}'::int[]), 1 = ALL('{2,NULL}'::int[]), "
            "1 <> ALL('{2,NULL}'::int[]), 1 <> ALL('{1,NULL}'::int[])",
            "SELECT NULL::int = ANY('{}'::int[]), NULL::int = ALL('{}'::int[]), "
            "NULL::int = ANY('{1}'::int[]), NULL::int = ALL('{1}'::int[]), "
            "1 = ANY('{}'::int[]), 1 < ALL('{}'::int[])",
            "SELECT 1 = SOME(ARRAY[1,NULL]), 3 > ALL(ARRAY[1,2]), 3 > ALL(ARRAY[1,NULL]), "
            "0 > ALL(ARRAY[1,NULL]), NOT (3 = ANY(ARRAY[1,NULL])), NOT (3 <> ALL(ARRAY[1,NULL]))",
            "SELECT 'a' = ANY('{a,b}'), 'c' = ANY('{a,b}'), 1 = ANY('{1,2}'), 3 = ANY('{1,2}'), "
            "3 <> ALL('{1,2}'), 1 = ANY('{}'), 1 = ANY('{NULL,1}'), 2 = ANY('{NULL,1}')",
            "SELECT NULL::int = ANY('{}'), 1 = SOME('{1}'), "
            "2 > ALL('{1,NULL}'), 0 > ALL('{1,NULL}')",
            "WITH c(id, a) AS (VALUES (1, ARRAY[1,2]), (2, NULL), (3, ARRAY[3,NULL])) "
            "SELECT id, a = '{1,2}', 1 = ANY(a), 3 = ALL(a), NOT (2 = ANY(a)), id = ANY('{1,3}'), "
            "a @> '{2}' FROM c ORDER BY id",
            "WITH c(id, a) AS (VALUES (1, ARRAY[1,2]), (2, NULL), (3, ARRAY[3,NULL])) "
            "SELECT id FROM c WHERE NOT (1 = ANY(a)) OR 3 = ALL(a) IS NULL ORDER BY id",
        ],
    )


def test_jsonb_casts_and_stored_text(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """x::jsonb in a SELECT list, WHERE, INSERT and UPDATE, printed as PostgreSQL
    normalizes jsonb (keys sorted and deduplicated, `{"a": 1}` spacing)."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            """SELECT '{"a":1}'::jsonb, '{"b":1, "a":[1, 2.50]}'::jsonb, CAST('[1,2]' AS jsonb)""",
            """SELECT jsonb '{"a":1}', '{"a":1}'::jsonb -> 'a', '{"a":1}'::jsonb ->> 'a'""",
            """SELECT '1'::jsonb, '"s"'::jsonb, 'null'::jsonb, NULL::jsonb, """
            """'{"a":1}'::jsonb::text""",
            """SELECT '{"a":1, "a":2}'::jsonb, '{"aa":1, "b":2}'::jsonb, """
            """'[1, 2.50, "x", null]'::jsonb""",
            """SELECT '{"a":}'::jsonb""",
            f"CREATE TABLE {t} (id int, j jsonb, s text)",
            f"""INSERT INTO {t} VALUES (1, '{{"a":1}}'::jsonb, '{{"z":1,  "y":2}}'), """
            f"""(2, '{{"b": 2,  "a": 1}}', '[1,  2]'), (3, NULL, NULL)""",
            f"""INSERT INTO {t} SELECT 4, '{{"q":[1,  2], "p":0}}', 'x'""",
            f"INSERT INTO {t} SELECT 5, s::jsonb, s FROM {t} WHERE id = 1",
            f"""UPDATE {t} SET j = '{{"d":3,   "c":4}}' WHERE id = 3""",
            f"""INSERT INTO {t} (id, j) VALUES (6, 'null'), (7, '[1,{{"b":1,"a":2}}]')""",
            f"SELECT id, j, j::text, s::jsonb FROM {t} ORDER BY id",
            f"""SELECT id FROM {t} WHERE j = '{{"a":1}}'::jsonb OR j = '{{"b":2,"a":1}}'::jsonb """
            "ORDER BY id",
            f"SELECT id FROM {t} WHERE j->>'a' = '1' ORDER BY id",
        ],
    )


def test_aggregate_result_types(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """sum(int2/int4) is int8, sum(int8) numeric, avg of integers and numerics numeric at
    PostgreSQL's division scale, avg of floats float8, count int8."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            f"CREATE TABLE {t} (i int, s smallint, b bigint, n numeric(10,2), d float8, g text)",
            f"INSERT INTO {t} VALUES (1, 1, 1, 1.25, 1.5, 'a'), (2, 2, 2, 2.5, 2.5, 'a'), "
            "(2, 3, 10000000000, 3, 3, 'b'), (NULL, NULL, NULL, NULL, NULL, 'b'), "
            "(50000, 7, 5, 5.5, 1e10, 'c')",
            f"SELECT sum(i), sum(s), sum(b), sum(n), sum(d), count(*), count(i) FROM {t}",
            f"SELECT avg(i), avg(s), avg(b), avg(n), avg(d) FROM {t}",
            f"SELECT g, sum(i), avg(i), avg(b), avg(n), count(*) FROM {t} GROUP BY g ORDER BY g",
            f"SELECT sum(i), avg(i), avg(n), sum(s) FROM {t} WHERE false",
            f"SELECT sum(DISTINCT i), avg(DISTINCT i), sum(i) FILTER (WHERE i > 1), "
            f"avg(i) FILTER (WHERE i > 1) FROM {t}",
            f"SELECT sum(i) + 1, avg(i) * 2, round(avg(i), 2), avg(i) > 1 FROM {t} WHERE i < 10",
            f"SELECT g, sum(i) OVER w, avg(i) OVER w, count(*) OVER w FROM {t} "
            "WINDOW w AS (PARTITION BY g) ORDER BY 1, 2",
            f"SELECT g FROM {t} GROUP BY g HAVING avg(i) >= 1.5 ORDER BY g",
            "SELECT sum(1), avg(2.5), sum(2::smallint), avg(1.5::float8), avg(x) "
            "FROM (VALUES (4), (5), (7)) AS v(x)",
            "SELECT avg(x), avg(x::bigint * 100000000000) FROM (VALUES (1), (2), (4)) AS v(x)",
        ],
    )


def test_casts_to_a_length_truncate(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """x::varchar(n) and x::char(n) keep the first n characters of any value, as an
    explicit cast does in PostgreSQL (DuckDB ignores the length: before, only a string
    constant was cut), in reads and in an UPDATE's SET."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            f"CREATE TABLE {t} (id int PRIMARY KEY, s text, v varchar(4), n int)",
            f"INSERT INTO {t} VALUES (1, 'def', 'ab', 12345), (2, NULL, NULL, -1)",
            # (|| '': the values, as text; the casts' own types are reported as text)
            f"SELECT ('abc' || s)::varchar(4) || '', CAST(n AS varchar(3)) || '',"
            f" (n > 0)::varchar(2) || '', (s || 'yz')::char(2) || '|',"
            f" ('é' || s)::varchar(1) || '' FROM {t} ORDER BY id",
            f"UPDATE {t} SET v = (s || 'toolong')::varchar(3) WHERE n > 0 RETURNING v",
            f"UPDATE {t} SET v = 'toolong'::varchar(4) WHERE id = 2 RETURNING v",
            f"SELECT * FROM {t} ORDER BY id",
        ],
    )


def test_numeric_casts_and_division(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """x::numeric keeps a constant's scale; numeric division is exact, at PostgreSQL's
    scale (at least 16 significant digits; quotients below 1 are cut at 16 decimals)."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            "SELECT 1.5::numeric, 1.5::numeric::text, 1.50::numeric, '1.50'::numeric, "
            "10::numeric, CAST(2 AS decimal), '-0.0'::numeric, 1e3::numeric",
            "SELECT 10::numeric / 4, (10::numeric / 4)::text, 10::numeric / 3, 2::numeric / 1, "
            "7.0 / 2, 100000::numeric / 3, 22 / 7.0, 123456789 / 1000.0",
            "SELECT 7 / 2, -7 / 2, 7::bigint / 2, 2.5 / 7::float8, 7::float8 / 2.5",
            "SELECT 1.5 * 2, 1.5 + 1.25, 1.50 * 1.5, round(1.2345::numeric, 2)",
            "SELECT 7.0 / 0",
            f"CREATE TABLE {t} (n numeric(10,2), i int, b bigint)",
            f"INSERT INTO {t} VALUES (10.50, 4, 3), (7.25, 3, 5), (100000, 7, 11)",
            f"SELECT n / i, n / 2, i / 2, n / b, b / 2, sum(n) OVER () / 3 FROM {t} ORDER BY n",
            f"SELECT sum(n) / count(*), sum(b) / count(*), sum(i) / count(*), avg(i) / 2 FROM {t}",
        ],
    )


def test_string_lengths_are_integers(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """length, char_length, strpos and position return int4, as PostgreSQL's (DuckDB's
    BIGINT reached clients as int8: pgjdbc's getObject gave a Long)."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            "SELECT length('héllo'), char_length('abc'), character_length(''), strpos('abc', 'c'),"
            " position('b' in 'abc'), length(NULL::text), strpos('abc', 'z')",
            "SELECT length('\\x0102'::bytea), length(B'101'), octet_length('é')",
            f"CREATE TABLE {t} (id int, s text, v varchar(5), c char(4), b bytea)",
            f"INSERT INTO {t} VALUES (1, 'abc', 'de', 'f', '\\x00'), (2, NULL, NULL, NULL, NULL)",
            f"SELECT id, length(s), char_length(v), length(c), length(b), strpos(s, 'c'),"
            f" position('e' in v), length(s) + 1, sum(length(s)) OVER () FROM {t} ORDER BY id",
            f"SELECT max(length(s)), count(*) FILTER (WHERE length(s) > 2) FROM {t}",
        ],
    )


def test_result_types_of_functions_and_smallint_arithmetic(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL's result types where DuckDB's differ: sign() is float8 (numeric of a
    numeric; DuckDB: int2), gcd/lcm of integers int4, octet_length/bit_length of text int4
    (octet_length of a text column was 42883), txid_current() int8 (was numeric); and a
    smallint with an integer constant is an integer (`32767::int2 + 1` overflowed: DuckDB
    types the constant as the smallint)."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            "SELECT sign(-2), sign(-2.5), sign(0.0), sign(3.5::float8), sign(2::int8),"
            " gcd(12, 18), lcm(4, 6), gcd(12::int8, 18), octet_length('héllo'),"
            " bit_length('héllo'), pg_typeof(txid_current())::text",
            "SELECT 32767::int2 + 1, 32767::int2 * 2, 1 - 32767::int2, 7::int2 / 2, 7::int2 % 4",
            f"CREATE TABLE {t} (id int, s int2, n numeric(10, 2), f float8, b int8, v varchar(5),"
            " x text, y bytea)",
            f"INSERT INTO {t} VALUES (1, 32767, -4.5, 0, 9, 'dé', 'abc', '\\x0102'),"
            " (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            f"SELECT id, sign(s), sign(n), sign(f), gcd(id, 6), lcm(b, 6), s + 1,"
            f" s * 10, s - 1, s / 2, s % 2, 2 * s, octet_length(v), octet_length(x),"
            f" octet_length(y), bit_length(v), bit_length(y) FROM {t} ORDER BY id",
        ],
    )


def test_integer_constants_read_as_postgres(conn, pg) -> None:  # type: ignore[no-untyped-def]
    """A string constant cast to an integer type is read by PostgreSQL's integer input:
    '1.5', '1e3', '0x10' and '1_000' are 22P02, a value out of range 22003 (DuckDB's cast
    rounded '1.5' to 2 and read '0x10' as 16)."""
    statements = [
        f"SELECT {e}"
        for e in (
            "'1.5'::int", "'1.5'::bigint", "CAST('2.5' AS integer)", "int4 '3.5'", "'1e3'::int",
            "'0x10'::int8", "'1_000'::int2", "'99999999999'::int", "'40000'::smallint", "''::int",
            "' 12 '::int", "'+5'::int8", "'-32768'::int2", "'007'::int", "'12'::text::int",
            "'1.5'::numeric::int", "ARRAY['1', '2']::int[]",
        )
    ]  # fmt: skip
    assert_same_as_postgres(conn, pg, statements)


def test_casts_to_varchar_char_and_name_report_their_types(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """`x::varchar(10)`, `::char(3)`, `::name` are reported as PostgreSQL types them, with
    the length (DuckDB has only VARCHAR: they were text), prepared or not."""
    t = table_name
    for c in (conn, pg):
        c.execute(f"CREATE TABLE {t} (id int, s text)")
        c.execute(f"INSERT INTO {t} VALUES (1, 'abcdef')")
    queries = [
        "SELECT 'abc'::varchar(5), 'abc'::varchar, 'a'::char(3), 'a'::name, 'x'::text,"
        " CAST('q' AS character varying(2))",
        f"SELECT s::varchar(3), s::char(2), s::name, id::varchar, s FROM {t}",
        f"SELECT x FROM (SELECT s::varchar(4) AS x FROM {t}) sub",
    ]
    for sql in queries:
        for prepare in (False, True):
            got, want = (
                [(d.type_code, d.internal_size, d.display_size) for d in cur.description or ()]
                + cur.fetchall()
                for cur in (c.execute(sql, prepare=prepare) for c in (conn, pg))
            )
            assert got == want, sql


def test_insert_select_strings_read_by_the_column_type(conn, pg, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """An INSERT ... SELECT's string constants for boolean and bytea columns are read
    with PostgreSQL's input functions ('off', '\\x01ff'; DuckDB's casts refused 'off' and
    took '\\x01' as four characters)."""
    t = table_name
    assert_same_as_postgres(
        conn,
        pg,
        [
            f"CREATE TABLE {t} (id int, b bool, y bytea, a text[])",
            f"INSERT INTO {t} SELECT g, 'off', '\\x01ff', '{{x}}' FROM generate_series(1, 2) g",
            f"INSERT INTO {t} SELECT g, 'YES', 'abc', '{{}}' FROM generate_series(3, 3) g",
            f"INSERT INTO {t} SELECT g, 'maybe', NULL, NULL FROM generate_series(4, 4) g",
            f"INSERT INTO {t} SELECT g, NULL, '\\xZZ', NULL FROM generate_series(5, 5) g",
            f"INSERT INTO {t} SELECT 6, ' f ', '\\x', NULL",
            f"SELECT id, b, y, a FROM {t} ORDER BY id",
        ],
    )


def test_postmaster_start_time_is_the_servers(conn, hw_server) -> None:  # type: ignore[no-untyped-def]
    """pg_postmaster_start_time() is when the server started (monitoring tools show
    uptime from it), the same in every session; DuckDB's was the statement's now()."""
    first = conn.execute("SELECT pg_postmaster_start_time(), now()").fetchone()
    assert first[0] < first[1]
    with psycopg.connect(hw_server.dsn, autocommit=True) as other:
        again = other.execute("SELECT pg_postmaster_start_time()::text").fetchone()[0]
    assert again == conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()[0]
