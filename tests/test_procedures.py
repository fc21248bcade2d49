"""CREATE PROCEDURE and CALL, and PL/pgSQL functions (server/routine_calls.py,
server/plpgsql_exec.py), against PostgreSQL 15: a transfer procedure with its checks
and atomicity, SQL procedures (AS $$ ... $$ and BEGIN ATOMIC) with defaults, a
procedure that COMMITs per batch, PL/pgSQL functions with defaults, INTO, recursion
and nesting in expressions, void functions, calls from DO blocks and in INSERT's
VALUES; set-returning functions (SETOF, RETURNS TABLE: RETURN NEXT, RETURN QUERY
[EXECUTE], %ROWTYPE records) called in FROM; OUT and INOUT parameters of PL/pgSQL and
SQL functions and procedures (CALL returns their row), pg_proc's view of them; errors
with PostgreSQL's SQLSTATE, message and CONTEXT; prepared calls through asyncpg."""

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


SETOF_SETUP = [
    "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2))",
    "INSERT INTO items VALUES (1, 'a', 1.50), (2, 'b', 2.25), (3, 'c', 10)",
    "CREATE FUNCTION nums(n int) RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN"
    " FOR i IN 1..n LOOP RETURN NEXT i * 10; END LOOP; RETURN; END $$",
    """CREATE FUNCTION pricey(lim numeric)
    RETURNS TABLE (id int, label text, doubled numeric) LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM items WHERE price > lim ORDER BY items.id LOOP
    id := r.id; label := upper(r.name); doubled := r.price * 2;
    RETURN NEXT;
  END LOOP;
  RETURN QUERY SELECT 99, 'extra'::text, 0.5::numeric;
END $$""",
    "CREATE FUNCTION all_items() RETURNS SETOF items LANGUAGE plpgsql AS $$"
    " BEGIN RETURN QUERY SELECT * FROM items ORDER BY id; END $$",
    "CREATE FUNCTION recs() RETURNS SETOF items LANGUAGE plpgsql AS $$"
    " DECLARE r items%ROWTYPE; BEGIN FOR r IN SELECT * FROM items WHERE id <> 2 LOOP"
    " RETURN NEXT r; END LOOP; END $$",
    "CREATE FUNCTION dyn(t text) RETURNS SETOF text LANGUAGE plpgsql AS $$ BEGIN"
    " RETURN QUERY EXECUTE format('SELECT name FROM %I WHERE id > $1 ORDER BY 1', t)"
    " USING 1; END $$",
    "CREATE FUNCTION snums(n int) RETURNS SETOF int STRICT LANGUAGE plpgsql AS $$"
    " BEGIN RETURN NEXT n; END $$",
    "CREATE FUNCTION deep(n int) RETURNS SETOF int LANGUAGE plpgsql AS $$"
    " BEGIN RETURN QUERY SELECT * FROM nums(n); RETURN NEXT -1; END $$",
    "CREATE FUNCTION empty() RETURNS SETOF text LANGUAGE plpgsql AS $$ BEGIN RETURN; END $$",
    "CREATE FUNCTION bad() RETURNS TABLE (a int) LANGUAGE plpgsql AS $$"
    " BEGIN RETURN QUERY SELECT count(*) FROM items; END $$",
    "CREATE FUNCTION bad2() RETURNS TABLE (a int, b int) LANGUAGE plpgsql AS $$"
    " BEGIN RETURN QUERY SELECT 1; END $$",
    "CREATE FUNCTION twice(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN x * 2; END $$",
]
SETOF_SCRIPT = [
    "SELECT * FROM nums(3)",
    "SELECT nums(3)",
    "SELECT * FROM nums(2) AS x",
    "SELECT * FROM nums(2) AS x(y) WHERE y > 10",
    "SELECT n.n, i.name FROM nums(3) n JOIN items i ON i.id * 10 = n.n ORDER BY 1",
    "SELECT * FROM nums(2) a CROSS JOIN nums(3) b ORDER BY 1, 2",
    "SELECT sum(x) FROM nums(5) AS t(x)",
    "SELECT * FROM nums(3) WITH ORDINALITY AS t(v, o) WHERE o > 1",
    "SELECT * FROM nums(2) WITH ORDINALITY",
    "SELECT nums(2) + 1",
    "SELECT * FROM pricey(2)",
    "SELECT label FROM pricey(0) p WHERE p.id < 3 ORDER BY label DESC",
    "SELECT * FROM pricey(5) WITH ORDINALITY",
    "SELECT * FROM pricey(1) WHERE id IN (SELECT id FROM items)",
    "SELECT * FROM all_items()",
    "SELECT name FROM all_items() WHERE price > 2",
    "SELECT * FROM recs()",
    "SELECT * FROM dyn('items')",
    "SELECT * FROM nums(NULL)",
    "SELECT * FROM snums(NULL)",
    "SELECT * FROM deep(2)",
    "SELECT * FROM empty()",
    "SELECT count(*) FROM empty()",
    "SELECT * FROM twice(4)",
    "SELECT * FROM twice(4) AS q",
    "PREPARE setof_p(int) AS SELECT * FROM nums($1) WHERE nums > 10",
    "EXECUTE setof_p(3)",
    "DEALLOCATE setof_p",
    "SELECT * FROM bad()",  # RETURN QUERY's columns must have the declared types: 42804
    "SELECT * FROM bad2()",
    "INSERT INTO items SELECT n + 100, 'z', 0 FROM nums(2) AS t(n)",
    "INSERT INTO items VALUES (twice(50), 'tw', twice(1)), (twice(51), 'tw2', 0)",
    "SELECT * FROM items ORDER BY id",
    "DO $$ DECLARE r items%ROWTYPE; BEGIN SELECT * INTO r FROM items WHERE id = 2;"
    " RAISE NOTICE 'got % %', r.name, r.price; END $$",
    "SELECT proname, proretset, pg_get_function_result(oid) FROM pg_proc"
    " WHERE proname IN ('pricey', 'nums', 'all_items') ORDER BY proname",
]


