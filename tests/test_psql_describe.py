"""psql 15's describe commands against Headwater and PostgreSQL 15: the same output.

The same objects are created in both (schema `psqld`, a fresh Headwater server of its
own so that no other test's objects are listed), then one scripted `psql -X` session of
\\l \\dn \\d \\dt \\dv \\dm \\di \\d NAME \\d+ NAME \\du \\x runs against each and the
outputs are compared line by line.

Differences that cannot be removed, and how they are normalised (see `_normalise`):

- `\\l` without a pattern: PostgreSQL also lists its `postgres`, `template0` and
  `template1` databases; a Headwater server has one database. Those rows are dropped
  from PostgreSQL's output and the table is compared cell by cell (their long
  "Access privileges" values make PostgreSQL's columns wider). `\\l headwater` is
  compared exactly.

Everything else is compared exactly. Commands with patterns (`\\dn`, `\\du`) name
the objects of this test because the shared PostgreSQL oracle may hold other tests'
schemas and roles.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.hwserver import HeadwaterServer, run_psql, start_temp_server

SETUP = r"""
DROP SCHEMA IF EXISTS psqld CASCADE;
CREATE SCHEMA psqld;
SET search_path = psqld;
CREATE TABLE orders (
    id int PRIMARY KEY,
    customer varchar(20) NOT NULL DEFAULT 'nobody',
    amount numeric(10,2) DEFAULT 0,
    note text UNIQUE,
    placed date DEFAULT '2024-01-01',
    paid boolean DEFAULT false,
    ratio double precision,
    code char(3),
    qty bigint NOT NULL,
    at timestamp,
    att timestamptz,
    uid uuid,
    doc jsonb,
    raw bytea,
    small smallint
);
CREATE INDEX orders_amount_idx ON orders (amount);
CREATE UNIQUE INDEX orders_customer_note ON orders (customer, note);
CREATE TABLE "Mixed Case" (x int, "Y" text, PRIMARY KEY (x));
CREATE TABLE lines (order_id int NOT NULL REFERENCES orders ON DELETE CASCADE,
                    line int NOT NULL, item text,
                    CONSTRAINT lines_pk PRIMARY KEY (order_id, line));
CREATE VIEW big_orders AS SELECT id, customer FROM orders WHERE amount > 5 AND NOT paid;
CREATE VIEW all_orders AS SELECT * FROM orders;
CREATE VIEW renamed AS SELECT id AS order_id, note FROM orders o WHERE o.note = 'x';
"""

SCRIPT = r"""
SET search_path = psqld;
\l
\l headwater
\dn (psqld|public)
\d
\dt
\dv
\dm
\di
\d orders
\d+ orders
\d big_orders
\d+ big_orders
\d+ all_orders
\d+ renamed
\d "Mixed Case"
\d lines
\d orders_pkey
\d orders_customer_note
\d+ lines_pk
\d nosuch
\dt ord*
\dv *orders
\di lines*
\du headwater
\x
\d orders
\dv
\x
SELECT current_user, current_schema, current_database(), version() LIKE 'PostgreSQL 15%' AS v;
SELECT 'orders'::regclass::oid = c.oid AS same, c.oid::regclass AS name
  FROM pg_class c WHERE relname = 'orders' AND c.relnamespace = 'psqld'::regnamespace;
SELECT format_type(atttypid, atttypmod), attnum FROM pg_attribute
  WHERE attrelid = 'orders'::regclass AND attnum > 0 ORDER BY attnum;
SELECT table_name, column_name, data_type, is_nullable, column_default
  FROM information_schema.columns WHERE table_schema = 'psqld'
  ORDER BY table_name, ordinal_position;
SELECT constraint_name, table_name, constraint_type FROM information_schema.table_constraints
  WHERE table_schema = 'psqld' AND constraint_type <> 'CHECK' ORDER BY 1;
SELECT constraint_name, column_name, ordinal_position FROM information_schema.key_column_usage
  WHERE table_schema = 'psqld' ORDER BY 1, 3;
SELECT table_name, table_type FROM information_schema.tables
  WHERE table_schema = 'psqld' ORDER BY 1;
SELECT schemaname, tablename, indexname, indexdef FROM pg_indexes
  WHERE schemaname = 'psqld' ORDER BY indexname;
"""


def _psql(host: str, port: int, script: str) -> str:
    return run_psql(host, port, script, timeout=60)


def _normalise(text: str) -> list[str]:
    r"""`\l` tables: keep the headwater row, compare cells without padding."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "List of databases":
            out.append("List of databases")
            i += 1
            while i < len(lines) and lines[i].strip():
                row = lines[i]
                if row.startswith("("):  # (n rows)
                    i += 1
                    continue
                cells = [c.strip().rstrip("+").strip() for c in row.split("|")]
                if cells[0] in ("postgres", "template0", "template1") or (
                    cells[0] == "" and any(cells[1:])
                ):
                    i += 1
                    continue
                if set(row) <= set("-+"):
                    out.append("---")
                else:
                    out.append(" | ".join(cells))
                i += 1
            continue
        out.append(line)
        i += 1
    return out


@pytest.fixture(scope="module")
def fresh_server() -> Iterator[HeadwaterServer]:
    server = start_temp_server()
    yield server
    server.stop()


@pytest.mark.skipif(
    shutil.which("psql") is None,
    reason="psql is not installed (apt-get install postgresql-client-15)",
)
def test_psql_describe_matches_postgres(fresh_server: HeadwaterServer, pg_oracle: Any) -> None:
    for host, port in ((pg_oracle.host, pg_oracle.port), (fresh_server.host, fresh_server.port)):
        setup = _psql(host, port, SETUP)
        assert "ERROR" not in setup, setup
    expected = _psql(pg_oracle.host, pg_oracle.port, SCRIPT)
    actual = _psql(fresh_server.host, fresh_server.port, SCRIPT)
    assert "\\l headwater" in actual and "List of relations" in actual
    assert _normalise(actual) == _normalise(expected)


def test_system_relations_have_postgres_columns(
    fresh_server: HeadwaterServer, pg_oracle: Any
) -> None:
    """Every emulated relation answers SELECT * with PostgreSQL 15's column names."""
    import psycopg
    from headwater.catalog.pg.specs import RELATIONS
    from psycopg import sql

    with (
        psycopg.connect(fresh_server.dsn, autocommit=True) as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for schema, name in RELATIONS:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(name)
            )
            expected = [d.name for d in pg.execute(query).description or ()]
            cur = hw.execute(query)
            cur.fetchall()
            assert [d.name for d in cur.description or ()] == expected, (schema, name)
