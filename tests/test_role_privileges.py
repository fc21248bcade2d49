"""SET ROLE, sequence privileges and ALTER DEFAULT PRIVILEGES against PostgreSQL 15:
SET [LOCAL] ROLE, RESET ROLE,
SET ROLE NONE, undone by ROLLBACK and by the end of the block (SET LOCAL), membership
needed, current_user / session_user; GRANT and REVOKE on sequences (ON SEQUENCE, ON ALL
SEQUENCES IN SCHEMA, ON TABLE of a sequence), nextval / currval / setval checked
against them (a serial column's default too, an identity column's not), relacl and
has_sequence_privilege; ALTER DEFAULT PRIVILEGES [FOR ROLE] [IN SCHEMA] GRANT / REVOKE on
tables, sequences, functions and schemas: pg_default_acl, psql's \\ddp, the ACLs of
tables, views, sequences (a serial's too), functions and schemas created afterwards,
privileges checked by them, DROP ROLE naming the entries."""

from __future__ import annotations

from typing import Any

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_same_as_postgres, psql_outputs

ROLES = ("pv_app", "pv_grp", "pv_member")
SCRIPT = [
    *(f"!DROP ROLE IF EXISTS {r}" for r in ROLES),
    "!CREATE ROLE pv_app",
    "!CREATE ROLE pv_grp NOLOGIN",
    "!CREATE ROLE pv_member LOGIN IN ROLE pv_grp",
    "!GRANT USAGE ON SCHEMA pv TO pv_app",
    "CREATE SEQUENCE sq",
    "CREATE TABLE tg (id serial PRIMARY KEY, v text)",
    "CREATE TABLE ti (id int GENERATED ALWAYS AS IDENTITY, v text)",
    "GRANT USAGE, SELECT ON SEQUENCE sq TO pv_app",
    "GRANT INSERT, SELECT ON tg, ti TO pv_app",
    "SELECT relname, relacl FROM pg_class WHERE relname IN ('sq', 'tg_id_seq', 'tg')"
    " AND relnamespace = 'pv'::regnamespace ORDER BY 1",
    "SELECT current_user, session_user",
    "SET ROLE pv_app",
    "SELECT current_user, session_user, current_setting('role'), current_setting('is_superuser')",
    "SELECT nextval('sq')",
    "SELECT currval('sq')",
    "SELECT setval('sq', 10)",  # UPDATE is not granted
    "INSERT INTO tg (v) VALUES ('x')",  # the serial's sequence: no USAGE
    "INSERT INTO ti (v) VALUES ('x')",  # an identity column's: none needed
    "SELECT count(*) FROM ti",
    "CREATE TABLE mine (a int)",  # no CREATE on the schema
    "DELETE FROM ti",
    "RESET ROLE",
    "SELECT current_user",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA pv TO pv_app",
    "SET ROLE pv_app",
    "INSERT INTO tg (v) VALUES ('x') RETURNING id",
    "SET ROLE NONE",
    "BEGIN",
    "SET LOCAL ROLE pv_app",
    "SELECT current_user",
    "COMMIT",
    "SELECT current_user",  # SET LOCAL ended with the block
    "BEGIN",
    "SET ROLE pv_app",
    "ROLLBACK",
    "SELECT current_user",  # undone
    "SET LOCAL ROLE pv_app",  # outside a block: a warning, nothing set
    "SELECT current_user",
    "SET ROLE pv_nosuch",
    "SET ROLE pv_member",
    "SET ROLE pv_grp",  # pv_member is a member
    "SELECT current_user",
    "SET ROLE pv_app",  # pv_member is not
    "RESET ROLE",
    "REVOKE USAGE ON SEQUENCE sq FROM pv_app",
    "SELECT relname, relacl FROM pg_class WHERE relname IN ('sq', 'tg_id_seq')"
    " AND relnamespace = 'pv'::regnamespace ORDER BY 1",
    "GRANT SELECT ON SEQUENCE tg TO pv_app",  # not a sequence
    "GRANT INSERT ON SEQUENCE sq TO pv_app",  # not a sequence's privilege
    "GRANT UPDATE ON TABLE sq TO pv_app",
    "SELECT relacl FROM pg_class WHERE relname = 'sq' AND relnamespace = 'pv'::regnamespace",
    "SELECT has_sequence_privilege('pv_app', 'sq', 'UPDATE'),"
    " has_sequence_privilege('pv_app', 'sq', 'USAGE')",
    "SET ROLE pv_app",
    "SELECT setval('sq', 20)",
    "SELECT nextval('sq')",  # UPDATE allows nextval
    "RESET ROLE",
]


