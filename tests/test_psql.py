"""A scripted psql session, run against PostgreSQL 15 and Headwater: same output."""

from __future__ import annotations

import shutil

import pytest

from tests.hwserver import run_psql

SCRIPT = r"""
CREATE TABLE psql_orders (id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2),
                          placed date DEFAULT '2024-01-01', paid boolean);
INSERT INTO psql_orders VALUES (1, 'ada', 12.50, '2024-03-01', true), (2, 'bob', 3.2, NULL, false);
INSERT INTO psql_orders (id, customer) VALUES (3, 'cy');
SELECT * FROM psql_orders ORDER BY id;
SELECT customer, sum(amount) AS total, count(*) FROM psql_orders
  GROUP BY customer ORDER BY customer;
UPDATE psql_orders SET amount = amount * 2 WHERE id = 1 RETURNING id, amount;
INSERT INTO psql_orders VALUES (1, 'eve', 1, NULL, NULL);
INSERT INTO psql_orders VALUES (4, NULL, 1, NULL, NULL);
SELECT * FROM psql_missing;
SELECT missing_column FROM psql_orders;
SELECT 1/0;
BEGIN;
DELETE FROM psql_orders;
SELECT count(*) FROM psql_orders;
ROLLBACK;
SELECT count(*) FROM psql_orders;
BEGIN;
SELECT 1/0;
SELECT 1;
ROLLBACK;
CREATE VIEW psql_big AS SELECT id, customer FROM psql_orders WHERE amount > 5;
SELECT * FROM psql_big;
DROP TABLE psql_orders;
DROP TABLE psql_orders CASCADE;
SELECT 1.50::numeric(5,2) AS n, 2.5::float8 AS f, 'a'::varchar(3) AS v, true AS b,
       '2024-02-29'::date AS d, '2024-02-29 12:34:56.5'::timestamp AS ts,
       NULL::int AS nothing;
"""


def _psql(host: str, port: int) -> str:
    return run_psql(host, port, SCRIPT, quiet=True)


@pytest.mark.skipif(
    shutil.which("psql") is None,
    reason="psql is not installed (apt-get install postgresql-client-15)",
)
def test_psql_session_matches_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    expected = _psql(pg_oracle.host, pg_oracle.port)
    actual = _psql(hw_server.host, hw_server.port)
    assert actual.splitlines() == expected.splitlines()


ROLLBACK_SCRIPT = r"""
\set ON_ERROR_ROLLBACK on
CREATE TABLE psql_sp (id int PRIMARY KEY, k text UNIQUE, n int);
INSERT INTO psql_sp VALUES (1, 'a', 0), (2, 'b', 0);
BEGIN;
UPDATE psql_sp SET n = n + 1 WHERE k = 'a';
INSERT INTO psql_sp SELECT 3, 'c', 0;
INSERT INTO psql_sp VALUES (4, 'a', 0);
UPDATE psql_sp SET n = n + 10 WHERE n >= 0;
INSERT INTO psql_sp VALUES (5, NULL, NULL), (3, 'x', 1);
COMMIT;
SELECT * FROM psql_sp ORDER BY id;
DROP TABLE psql_sp;
"""


@pytest.mark.skipif(
    shutil.which("psql") is None,
    reason="psql is not installed (apt-get install postgresql-client-15)",
)
def test_psql_on_error_rollback_matches_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    """psql's ON_ERROR_ROLLBACK wraps each statement of a block in a savepoint and rolls
    back to it on an error: after a write in the block's writing transaction (here an
    INSERT ... SELECT) that was 0A000 and lost the block."""
    expected = run_psql(pg_oracle.host, pg_oracle.port, ROLLBACK_SCRIPT, quiet=True)
    actual = run_psql(hw_server.host, hw_server.port, ROLLBACK_SCRIPT, quiet=True)
    assert actual.splitlines() == expected.splitlines()
