"""pg_typeof with PostgreSQL's type names (DuckDB's pg_typeof says decimal(18,0), double,
varchar[], timestamp): a macro over DuckDB's typeof(); an untyped constant is `unknown`."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.types import ENUMS_BY_DUCKDB
from headwater.planner.functions.nodes import call, column_type, const, user_type
from pglast.enums import SQLValueFunctionOp

_NAMES = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "HUGEINT": "numeric",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "VARCHAR": "text",
    "DATE": "date",
    "TIME": "time without time zone",
    "TIME WITH TIME ZONE": "time with time zone",
    "TIMESTAMP": "timestamp without time zone",
    "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
    "INTERVAL": "interval",
    "BLOB": "bytea",
    "UUID": "uuid",
}


_NAME_VALUES = frozenset(
    {
        SQLValueFunctionOp.SVFOP_CURRENT_USER,
        SQLValueFunctionOp.SVFOP_CURRENT_ROLE,
        SQLValueFunctionOp.SVFOP_SESSION_USER,
        SQLValueFunctionOp.SVFOP_USER,
        SQLValueFunctionOp.SVFOP_CURRENT_CATALOG,
        SQLValueFunctionOp.SVFOP_CURRENT_SCHEMA,
    }
)


def macros() -> list[str]:
    cases = " ".join(f"WHEN '{duck}' THEN '{pg}'" for duck, pg in _NAMES.items())
    base = "regexp_replace(t, '(\\[\\])+$', '')"
    return [
        f"CREATE OR REPLACE MACRO hw_pg_base_name(b) AS CASE WHEN b LIKE 'DECIMAL%'"
        f" THEN 'numeric' ELSE CASE b {cases} END END",
        # PostgreSQL's array types have no dimensions: int[] for int[][] too
        f"CREATE OR REPLACE MACRO hw_pg_type_name(t) AS hw_pg_base_name({base})"
        " || CASE WHEN t LIKE '%[]' THEN '[]' ELSE '' END",
        "CREATE OR REPLACE MACRO hw_pg_typeof(x) AS"
        " coalesce(hw_pg_type_name(typeof(x)), CAST(pg_typeof(x) AS VARCHAR))",
    ]


def _enum_of(node: Any) -> Any:
    """The enum an enum column or a cast to an enum is of, or None."""
    if isinstance(node, A.TypeCast) and not node.typeName.arrayBounds:
        return user_type([n.sval for n in node.typeName.names])
    return ENUMS_BY_DUCKDB.get(column_type(node) or "")


def rewrite_pg_typeof(args: list[Any]) -> Any | None:
    if len(args) != 1:
        return None
    if isinstance(args[0], A.A_Const) and (args[0].isnull or isinstance(args[0].val, A.String)):
        return const("unknown")  # PostgreSQL has not typed a bare literal
    if isinstance(args[0], A.SQLValueFunction) and args[0].op in _NAME_VALUES:
        return const("name")  # current_user & co. are of type name (DuckDB: varchar)
    enum = _enum_of(args[0])
    if enum is not None:  # (DuckDB's typeof spells out the ENUM's labels)
        return const(enum.sql_name)
    return call("hw_pg_typeof", args[0])


def rewrite_enum_range(args: list[Any]) -> Any | None:
    """enum_range(lo, hi): the labels from lo to hi, NULL an open end (DuckDB's
    enum_range_boundary; its enum_range takes one argument as PostgreSQL's does)."""
    return call("enum_range_boundary", *args) if len(args) == 2 else None
