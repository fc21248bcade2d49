"""The few pglast nodes the function rewrites build and inspect."""

from __future__ import annotations

from typing import Any

import pglast.ast as A


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
