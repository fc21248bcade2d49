"""BEFORE INSERT / UPDATE row triggers running PL/pgSQL functions that assign NEW's fields
(server/triggers.py, planner/plpgsql.py), against PostgreSQL 15: the `updated_at` idiom,
IF / ELSIF / ELSE over NEW, OLD and TG_OP, WHEN conditions, several triggers in name
order; on every write path (INSERT of constants, prepared and simple, INSERT ... SELECT,
UPDATE by key and by scan, ON CONFLICT, COPY FROM STDIN) with RETURNING; CREATE OR
REPLACE TRIGGER, DROP TRIGGER, DROP FUNCTION (2BP01, CASCADE); pg_trigger,
pg_get_triggerdef and psql's \\d; refusals name what is supported."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import psycopg

from tests.hwserver import HeadwaterServer, start_temp_server
from tests.oracle_scripts import assert_same_as_postgres, in_schema, psql_outputs

FUNCTIONS = [
    "CREATE TABLE tt (id int PRIMARY KEY, name text, n int DEFAULT 0,"
    " created_at timestamptz, updated_at timestamptz, touched boolean DEFAULT false)",
    # the idiom of Rails, Django and Supabase migrations
    "CREATE FUNCTION set_updated_at() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END; $$",
    "CREATE FUNCTION stamp() RETURNS trigger AS $$ BEGIN"
    " IF TG_OP = 'INSERT' THEN NEW.created_at = now(); NEW.n := coalesce(NEW.n, 0) + 1;"
    " ELSIF OLD.name IS DISTINCT FROM NEW.name THEN NEW.touched := true;"
    " NEW.n := OLD.n + 10; ELSE NEW.n := NEW.n * 2; END IF;"
    " IF NEW.name IS NULL THEN RETURN NEW; END IF; NEW.name := upper(NEW.name);"
    " RETURN NEW; END $$ LANGUAGE plpgsql",
]
SCRIPT = [
    *FUNCTIONS,
    "CREATE TRIGGER trg_updated BEFORE UPDATE ON tt FOR EACH ROW EXECUTE FUNCTION set_updated_at()",
    "CREATE TRIGGER a_stamp BEFORE INSERT OR UPDATE ON tt FOR EACH ROW EXECUTE PROCEDURE stamp()",
    "INSERT INTO tt (id, name) VALUES (1, 'a'), (2, 'b'), (3, NULL)",
    "SELECT id, name, n, created_at IS NOT NULL, updated_at IS NULL, touched FROM tt ORDER BY id",
    "UPDATE tt SET name = 'x' WHERE id = 1 RETURNING id, name, n, touched, updated_at IS NOT NULL",
    "UPDATE tt SET n = 5 WHERE id = 2 RETURNING id, name, n, touched, updated_at IS NOT NULL",
    "UPDATE tt SET n = n + 1 WHERE n > 0 RETURNING id, name, n, touched",
    "INSERT INTO tt (id, name, n) VALUES (4, 'c', 7) ON CONFLICT (id) DO NOTHING RETURNING id, n",
    "INSERT INTO tt (id, name) VALUES (5, 'e'), (4, 'cc') ON CONFLICT (id)"
    " DO UPDATE SET name = excluded.name RETURNING id, name, n, touched",
    "INSERT INTO tt (id, name) SELECT g, 'g' || g FROM generate_series(6, 7) g"
    " RETURNING id, name, n",
    "SELECT tgname, tgtype, tgenabled, tgnargs, pg_get_triggerdef(oid),"
    " pg_get_triggerdef(oid, true) FROM pg_trigger WHERE tgrelid = 'tt'::regclass ORDER BY tgname",
    "SELECT p.proname, l.lanname, p.prorettype::regtype::text FROM pg_proc p"
    " JOIN pg_language l ON l.oid = p.prolang WHERE p.proname IN ('stamp', 'set_updated_at')"
    " ORDER BY 1",
    "SELECT set_updated_at()",
    # WHEN, OR REPLACE
    "CREATE TRIGGER t_when BEFORE UPDATE ON tt FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)"
    " EXECUTE FUNCTION set_updated_at()",
    "CREATE TRIGGER t_old BEFORE INSERT ON tt FOR EACH ROW WHEN (OLD.n > 1)"
    " EXECUTE FUNCTION stamp()",
    "CREATE TRIGGER a_stamp BEFORE INSERT ON tt FOR EACH ROW EXECUTE FUNCTION stamp()",
    "CREATE OR REPLACE TRIGGER a_stamp BEFORE INSERT ON tt FOR EACH ROW"
    " WHEN (NEW.n IS NOT NULL) EXECUTE FUNCTION stamp()",
    "INSERT INTO tt (id, name, n) VALUES (8, 'w', 3), (9, 'v', NULL) RETURNING id, name, n",
    "UPDATE tt SET n = n WHERE id = 8 RETURNING id, n",
    "CREATE TRIGGER t_nosuch BEFORE INSERT ON tt FOR EACH ROW EXECUTE FUNCTION nosuch()",
    "CREATE TRIGGER t_notrig BEFORE INSERT ON tt FOR EACH ROW EXECUTE FUNCTION lower()",
    # DROP
    "DROP FUNCTION set_updated_at()",
    "DROP TRIGGER trg_updated ON tt",
    "DROP TRIGGER trg_updated ON tt",
    "DROP TRIGGER IF EXISTS trg_updated ON tt",
    "DROP TRIGGER IF EXISTS trg_updated ON nosuch",
    "DROP FUNCTION set_updated_at() CASCADE",
    "SELECT tgname FROM pg_trigger WHERE tgrelid = 'tt'::regclass ORDER BY 1",
    "UPDATE tt SET name = 'q' WHERE id = 9 RETURNING id, name, n, touched",
    "CREATE FUNCTION takes(int) RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
    'CREATE FUNCTION "Quoted Name"() RETURNS trigger LANGUAGE plpgsql'
    " AS $$ BEGIN NEW.n := 1; RETURN NEW; END $$",
    "DROP TABLE tt",
    "SELECT count(*) FROM pg_trigger WHERE tgname IN ('a_stamp', 't_when')",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "trg", SCRIPT, ("position",))


REFUSED = [
    # (statement, what PostgreSQL runs and Headwater refuses, with a hint)
    "CREATE TRIGGER t2 AFTER INSERT ON tt FOR EACH ROW EXECUTE FUNCTION stamp()",
    "CREATE TRIGGER t3 BEFORE DELETE ON tt FOR EACH ROW EXECUTE FUNCTION stamp()",
    "CREATE TRIGGER t4 BEFORE INSERT ON tt FOR EACH STATEMENT EXECUTE FUNCTION stamp()",
    "CREATE TRIGGER t5 BEFORE UPDATE OF name ON tt FOR EACH ROW EXECUTE FUNCTION stamp()",
    "CREATE FUNCTION r() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
    "CREATE FUNCTION d() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ DECLARE x int; BEGIN RETURN NEW; END $$",
    "CREATE FUNCTION q() RETURNS trigger LANGUAGE plpgsql"
    " AS $$ BEGIN INSERT INTO log VALUES (1); RETURN NEW; END $$",
    # (a plpgsql function that is not a trigger's runs: tests/test_procedures.py)
    "CREATE FUNCTION i() RETURNS int LANGUAGE plpgsql AS $$ DECLARE x int;"
    " BEGIN FOREACH x SLICE 1 IN ARRAY ARRAY[[1]] LOOP END LOOP; RETURN 1; END $$",
]


def test_refusals_name_what_is_supported(hw_server: HeadwaterServer) -> None:
    with in_schema([hw_server.dsn], "trg_refused", FUNCTIONS[:3]) as (conn,):
        for sql in REFUSED:
            try:
                conn.execute(sql)
            except psycopg.errors.FeatureNotSupported as e:
                assert e.diag.message_hint, sql
            else:
                raise AssertionError(f"{sql} ran")


def test_every_write_path_fires(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """The writes the fast paths would take (prepared INSERTs of constants, point
    UPDATEs by key, COPY FROM STDIN) take the general path and get the trigger's values,
    as PostgreSQL's rows do."""
    setup = [
        *FUNCTIONS,
        "CREATE TRIGGER a_stamp BEFORE INSERT OR UPDATE ON tt FOR EACH ROW"
        " EXECUTE FUNCTION stamp()",
    ]
    query = "SELECT id, name, n, touched, created_at IS NOT NULL FROM tt ORDER BY id"
    with in_schema([pg_oracle.dsn, hw_server.dsn], "trg_paths", setup) as conns:
        results = []
        for conn in conns:
            info = conn.info
            asyncio.run(_asyncpg_writes(info.host, info.port, info.user, info.dbname))
            with conn.cursor() as cur:
                with cur.copy("COPY tt (id, name, n) FROM STDIN") as copy:
                    copy.write_row((20, "copied", 4))
                    copy.write_row((21, None, None))
            conn.execute("UPDATE tt SET name = 'p' WHERE id = 10")  # simple protocol, by key
            results.append(conn.execute(query).fetchall())
        assert results[1] == results[0]


