"""pg_cancel_backend and pg_terminate_backend: one session signalling another.

A superuser may signal any session; another role only sessions of roles it is a
member of, and never a superuser's (PostgreSQL's rules; there is no
pg_signal_backend role here). CancelRequest packets are server.py's `cancel`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pglast.ast as A
from headwater.catalog.privileges import is_superuser, memberships

from headwater.errors import InsufficientPrivilege

SIGNAL_FUNCTIONS = ("pg_cancel_backend", "pg_terminate_backend")


def signal_call(stmt: A.SelectStmt, params: list[Any]) -> tuple[str, int | None] | None:
    """`SELECT pg_cancel_backend(pid)` (a constant or a parameter): (function, pid)."""
    if stmt.fromClause or not stmt.targetList or len(stmt.targetList) != 1:
        return None
    val = stmt.targetList[0].val
    if not isinstance(val, A.FuncCall) or len(val.args or ()) not in (1, 2):
        return None
    names = [n.sval for n in val.funcname]
    if names[-1] not in SIGNAL_FUNCTIONS or (len(names) > 1 and names[0] != "pg_catalog"):
        return None
    arg = val.args[0]
    while isinstance(arg, A.TypeCast):
        arg = arg.arg
    if isinstance(arg, A.A_Const):
        if arg.isnull:
            return names[-1], None
        if isinstance(arg.val, A.Integer):
            return names[-1], arg.val.ival
        if isinstance(arg.val, A.String) and arg.val.sval.strip().lstrip("-").isdigit():
            return names[-1], int(arg.val.sval)
        return None
    if isinstance(arg, A.ParamRef) and 0 < arg.number <= len(params):
        v = params[arg.number - 1]
        return (names[-1], int(v)) if isinstance(v, int | str) and str(v).isdigit() else None
    return None


def signal_backend(executor: Any, func: str, pid: int | None) -> Any:
    from headwater.catalog.types import BOOL, ColumnType
    from headwater.server.results import Field, Result

    field_ = [Field(func, ColumnType(BOOL))]
    if pid is None:
        return Result("SELECT 1", field_, [(None,)])
    s = executor.s
    server = getattr(executor.instance, "server", None)
    conn = server.sessions.get(pid) if server is not None else None
    if conn is None or conn.session is None:
        return Result(
            "SELECT 1",
            field_,
            [(False,)],
            notices=[f"PID {pid} is not a PostgreSQL server process"],
        )
    cat = s.catalog
    if not is_superuser(cat, s.role_oid):
        target = conn.session.role_oid
        if is_superuser(cat, target):
            what = "cancel query" if func == "pg_cancel_backend" else "terminate process"
            raise InsufficientPrivilege(f"must be a superuser to {what} of superuser")
        if target not in memberships(cat, s.role_oid):
            what = (
                "query is being canceled"
                if func == "pg_cancel_backend"
                else ("process is being terminated")
            )
            raise InsufficientPrivilege(
                f"must be a member of the role whose {what} or member of pg_signal_backend"
            )
    if func == "pg_cancel_backend":
        conn.cancel()
    else:
        asyncio.get_running_loop().call_soon(conn.terminate)
    return Result("SELECT 1", field_, [(True,)])