OUT_SETUP = [
    "CREATE FUNCTION outs(a int, OUT b int, OUT c text) LANGUAGE plpgsql AS $$"
    " BEGIN b := a * 2; c := 'x' || a; END $$",
    "CREATE FUNCTION one(a int, OUT doubled int) LANGUAGE plpgsql AS $$"
    " BEGIN doubled := a * 2; END $$",
    "CREATE FUNCTION io(INOUT x int, y int DEFAULT 10) LANGUAGE plpgsql AS $$"
    " BEGIN x := x + y; END $$",
    "CREATE FUNCTION sq_out(n int, OUT i int, OUT sq int) RETURNS SETOF record"
    " LANGUAGE plpgsql AS $$ BEGIN FOR k IN 1..n LOOP i := k; sq := k * k; RETURN NEXT;"
    " END LOOP; END $$",
    "CREATE FUNCTION sqlout(a int, OUT p int, OUT q int) LANGUAGE sql AS 'SELECT a + 1, a + 2'",
    "CREATE FUNCTION sqlone(a int, OUT p int) LANGUAGE sql AS 'SELECT a * 10'",
    "CREATE PROCEDURE inout_p(INOUT x int, IN y int DEFAULT 1) LANGUAGE plpgsql AS $$"
    " BEGIN x := x + y; END $$",
    "CREATE PROCEDURE outp(a int, OUT r text, OUT s int) LANGUAGE plpgsql AS $$"
    " BEGIN r := 'got ' || a; s := a * 3; END $$",
    "CREATE PROCEDURE sqlp(INOUT a int) LANGUAGE sql AS $$ SELECT a * 100 $$",
]
OUT_SCRIPT = [
    "SELECT * FROM outs(4)",
    "SELECT c, b FROM outs(5) o WHERE b > 1",
    "SELECT one(3), one(2) + 1",
    "SELECT * FROM one(3)",
    "SELECT * FROM one(3) AS q",
    "SELECT io(1), io(1, 2)",
    "SELECT * FROM sq_out(3)",
    "SELECT * FROM sqlout(1)",
    "SELECT sqlone(2), * FROM sqlone(3)",
    "CALL inout_p(5)",
    "CALL inout_p(5, 10)",
    "CALL outp(2, NULL, NULL)",
    "CALL sqlp(3)",
    "CREATE FUNCTION badret(a int, OUT b int) RETURNS text LANGUAGE plpgsql AS $$"
    " BEGIN b := 1; END $$",
    "SELECT proname, pronargs, prorettype::regtype::text, proargmodes::text[], proargnames,"
    " pg_get_function_arguments(oid), pg_get_function_identity_arguments(oid),"
    " pg_get_function_result(oid) FROM pg_proc"
    " WHERE pronamespace = current_schema()::regnamespace ORDER BY 1",
    "DROP FUNCTION outs(int)",
    "DROP PROCEDURE outp(int, text, int)",
]


