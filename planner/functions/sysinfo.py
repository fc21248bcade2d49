"""PostgreSQL 15's system information and administration functions that BI tools and
drivers call, with PostgreSQL's answers for a server without triggers, JIT, WAL files,
tablespaces or row security: pg_size_bytes, pg_column_size, pg_database_size,
pg_client_encoding, pg_trigger_depth and friends."""

from __future__ import annotations

import re
import time
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import partial
from typing import Any

import pglast.ast as A
from headwater.catalog.pg.expressions import printed
from headwater.planner.functions import udf
from headwater.planner.functions.nodes import call, cast, const
from pglast import parse_sql

# pg_size_bytes: a number, optional spaces, an optional unit (PostgreSQL 15's list)
_SIZE = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*")
_UNITS = {"bytes": 0, "kb": 10, "mb": 20, "gb": 30, "tb": 40, "pb": 50}


def _size_bytes(text: str) -> int:
    """PostgreSQL's pg_size_bytes: '1.5 GB' -> 1610612736 (22023 for a bad size)."""
    m = _SIZE.fullmatch(text)
    unit = m.group(2) if m else ""
    if m is None or (unit and unit.lower() not in _UNITS):
        raise ValueError(f'[SQLSTATE 22023] invalid size: "{text}"')
    try:
        value = Decimal(m.group(1)) * (1 << _UNITS.get(unit.lower(), 0))
    except InvalidOperation:
        raise ValueError(f'[SQLSTATE 22023] invalid size: "{text}"') from None
    n = int(value.to_integral_value(ROUND_HALF_UP))
    if not -(2**63) <= n < 2**63:
        raise ValueError("[SQLSTATE 22003] bigint out of range")
    return n


def _constant(value: Any, type_name: str) -> Any:
    def rewrite(args: list[Any]) -> Any:
        return cast(A.A_Const(isnull=True) if value is None else const(value), type_name)

    return rewrite


def _sleep(seconds: float) -> str:
    """pg_sleep: waits, then returns void (printed as an empty string)."""
    if seconds > 0:
        time.sleep(seconds)
    return ""


def _one(name: str) -> Any:
    return lambda args: call(name, cast(args[0], "float8")) if len(args) == 1 else None


def _boolean(value: bool) -> Any:
    return lambda args: A.A_Const(isnull=False, val=A.Boolean(boolval=value))


# PostgreSQL's sizes of a datum of each fixed-length type; variable-length: bytes + header
_COLUMN_SIZE = (
    "CAST(CASE WHEN x IS NULL THEN NULL ELSE CASE typeof(x)"
    " WHEN 'BOOLEAN' THEN 1 WHEN 'SMALLINT' THEN 2 WHEN 'INTEGER' THEN 4 WHEN 'BIGINT' THEN 8"
    " WHEN 'REAL' THEN 4 WHEN 'FLOAT' THEN 4 WHEN 'DOUBLE' THEN 8 WHEN 'DATE' THEN 4"
    " WHEN 'TIME' THEN 8 WHEN 'TIMESTAMP' THEN 8 WHEN 'TIMESTAMP WITH TIME ZONE' THEN 8"
    " WHEN 'INTERVAL' THEN 16 WHEN 'UUID' THEN 16"
    " WHEN 'BLOB' THEN octet_length(CAST(x AS BLOB)) + 4"
    " ELSE strlen(CAST(x AS VARCHAR)) + 4 END END AS INTEGER)"
)
# The database's size: the bytes its data takes in the replica's memory (DuckDB's own
# accounting); 3D000 for any other database, as PostgreSQL answers.
_DATABASE_SIZE = (
    "CASE WHEN CAST(d AS VARCHAR) = current_db OR CAST(d AS VARCHAR) = '16384'"
    " THEN (SELECT CAST(greatest(sum(memory_usage_bytes), 8192) AS BIGINT) FROM duckdb_memory())"
    " ELSE error('[SQLSTATE 3D000] database \"' || CAST(d AS VARCHAR) || '\" does not exist')"
    " END"
)

_SESSION_DATABASE = "(SELECT _hw_s.hw_database FROM pg_catalog._hw_session _hw_s)"

MACROS = [
    f"CREATE OR REPLACE MACRO pg_column_size(x) AS {_COLUMN_SIZE}",
    "CREATE OR REPLACE MACRO pg_char_to_encoding(n) AS"
    " CAST(CASE upper(replace(n, '-', '')) WHEN 'UTF8' THEN 6 WHEN 'UNICODE' THEN 6"
    " WHEN 'SQL_ASCII' THEN 0 ELSE -1 END AS INTEGER)",
]


def _database_size(args: list[Any]) -> Any:
    if len(args) != 1:
        return None
    session_db = parse_sql(f"SELECT {_SESSION_DATABASE}")[0].stmt.targetList[0].val
    return call("hw_database_size", args[0], session_db)


REWRITES = {
    "pg_size_bytes": lambda args: call("hw_pg_size_bytes", *args) if len(args) == 1 else None,
    "pg_database_size": _database_size,
    "pg_sleep": _one("hw_pg_sleep"),
    "setseed": _one("hw_setseed"),
    "pg_client_encoding": _constant("UTF8", "text"),
    "getdatabaseencoding": _constant("UTF8", "text"),
    "pg_jit_available": _boolean(False),
    "pg_notification_queue_usage": _constant(0, "float8"),
    "pg_trigger_depth": _constant(0, "int4"),
    "pg_reload_conf": _boolean(True),
    "row_security_active": _boolean(False),
    "pg_tablespace_location": _constant("", "text"),
    "txid_current_if_assigned": _constant(None, "int8"),
    "txid_current": lambda a: None if a else call("hw_txid_current"),
    "pg_xact_commit_timestamp": _constant(None, "timestamptz"),
}


def install(db: Any) -> None:
    for sql in MACROS:
        db.execute(sql)
    db.execute(f"CREATE OR REPLACE MACRO hw_database_size(d, current_db) AS {_DATABASE_SIZE}")
    db.execute("CREATE OR REPLACE MACRO hw_txid_current() AS CAST(txid_current() AS BIGINT)")
    udf.register(db, "hw_pg_size_bytes", _size_bytes, ["VARCHAR"], "BIGINT")
    udf.register(db, "hw_pretty_expr", partial(printed, pretty=True), ["VARCHAR"], "VARCHAR")
    udf.register(db, "hw_pg_sleep", _sleep, ["DOUBLE"], "VARCHAR")
    # setseed returns void: an empty string, as PostgreSQL prints it
    db.execute("CREATE OR REPLACE MACRO hw_setseed(x) AS coalesce(CAST(setseed(x) AS VARCHAR), '')")
