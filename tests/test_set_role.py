"""SET ROLE and sequence privileges against PostgreSQL 15: SET [LOCAL] ROLE, RESET ROLE,
SET ROLE NONE, undone by ROLLBACK and by the end of the block (SET LOCAL), membership
needed, current_user / session_user; GRANT and REVOKE on sequences (ON SEQUENCE, ON ALL
SEQUENCES IN SCHEMA, ON TABLE of a sequence), nextval / currval / setval checked
against them (a serial column's default too, an identity column's not), relacl and
has_sequence_privilege."""

from __future__ import annotations

from typing import Any

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_same_as_postgres

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


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, "pv", SCRIPT, ("position", "types"))