def _same(hw_dsn: str, pg_dsn: str, schema: str, setup: list[str], script: list[str]) -> None:
    with in_schema((hw_dsn, pg_dsn), schema, setup) as (hw, pg):
        got: dict[str, list[Any]] = {}
        for name, conn in (("hw", hw), ("pg", pg)):
            notices: list[Any] = []
            conn.add_notice_handler(lambda d, n=notices: n.append(d.message_primary))
            got[name] = [with_context(conn, sql, notices) for sql in script]
        for sql, have, want in zip(script, got["hw"], got["pg"], strict=True):
            assert have == want, f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {have}"


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    _same(hw_server.dsn, pg_oracle.dsn, "procs", SETUP, SCRIPT)


def test_out_parameters_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    _same(hw_server.dsn, pg_oracle.dsn, "procs_out", OUT_SETUP, OUT_SCRIPT)


def test_set_returning_functions_same_as_postgres(
    hw_server: HeadwaterServer, pg_oracle: Any
) -> None:
    _same(hw_server.dsn, pg_oracle.dsn, "procs_setof", SETOF_SETUP, SETOF_SCRIPT)
    # (PostgreSQL's message is the same, its CONTEXT the compilation's line)
    with psycopg.connect(hw_server.dsn, autocommit=True) as hw:
        for body in ("RETURN NEXT 1;", "RETURN QUERY SELECT 1;"):
            try:
                hw.execute(
                    f"CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN {body} END $$"
                )
            except psycopg.errors.DatatypeMismatch as e:
                assert "in a non-SETOF function" in str(e)
            else:
                raise AssertionError(f"{body} in a non-SETOF function was accepted")


