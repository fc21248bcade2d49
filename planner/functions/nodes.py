"""The few pglast nodes the function rewrites build and inspect."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

import pglast.ast as A

# The column types of the statement being translated, by column name (PostgreSQL type
# names: "jsonb", "bytea", "float4", ...; planner/scope.py `column_types`, or the IR's
# internal names): rewrites that depend on an operand's type (jsonb's operators on a
# jsonb column, real arithmetic, length of bytea) read a bare column's from here.
COLUMN_TYPES: ContextVar[Mapping[str, str]] = ContextVar(
    "COLUMN_TYPES", default=MappingProxyType({})
)


def column_type(node: Any) -> str | None:
    """The type of a column reference of the statement being translated, if known."""
    if isinstance(node, A.ColumnRef) and isinstance(node.fields[-1], A.String):
        return COLUMN_TYPES.get().get(node.fields[-1].sval)
    return None


def user_type(names: list[str]) -> Any:
    """The PgType of a type of the database's own (an enum) by its name as written, when
    the statement's column types know the catalog (planner/scope.py); else None."""
    find = getattr(COLUMN_TYPES.get(), "user_type", None)
    return find(names) if find is not None else None


def call(name: str, *args: Any) -> A.FuncCall:
    return A.FuncCall(funcname=(A.String(sval=name),), args=tuple(args))


def const(value: str | int | None) -> A.A_Const:
    if value is None:
        return A.A_Const(isnull=True)
    if isinstance(value, int):
        return A.A_Const(isnull=False, val=A.Integer(ival=value))
    return A.A_Const(isnull=False, val=A.String(sval=value))


def cast(node: Any, type_name: str) -> A.TypeCast:
    return A.TypeCast(arg=node, typeName=A.TypeName(names=(A.String(sval=type_name),), typemod=-1))


def text_of(node: Any) -> str | None:
    """The value of a string constant (possibly cast to text), else None."""
    if isinstance(node, A.TypeCast):
        names = [n.sval for n in node.typeName.names if isinstance(n, A.String)]
        if names[-1:] in (["text"], ["varchar"], ["unknown"]):
            node = node.arg
    if isinstance(node, A.A_Const) and not node.isnull and isinstance(node.val, A.String):
        return node.val.sval
    return None


def copy(node: Any) -> Any:
    """A fresh copy of an expression node (the Binder rewrites nodes in place)."""
    from pglast import parse_sql
    from pglast.stream import RawStream

    return parse_sql(f"SELECT {RawStream()(node)}")[0].stmt.targetList[0].val
