"""CREATE DOMAIN (server/domains.py, catalog/pg/domains.py) against PostgreSQL 15: NOT
NULL, CHECK (VALUE ...) and DEFAULT enforced on every write path (INSERT of constants,
prepared INSERT, INSERT ... SELECT, UPDATE, upsert, COPY, ADD COLUMN over existing
rows) with PostgreSQL's errors; ALTER DOMAIN; casts to a domain; pg_type,
pg_attribute, format_type, pg_constraint and psql's \\d; DROP DOMAIN refused while
used; kept across a restart."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.hwserver import HeadwaterServer, start_temp_server
from tests.oracle_scripts import assert_same_as_postgres, psql_outputs

DOMAINS = [
    "CREATE DOMAIN posint AS integer CHECK (VALUE > 0)",
    "CREATE DOMAIN email AS text NOT NULL CONSTRAINT email_has_at CHECK (VALUE LIKE '%@%')"
    " DEFAULT 'nobody@example.com'",
    "CREATE DOMAIN code AS varchar(5) CHECK (length(VALUE) >= 2) CHECK (upper(VALUE) = VALUE)",
    "CREATE DOMAIN price AS numeric(10,2) DEFAULT 0 CHECK (VALUE >= 0)",
]
SCRIPT = [
    *DOMAINS,
    "CREATE DOMAIN posint AS integer",
    "CREATE DOMAIN bad AS integer CHECK (other > 0)",
    "CREATE DOMAIN bad AS integer PRIMARY KEY",
    "CREATE TABLE people (id posint PRIMARY KEY, mail email, c code, p price, n int)",
    "INSERT INTO people (id, c) VALUES (1, 'AB')",
    "INSERT INTO people VALUES (0, 'a@b', 'AB', 1, 1)",
    "INSERT INTO people VALUES (2, 'nope', 'AB', 1, 1)",
    "INSERT INTO people VALUES (3, NULL, 'AB', 1, 1)",
    "INSERT INTO people VALUES (4, 'x@y', 'ab', 1, 1)",
    "INSERT INTO people VALUES (5, 'x@y', 'ABCDEFG', 1, 1)",
    "INSERT INTO people VALUES (6, 'x@y', 'CD', -1, 1)",
    "INSERT INTO people VALUES (7, 'x@y', 'CD', 2.5, 1), (8, 'z@y', 'EF', 3, 2)",
    "INSERT INTO people SELECT id + 10, mail, c, p, n FROM people",
    "INSERT INTO people SELECT -id, mail, c, p, n FROM people WHERE id = 1",
    "UPDATE people SET id = -1 WHERE id = 1",
    "UPDATE people SET c = 'Q' WHERE id = 1",
    "UPDATE people SET p = p - 100 WHERE n = 2",
    "UPDATE people SET mail = upper(mail) WHERE id > 10",
    "INSERT INTO people VALUES (7, 'a@b', 'GH', 1, 1) ON CONFLICT (id) DO UPDATE SET p = -5",
    "INSERT INTO people VALUES (7, 'a@b', 'GH', 1, 1) ON CONFLICT (id) DO UPDATE SET p = 9",
    "SELECT * FROM people ORDER BY id",
    "SELECT 5::posint, '7'::posint + 1, 'a@b'::email",
    "SELECT format_type(atttypid, atttypmod), attnotnull, atthasdef FROM pg_attribute"
    " WHERE attrelid = 'people'::regclass AND attnum > 0 ORDER BY attnum",
    "SELECT typname, typtype, format_type(typbasetype, typtypmod), typnotnull, typdefault,"
    " typarray <> 0 FROM pg_type WHERE typtype = 'd'"
    " AND typnamespace = current_schema()::regnamespace ORDER BY 1",
    "SELECT 'posint'::regtype::oid = (SELECT oid FROM pg_type WHERE typname = 'posint')",
    "SELECT conname, contype, contypid::regtype::text, conrelid FROM pg_constraint"
    " WHERE contypid <> 0 AND connamespace = current_schema()::regnamespace ORDER BY 1",
    "SELECT conname FROM pg_constraint WHERE conrelid = 'people'::regclass ORDER BY 1",
    "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'posint_check'",
    # ALTER DOMAIN: the tables of the domain take the change, their rows checked
    "ALTER DOMAIN price ADD CONSTRAINT small CHECK (VALUE < 1000)",
    "ALTER DOMAIN price ADD CONSTRAINT tiny CHECK (VALUE < 2)",
    "ALTER DOMAIN price ADD CONSTRAINT tiny CHECK (VALUE < 2) NOT VALID",
    "INSERT INTO people (id, c, p) VALUES (40, 'TT', 5)",
    "ALTER DOMAIN price VALIDATE CONSTRAINT tiny",
    "ALTER DOMAIN price DROP CONSTRAINT tiny",
    "ALTER DOMAIN price DROP CONSTRAINT IF EXISTS tiny",
    "ALTER DOMAIN price DROP CONSTRAINT tiny",
    "ALTER DOMAIN price SET DEFAULT 7",
    "INSERT INTO people (id, c) VALUES (41, 'UU') RETURNING p",
    "ALTER DOMAIN price DROP DEFAULT",
    "INSERT INTO people (id, c) VALUES (42, 'VV') RETURNING p",
    "ALTER DOMAIN code SET NOT NULL",
    "ALTER DOMAIN price SET NOT NULL",
    "ALTER DOMAIN email DROP NOT NULL",
    "INSERT INTO people (id, mail, c) VALUES (43, NULL, 'WW') RETURNING mail",
    "SELECT conname, convalidated FROM pg_constraint WHERE contypid = 'price'::regtype ORDER BY 1",
    "SELECT typname, typnotnull, typdefault FROM pg_type WHERE typtype = 'd'"
    " AND typnamespace = current_schema()::regnamespace ORDER BY 1",
    # a column added over existing rows takes the domain's DEFAULT, and its CHECKs
    "ALTER TABLE people ADD COLUMN m2 email",
    "ALTER TABLE people ADD COLUMN extra posint",
    "SELECT id, m2, extra FROM people ORDER BY id",
    "INSERT INTO people (id, c, extra) VALUES (30, 'ZZ', -5)",
    "ALTER TABLE people ADD COLUMN broken posint DEFAULT -1",
    "ALTER TABLE people ALTER COLUMN n TYPE posint",
    "DROP DOMAIN posint",
    "DROP DOMAIN IF EXISTS nosuch",
    "DROP DOMAIN nosuch",
    "CREATE TABLE t2 (a code)",
    "DROP TABLE t2",
    "DROP DOMAIN code, price",
    "CREATE TABLE t3 (a posint, CONSTRAINT posint_check CHECK (a < 100))",
    "INSERT INTO t3 VALUES (100)",
    "INSERT INTO t3 VALUES (0)",
    "ALTER TABLE t3 DROP CONSTRAINT posint_check",
    "INSERT INTO t3 VALUES (100)",
    "INSERT INTO t3 VALUES (0)",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "domains", SCRIPT, ("position",))


def test_extended_protocol_and_copy(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """Prepared INSERTs and UPDATEs (the fast paths) and COPY check the domain too."""
    out = []
    for dsn in (hw_server.dsn, pg_oracle.dsn):
        got: list[Any] = []
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS domains_ext CASCADE")
            conn.execute("CREATE SCHEMA domains_ext")
            conn.execute("SET search_path = domains_ext")
            for sql in DOMAINS:
                conn.execute(sql)
            conn.execute("CREATE TABLE t (id posint PRIMARY KEY, mail email, p price)")
            for args in ((1, "a@b", 1), (2, "ab", 1), (0, "a@b", 1), (3, None, 1), (4, "c@d", -2)):
                try:
                    conn.execute("INSERT INTO t VALUES (%s, %s, %s)", args, prepare=True)
                    got.append("ok")
                except psycopg.Error as e:
                    got.append((e.sqlstate, e.diag.message_primary))
            for args in ((-1, 1), (5, 1), ("x", 1)):
                try:
                    conn.execute("UPDATE t SET p = %s WHERE id = %s", args, prepare=True)
                    got.append("ok")
                except psycopg.Error as e:
                    got.append((e.sqlstate, e.diag.message_primary))
            for rows in ([(10, "e@f", 1)], [(11, "e@f", -1)], [(12, "nope", 1)]):
                try:
                    with conn.cursor().copy("COPY t FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)
                    got.append("ok")
                except psycopg.Error as e:
                    got.append((e.sqlstate, e.diag.message_primary))
            got.append(conn.execute("SELECT * FROM t ORDER BY id").fetchall())
            conn.execute("DROP SCHEMA domains_ext CASCADE")
        out.append(got)
    assert out[0] == out[1]


def test_psql_describes_the_table(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    setup = (
        "DROP SCHEMA IF EXISTS domains_psql CASCADE; CREATE SCHEMA domains_psql;"
        " SET search_path = domains_psql;"
        + "".join(f" {sql};" for sql in DOMAINS)
        + " CREATE TABLE domains_psql.t (id posint PRIMARY KEY, mail email, c code,"
        " p price DEFAULT 1, n int);"
    )
    want, got = psql_outputs((pg_oracle.dsn, hw_server.dsn), setup, "\\d domains_psql.t\n")
    assert got == want


def test_domains_kept_across_a_restart() -> None:
    server = start_temp_server()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            for sql in DOMAINS:
                conn.execute(sql)
            conn.execute("CREATE TABLE t (id posint, mail email)")
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO t (id) VALUES (1)")
            assert conn.execute("SELECT * FROM t").fetchall() == [(1, "nobody@example.com")]
            try:
                conn.execute("INSERT INTO t VALUES (0, 'a@b')")
            except psycopg.errors.CheckViolation as e:
                assert str(e) == 'value for domain posint violates check constraint "posint_check"'
            else:
                raise AssertionError("the domain's CHECK was lost")
            types = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = 't'::regclass AND attnum > 0 ORDER BY attnum"
            ).fetchall()
            assert types == [("posint",), ("email",)]
    finally:
        server.stop()
