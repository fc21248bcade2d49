"""Array columns in tables (text[], int[], bigint[], float8[], bool[], date[],
timestamptz[], uuid[], ...) against PostgreSQL 15: CREATE TABLE and ALTER TABLE ADD
COLUMN, INSERT of '{...}' constants (one row, many rows, in a block), ARRAY[...] and
parameters (psycopg lists, asyncpg binary arrays), UPDATE (by key, by other columns,
array_append), DELETE by `@>` and `= ANY`, COPY FROM STDIN in text and CSV, COPY TO,
CREATE TABLE AS; reads of elements, slices, cardinality, unnest, and `arr::text`
(PostgreSQL's '{a,"b c"}'); a materialized view over such a table; PostgreSQL's errors
for malformed literals and bad elements; what is refused (0A000: keys on arrays,
element lengths, numeric[] and jsonb[], multidimensional values)."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import uuid
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_same_as_postgres, in_schema

pytestmark = pytest.mark.oracle

SCRIPT = [
    "CREATE TABLE ar (id int PRIMARY KEY, g int, tags text[], nums bigint[], f float8[],"
    " b bool[], d date[], tz timestamptz[], u uuid[])",
    "INSERT INTO ar VALUES (1, 1, '{a,b}', '{1,2,3}', '{1.5,-0.25}', '{t,f}', '{2024-02-29}',"
    " '{\"2024-01-01 10:00+02\"}', '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}')",
    "INSERT INTO ar (id, g, tags, nums) VALUES (2, 1, ARRAY['x', NULL, 'y z'], ARRAY[4, 5])",
    "INSERT INTO ar (id, g, tags, nums) VALUES (3, 2, '{}', '{}'), (4, 2, NULL, '{7}'),"
    ' (5, 3, \'{"quoted, comma","back\\\\slash",""}\', \'{-9223372036854775808}\'),'
    " (6, 3, '{only}', '{6}'), (7, 3, '{ seven , 7 }', '{70}'), (8, 3, '{e}', '{8}'),"
    " (9, 4, '{n}', '{9}'), (10, 4, '{NULL}', '{10,NULL}')",  # (8 rows: the Arrow path)
    "BEGIN",
    "INSERT INTO ar (id, g, tags) VALUES (11, 5, '{in,block}')",
    "UPDATE ar SET tags = '{changed}' WHERE id = 11",
    "COMMIT",
    "UPDATE ar SET nums = '{7,8,9}' WHERE id = 3",
    "UPDATE ar SET nums = array_append(nums, 100) WHERE g = 2",
    "UPDATE ar SET g = g + 10 WHERE 'x' = ANY(tags)",
    "DELETE FROM ar WHERE tags @> '{e}'",
    # an array column compared with a '{...}' constant in an UPDATE's or DELETE's
    # condition (the constant was left as text there: DuckDB then cast the list)
    "UPDATE ar SET g = g + 100 WHERE nums = '{7,8,9}' OR tags = '{n}'",
    "DELETE FROM ar WHERE tags = '{changed}'",
    "SELECT * FROM ar ORDER BY id",
    "SELECT id, tags[1], nums[2], nums[1:2], cardinality(tags), array_length(nums, 1)"
    " FROM ar ORDER BY id",
    "SELECT id FROM ar WHERE tags && '{a,n}' ORDER BY id",
    # PostgreSQL's array text (DuckDB's would be [a, b c]): quoting, NULL, t/f, floats
    "SELECT id, tags::text, nums::text, f::text, b::text, d::text, tz::text, u::text,"
    " 'tags: ' || tags::text, concat(nums, '/', b) FROM ar ORDER BY id",
    "SELECT id, unnest(tags) AS tag FROM ar ORDER BY 1, 2",
    "SELECT g, count(*), max(cardinality(nums)) FROM ar GROUP BY g ORDER BY g",
    "ALTER TABLE ar ADD COLUMN extra int[]",
    "UPDATE ar SET extra = '{1}' WHERE id = 1",
    "SELECT id, extra FROM ar ORDER BY id",
    "CREATE TABLE ar_copy AS SELECT id, tags FROM ar WHERE id < 5",
    "SELECT * FROM ar_copy ORDER BY id",
    # PostgreSQL's errors
    "INSERT INTO ar (id, tags) VALUES (20, '{bad')",
    "INSERT INTO ar (id, nums) VALUES (21, '{1,x}')",
    "INSERT INTO ar (id, d) VALUES (22, '{2024-02-30}')",
    "UPDATE ar SET nums = 'not an array' WHERE id = 1",
    # an INSERT ... SELECT's '{...}' constants, read with the array's input function
    "INSERT INTO ar (id, g, tags, nums) SELECT 30 + g, g, '{s,\"t u\"}', '{1,NULL}'"
    " FROM generate_series(1, 2) g RETURNING id, tags, nums",
    "INSERT INTO ar (id, tags) SELECT 40, '{bad'",
    "SELECT count(*) FROM ar",
    # || of an array column and an element, another array, a '{...}' constant, NULL
    # (an element column's || was DuckDB's text concatenation, or 42703)
    "CREATE TABLE ac (id int PRIMARY KEY, nums int[], tags text[], name text, n int)",
    "INSERT INTO ac VALUES (1, '{1,2}', '{a,b}', 'x', 5), (2, NULL, NULL, NULL, NULL),"
    " (3, '{}', '{}', 'y', 7)",
    "SELECT id, nums || 4, 0 || nums, nums || n, n || nums FROM ac ORDER BY id",
    "SELECT id, nums || nums, nums || '{}'::int[], ARRAY[1] || nums, tags || tags FROM ac"
    " ORDER BY id",
    "SELECT id, tags || 'z'::text, name || tags, tags || name, tags || '{c,d}', '{q}' || tags,"
    " tags || NULL, NULL || tags, tags || ARRAY['k'], name || 'x', name || n FROM ac ORDER BY id",
    "SELECT pg_typeof(tags || name)::text, pg_typeof(nums || 1)::text FROM ac WHERE id = 1",
    "UPDATE ac SET tags = tags || 'new'::text, nums = nums || 9 WHERE id = 1 RETURNING tags, nums",
    "UPDATE ac SET tags = tags || '{x,y}' WHERE id = 3 RETURNING tags",
    # column defaults written as PostgreSQL writes them ('{}' was DuckDB's cast error,
    # '{}'::jsonb an unknown type): omitted, DEFAULT, many rows, ADD COLUMN, SET DEFAULT
    "CREATE TABLE ad (id int PRIMARY KEY, a text[] DEFAULT '{}', b int[] DEFAULT '{1,2}'::int[],"
    " c text[] DEFAULT ARRAY['x'], d text[] DEFAULT '{\"q r\",NULL}',"
    " j jsonb DEFAULT '{}'::jsonb, k jsonb DEFAULT '[]')",
    "INSERT INTO ad (id) VALUES (1)",
    "INSERT INTO ad VALUES (2, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT, DEFAULT)",
    "INSERT INTO ad (id) VALUES (3), (4), (5), (6), (7), (8), (9), (10), (11)",
    "ALTER TABLE ad ADD COLUMN e text[] DEFAULT '{z}'",
    "UPDATE ad SET a = '{changed}', e = DEFAULT WHERE id = 1",
    "UPDATE ad SET a = DEFAULT WHERE id = 1",
    "SELECT * FROM ad ORDER BY id",
]

REFUSED = [  # PostgreSQL takes these; Headwater says so (0A000)
    "CREATE TABLE ar_k (a int[] PRIMARY KEY)",
    "CREATE TABLE ar_v (a varchar(3)[])",
    "CREATE TABLE ar_n (a numeric[])",
    "CREATE TABLE ar_j (a jsonb[])",
]


def test_array_columns_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "arr_cols", SCRIPT, ignore=("position",))


def test_refused_array_columns(hw_server: HeadwaterServer) -> None:
    with in_schema([hw_server.dsn], "arr_refused", ["CREATE TABLE t (id int, a int[])"]) as [c]:
        for sql in REFUSED:
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                c.execute(sql)
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            c.execute("ALTER TABLE t ADD UNIQUE (a)")
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            c.execute("INSERT INTO t VALUES (1, '{{1,2},{3,4}}')")


def _copy_in_and_out(c: psycopg.Connection) -> tuple[list[Any], str]:
    c.execute("CREATE TABLE ac (id int, tags text[], nums int[], d date[])")
    with c.cursor().copy("COPY ac FROM STDIN") as cp:
        cp.write('1\t{"a b",NULL,c}\t{1,2}\t{2024-01-02}\n2\t\\N\t{}\t\\N\n')
    with c.cursor().copy("COPY ac FROM STDIN (FORMAT csv)") as cp:
        cp.write('3,"{m,""n o""}",{4},"{2020-02-29,1999-12-31}"\n')
    with c.cursor().copy("COPY ac (id, nums) FROM STDIN") as cp:
        cp.write("4\t{1,2,3,4,5,6,7,8,9,10}\n")
    out = io.StringIO()
    with c.cursor().copy("COPY (SELECT * FROM ac ORDER BY id) TO STDOUT") as cp:
        for data in cp:
            out.write(bytes(data).decode())
    return c.execute("SELECT * FROM ac ORDER BY id").fetchall(), out.getvalue()


def test_array_columns_copy_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    with in_schema([hw_server.dsn, pg_oracle.dsn], "arr_copy") as (hw, pg):
        assert _copy_in_and_out(hw) == _copy_in_and_out(pg)


async def _through_asyncpg(info: Any, schema: str) -> list[Any]:
    import asyncpg

    c = await asyncpg.connect(
        host=info.host, port=info.port, user=info.user, database=info.dbname, ssl=False
    )
    try:
        await c.execute(f"SET search_path = {schema}")
        await c.execute("INSERT INTO ap VALUES ($1, $2, $3, $4)", 3, ["as", None], [2**40], None)
        await c.execute("UPDATE ap SET tags = $1 WHERE id = $2", ["upd"], 3)
        await c.execute("UPDATE ap SET nums = $1 WHERE tags = $2", [1, 2], ["upd"])
        rows = await c.fetch("SELECT * FROM ap WHERE nums && $1 ORDER BY id", [1, 2**40])
        return [tuple(r) for r in rows]
    finally:
        await c.close()


def test_array_parameters_into_columns(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """psycopg's lists (text format, typed) and asyncpg's binary arrays as values: the
    fast INSERT path, a point UPDATE by key, and a general UPDATE by an array."""
    setup = ["CREATE TABLE ap (id int PRIMARY KEY, tags text[], nums bigint[], at date[])"]
    answers = []
    with in_schema([hw_server.dsn, pg_oracle.dsn], "arr_params", setup) as conns:
        for c in conns:
            c.execute(
                "INSERT INTO ap VALUES (%s, %s, %s, %s)",
                (1, ["a", "b c", None], [1, 2], [dt.date(2024, 1, 1)]),
            )
            c.execute("INSERT INTO ap VALUES (%s, %s, %s, %s)", (2, [], None, None), prepare=True)
            c.execute("UPDATE ap SET tags = %s WHERE id = %s", (["z", uuid.UUID(int=1).hex], 1))
            rows = asyncio.run(_through_asyncpg(c.info, "arr_params"))
            answers.append((rows, c.execute("SELECT * FROM ap ORDER BY id").fetchall()))
    assert answers[0] == answers[1]


def test_view_over_array_columns(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """A materialized view over a table with array columns (reading them or not) follows
    its writes; PostgreSQL's plain view is the oracle."""
    setup = [
        "CREATE TABLE av (id int PRIMARY KEY, g int, tags text[], nums int[])",
        "INSERT INTO av VALUES (1, 1, '{a,b}', '{1,2}'), (2, 1, '{c}', '{3}'), (3, 2, NULL, '{}')",
    ]
    views = {
        "av_count": "SELECT g, count(*) AS n FROM av GROUP BY g",
        "av_arr": "SELECT id, tags, cardinality(nums) AS k FROM av WHERE g = 1",
    }
    writes = [
        "INSERT INTO av VALUES (4, 1, '{d,e,f}', '{4,5}')",
        "UPDATE av SET tags = '{z}' WHERE id = 1",
        "UPDATE av SET nums = array_append(nums, 9) WHERE g = 1",
        "DELETE FROM av WHERE id = 2",
    ]
    with in_schema([hw_server.dsn, pg_oracle.dsn], "arr_views", setup) as (hw, pg):
        for name, sql in views.items():
            hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            pg.execute(f"CREATE VIEW {name} AS {sql}")
        for write in writes:
            for c in (hw, pg):
                c.execute(write)
            for name in views:
                got, want = (
                    c.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall() for c in (hw, pg)
                )
                assert got == want, (write, name)
