"""CREATE TABLE AS, SELECT INTO and temporary tables against PostgreSQL 15: the same
rows, column types, tags, notices and SQLSTATEs.

Each script runs on one fresh connection to each server, in a schema of its own; every
statement's outcome (rows, or command tag, notices, or SQLSTATE and message) must be
identical. The temporary schema's number (pg_temp_N) may differ: it is masked.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer, start_temp_server
from tests.oracle_scripts import assert_same_as_postgres, outcome, psql_outputs

TYPES = (
    "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute a "
    "JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = '{}' AND attnum > 0 "
    "AND c.relnamespace = current_schema()::regnamespace ORDER BY attnum"
)

SCRIPTS: dict[str, list[str]] = {
    "ctas": [
        "CREATE TABLE src (id int PRIMARY KEY, name varchar(10), amount numeric(12,2), "
        "note text, at timestamp)",
        "INSERT INTO src VALUES (1, 'a', 1.50, 'x', '2024-01-01 10:00'), "
        "(2, 'b', 2.25, NULL, '2024-01-02 11:00'), (3, 'c', NULL, 'z', NULL)",
        "CREATE TABLE t1 AS SELECT * FROM src",
        TYPES.format("t1"),
        "SELECT * FROM t1 ORDER BY id",
        "CREATE TABLE t2 AS SELECT id, amount * 2 AS dbl, count(*) OVER () AS n, "
        "'lit' AS lit, 1.5 AS num, name || '!' AS shout, sum(id) OVER () AS s, "
        "id::bigint AS big, true AS flag FROM src WHERE id < 3",
        TYPES.format("t2"),
        "SELECT * FROM t2 ORDER BY id",
        "CREATE TABLE t3 (x, y) AS SELECT id, name FROM src",
        TYPES.format("t3"),
        "CREATE TABLE t4 (x, y, z) AS SELECT id, name FROM src",
        "CREATE TABLE t4 AS SELECT 1, 2",
        TYPES.format("t4"),
        "CREATE TABLE t5 AS SELECT 1 AS a, 2 AS a",
        "CREATE TABLE t1 AS SELECT 1",
        "CREATE TABLE IF NOT EXISTS t1 AS SELECT 1",
        "CREATE TABLE t6 AS SELECT * FROM src WITH NO DATA",
        "SELECT count(*) FROM t6",
        TYPES.format("t6"),
        "CREATE TABLE t7 AS SELECT * FROM src WHERE false",
        "CREATE TABLE t8 AS SELECT 1 / 0 AS boom",
        "SELECT count(*) FROM pg_class WHERE relname = 't8'",
        "CREATE UNLOGGED TABLE t9 AS SELECT id FROM src",
        "CREATE TABLE t10 AS VALUES (1, 'a'), (2, 'b')",
        "SELECT * FROM t10 ORDER BY 1",
        "CREATE TABLE t11 AS SELECT name, sum(amount) AS total FROM src GROUP BY name",
        TYPES.format("t11"),
        "INSERT INTO t11 VALUES ('d', 4)",
        "SELECT * FROM t11 ORDER BY name",
        "CREATE TABLE t12 AS WITH w AS (SELECT id FROM src) SELECT id * 10 AS k FROM w",
        "SELECT * FROM t12 ORDER BY k",
        "CREATE TABLE t13 AS SELECT * FROM nosuch",
        "CREATE TABLE nosuch_schema.t AS SELECT 1",
    ],
    "types": [
        "CREATE TABLE q AS SELECT 'abc'::varchar(5) AS v, 'x'::char(3) AS c, "
        "'2024-01-02'::date AS d, '{\"a\":1}'::jsonb AS j, 1.5::float8 AS f, "
        "2::smallint AS sm, interval '1 day' AS iv, 'abc' AS lit, NULL AS nul, "
        "'2024-01-01 10:00'::timestamptz AS tz",
        TYPES.format("q"),
        "SELECT * FROM q",
        "CREATE TABLE src (id int, name varchar(10), c char(4), amt numeric(10,2))",
        "INSERT INTO src VALUES (1, 'a', 'xy', 1.25), (2, 'b', 'z', NULL)",
        "CREATE TABLE q2 AS SELECT s.name, s.c, upper(s.name) AS up, s.amt, "
        "round(s.amt, 1) AS r, s.amt::numeric(6,1) AS cast1, coalesce(s.amt, 0) AS co, "
        "(SELECT max(id) FROM src) AS sub FROM src s",
        TYPES.format("q2"),
        "SELECT * FROM q2 ORDER BY name",
        "CREATE TABLE q6 AS SELECT id, row_number() OVER (ORDER BY id) AS rn FROM src",
        "SELECT * FROM q6 ORDER BY id",
        "SELECT id INTO q7 FROM src UNION ALL SELECT 3",
        "SELECT * FROM q7 ORDER BY 1",
    ],
    "select_into": [
        "CREATE TABLE src (id int, v text)",
        "INSERT INTO src VALUES (1, 'a'), (2, 'b')",
        "SELECT id, v INTO dst FROM src WHERE id > 1",
        "SELECT * FROM dst",
        TYPES.format("dst"),
        "SELECT * INTO TABLE dst2 FROM src",
        "SELECT count(*) FROM dst2",
        "SELECT 1 AS one INTO dst",
    ],
    "transaction": [
        "BEGIN",
        "CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 5) g",
        "SELECT count(*) FROM t",
        "ROLLBACK",
        "SELECT count(*) FROM pg_class WHERE relname = 't'",
        "BEGIN",
        "CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 5) g",
        "INSERT INTO t SELECT * FROM t",
        "COMMIT",
        "SELECT count(*) FROM t",
    ],
    "temp": [
        "CREATE TABLE perm (id int, v text)",
        "INSERT INTO perm VALUES (1, 'p1'), (2, 'p2')",
        "CREATE TEMP TABLE tt (id int PRIMARY KEY, w text)",
        "INSERT INTO tt VALUES (1, 'one'), (3, 'three')",
        "INSERT INTO tt VALUES (1, 'dup')",
        "UPDATE tt SET w = w || '!' WHERE id = 3",
        "SELECT * FROM tt ORDER BY id",
        "SELECT p.id, p.v, t.w FROM perm p LEFT JOIN tt t USING (id) ORDER BY 1",
        "DELETE FROM tt WHERE id = 1",
        "SELECT count(*) FROM tt",
        "SELECT nspname LIKE 'pg_temp_%' FROM pg_namespace n JOIN pg_class c "
        "ON c.relnamespace = n.oid WHERE relname = 'tt'",
        "SELECT relpersistence FROM pg_class WHERE relname IN ('tt', 'perm') ORDER BY relname",
        "SELECT table_schema LIKE 'pg_temp%', table_name, table_type "
        "FROM information_schema.tables WHERE table_name IN ('tt', 'perm') ORDER BY 2",
        "CREATE TEMPORARY TABLE perm (shadow int)",
        "SELECT * FROM perm",
        "SELECT count(*) FROM public.perm",
        "DROP TABLE perm",
        "SELECT count(*) FROM perm",
        "CREATE TEMP TABLE tas AS SELECT id * 2 AS d FROM perm",
        "SELECT * FROM tas ORDER BY d",
        "CREATE MATERIALIZED VIEW mv AS SELECT * FROM tt",
        "CREATE VIEW tv AS SELECT * FROM tas",
        "CREATE VIEW public.tv2 AS SELECT * FROM tas",
        "CREATE TEMP VIEW tv3 AS SELECT 1 AS one",
        "SELECT relname, relpersistence FROM pg_class WHERE relname LIKE 'tv%' ORDER BY 1",
        "SELECT * FROM tv ORDER BY 1",
        "CREATE MATERIALIZED VIEW mv AS SELECT * FROM tv",
        "CREATE TEMP TABLE x (a int) ON COMMIT DELETE ROWS",
        "INSERT INTO x VALUES (1)",
        "SELECT count(*) FROM x",
        "BEGIN",
        "INSERT INTO x VALUES (1), (2)",
        "SELECT count(*) FROM x",
        "COMMIT",
        "SELECT count(*) FROM x",
        "BEGIN",
        "CREATE TEMP TABLE d (a int) ON COMMIT DROP",
        "INSERT INTO d VALUES (1)",
        "SELECT count(*) FROM d",
        "COMMIT",
        "SELECT count(*) FROM d",
        "CREATE TABLE oc (a int) ON COMMIT DELETE ROWS",
        "CREATE TEMP TABLE public.tq (a int)",
        "CREATE TABLE pg_temp.viaschema (a int)",
        "SELECT count(*) FROM viaschema",
        "CREATE TEMP TABLE IF NOT EXISTS tt (z int)",
        "DROP TABLE tt",
        "SELECT * FROM tt",
        "DISCARD TEMP",
        "SELECT * FROM x",
        "SELECT count(*) FROM pg_class WHERE relpersistence = 't'",
        "CREATE TEMP TABLE again (a int)",
        "SELECT count(*) FROM again",
    ],
    # CREATE TABLE (LIKE ...): what each INCLUDING option copies (planner/like_clause.py)
    "like": [
        "CREATE TYPE lk_mood AS ENUM ('x', 'y')",
        "CREATE TABLE src (id serial PRIMARY KEY, code text NOT NULL UNIQUE,"
        " qty int DEFAULT 3 CONSTRAINT qty_ok CHECK (qty >= 0), m lk_mood, price numeric(10,2),"
        " twice int GENERATED ALWAYS AS (abs(qty)) STORED,"
        " ident bigint GENERATED BY DEFAULT AS IDENTITY, v varchar(12))",
        "CREATE TABLE c1 (LIKE src)",
        "CREATE TABLE c2 (LIKE src INCLUDING DEFAULTS)",
        "CREATE TABLE c3 (LIKE src INCLUDING ALL)",
        "CREATE TABLE c4 (extra int, LIKE src INCLUDING CONSTRAINTS INCLUDING INDEXES, z text)",
        "CREATE TABLE c5 (LIKE src INCLUDING ALL EXCLUDING INDEXES)",
        "CREATE TABLE c6 (LIKE nothere)",
        "CREATE TEMP TABLE c7 (LIKE src INCLUDING DEFAULTS)",
        "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d"
        " ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
        " WHERE c.relname IN ('c1', 'c2', 'c3', 'c4', 'c5', 'c7') AND a.attnum > 0"
        " ORDER BY 1, 2, 3, 5, 6",
        "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid)"
        " FROM pg_constraint WHERE conrelid::regclass::text IN ('c1', 'c2', 'c3', 'c4', 'c5')"
        " ORDER BY 1, 2",
        "INSERT INTO c3 (code, qty) VALUES ('a', 1) RETURNING *",
        "INSERT INTO c3 (code, qty) VALUES ('a', 1)",
        "INSERT INTO c3 (code, qty) VALUES ('b', -1)",
        "INSERT INTO c1 (id, code) VALUES (1, 'a') RETURNING *",
        "INSERT INTO c1 (code) VALUES ('a')",
        "INSERT INTO c2 (code, ident) VALUES ('z', 7) RETURNING id, qty",
        "INSERT INTO c5 (code, qty) VALUES ('q', 4) RETURNING qty, twice, ident",
        "INSERT INTO c4 (code, extra) VALUES ('n', 1), ('n', 2)",
    ],
}


# Not compared: result types (catalog columns of type name show as text) and error
# positions (DDL errors have none yet)
IGNORED = ("types", "position")


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_same_as_postgres(name: str, hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    script, schema = SCRIPTS[name], f"ctas_{name}"
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, schema, script, IGNORED)


def test_parameters(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """CREATE TABLE AS with bound parameters (extended protocol)."""
    for dsn in (pg_oracle.dsn, hw_server.dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS ctas_params")
            cur = conn.execute("CREATE TABLE ctas_params AS SELECT %s::int AS a", [5])
            assert cur.statusmessage == "SELECT 1"
            assert conn.execute("SELECT a FROM ctas_params").fetchall() == [(5,)]
            conn.execute("DROP TABLE IF EXISTS ctas_params2")
            cur = conn.execute("SELECT %s::int AS b INTO ctas_params2", [7])
            assert cur.statusmessage == "SELECT 1" and cur.description is None
            assert conn.execute("SELECT b FROM ctas_params2").fetchall() == [(7,)]


def _temp_setup(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("DROP TABLE IF EXISTS shared_t")
    conn.execute("CREATE TABLE shared_t (a int)")
    conn.execute("CREATE TEMP TABLE mine (a int)")
    conn.execute("INSERT INTO mine VALUES (1), (2)")
    return conn


def test_temp_tables_are_session_local(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    for dsn in (pg_oracle.dsn, hw_server.dsn):
        owner = _temp_setup(dsn)
        schema = owner.execute("SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema()")
        temp = schema.fetchone()[0]
        assert re.fullmatch(r"pg_temp_\d+", temp), dsn
        path = owner.execute("SELECT current_schemas(true)").fetchone()[0]
        assert path[:2] == [temp, "pg_catalog"], dsn
        assert owner.execute("SELECT current_schema()").fetchone()[0] == "public"
        with psycopg.connect(dsn, autocommit=True) as other:
            with pytest.raises(psycopg.errors.UndefinedTable):
                other.execute("SELECT * FROM mine")
            assert other.execute("SELECT pg_my_temp_schema()").fetchone()[0] == 0
            hidden = other.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'mine'"
            )
            assert hidden.fetchone()[0] == 0, dsn
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                other.execute(f"SELECT * FROM {temp}.mine")
            other.execute("CREATE TEMP TABLE mine (b text)")  # its own, same name
            other.execute("INSERT INTO mine VALUES ('x')")
            assert other.execute("SELECT * FROM mine").fetchall() == [("x",)]
        assert owner.execute("SELECT count(*) FROM mine").fetchone()[0] == 2
        owner.close()
        with psycopg.connect(dsn, autocommit=True) as later:
            for _ in range(50):  # PostgreSQL drops them as the backend exits
                n = later.execute(
                    "SELECT count(*) FROM pg_class WHERE relname = 'mine'"
                ).fetchone()[0]
                if n == 0:
                    break
                import time

                time.sleep(0.1)
            assert n == 0, dsn


def test_temp_tables_gone_after_restart() -> None:
    server = start_temp_server()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE keep AS SELECT g FROM generate_series(1, 3) g")
            conn.execute("CREATE TEMP TABLE gone AS SELECT g FROM generate_series(1, 3) g")
            conn.execute("INSERT INTO gone VALUES (4)")
            server.kill()
            server.start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM keep").fetchone()[0] == 3
            n = conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'gone'").fetchone()
            assert n[0] == 0
            assert (
                conn.execute(
                    "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'pg_temp%'"
                ).fetchone()[0]
                == 0
            )
    finally:
        server.stop()


PSQL_SETUP = r"""
DROP SCHEMA IF EXISTS ctaspsql CASCADE;
CREATE SCHEMA ctaspsql;
"""

PSQL_SCRIPT = r"""
SET search_path = ctaspsql;
CREATE TABLE perm (id int PRIMARY KEY, v text);
CREATE TEMP TABLE scratch (id int, note varchar(20));
CREATE TEMP TABLE made AS SELECT id, v || '!' AS shout FROM perm;
SELECT 1 AS one INTO ctaspsql.into_t;
\dt
\d scratch
\d made
\d into_t
"""


def test_psql_describe(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    outputs = psql_outputs((pg_oracle.dsn, hw_server.dsn), PSQL_SETUP, PSQL_SCRIPT)
    outputs = [re.sub(r"pg_temp_\d+", "pg_temp_N", out) for out in outputs]
    assert outputs[1] == outputs[0]


PRIVILEGE_SCRIPT = [
    "CREATE TEMP TABLE mine (a int)",
    "INSERT INTO mine VALUES (1)",
    "SELECT * FROM mine",
    "CREATE TABLE ctas_priv.nope (a int)",
    "CREATE TABLE ctas_priv.nope2 AS SELECT 1",
    "SELECT 1 AS a INTO ctas_priv.nope3",
    "SELECT 1 AS a INTO TEMP ok4",
    "CREATE TEMP TABLE ok5 AS SELECT * FROM mine",
    "SELECT * FROM ok5",
    "CREATE TEMP SEQUENCE tsq",
    "SELECT nextval('tsq')",
]


def test_temp_tables_need_no_create_privilege(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """A role without CREATE on a schema makes temporary tables (TEMP is PUBLIC's) but
    no table there, by CREATE TABLE, CREATE TABLE AS or SELECT INTO (42501)."""
    outcomes = []
    for dsn in (pg_oracle.dsn, hw_server.dsn):
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("DROP SCHEMA IF EXISTS ctas_priv CASCADE")
            admin.execute("CREATE SCHEMA ctas_priv")
            admin.execute("DROP ROLE IF EXISTS ctas_user")
            admin.execute("CREATE ROLE ctas_user LOGIN")
            admin.execute("GRANT USAGE ON SCHEMA ctas_priv TO ctas_user")
        user_dsn = dsn.replace("user=headwater", "user=ctas_user")
        with psycopg.connect(user_dsn, autocommit=True) as conn:
            outcomes.append([outcome(conn, sql, [], IGNORED) for sql in PRIVILEGE_SCRIPT])
    for sql, want, have in zip(PRIVILEGE_SCRIPT, *outcomes, strict=True):
        assert have == want, sql
