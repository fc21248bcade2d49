"""Array-typed bind parameters against PostgreSQL 15: psycopg (server-side binding,
prepared statements, client-side binding; arrays in text format with declared int/float/
date/... array OIDs, or untyped '{...}' for lists of strings), ParameterDescription, and
asyncpg (binary format, types from ParameterDescription). `= ANY($1)`, `<> ALL($1)`,
`unnest($1)`, `$1::int[]`, `array_length($1, 1)`, NULL elements, empty and NULL arrays,
multi-dimensional arrays; malformed array input (22P02); PREPARE with an array
parameter; generate_series(int, int) typed integer (chr(g))."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from tests.hwserver import HeadwaterServer

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.oracle

SETUP = (
    "DROP TABLE IF EXISTS arrp",
    "CREATE TABLE arrp (id int, name text, d date)",
    "INSERT INTO arrp VALUES (1, 'a', '2024-01-01'), (2, 'b', '2024-01-02'), "
    "(3, 'c', NULL), (4, NULL, '2024-01-04')",
    "DROP TABLE IF EXISTS arrx",
    "CREATE TABLE arrx (id bigint, n numeric(12,2), r real, f float8, s smallint, t text,"
    " v varchar(3), at timestamptz)",
    "INSERT INTO arrx SELECT g, g * 1.25, g / 4.0, g * 0.5, g % 7, 't' || g, 'v' || g % 10,"
    " TIMESTAMPTZ '2024-01-01 00:00+00' + g * INTERVAL '7 hours' FROM generate_series(1, 40) g",
    "DROP TABLE IF EXISTS arrj",
    "CREATE TABLE arrj (id int, j jsonb, n numeric)",
    """INSERT INTO arrj VALUES (1, '{"a": 1, "b": {"c": [1, 2]}, "t": ["x"]}', 1.5),"""
    """ (2, '{"a": 2}', 2)""",
)


@pytest.fixture(scope="module")
def both(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[Any]:
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for c in (hw, pg):
            for sql in SETUP:
                c.execute(sql)
        yield hw, pg


def _run(conn: Any, mode: str, sql: str, args: tuple[Any, ...]) -> Any:
    try:
        if mode == "client":
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql, args)
        else:
            cur = conn.cursor()
            cur.execute(sql, args, prepare=mode == "prepared")
        return cur.fetchall()
    except psycopg.Error as e:
        return ("ERROR", e.sqlstate)


CASES: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT id FROM arrp WHERE name = ANY(%s) ORDER BY id", (["a", "c"],)),
    ("SELECT id FROM arrp WHERE name = ANY(%s) ORDER BY id", (["a", None],)),
    ("SELECT id FROM arrp WHERE name = ANY(%s) ORDER BY id", ([],)),
    ("SELECT id FROM arrp WHERE name <> ALL(%s) ORDER BY id", (["a", "c"],)),
    ("SELECT id FROM arrp WHERE id = ANY(%s) ORDER BY id", ([1, 3],)),
    ("SELECT id FROM arrp WHERE id = ANY(%s) ORDER BY id", ([1, None],)),
    ("SELECT id FROM arrp WHERE id = ANY(%s) ORDER BY id", ([2**40, 2],)),
    ("SELECT id FROM arrp WHERE id = ANY(%s) ORDER BY id", (None,)),
    ("SELECT id FROM arrp WHERE id <> ALL(%s) ORDER BY id", ([1, 3],)),
    ("SELECT id FROM arrp WHERE id <> ALL(%s) ORDER BY id", ([],)),
    ("SELECT id FROM arrp WHERE id <> ALL(%s) ORDER BY id", ([1, None],)),
    ("SELECT id FROM arrp WHERE d = ANY(%s) ORDER BY id", ([dt.date(2024, 1, 2)],)),
    ("SELECT id FROM arrp WHERE id = ANY(%s::int[]) ORDER BY id", ("{2,4}",)),
    ("SELECT id, id = ANY(%s) FROM arrp ORDER BY id", ([1, None],)),
    ("SELECT unnest(%s) AS x ORDER BY x", ([3, 1, 2],)),
    ("SELECT unnest(%s::text[])", (["a b", "c,d", '"q"', "NULL", None, "", "x\\y"],)),
    ("SELECT x FROM unnest(%s::int[]) AS x ORDER BY x", ([5, 4],)),
    ("SELECT %s::int[]", (["1", "2"],)),
    ("SELECT %s::int[]", ([],)),
    ("SELECT %s::int[]", (None,)),
    ("SELECT array_length(%s, 1)", ([1, 2, 3],)),
    ("SELECT array_length(%s::int[], 1)", ([],)),
    ("SELECT %s", ([1, 2],)),
    ("SELECT %s", ([1, None],)),
    ("SELECT %s", ([[1, 2], [3, 4]],)),
    ("SELECT %s", (["x", "y"],)),
    ("SELECT %s", ([1.5, -2.25],)),
    ("SELECT %s", ([True, None, False],)),
    ("SELECT %s", ([Decimal("1.5"), Decimal("-10.25")],)),
    ("SELECT %s", ([dt.date(2024, 2, 29)],)),
    ("SELECT %s", ([dt.datetime(2024, 2, 29, 12, 30, 1)],)),
    ("SELECT %s", ([uuid.UUID("12345678-1234-5678-1234-567812345678")],)),
    ("SELECT %s::text[]", (["a", "b"],)),
    # a system catalog's columns (the parameter's type inferred from one: was 'UNNEST()
    # can only be applied to lists', a scalar text parameter)
    ("SELECT relname FROM pg_class WHERE relname = ANY(%s) ORDER BY 1", (["pg_type", "x"],)),
    ("SELECT oid::int FROM pg_type WHERE typname = ANY(%s) ORDER BY 1", (["int4", "oid"],)),
    ("SELECT count(*) FROM pg_namespace WHERE lower(nspname) = ANY(%s)", (["pg_catalog"],)),
]

BAD: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT id FROM arrp WHERE id = ANY(%s::int[])", ("{1,x}",)),
    ("SELECT id FROM arrp WHERE name = ANY(%s)", ("{a,",)),
    ("SELECT id FROM arrp WHERE name = ANY(%s)", ("a,b",)),
    ("SELECT %s::int[]", ("{{1,2},{3}}",)),
    ("SELECT %s::int[]", ("{1,{2}}",)),
    ("SELECT %s::int[]", ("{99999999999}",)),
    ("SELECT %s::date[]", ("{2024-13-01}",)),
]


@pytest.mark.parametrize("mode", ["server", "prepared", "client"])
def test_psycopg_array_parameters_as_postgresql(both: Any, mode: str) -> None:
    hw, pg = both
    for sql, args in CASES + BAD:
        expected = _run(pg, mode, sql, args)
        assert _run(hw, mode, sql, args) == expected, (mode, sql, args, expected)
    for sql, args in BAD:  # 22P02, or 22003/22008 for an element out of its type's range
        answer = _run(hw, mode, sql, args)
        assert answer[0] == "ERROR" and answer[1].startswith("22"), (mode, sql, answer)


def test_malformed_array_message(both: Any) -> None:
    """The message PostgreSQL gives, naming the literal."""
    hw, pg = both
    for c in (hw, pg):
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as err:
            c.execute("SELECT id FROM arrp WHERE name = ANY(%s)", ("{a,",))
        assert str(err.value).splitlines()[0] == 'malformed array literal: "{a,"'


def test_sql_prepare_with_array_parameter(both: Any) -> None:
    hw, pg = both
    script = [
        "PREPARE arrp_q(int[]) AS SELECT id FROM arrp WHERE id = ANY($1) ORDER BY id",
        "EXECUTE arrp_q('{1,4}')",
        "EXECUTE arrp_q(ARRAY[2, 3])",
        "EXECUTE arrp_q('{1,x}')",
        "DEALLOCATE arrp_q",
    ]
    for sql in script:
        answers = []
        for c in (hw, pg):
            try:
                cur = c.execute(sql)
                answers.append(cur.fetchall() if cur.description else cur.statusmessage)
            except psycopg.Error as e:
                answers.append(("ERROR", e.sqlstate))
        assert answers[0] == answers[1], sql


def test_generate_series_of_integers_is_integer(both: Any) -> None:
    hw, pg = both
    for sql in (
        "SELECT chr(g) FROM generate_series(65, 67) AS g",
        "SELECT g, pg_typeof(g)::text FROM generate_series(1, 3) AS g",
        "SELECT x FROM generate_series(5, 1, -2) AS t(x)",
        "SELECT * FROM generate_series(1, 2)",
        "SELECT generate_series(1, 2) + 1 AS n",
        "SELECT chr(x) FROM (SELECT generate_series(97, 98) AS x) s",
        "SELECT g, pg_typeof(g)::text FROM generate_series(1, 3000000000, 1000000000) AS g",
        "SELECT g * 1000000000 FROM generate_series(1, 3) AS g",
        # inside a function's arguments: unnested too (one row per element)
        "SELECT pg_typeof(generate_series(1, 2))::text",
        "SELECT abs(generate_series(-2, 2)) AS a",
        "SELECT round(generate_series(1, 2)::numeric / 3, 2) AS r",
        "SELECT coalesce(generate_series(1, 2), 0)",
    ):
        h, p = _run(hw, "server", sql, ()), _run(pg, "server", sql, ())
        assert h == p, sql
        if p and p[0] != "ERROR":
            cur_h, cur_p = hw.execute(sql), pg.execute(sql)
            assert [d.type_code for d in cur_h.description] == [
                d.type_code for d in cur_p.description
            ], sql


def test_integer_parameters_given_to_functions(both: Any) -> None:
    """psycopg declares a small int smallint and a larger one integer: a function given
    the parameter sees that type (`generate_series(1, $1)` is integer, so `date + g`
    and chr(g) resolve), as in PostgreSQL, whatever type DuckDB gives the bound value."""
    hw, pg = both
    for sql, args in (
        ("SELECT DATE '2020-01-01' + g FROM generate_series(1, %s) AS g", (3,)),
        ("SELECT g, pg_typeof(g)::text FROM generate_series(1, %s) AS g", (2,)),
        ("SELECT g, pg_typeof(g)::text FROM generate_series(69998, %s) AS g", (70000,)),
        ("SELECT chr(g) FROM generate_series(65, %s) AS g", (67,)),
        ("SELECT pg_typeof(%s)::text, pg_typeof(%s)::text", (3, 70000)),
        ("SELECT abs(%s), %s + 1", (-4, 5)),
        ("SELECT id FROM arrp WHERE id = %s", (2,)),
    ):
        for mode in ("server", "prepared"):
            assert _run(hw, mode, sql, args) == _run(pg, mode, sql, args), (mode, sql, args)


# -- ParameterDescription; asyncpg's binary arrays ---------------------------------------


def _param_oids(c: Any, sql: str) -> list[int]:
    """The parameter types the server announces for `sql` (ParameterDescription)."""
    c.pgconn.prepare(b"param_desc", sql.encode())
    d = c.pgconn.describe_prepared(b"param_desc")
    c.execute("DEALLOCATE param_desc")
    return [d.param_type(i) for i in range(d.nparams)]


def test_parameter_description_of_array_contexts(both: Any) -> None:
    """`col = ANY($1)` announces the column's array type, as PostgreSQL does (asyncpg
    encodes by it)."""
    hw, pg = both
    for sql in (
        "SELECT id FROM arrp WHERE id = ANY($1)",
        "SELECT id FROM arrp WHERE name = ANY($1)",
        "SELECT id FROM arrp WHERE d <> ALL($1)",
        "SELECT id FROM arrp WHERE 1 = ANY($1)",
        "SELECT unnest($1::text[])",
        "SELECT array_length($1::int8[], 1)",
        "SELECT $1::numeric[]",
    ):
        assert _param_oids(hw, sql) == _param_oids(pg, sql), sql


def test_parameter_description_of_expressions(both: Any) -> None:
    """A parameter compared with arithmetic, a function or COALESCE of columns gets the
    type PostgreSQL resolves (it was text: asyncpg then refused an int for
    `id % 10 = $1`)."""
    hw, pg = both
    for sql in (
        "SELECT 1 FROM arrx WHERE id % 10 = $1",
        "SELECT 1 FROM arrx WHERE $1 = s % 3",
        "SELECT 1 FROM arrx WHERE s + s = $1 OR s * 2 = $2 OR -s = $3",
        "SELECT 1 FROM arrx WHERE n * 2 > $1 AND r * 2 < $2 AND r * r < $3 AND f / 2 < $4",
        "SELECT 1 FROM arrx WHERE abs(s) = $1 AND length(t) > $2 AND coalesce(n, s) < $3",
        "SELECT 1 FROM arrx WHERE greatest(id, s) = $1 AND coalesce(t, 'x') = $2",
        "SELECT 1 FROM arrx WHERE id % 10 IN ($1, $2) AND id + 1 BETWEEN $3 AND $4",
        "SELECT 1 FROM arrx WHERE id % 10 = $1 + 1 AND lower(t) = $2",
        "SELECT 1 FROM arrx WHERE (s, t) = ($1, $2) AND extract(hour FROM at) = $3",
        "SELECT 1 FROM arrx WHERE date_trunc('day', at) = $1 AND round(n) > $2",
        "SELECT coalesce(s, $1), greatest($2, n) FROM arrx WHERE s = COALESCE($3, s)",
        "UPDATE arrx SET at = at + $1 * interval '1 second' WHERE id = $2",
    ):
        assert _param_oids(hw, sql) == _param_oids(pg, sql), sql


def test_parameter_description_of_subquery_columns(both: Any) -> None:
    """A parameter compared with a column of a subquery in FROM gets that column's type
    (it was text: asyncpg's prepared `WHERE x > $1` then failed in DuckDB)."""
    hw, pg = both
    for sql in (
        "SELECT * FROM (SELECT 1 AS x) s WHERE x > $1",
        "SELECT * FROM (SELECT id, t AS label FROM arrx) s WHERE s.id = $1 AND label = $2",
        "SELECT * FROM (VALUES (CAST(NULL AS bigint), 'a')) AS v(a, b) WHERE a < $1",
        "SELECT * FROM (SELECT q.* FROM (SELECT n, s FROM arrx) q) r WHERE n > $1 AND s = $2",
        "SELECT * FROM (SELECT id FROM arrx UNION SELECT 2) u WHERE id <> $1",
    ):
        assert _param_oids(hw, sql) == _param_oids(pg, sql), sql


def test_descriptions_of_json_operators_and_arithmetic(both: Any) -> None:
    """A jsonb column's operators announce their parameters as PostgreSQL does (`j ->
    $1` text, `j #> $1` text[], `j @> $1` jsonb: it was jsonb for all, so asyncpg sent a
    key as JSON), and Describe types `n * $1` by the parameter's announced type
    (numeric; it was text, then asyncpg could not decode the numeric it got)."""
    hw, pg = both
    for sql in (
        "SELECT j -> $1, j ->> $2, j #> $3, j #>> $4 FROM arrj",
        "SELECT 1 FROM arrj WHERE j @> $1 AND $2 <@ j AND j ? $3 AND j ?| $4 AND j ?& $5",
        "SELECT j - $1, j #- $2, j || $3 FROM arrj",
        "SELECT n * $1, $2 + n, n / $3, id - $4 FROM arrj",
    ):
        assert _param_oids(hw, sql) == _param_oids(pg, sql), sql
        assert _result_oids(hw, sql) == _result_oids(pg, sql), sql


def _result_oids(c: Any, sql: str) -> list[int]:
    """The result column types the server describes for `sql` before it runs."""
    c.pgconn.prepare(b"result_desc", sql.encode())
    d = c.pgconn.describe_prepared(b"result_desc")
    c.execute("DEALLOCATE result_desc")
    return [d.ftype(i) for i in range(d.nfields)]


def test_parameter_description_of_system_columns(both: Any) -> None:
    """A parameter compared with a system catalog's column is announced with the column's
    type (oid, name, ...), as PostgreSQL does: asyncpg refused an int for `oid = $1`
    announced as text. A LIKE or regular expression pattern is text."""
    hw, pg = both
    for sql in (
        "SELECT relname FROM pg_class WHERE oid = $1",
        "SELECT relname FROM pg_catalog.pg_class WHERE relname = $1 AND relnamespace = $2",
        "SELECT attname FROM pg_attribute WHERE attrelid = $1 AND attnum > $2",
        "SELECT typname FROM pg_type t WHERE t.oid = ANY($1)",
        "SELECT column_name FROM information_schema.columns WHERE table_name = $1",
        "SELECT nspname FROM pg_namespace WHERE oid = $1 LIMIT $2",
        "SELECT 1 FROM pg_class WHERE relname LIKE $1 OR relname ~* $2",  # patterns: text
        "SELECT 1 FROM information_schema.tables WHERE table_name NOT ILIKE $1",
    ):
        assert _param_oids(hw, sql) == _param_oids(pg, sql), sql


def test_asyncpg_parameters_of_headwater_catalog(both: Any) -> None:
    """headwater_catalog's columns type their parameters too (epoch: bigint)."""
    import asyncpg

    info = both[0].info

    async def run() -> tuple[Any, Any]:
        conn = await asyncpg.connect(
            host=info.host,
            port=info.port,
            user=info.user,
            database=info.dbname,
            password=info.password or None,
        )
        try:
            epochs = await conn.fetch(
                "SELECT epoch FROM headwater_catalog.epochs WHERE epoch > $1 LIMIT 1", 0
            )
            rel = await conn.fetchval("SELECT relname FROM pg_class WHERE oid = $1", 1259)
            return epochs, rel
        finally:
            await conn.close()

    epochs, rel = asyncio.run(run())
    assert len(epochs) == 1 and rel == "pg_class"


async def _asyncpg_answers(dsn: dict[str, Any]) -> list[Any]:
    """Array parameters and results through asyncpg. It encodes text[] and oid[] itself
    and introspects pg_type for every other array (and for int2vector/oidvector): its
    introspection query needs pg_catalog's oid columns typed oid and array_agg of them
    typed oid[] (reported as bigint / bigint[], it recursed until RecursionError)."""
    import asyncpg

    conn = await asyncpg.connect(**dsn)
    out: list[Any] = []
    try:
        calls: list[tuple[str, Any]] = [
            ("SELECT id FROM arrp WHERE name = ANY($1) ORDER BY id", ["b", "c"]),
            ("SELECT id FROM arrp WHERE name = ANY($1) ORDER BY id", []),
            ("SELECT id FROM arrp WHERE name = ANY($1) ORDER BY id", None),
            ("SELECT id FROM arrp WHERE name <> ALL($1) ORDER BY id", ["a", None]),
            ("SELECT unnest($1::text[])", ["x", None, "y z", ""]),
            ("SELECT array_length($1::text[], 1)", ["p", "q"]),
            ("SELECT id FROM arrp WHERE id::oid = ANY($1::oid[]) ORDER BY id", [1, 3]),
            ("SELECT id FROM arrp WHERE id = ANY($1::int[]) ORDER BY id", [1, 3]),
            ("SELECT $1::int8[], $2::date[]", ([2**40, None], [dt.date(2024, 2, 29)])),
            ("SELECT $1::numeric[], $2::bool[]", ([Decimal("1.50"), None], [True, False])),
            ("SELECT $1::float8[], $2::int2[]", ([1.5, -0.25], [1, 2])),
            ("SELECT DATE '2020-01-01' + g FROM generate_series(1, $1) AS g", 2),
            ("SELECT count(*) FROM arrx WHERE id % 10 = $1", 3),
            ("SELECT id FROM arrx WHERE n * 2 > $1 AND s % 3 = $2 ORDER BY id", (Decimal(90), 1)),
            ("SELECT id FROM arrx WHERE r * 2 BETWEEN $1 AND $2 ORDER BY id", (3.0, 4.5)),
            # compared as numeric and text, not as numeric(12,2) and varchar(3): 1.251 is
            # not rounded to 1.25 (a wrong match), 'v1xyz' is not too long (an error)
            ("SELECT count(*) FROM arrx WHERE n = $1 OR n * 1 = $1", Decimal("1.251")),
            ("SELECT id FROM arrx WHERE n IN ($1, $2)", (Decimal(2.5), Decimal("3.749"))),
            ("SELECT count(*) FROM arrx WHERE v = $1", "v1xyz"),
            ("SELECT count(*) FROM arrx WHERE (s, v) = ($1, $2)", (1, "v1")),
            ("SELECT '{30,22}'::oid[], 26::oid, ARRAY[1::oid, 2::oid]", None),
            # a jsonb column's operators with parameters (the key is text, a path text[],
            # a containment's operand jsonb); arithmetic with a parameter stays numeric
            ("SELECT id FROM arrj WHERE j @> $1 ORDER BY id", '{"a": 1}'),
            ("SELECT id FROM arrj WHERE j ? $1 OR j ?| $2 ORDER BY id", ("b", ["zz"])),
            ("SELECT j -> $1, j ->> $1, j #> $2, j #>> $2 FROM arrj ORDER BY id", ("a", ["b"])),
            ("SELECT j - $1 FROM arrj ORDER BY id", "a"),
            ("SELECT n * $1, n + $1 FROM arrj ORDER BY id", Decimal(2)),
            ("SELECT typname, typelem, typarray FROM pg_type WHERE oid = ANY('{22,30}')", None),
            (
                "SELECT oid::int, format_type(oid, NULL) FROM pg_type WHERE oid = ANY($1::oid[])"
                " ORDER BY 1",
                [22, 30, 1006, 1013],
            ),
        ]
        for sql, arg in calls:
            args = arg if isinstance(arg, tuple) else () if "$" not in sql else (arg,)
            try:
                out.append([tuple(r) for r in await asyncio.wait_for(conn.fetch(sql, *args), 30)])
            except asyncpg.PostgresError as e:
                out.append(("ERROR", e.sqlstate))
    finally:
        await conn.close()
    return out


def test_asyncpg_binary_array_parameters(both: Any) -> None:
    pytest.importorskip("asyncpg")
    answers = []
    for c in both:
        info = c.info
        dsn = {
            "host": info.host,
            "port": info.port,
            "user": info.user,
            "database": info.dbname,
            "password": info.password or None,
        }
        answers.append(asyncio.run(_asyncpg_answers(dsn)))
    for got, expected in zip(answers[0], answers[1], strict=True):
        assert got == expected