_ENTRIES = (
    "SELECT r.rolname, n.nspname, d.defaclobjtype, d.defaclacl::text[]"
    " FROM pg_default_acl d JOIN pg_roles r ON r.oid = d.defaclrole"
    " LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace"
    " WHERE r.rolname IN ('headwater', 'pd_owner') ORDER BY 1, 2, 3"
)
DEFAULTS = [
    "!DROP SCHEMA IF EXISTS pd_new CASCADE",
    *(f"!DROP ROLE IF EXISTS {r}" for r in ("pd_app", "pd_owner")),
    "!CREATE ROLE pd_app",
    "!CREATE ROLE pd_owner",
    "!GRANT CREATE, USAGE ON SCHEMA pd TO pd_owner",
    "!GRANT USAGE ON SCHEMA pd TO pd_app",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA pd GRANT SELECT ON TABLES TO pd_app",
    "ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT ON SEQUENCES TO pd_app",
    "ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC",
    "ALTER DEFAULT PRIVILEGES FOR ROLE pd_owner GRANT INSERT, UPDATE ON TABLES TO pd_app",
    "ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO pd_app",
    _ENTRIES,
    "CREATE TABLE t1 (id serial PRIMARY KEY)",
    "CREATE VIEW v1 AS SELECT 1 AS x",
    "CREATE SEQUENCE s1",
    "CREATE FUNCTION f1() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "CREATE SCHEMA pd_new",
    "SELECT relname, relacl::text[] FROM pg_class WHERE relnamespace = 'pd'::regnamespace"
    " AND relkind IN ('r', 'v', 'S') ORDER BY 1",
    "SELECT proname, proacl::text[] FROM pg_proc WHERE proname = 'f1'",
    "SELECT nspacl::text[] FROM pg_namespace WHERE nspname = 'pd_new'",
    "SET ROLE pd_owner",
    "CREATE TABLE t2 (a int)",
    "RESET ROLE",
    "SELECT relowner::regrole::text, array_length(relacl, 1) FROM pg_class"
    " WHERE relname = 't2' AND relnamespace = 'pd'::regnamespace",
    "SET ROLE pd_app",
    "SELECT * FROM t1",
    "INSERT INTO t1 VALUES (DEFAULT)",  # no INSERT on t1
    "INSERT INTO t2 VALUES (1)",  # pd_owner's default: INSERT
    "SELECT nextval('s1')",
    "SELECT f1()",  # PUBLIC's EXECUTE was revoked
    "RESET ROLE",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA pd REVOKE SELECT ON TABLES FROM pd_app",
    "ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC",
    _ENTRIES,
    "DROP ROLE pd_app",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA pd GRANT ALL ON SCHEMAS TO pd_app",
    "ALTER DEFAULT PRIVILEGES FOR ROLE pd_nosuch GRANT SELECT ON TABLES TO pd_app",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA pd_nosuch GRANT SELECT ON TABLES TO pd_app",
    "ALTER DEFAULT PRIVILEGES GRANT SELECT ON SCHEMAS TO pd_app",
    "ALTER DEFAULT PRIVILEGES REVOKE USAGE ON SCHEMAS FROM pd_app",
    "ALTER DEFAULT PRIVILEGES REVOKE ALL ON SEQUENCES FROM pd_app",
    "ALTER DEFAULT PRIVILEGES FOR ROLE pd_owner REVOKE ALL ON TABLES FROM pd_app",
    _ENTRIES,
    "DROP SCHEMA pd_new",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "pv", SCRIPT, ("position", "types"))


def test_default_privileges_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "pd", DEFAULTS, ("position", "types"))


def test_psql_ddp_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    setup = (
        "DROP ROLE IF EXISTS pq_app; CREATE ROLE pq_app; DROP SCHEMA IF EXISTS pq CASCADE;"
        " CREATE SCHEMA pq;"
        " ALTER DEFAULT PRIVILEGES IN SCHEMA pq GRANT SELECT, INSERT ON TABLES TO pq_app;"
        " ALTER DEFAULT PRIVILEGES IN SCHEMA pq GRANT USAGE ON SEQUENCES TO pq_app;"
    )
    teardown = (
        "ALTER DEFAULT PRIVILEGES IN SCHEMA pq REVOKE ALL ON TABLES FROM pq_app;"
        " ALTER DEFAULT PRIVILEGES IN SCHEMA pq REVOKE ALL ON SEQUENCES FROM pq_app;"
    )
    hw, pg = psql_outputs((hw_server.dsn, pg_oracle.dsn), setup, "\\ddp pq")
    assert hw == pg
    psql_outputs((hw_server.dsn, pg_oracle.dsn), teardown, "SELECT 1")