PER_ROW_SETUP = [
    "CREATE TABLE items (id int PRIMARY KEY, qty int, price numeric(10,2), name text)",
    "INSERT INTO items VALUES (1, 2, 1.50, 'a'), (2, 0, 2.25, 'b'), (3, 5, 10, NULL),"
    " (4, 2, 1.50, 'd')",
    "CREATE FUNCTION total(q int, p numeric) RETURNS numeric LANGUAGE plpgsql IMMUTABLE AS $$"
    " BEGIN IF q = 0 THEN RETURN NULL; END IF; RETURN q * p; END $$",
    "CREATE FUNCTION label(t text) RETURNS text LANGUAGE plpgsql STABLE AS $$"
    " BEGIN RETURN coalesce(upper(t), '<none>'); END $$",
    "CREATE FUNCTION vol(x int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN x; END $$",
    "CREATE TABLE orders (uid int, amount numeric)",
    "INSERT INTO orders VALUES (1, 10), (1, 5), (2, 7)",
    "CREATE FUNCTION stats(u int) RETURNS TABLE (n bigint, total numeric) LANGUAGE plpgsql"
    " STABLE AS $$ BEGIN RETURN QUERY SELECT count(*), coalesce(sum(amount), 0) FROM orders"
    " WHERE uid = u; END $$",
    "CREATE FUNCTION upto(n int) RETURNS SETOF int LANGUAGE plpgsql IMMUTABLE AS $$"
    " BEGIN FOR i IN 1..n LOOP RETURN NEXT i; END LOOP; END $$",
]
PER_ROW_SCRIPT = [
    "SELECT id, total(qty, price), label(name) FROM items ORDER BY id",
    "SELECT id FROM items WHERE total(qty, price) > 3 ORDER BY id",
    "SELECT id FROM items ORDER BY label(name) DESC, id",
    "SELECT i.id, label(j.name) FROM items i JOIN items j ON j.id = i.id + 1 ORDER BY 1",
    "SELECT total(qty, total(qty, price)) FROM items ORDER BY id",  # nested: inner first
    "SELECT id, total(1, 2) FROM items WHERE id < 3 ORDER BY id",
    "SELECT label(name) FROM items WHERE false",
    "ALTER FUNCTION vol STABLE",
    "SELECT id, vol(qty) FROM items ORDER BY id",
    # in FROM, per row of the items before it (LATERAL)
    "SELECT i.id, s.n, s.total FROM items i, stats(i.id) s ORDER BY i.id",
    "SELECT i.id, x FROM items i, upto(i.qty) AS x ORDER BY 1, 2",
    "SELECT i.id, v FROM items i, total(i.qty, i.price) v ORDER BY 1",
    "SELECT i.id, s.* FROM items i, stats(i.id) s WHERE s.n > 0 ORDER BY 1",
]


def test_per_row_calls_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """A STABLE or IMMUTABLE PL/pgSQL function called per row of a query runs once per
    distinct argument list (server/routine_calls.py _per_row)."""
    _same(hw_server.dsn, pg_oracle.dsn, "procs_per_row", PER_ROW_SETUP, PER_ROW_SCRIPT)


def test_per_row_calls_are_refused(hw_server: HeadwaterServer) -> None:
    """A VOLATILE PL/pgSQL function in a query over rows would have to run once per row,
    as one in a view or in GROUP BY: refused, naming what runs (PostgreSQL runs them)."""
    with in_schema((hw_server.dsn,), "procs_rows", SETUP + PER_ROW_SETUP) as (hw,):
        for sql, message in (
            ("SELECT id, rich(balance) FROM acct", "and it is VOLATILE"),
            ("CREATE VIEW v AS SELECT add_tax(balance) FROM acct", "cannot be called here"),
            ("SELECT label(name), count(*) FROM items GROUP BY label(name)", "cannot be called"),
        ):
            try:
                hw.execute(sql)
            except psycopg.errors.FeatureNotSupported as e:
                assert message in str(e) and e.diag.message_hint, e
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
            out.append(await conn.fetch("SELECT * FROM nums($1) WHERE nums > $2", 4, 15))
            out.append(await conn.fetch("SELECT * FROM pricey($1)", Decimal(2)))
            out.append(await conn.fetch("CALL inout_p($1, $2)", 5, 7))  # its OUT row
            out.append(await conn.fetch("SELECT * FROM outs($1)", 3))
            query = "SELECT id, total(id, $1 * price) FROM items WHERE label(name) <> $2 ORDER BY 1"
            out.append(await conn.fetch(query, Decimal(2), "B"))
            query = "SELECT i.id, s.n FROM items i, stats(i.id + $1) s ORDER BY 1"
            out.append(await conn.fetch(query, 0))
            return [[tuple(r) for r in x] if isinstance(x, list) else x for x in out]
        finally:
            await conn.close()

    with in_schema(
        (hw_server.dsn, pg_oracle.dsn),
        "procs_async",
        SETUP + SETOF_SETUP + OUT_SETUP + PER_ROW_SETUP[2:],
    ):
        got = asyncio.run(run(hw_server.dsn))
        want = asyncio.run(run(pg_oracle.dsn))
    assert got == want  # (numerically: an unconstrained numeric may print another scale)
