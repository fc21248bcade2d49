"""CREATE FUNCTION ... LANGUAGE sql, inlined where it is called (planner/sql_functions.py),
against PostgreSQL 15: calls in reads, writes, defaults, CHECKs, views and materialized
views; named and default arguments, STRICT, set-returning functions in FROM (LATERAL
too), a body with FROM as a scalar subquery; CREATE OR REPLACE, DROP FUNCTION, DROP
SCHEMA; pg_proc, pg_get_functiondef() and psql's \\df; the errors and their SQLSTATEs."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import psycopg

from tests.hwserver import HeadwaterServer, start_temp_server
from tests.oracle_scripts import assert_same_as_postgres, in_schema, outcome, psql_outputs

TABLE = [
    "CREATE TABLE t (id int PRIMARY KEY, a int, b text, c numeric(10,2))",
    "INSERT INTO t VALUES (1, 10, 'x', 1.5), (2, 20, 'y', 2.25), (3, NULL, 'z', NULL)",
]

SCRIPT = [
    *TABLE,
    "CREATE FUNCTION add(a integer, b integer DEFAULT 2) RETURNS integer"
    " LANGUAGE sql IMMUTABLE AS $$ SELECT a + b $$",
    "SELECT add(1, 2), add(5), add(b => 10, a => 1), add(1, b => 3)",
    "SELECT id, add(a, id) FROM t ORDER BY id",
    "CREATE FUNCTION dbl(n int) RETURNS int RETURN n * 2",
    "SELECT dbl(21), dbl(add(1)), add(dbl(2), dbl(3)), public.dbl(4)",
    # typmods of parameters and results are dropped, as PostgreSQL drops them
    "CREATE FUNCTION tag(varchar(2), int) RETURNS text AS 'SELECT $1 || ''-'' || $2'"
    " LANGUAGE sql STRICT",
    "SELECT id, tag(b, a) FROM t ORDER BY id",
    "SELECT tag(NULL, 1), tag('abc', NULL), tag('abcd', 12345)",
    # a body with FROM: a scalar subquery over the body's own table, the argument a column
    # of the caller's (the body's t must not capture it)
    "CREATE FUNCTION above(lim int) RETURNS bigint LANGUAGE sql STABLE"
    " AS $$ SELECT count(*) FROM t WHERE a > lim $$",
    "SELECT above(5), above(15), above(100), above(NULL)",
    "SELECT id, above(a) FROM t ORDER BY id",
    "CREATE FUNCTION first_b() RETURNS text LANGUAGE sql AS $$ SELECT b FROM t ORDER BY id $$",
    "SELECT first_b()",
    # set-returning: RETURNS TABLE and SETOF, in FROM, with aliases, LATERAL
    "CREATE FUNCTION rows_above(lim int) RETURNS TABLE(id int, b text) LANGUAGE sql"
    " AS $$ SELECT id, b FROM t WHERE a > lim ORDER BY id $$",
    "SELECT * FROM rows_above(5)",
    "SELECT r.b FROM rows_above(15) AS r",
    "SELECT * FROM rows_above(5) AS x(i, s)",
    "SELECT t.id, x.* FROM t, rows_above(t.a - 1) AS x ORDER BY 1, 2",
    "SELECT id, (SELECT string_agg(b, ',' ORDER BY b) FROM rows_above(t.a)) FROM t ORDER BY id",
    "CREATE FUNCTION ids() RETURNS SETOF int LANGUAGE sql AS $$ SELECT id FROM t ORDER BY id $$",
    "SELECT * FROM ids()",
    "SELECT * FROM ids() AS k",
    "CREATE FUNCTION rows_of(lim int) RETURNS SETOF t LANGUAGE sql"
    " AS 'SELECT * FROM t WHERE id <= lim ORDER BY id'",
    "SELECT * FROM rows_of(2)",
    "SELECT r.b, r.c FROM rows_of(5) AS r WHERE r.a > 10",
    "SELECT pg_get_function_result(oid) FROM pg_proc WHERE proname = 'rows_of'",
    "SELECT * FROM add(1, 1)",
    "SELECT * FROM add(1, 1) AS z",
    "CREATE FUNCTION echo(anyelement) RETURNS anyelement LANGUAGE sql AS 'SELECT $1'",
    "SELECT echo(1), echo('a'::text), echo(2.5)",
    # an argument computed anew at each call, used twice by the body: computed once
    "CREATE FUNCTION twice(x int) RETURNS int LANGUAGE sql AS 'SELECT x + x'",
    "SELECT twice((random() * 0)::int)",
    # writes
    "INSERT INTO t VALUES (dbl(2), add(1), tag('w', 1), 3.5) RETURNING *",
    "UPDATE t SET a = dbl(a) WHERE id = add(1, 0) RETURNING id, a",
    "DELETE FROM t WHERE id = dbl(2) RETURNING id",
    # CREATE OR REPLACE, overloads, DROP
    "CREATE FUNCTION add(a integer, b integer DEFAULT 2) RETURNS integer LANGUAGE sql"
    " AS $$ SELECT a + b $$",
    "CREATE OR REPLACE FUNCTION add(a integer, b integer DEFAULT 2) RETURNS integer"
    " LANGUAGE sql AS $$ SELECT a + b + 100 $$",
    "SELECT add(1)",
    "CREATE OR REPLACE FUNCTION add(a integer, b integer DEFAULT 2) RETURNS bigint"
    " LANGUAGE sql AS $$ SELECT a + b $$",
    # a default, a CHECK and a view calling functions
    "CREATE TABLE d (k int PRIMARY KEY, v int DEFAULT dbl(21) CHECK (v < add(100)))",
    "INSERT INTO d (k) VALUES (1) RETURNING *",
    "INSERT INTO d VALUES (2, 500)",
    "CREATE VIEW v AS SELECT id, dbl(a) AS d FROM t",
    "SELECT * FROM v ORDER BY id",
    "SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),"
    " pg_get_function_identity_arguments(p.oid), p.provolatile, p.proisstrict, p.proretset,"
    " p.pronargs, p.pronargdefaults, p.prosrc,"
    # (a table's row type has no pg_type row here: pg_class.reltype is 0)
    " CASE WHEN p.proname <> 'rows_of' THEN p.prorettype::regtype::text END"
    " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
    " WHERE n.nspname = current_schema ORDER BY 1, 2",
    "SELECT pg_get_functiondef(p.oid) FROM pg_proc p WHERE proname IN ('tag', 'rows_above')"
    " ORDER BY proname",
    # what holds a function's body keeps it (CASCADE drops views; tables: see below)
    "DROP TABLE d",
    "DROP FUNCTION dbl",
    "DROP FUNCTION dbl(int) CASCADE",
    "SELECT * FROM v",
    "DROP FUNCTION add(int)",
    "DROP FUNCTION IF EXISTS add(int)",
    "DROP FUNCTION nosuch",
    "DROP FUNCTION IF EXISTS nosuch, first_b",
    "DROP FUNCTION add(int, int)",
    "SELECT proname FROM pg_proc WHERE proname IN ('first_b', 'add', 'dbl')",
    # COMMENT ON, GRANT / REVOKE EXECUTE, ALTER FUNCTION
    "COMMENT ON FUNCTION tag(varchar, int) IS 'joins'",
    "SELECT obj_description(p.oid, 'pg_proc') FROM pg_proc p WHERE proname = 'tag'",
    "COMMENT ON FUNCTION tag(text) IS 'x'",
    "SELECT proacl::text[] FROM pg_proc WHERE proname = 'tag'",
    "REVOKE EXECUTE ON FUNCTION tag(varchar, int) FROM PUBLIC",
    "SELECT array_length(proacl, 1) FROM pg_proc WHERE proname = 'tag'",
    "GRANT SELECT ON FUNCTION tag(varchar, int) TO PUBLIC",
    "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC",
    "SELECT array_length(proacl, 1) FROM pg_proc WHERE proname = 'tag'",
    "ALTER FUNCTION tag(varchar, int) RENAME TO joined",
    "ALTER FUNCTION joined(varchar, int) RENAME TO joined",
    "ALTER FUNCTION joined(varchar, int) IMMUTABLE CALLED ON NULL INPUT",
    "SELECT provolatile, proisstrict FROM pg_proc WHERE proname = 'joined'",
    "SELECT joined('a', NULL)",
    "ALTER FUNCTION joined(varchar, int) OWNER TO CURRENT_USER",
    "ALTER FUNCTION nosuch(int) STABLE",
    # errors
    "SELECT joined(1, 2, 3)",
    "SELECT joined('a', 3) OVER ()",
    "CREATE FUNCTION nolang() RETURNS int AS 'SELECT 1'",
    "CREATE FUNCTION nobody() RETURNS int LANGUAGE sql",
    "CREATE FUNCTION two_cols() RETURNS int LANGUAGE sql AS 'SELECT 1, 2'",
    "CREATE FUNCTION bad_default(a int DEFAULT 1, b int) RETURNS int LANGUAGE sql AS 'SELECT a'",
    "CREATE FUNCTION rec(n int) RETURNS int LANGUAGE sql AS 'SELECT rec(n - 1)'",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "sqlfn", SCRIPT)


REFUSED = [
    # (statement, SQLSTATE): what PostgreSQL runs and Headwater refuses, naming why
    (  # (PL/pgSQL functions and procedures run: tests/test_procedures.py)
        "CREATE FUNCTION pl() RETURNS int LANGUAGE plpgsql AS $$ DECLARE x int;"
        " BEGIN FOREACH x SLICE 1 IN ARRAY ARRAY[[1]] LOOP END LOOP; RETURN 1; END $$",
        "0A000",
    ),
    ("CREATE FUNCTION w() RETURNS void LANGUAGE sql AS 'SELECT 1'", "0A000"),
    (
        "CREATE FUNCTION ins() RETURNS int LANGUAGE sql AS 'INSERT INTO t VALUES (9); SELECT 1'",
        "0A000",
    ),
    ("CREATE FUNCTION vf(VARIADIC a int[]) RETURNS int LANGUAGE sql AS 'SELECT 1'", "0A000"),
    ("CREATE FUNCTION f(text) RETURNS int LANGUAGE sql AS 'SELECT 1'", "0A000"),
    ("SELECT rec(3)", "54001"),
    # a table's default holds f's body: CASCADE would have to drop the default alone
    ("DROP FUNCTION f", "2BP01"),
    ("DROP FUNCTION f CASCADE", "0A000"),
    ("CREATE OR REPLACE FUNCTION f(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1'", "0A000"),
    ("ALTER FUNCTION f(int) STRICT", "0A000"),
]


PRIVILEGES = [  # (who runs it: the superuser, or the role without privileges, statement)
    ("su", "CREATE FUNCTION sqlfn_priv.secret() RETURNS int LANGUAGE sql AS 'SELECT 42'"),
    ("su", "CREATE ROLE sqlfn_caller LOGIN PASSWORD 'Caller-Pw-1'"),
    ("su", "GRANT USAGE ON SCHEMA sqlfn_priv TO sqlfn_caller"),
    ("role", "SELECT sqlfn_priv.secret()"),
    ("su", "REVOKE EXECUTE ON FUNCTION sqlfn_priv.secret() FROM PUBLIC"),
    ("role", "SELECT sqlfn_priv.secret()"),
    ("role", "SELECT 1 + sqlfn_priv.secret()"),
    ("su", "GRANT EXECUTE ON FUNCTION sqlfn_priv.secret() TO sqlfn_caller"),
    ("role", "SELECT sqlfn_priv.secret()"),
    ("role", "ALTER FUNCTION sqlfn_priv.secret() IMMUTABLE"),
    ("role", "COMMENT ON FUNCTION sqlfn_priv.secret() IS 'mine'"),
    ("role", "DROP FUNCTION sqlfn_priv.secret()"),
    ("role", "CREATE FUNCTION sqlfn_priv.mine() RETURNS int LANGUAGE sql AS 'SELECT 1'"),
    ("su", "DROP FUNCTION sqlfn_priv.secret()"),
    ("su", "REVOKE USAGE ON SCHEMA sqlfn_priv FROM sqlfn_caller"),
]


def test_execute_privilege(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """EXECUTE: PUBLIC's until revoked; a role without it gets PostgreSQL's 42501 (the
    body is inlined after the check); only the owner alters, comments on or drops;
    CREATE in a schema needs CREATE on it."""
    outcomes = []
    with in_schema([pg_oracle.dsn, hw_server.dsn], "sqlfn_priv") as supers:
        for su in supers:
            role = None
            notices: list[Any] = []
            out = []
            for who, sql in PRIVILEGES:
                if who == "role" and role is None:
                    info = su.info
                    role = psycopg.connect(
                        host=info.host,
                        port=info.port,
                        dbname=info.dbname,
                        user="sqlfn_caller",
                        password="Caller-Pw-1",
                        autocommit=True,
                    )
                out.append(outcome(role if who == "role" else su, sql, notices))
            if role is not None:
                role.close()
            su.execute("DROP ROLE sqlfn_caller")
            outcomes.append(out)
    for (_, sql), want, got in zip(PRIVILEGES, *outcomes, strict=True):
        assert got == want, f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {got}"


def test_refusals_name_what_to_do(hw_server: HeadwaterServer) -> None:
    setup = [*TABLE, "CREATE FUNCTION f(int) RETURNS int LANGUAGE sql AS 'SELECT $1'"]
    setup.append("CREATE FUNCTION rec(n int) RETURNS int LANGUAGE sql AS 'SELECT rec(n - 1)'")
    setup.append("CREATE TABLE dep (k int, v int DEFAULT f(7))")
    with in_schema([hw_server.dsn], "sqlfn_refused", setup) as (conn,):
        for sql, state in REFUSED:
            try:
                conn.execute(sql)
            except psycopg.Error as e:
                assert e.sqlstate == state, (sql, e.sqlstate, str(e))
                if state in ("0A000", "2BP01"):
                    assert e.diag.message_hint, sql  # says what to do instead
            else:
                raise AssertionError(f"{sql} ran")
        assert conn.execute("SELECT f(41) + 1").fetchone() == (42,)  # still usable


VIEW_WRITES = [
    "INSERT INTO t VALUES (4, 40, 'x', 4.25), (5, 5, 'q', 0.5)",
    "UPDATE t SET a = a + 7 WHERE id IN (1, 4)",
    "DELETE FROM t WHERE id = 2",
    "UPDATE t SET b = 'x' WHERE id = 5",
    "INSERT INTO t SELECT g, g % 13, 'g' || (g % 3), g / 4.0 FROM generate_series(6, 200) g",
]


def test_materialized_views_calling_functions(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """A materialized view over calls (inlined when it is created) equals PostgreSQL's
    query after each write; the view is maintained like any other."""
    setup = [
        *TABLE,
        "CREATE FUNCTION bucket(v int, width int DEFAULT 10) RETURNS int IMMUTABLE"
        " LANGUAGE sql RETURN (v / width) * width",
        "CREATE FUNCTION weight(c numeric) RETURNS numeric(12,2) LANGUAGE sql"
        " AS 'SELECT coalesce(c, 0) * 2'",
        "CREATE FUNCTION heavy(lim int) RETURNS TABLE(id int, a int) LANGUAGE sql"
        " AS 'SELECT id, a FROM t WHERE a >= lim'",
    ]
    views = {
        "mv_buckets": "SELECT bucket(a) AS k, count(*) AS n, sum(weight(c)) AS w FROM t"
        " WHERE a IS NOT NULL GROUP BY bucket(a)",
        "mv_heavy": "SELECT b, count(*) AS n FROM t JOIN heavy(10) AS h ON h.id = t.id GROUP BY b",
    }
    with in_schema([pg_oracle.dsn, hw_server.dsn], "sqlfn_mv", setup) as (pg, hw):
        for name, sql in views.items():
            hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        for write in ["SELECT 1", *VIEW_WRITES]:
            pg.execute(write)
            hw.execute(write)
            for name, sql in views.items():
                want = sorted(pg.execute(sql).fetchall())
                got = sorted(hw.execute(f"SELECT * FROM {name}").fetchall())
                assert got == want, (write, name, got, want)
        # the view holds the body: replacing it would leave the view on the old one
        for sql, error in [
            ("DROP FUNCTION bucket", psycopg.errors.DependentObjectsStillExist),
            (
                "CREATE OR REPLACE FUNCTION bucket(v int, width int DEFAULT 10) RETURNS int"
                " LANGUAGE sql RETURN v",
                psycopg.errors.FeatureNotSupported,
            ),
        ]:
            try:
                hw.execute(sql)
            except error as e:
                assert (
                    "materialized view mv_buckets depends on function bucket(integer,integer)"
                    in str(e.diag.message_detail)
                )
            else:
                raise AssertionError(f"{sql} ran")
        hw.execute("DROP FUNCTION bucket CASCADE")
        assert hw.execute(
            "SELECT count(*) FROM pg_matviews WHERE matviewname = 'mv_buckets'"
        ).fetchone() == (0,)


def test_prepared_calls_with_parameters(hw_server: HeadwaterServer) -> None:
    """asyncpg prepares a call with $n arguments (a body's own $1 is another thing)."""

    async def run() -> None:
        conn = await asyncpg.connect(
            host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
        )
        try:
            await conn.execute("DROP SCHEMA IF EXISTS sqlfn_prep CASCADE")
            await conn.execute("CREATE SCHEMA sqlfn_prep")
            await conn.execute("SET search_path = sqlfn_prep")
            await conn.execute(
                "CREATE FUNCTION mul(int, int) RETURNS int LANGUAGE sql AS 'SELECT $1 * $2'"
            )
            stmt = await conn.prepare("SELECT mul($1, $2) + $2 AS r")
            assert [await stmt.fetchval(i, 3) for i in range(3)] == [3, 6, 9]
            assert await conn.fetchval("SELECT mul($1::int, 7)", 6) == 42
        finally:
            await conn.close()

    asyncio.run(run())


def test_psql_lists_functions(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """psql's \\df: schema, name, result and argument types, kind, as PostgreSQL's."""
    setup = (
        "DROP SCHEMA IF EXISTS sqlfn_psql CASCADE; CREATE SCHEMA sqlfn_psql;"
        " CREATE FUNCTION sqlfn_psql.add(a integer, b integer DEFAULT 2) RETURNS integer"
        " LANGUAGE sql AS 'SELECT a + b';"
        " CREATE FUNCTION sqlfn_psql.evens(n int) RETURNS TABLE(i int) LANGUAGE sql"
        " AS 'SELECT g FROM generate_series(0, n, 2) g';"
    )
    want, got = psql_outputs((pg_oracle.dsn, hw_server.dsn), setup, "\\df sqlfn_psql.*\n")
    assert got == want


def test_functions_kept_across_a_restart() -> None:
    """Functions and procedures are catalog objects: a SIGKILL and restart keeps them; DROP SCHEMA
    names them (2BP01) and CASCADE drops them."""
    server = start_temp_server()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA lib")
            conn.execute(
                "CREATE FUNCTION lib.inc(x int, by int DEFAULT 1) RETURNS int"
                " LANGUAGE sql IMMUTABLE STRICT RETURN x + by"
            )
            conn.execute("CREATE VIEW lib_v AS SELECT lib.inc(41) AS answer")
            conn.execute(
                "CREATE PROCEDURE stamp(v int) LANGUAGE plpgsql AS $$ BEGIN"
                " CREATE TABLE IF NOT EXISTS stamps (v int); INSERT INTO stamps VALUES (v); END $$"
            )
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT lib.inc(1), lib.inc(1, 5), lib.inc(NULL)").fetchone() == (
                2,
                6,
                None,
            )
            assert conn.execute("SELECT * FROM lib_v").fetchone() == (42,)
            conn.execute("CALL stamp(3)")  # a procedure, PL/pgSQL (server/routine_calls.py)
            assert conn.execute("SELECT v FROM stamps").fetchall() == [(3,)]
            try:  # the view's dependency on the function was kept too
                conn.execute("DROP FUNCTION lib.inc")
            except psycopg.errors.DependentObjectsStillExist:
                pass
            else:
                raise AssertionError("DROP FUNCTION dropped a function a view holds")
            conn.execute("DROP VIEW lib_v")
            try:
                conn.execute("DROP SCHEMA lib")
            except psycopg.errors.DependentObjectsStillExist as e:
                assert (
                    e.diag.message_detail
                    == "function lib.inc(integer, integer) depends on schema lib"
                )
            else:
                raise AssertionError("DROP SCHEMA lib dropped its function")
            conn.execute("DROP SCHEMA lib CASCADE")
            assert conn.execute(
                "SELECT count(*) FROM pg_proc WHERE proname = 'inc'"
            ).fetchone() == (0,)
    finally:
        server.stop()
