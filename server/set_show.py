"""SET, RESET and SHOW statements over a session's settings (server/settings.py)."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.types import TEXT, ColumnType
from headwater.planner.relations import deparse
from headwater.server.results import Field, Result
from headwater.server.settings import Settings, canonical
from pglast.enums import VariableSetKind


def set_var(st: Settings, stmt: A.VariableSetStmt) -> Result:
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
    value = ", ".join(_setting_value(a) for a in stmt.args or ())
    if name == "timezone" and stmt.kind == VariableSetKind.VAR_SET_VALUE and not stmt.args:
        value = "UTC"
    st.set(name, value)
    return Result("SET")


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
