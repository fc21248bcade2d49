"""CREATE PROCEDURE and CALL, and PL/pgSQL functions (server/routine_calls.py,
server/plpgsql_exec.py), against PostgreSQL 15: a transfer procedure with its checks
and atomicity, SQL procedures (AS $$ ... $$ and BEGIN ATOMIC) with defaults, a
procedure that COMMITs per batch, PL/pgSQL functions with defaults, INTO, recursion
and nesting in expressions, void functions, calls from DO blocks; errors with
PostgreSQL's SQLSTATE, message and CONTEXT; prepared calls through asyncpg."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import asyncpg
import psycopg

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import in_schema, with_context

TRANSFER = """CREATE PROCEDURE transfer(src int, dst int, amount numeric) LANGUAGE plpgsql AS $$
BEGIN
  IF amount <= 0 THEN
    RAISE EXCEPTION 'amount must be positive, got %', amount;
  END IF;
  UPDATE acct SET balance = balance - amount WHERE id = src;
  UPDATE acct SET balance = balance + amount WHERE id = dst;
  IF (SELECT balance FROM acct WHERE id = src) < 0 THEN
    RAISE EXCEPTION 'insufficient funds in %', src USING ERRCODE = 'check_violation';
  END IF;
  RAISE NOTICE 'moved % from % to %', amount, src, dst;
END $$"""
ADD_TAX = """CREATE FUNCTION add_tax(p numeric, rate numeric DEFAULT 0.25) RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE t numeric;
BEGIN
  IF p IS NULL THEN RETURN NULL; END IF;
  t := p * rate;
  RETURN p + t;
END $$"""
SETUP = [
    "CREATE TABLE acct (id int PRIMARY KEY, balance numeric(10,2), note text)",
    "INSERT INTO acct VALUES (1, 100, NULL), (2, 50, NULL)",
    TRANSFER,
    ADD_TAX,
    "CREATE FUNCTION fact(n int) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$"
    " BEGIN IF n <= 1 THEN RETURN 1; END IF; RETURN n * fact(n - 1); END $$",
    "CREATE FUNCTION rich(lim numeric) RETURNS int LANGUAGE plpgsql AS $$ DECLARE c int;"
    " BEGIN SELECT count(*) INTO c FROM acct WHERE balance > lim; RETURN c; END $$",
    "CREATE FUNCTION log_it(msg text) RETURNS void LANGUAGE plpgsql AS $$"
    " BEGIN INSERT INTO acct VALUES (9, 0, msg); END $$",
    "CREATE PROCEDURE note_all(msg text DEFAULT 'hello') LANGUAGE sql AS $$"
    " UPDATE acct SET note = msg; INSERT INTO acct VALUES (3, 0, msg) ON CONFLICT (id)"
    " DO NOTHING $$",
    "CREATE PROCEDURE bump(x int) BEGIN ATOMIC UPDATE acct SET balance = balance + x"
    " WHERE id = 3; END",
    "CREATE PROCEDURE batches() LANGUAGE plpgsql AS $$ BEGIN FOR i IN 10..12 LOOP"
    " INSERT INTO acct VALUES (i, i, 'batch'); COMMIT; END LOOP; END $$",
]
SCRIPT = [
    "CALL transfer(1, 2, 30)",
    "SELECT * FROM acct ORDER BY id",
    "CALL transfer(1, 2, 500)",  # the UPDATEs it made are undone
    "CALL transfer(1, 2, -1)",
    "SELECT * FROM acct ORDER BY id",
    "CALL note_all()",
    "CALL note_all('bye')",
    "CALL bump(7)",
    "SELECT * FROM acct ORDER BY id",
    "SELECT add_tax(100), add_tax(10, 0.5) AS total, add_tax(NULL)",
    "SELECT add_tax(add_tax(8)) + 1 AS twice",
    "SELECT fact(10), fact(1)",
    "SELECT rich(10), rich(1000)",
    "SELECT log_it('logged')",
    "SELECT note FROM acct WHERE id = 9",
    "DO $$ DECLARE v numeric; BEGIN v := add_tax(4); RAISE NOTICE 'v=%', v > 4;"
    " PERFORM log_it('again'); END $$",
    "SELECT count(*) FROM acct WHERE note = 'again'",
    "BEGIN",
    "CALL transfer(2, 1, 5)",
    "ROLLBACK",
    "SELECT balance FROM acct WHERE id IN (1, 2) ORDER BY id",
    "CALL batches()",
    "SELECT count(*) FROM acct WHERE note = 'batch'",
    "BEGIN",
    "CALL batches()",  # COMMIT inside a transaction block: 2D000
    "ROLLBACK",
    "CALL add_tax(1)",
    "SELECT transfer(1, 2, 3)",
    "CALL nosuch(1)",
    "SELECT proname, prokind, prorettype::regtype::text, pg_get_function_arguments(oid),"
    " pg_get_function_result(oid) FROM pg_proc"
    " WHERE pronamespace = current_schema()::regnamespace AND proname <> 'note_all'"
    " ORDER BY 1",
    "DROP PROCEDURE bump",
    "DROP FUNCTION fact",
    "SELECT count(*) FROM pg_proc WHERE proname IN ('bump', 'fact')",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    with in_schema((hw_server.dsn, pg_oracle.dsn), "procs", SETUP) as (hw, pg):
        got: dict[str, list[Any]] = {}
        for name, conn in (("hw", hw), ("pg", pg)):
            notices: list[Any] = []
            conn.add_notice_handler(lambda d, n=notices: n.append(d.message_primary))
            got[name] = [with_context(conn, sql, notices) for sql in SCRIPT]
        for sql, have, want in zip(SCRIPT, got["hw"], got["pg"], strict=True):
            assert have == want, f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {have}"


def test_per_row_calls_are_refused(hw_server: HeadwaterServer) -> None:
    """A PL/pgSQL function in a query over rows would run once per row: refused, naming
    the forms that run (PostgreSQL runs it per row)."""
    with in_schema((hw_server.dsn,), "procs_rows", SETUP) as (hw,):
        for sql in (
            "SELECT id, rich(balance) FROM acct",
            "CREATE VIEW v AS SELECT add_tax(balance) FROM acct",
        ):
            try:
                hw.execute(sql)
            except psycopg.errors.FeatureNotSupported as e:
                assert "can only be called on its own" in str(e), e
            else:
                raise AssertionError(f"{sql} ran")


def test_prepared_calls_through_asyncpg(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    async def run(dsn: str) -> list[Any]:
        p = dict(kv.split("=") for kv in dsn.split())
        conn = await asyncpg.connect(
            host=p["host"], port=int(p["port"]), user=p["user"], database=p["dbname"]
        )
        try:
            await conn.execute("SET search_path = procs_async")
            out = [await conn.fetchval("SELECT add_tax($1)", Decimal("40"))]
            out.append(await conn.fetchval("SELECT add_tax($1, $2)", Decimal(8), Decimal(1)))
            out.append(await conn.fetchval("SELECT fact($1)", 5))
            await conn.execute("CALL transfer($1, $2, $3)", 1, 2, Decimal(10))
            out.append(await conn.fetch("SELECT id, balance FROM acct ORDER BY id"))
            return [[tuple(r) for r in x] if isinstance(x, list) else x for x in out]
        finally:
            await conn.close()

    with in_schema((hw_server.dsn, pg_oracle.dsn), "procs_async", SETUP):
        got = asyncio.run(run(hw_server.dsn))
        want = asyncio.run(run(pg_oracle.dsn))
    assert got == want  # (numerically: an unconstrained numeric may print another scale)