async def _asyncpg_writes(host: str, port: int, user: str, dbname: str) -> None:
    conn = await asyncpg.connect(host=host, port=port, user=user, database=dbname)
    try:
        await conn.execute("SET search_path = trg_paths")
        await conn.executemany(
            "INSERT INTO tt (id, name, n) VALUES ($1, $2, $3)", [(10, "a", 1), (11, "b", None)]
        )
        await conn.execute("UPDATE tt SET n = $1 WHERE id = $2", 9, 11)
    finally:
        await conn.close()


def test_psql_shows_triggers(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """psql's \\d lists a table's triggers as PostgreSQL's does."""
    setup = (
        "DROP SCHEMA IF EXISTS trg_psql CASCADE; CREATE SCHEMA trg_psql;"
        " CREATE TABLE trg_psql.t (id int PRIMARY KEY, updated_at timestamptz);"
        " CREATE FUNCTION trg_psql.touch() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;"
        " CREATE TRIGGER touch_t BEFORE UPDATE ON trg_psql.t FOR EACH ROW"
        " EXECUTE FUNCTION trg_psql.touch();"
    )
    want, got = psql_outputs((pg_oracle.dsn, hw_server.dsn), setup, "\\d trg_psql.t\n")
    assert got == want


def test_triggers_kept_across_a_restart() -> None:
    server = start_temp_server()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text, updated_at timestamptz)")
            conn.execute(FUNCTIONS[1])
            conn.execute(
                "CREATE TRIGGER touch BEFORE INSERT OR UPDATE ON t FOR EACH ROW"
                " EXECUTE FUNCTION set_updated_at()"
            )
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            row = conn.execute(
                "INSERT INTO t (id, v) VALUES (1, 'a') RETURNING updated_at IS NOT NULL"
            ).fetchone()
            assert row == (True,)
            assert conn.execute("SELECT tgname FROM pg_trigger").fetchall() == [("touch",)]
    finally:
        server.stop()
