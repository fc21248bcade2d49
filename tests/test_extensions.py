"""CREATE EXTENSION / DROP EXTENSION for the extensions whose functions Headwater
provides (pgcrypto, uuid-ossp; plpgsql is there from the start), against PostgreSQL 15:
the same tags, notices, SQLSTATEs, pg_extension rows and function results."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.hwserver import HeadwaterServer, start_temp_server
from tests.oracle_scripts import assert_same_as_postgres, psql_outputs

SCRIPT = [
    "SELECT extname, extversion, extnamespace::regnamespace::text, extrelocatable"
    " FROM pg_extension ORDER BY 1",
    "CREATE EXTENSION pgcrypto",
    "CREATE EXTENSION pgcrypto",
    "CREATE EXTENSION IF NOT EXISTS pgcrypto",
    'CREATE EXTENSION IF NOT EXISTS "uuid-ossp"',
    "CREATE EXTENSION plpgsql",
    "CREATE EXTENSION IF NOT EXISTS plpgsql",
    "SELECT extname, extversion, extnamespace::regnamespace::text = current_schema,"
    " extrelocatable FROM pg_extension ORDER BY 1",
    "SELECT name, default_version, installed_version FROM pg_available_extensions"
    " WHERE name IN ('pgcrypto', 'uuid-ossp', 'plpgsql') ORDER BY 1",
    "SELECT length(uuid_generate_v4()::text), uuid_generate_v4() <> uuid_generate_v4(),"
    " length(uuid_generate_v1()::text), uuid_nil(), uuid_ns_dns(), uuid_ns_url(),"
    " uuid_generate_v3(uuid_ns_dns(), 'example.com'), uuid_generate_v5(uuid_ns_url(), 'x')",
    "SELECT encode(digest('abc', 'sha256'), 'hex'), encode(digest('abc'::bytea, 'md5'), 'hex'),"
    " encode(digest('héllo', 'sha1'), 'hex'), encode(hmac('abc', 'key', 'sha256'), 'hex'),"
    " encode(hmac('\\x01'::bytea, '\\x02'::bytea, 'sha512'), 'hex')",
    "SELECT digest('abc', 'nosuch')",
    "SELECT length(gen_random_bytes(16)), gen_random_bytes(8) <> gen_random_bytes(8)",
    "SELECT gen_random_bytes(0)",
    "CREATE TABLE tok (id uuid PRIMARY KEY DEFAULT uuid_generate_v4(), h bytea)",
    "INSERT INTO tok (h) SELECT digest(g::text, 'sha256') FROM generate_series(1, 3) g",
    "SELECT count(DISTINCT id), count(*) FROM tok",
    'DROP EXTENSION "uuid-ossp"',
    "CREATE VIEW tv AS SELECT uuid_nil() AS n",
    "ALTER TABLE tok ADD CONSTRAINT h_set CHECK (h <> digest('', 'md5'))",
    "DROP EXTENSION pgcrypto",
    "DROP VIEW tv",
    "ALTER TABLE tok DROP CONSTRAINT h_set",
    'DROP EXTENSION "uuid-ossp" CASCADE',
    "SELECT column_default FROM information_schema.columns WHERE table_name = 'tok'"
    " ORDER BY ordinal_position",
    'DROP EXTENSION "uuid-ossp"',
    'DROP EXTENSION IF EXISTS "uuid-ossp"',
    "DROP EXTENSION pgcrypto",
    "CREATE EXTENSION pgcrypto WITH SCHEMA nosuchschema",
    "CREATE EXTENSION pgcrypto VERSION '9.9'",
    "CREATE EXTENSION pgcrypto WITH SCHEMA public",
    "SELECT extname, extnamespace::regnamespace::text = current_schema FROM pg_extension"
    " ORDER BY 1",
    "DROP EXTENSION pgcrypto",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "extensions", SCRIPT, ("types",))


def test_an_extension_not_provided(hw_server: HeadwaterServer) -> None:
    """PostgreSQL's error (0A000, its message); the hint names what is provided."""
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION postgis")
        except psycopg.errors.FeatureNotSupported as e:
            assert e.diag.message_primary == 'extension "postgis" is not available'
            assert "pgcrypto, uuid-ossp" in str(e.diag.message_hint)
        else:
            raise AssertionError("CREATE EXTENSION postgis succeeded")


def test_extensions_kept_across_a_restart() -> None:
    server = start_temp_server()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute('CREATE EXTENSION IF NOT EXISTS "uuid-ossp"')
            conn.execute("CREATE SCHEMA crypto")
            conn.execute("CREATE EXTENSION pgcrypto SCHEMA crypto")
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT extname, extnamespace::regnamespace::text FROM pg_extension ORDER BY 1"
            ).fetchall()
            assert rows == [
                ("pgcrypto", "crypto"),
                ("plpgsql", "pg_catalog"),
                ("uuid-ossp", "public"),
            ]
            with psycopg.ClientCursor(conn) as cur:
                try:
                    cur.execute("DROP SCHEMA crypto")
                except psycopg.errors.DependentObjectsStillExist as e:
                    assert "extension pgcrypto depends on schema crypto" in str(
                        e.diag.message_detail
                    )
                else:
                    raise AssertionError("DROP SCHEMA crypto dropped its extension")
            conn.execute("DROP SCHEMA crypto CASCADE")
            names = conn.execute("SELECT extname FROM pg_extension ORDER BY 1").fetchall()
            assert names == [("plpgsql",), ("uuid-ossp",)]
    finally:
        server.stop()


def test_psql_lists_extensions(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """psql's \\dx: name, version, schema and description as PostgreSQL's."""
    setup = 'CREATE EXTENSION IF NOT EXISTS "uuid-ossp";'
    try:
        want, got = psql_outputs((pg_oracle.dsn, hw_server.dsn), setup, "\\dx uuid-ossp\n")
        assert got == want
    finally:
        for dsn in (pg_oracle.dsn, hw_server.dsn):
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute('DROP EXTENSION IF EXISTS "uuid-ossp"')
