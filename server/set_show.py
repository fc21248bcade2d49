"""SET, RESET and SHOW statements over a session's settings (server/settings.py)."""

from __future__ import annotations

import copy
from typing import Any

import pglast.ast as A
from headwater.catalog.types import TEXT, ColumnType
from headwater.planner.naming import name_targets
from headwater.planner.relations import deparse
from headwater.server.results import Field, Result
from headwater.server.settings import Settings, canonical
from pglast.enums import VariableSetKind

from headwater.errors import FeatureNotSupported, SQLError


def set_var(st: Settings, stmt: A.VariableSetStmt, in_block: bool = False) -> Result:
    if stmt.kind == VariableSetKind.VAR_RESET_ALL:
        for k in list(st.values):
            st.reset(k)
        return Result("RESET")
    if stmt.kind == VariableSetKind.VAR_RESET:
        st.reset(stmt.name)
        return Result("RESET")
    if stmt.kind == VariableSetKind.VAR_SET_DEFAULT:
        st.reset(stmt.name)
        return Result("SET")
    if stmt.kind == VariableSetKind.VAR_SET_MULTI:
        return Result("SET")  # SET TRANSACTION ...: one isolation level is offered
    name = stmt.name
    if name in ("transaction_isolation", "default_transaction_isolation"):
        return Result("SET")
    value = setting_text(stmt)
    if name == "timezone" and stmt.kind == VariableSetKind.VAR_SET_VALUE and not stmt.args:
        value = "UTC"
    if stmt.is_local:
        if not in_block:
            warning = "SET LOCAL can only be used in transaction blocks"
            return Result("SET", notices=[SQLError(warning, "25P01", severity="WARNING")])
        st.set_local(name, value)
    else:
        st.set(name, value)
    return Result("SET")


def setting_text(stmt: A.VariableSetStmt) -> str:
    """The value SET gives (its items joined as PostgreSQL shows a list)."""
    return ", ".join(_setting_value(a) for a in stmt.args or ())


def show_var(st: Settings, stmt: A.VariableShowStmt) -> Result:
    if stmt.name == "all":
        rows = [(k, v, "") for k, v in sorted(st.values.items())]
        text = ColumnType(TEXT)
        return Result(
            "SHOW",
            [Field("name", text), Field("setting", text), Field("description", text)],
            rows,
        )
    key = canonical(stmt.name)
    value = st.get(key)
    return Result(
        "SHOW",
        [Field(stmt.name if stmt.name != "timezone" else "TimeZone", ColumnType(TEXT))],
        [(value,)],
    )


def _setting_value(node: Any) -> str:
    if isinstance(node, A.A_Const):
        v = node.val
        if isinstance(v, A.String):
            return v.sval
        if isinstance(v, A.Integer):
            return str(v.ival)
        if isinstance(v, A.Float):
            return v.fval
        if isinstance(v, A.Boolean):
            return "on" if v.boolval else "off"
    if isinstance(node, A.TypeCast):
        return _setting_value(node.arg)
    return deparse(node)


def apply_set_config(st: Settings, stmt: A.SelectStmt, params: list[Any] | None) -> A.SelectStmt:
    """`SELECT set_config(name, value, is_local)` (asyncpg runs it before introspecting
    types): the setting is set as SET does and the call becomes the value it returns.
    Only calls in the target list of a SELECT without FROM, their arguments constants
    or parameters; `params` None (Describe) sets nothing."""
    if stmt.fromClause or not stmt.targetList:
        return stmt
    hits = [
        i
        for i, rt in enumerate(stmt.targetList)
        if isinstance(rt, A.ResTarget) and _is_set_config(rt.val)
    ]
    if not hits:
        return stmt
    stmt = copy.deepcopy(stmt)
    name_targets(stmt)  # the column keeps the name set_config
    for i in hits:
        rt = stmt.targetList[i]
        value = None
        if params is not None:
            args = _set_config_args(rt.val, params)
            if args is None:
                raise FeatureNotSupported(
                    "set_config() takes constants or parameters for its name and value"
                )
            value = st.get(st.set(*args))
        rt.val = A.TypeCast(
            arg=A.A_Const(
                isnull=value is None, val=None if value is None else A.String(sval=value)
            ),
            typeName=A.TypeName(names=(A.String(sval="text"),), typemod=-1),
        )
    return stmt


def _is_set_config(node: Any) -> bool:
    if not isinstance(node, A.FuncCall) or len(node.args or ()) != 3:
        return False
    names = [n.sval for n in node.funcname if isinstance(n, A.String)]
    return names[-1:] == ["set_config"] and (len(names) == 1 or names[0] == "pg_catalog")


def _set_config_args(node: Any, params: list[Any]) -> tuple[str, str] | None:
    out: list[str] = []
    for arg in node.args[:2]:
        while isinstance(arg, A.TypeCast):
            arg = arg.arg
        if isinstance(arg, A.ParamRef) and 0 < arg.number <= len(params):
            value = params[arg.number - 1]
            if not isinstance(value, str):
                return None
            out.append(value)
        elif isinstance(arg, A.A_Const) and isinstance(arg.val, A.String):
            out.append(arg.val.sval)
        else:
            return None
    return out[0], out[1]
