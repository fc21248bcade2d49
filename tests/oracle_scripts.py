"""Scripts of statements run on PostgreSQL (the oracle) and on Headwater, compared.

Each script runs in a fresh schema of its own (`public.` in a statement names it) on
one autocommit connection; what each statement gives back is compared: its status,
rows, result types and notices, or its error's SQLSTATE, message, detail, hint and
position (`ignore` leaves out "types" or "position"). A statement starting with `!`
is run without being compared (setup). psql scripts are compared on psql's output.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from tests.hwserver import run_psql


def outcome(
    conn: psycopg.Connection, sql: str, notices: list[Any], ignore: tuple[str, ...] = ()
) -> Any:
    """What `sql` gives back on `conn` (`notices`: filled by the notice handler)."""
    notices.clear()
    try:
        cur = conn.execute(sql)
        desc = cur.description
        rows = cur.fetchall() if desc else None
        types = [d.type_code for d in desc] if desc and "types" not in ignore else None
        return ("ok", cur.statusmessage, rows, types, list(notices))
    except psycopg.Error as e:
        diag = e.diag
        position = diag.statement_position if "position" not in ignore else None
        return (
            "error",
            e.sqlstate,
            diag.message_primary,
            diag.message_detail,
            diag.message_hint,
            position,
        )


def with_context(conn: psycopg.Connection, sql: str, notices: list[Any]) -> Any:
    """What `sql` gives back, its error's CONTEXT included (PL/pgSQL's lines)."""
    notices.clear()
    try:
        cur = conn.execute(sql)
        rows = cur.fetchall() if cur.description else None
        return ("ok", cur.statusmessage, rows, list(notices))
    except psycopg.Error as e:
        d = e.diag
        fields = (d.message_primary, d.message_detail, d.message_hint, d.context)
        return ("error", e.sqlstate, *fields, list(notices))


def run_script(
    dsn: str, schema: str, script: list[str], ignore: tuple[str, ...] = ()
) -> list[tuple[str, Any]]:
    """(statement, outcome) of each statement of `script`, run in a fresh `schema`."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        setup.execute(f"CREATE SCHEMA {schema}")
    out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        notices: list[Any] = []
        conn.add_notice_handler(
            lambda d: notices.append((d.severity_nonlocalized, d.message_primary))
        )
        conn.execute(f"SET search_path = {schema}")
        for sql in script:
            sql = sql.replace("public.", f"{schema}.")
            if sql.startswith("!"):
                conn.execute(sql[1:])
                continue
            out.append((sql, outcome(conn, sql, notices, ignore)))
    return out


def assert_same_as_postgres(
    oracle_dsn: str, dsn: str, schema: str, script: list[str], ignore: tuple[str, ...] = ()
) -> None:
    """Every statement of `script` gives on `dsn` what it gives on PostgreSQL."""
    expected = run_script(oracle_dsn, schema, script, ignore)
    got = run_script(dsn, schema, script, ignore)
    for (sql, want), (_, have) in zip(expected, got, strict=True):
        assert have == want, f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {have}"


def psql_outputs(dsns: tuple[str, ...], setup: str, script: str) -> list[str]:
    """psql's output of `script` on each server, after `setup` (run quietly); the test
    is skipped without psql."""
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed")
    outputs = []
    for dsn in dsns:
        params = dict(kv.split("=") for kv in dsn.split())
        host, port = params["host"], int(params["port"])
        run_psql(host, port, setup, quiet=True)
        outputs.append(run_psql(host, port, script))
    return outputs


@contextmanager
def in_schema(dsns: Sequence[str], schema: str, setup: Sequence[str] = ()) -> Iterator[list[Any]]:
    """An autocommit connection to each of `dsns`, in a fresh `schema` on each, after
    `setup`; the schema is dropped afterwards."""
    conns = [psycopg.connect(dsn, autocommit=True) for dsn in dsns]
    try:
        for c in conns:
            c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            c.execute(f"CREATE SCHEMA {schema}")
            c.execute(f"SET search_path = {schema}")
            for sql in setup:
                c.execute(sql)
        yield conns
    finally:
        for c in conns:
            if not c.closed:
                c.rollback()
                c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                c.close()


def statement_results(conn: psycopg.Connection, script: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each statement's tag and rows, or its error (SQLSTATE, message, detail, hint); with
    the notices. A statement `COPY ... FROM STDIN` sends its lines after the first as data."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(f"{d.severity}: {d.message_primary}"))
    out: list[tuple[Any, ...]] = []
    for sql in script:
        notices.clear()
        try:
            with conn.cursor() as cur:
                if sql.startswith("COPY "):
                    head, data = sql.split("\n", 1)
                    with cur.copy(head) as copy:
                        copy.write(data)
                else:
                    cur.execute(sql)
                rows = cur.fetchall() if cur.description else None
                out.append((sql, cur.statusmessage, rows, list(notices)))
        except psycopg.Error as e:
            d = e.diag
            out.append(
                (sql, "ERROR", d.sqlstate, d.message_primary, d.message_detail, d.message_hint)
            )
    return out


@contextmanager
def script_comparer(
    hw_dsn: str, pg_dsn: str, prefix: str
) -> Iterator[Callable[[list[str]], list[tuple[Any, ...]]]]:
    """compare(script): run `script` on Headwater and on PostgreSQL, each time in a new
    schema `{prefix}_N`, and assert that every statement's results are the same."""
    schemas = itertools.count()
    with (
        psycopg.connect(hw_dsn, autocommit=True) as hw,
        psycopg.connect(pg_dsn, autocommit=True) as pg,
    ):

        def compare(script: list[str]) -> list[tuple[Any, ...]]:
            schema = f"{prefix}_{next(schemas)}"
            prelude = [f"DROP SCHEMA IF EXISTS {schema} CASCADE", f"CREATE SCHEMA {schema}"]
            prelude.append(f"SET search_path = {schema}")
            got = statement_results(hw, prelude + script)[3:]
            want = statement_results(pg, prelude + script)[3:]
            for g, e in zip(got, want, strict=True):
                assert g == e, f"\nheadwater:  {g}\npostgresql: {e}"
            return got

        yield compare


def assert_results_as_postgres(dsn: str, oracle_dsn: str, script: Sequence[str]) -> None:
    """`statement_results` of `script` on Headwater equal PostgreSQL's (COPY data too)."""
    results = []
    for d in (dsn, oracle_dsn):
        with psycopg.connect(d, autocommit=True) as conn:
            results.append(statement_results(conn, script))
    assert results[0] == results[1]
