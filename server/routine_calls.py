"""CALL of a procedure, and `SELECT f(...)` of a PL/pgSQL function, run a statement at a
time in the calling session.

A PL/pgSQL body runs in server/plpgsql_exec.py with the call's arguments (computed
first, by one SELECT of them) as its parameters; a SQL procedure's statements run in
order with its parameters bound as $n. Both are atomic as in PostgreSQL: outside a
transaction block a call runs in a transaction of its own (a procedure called so may
COMMIT and ROLLBACK inside). A PL/pgSQL function called elsewhere than in a SELECT
without FROM (per row of a query, in a view) is refused by the inliner
(planner/sql_functions.py): it would be run once per row.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Function
from headwater.planner.pg_compat import copy_tree
from headwater.planner.plpgsql import parse_function
from headwater.planner.sql_functions import type_guess
from headwater.planner.syntax import replaced
from headwater.server import plpgsql_exec, user_functions
from headwater.server.results import Result
from pglast import parse_sql
from pglast.enums import TransactionStmtKind

from headwater.errors import InsufficientPrivilege, SQLError, UndefinedFunction, WrongObjectType

if TYPE_CHECKING:
    from headwater.server.executor import Executor

MAX_DEPTH = 100  # nested calls (a function calling itself): 54001 past it
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("plpgsql_depth", default=0)


async def call(ex: Executor, stmt: A.CallStmt, params: list[Any]) -> Result:
    """CALL p(args): a procedure, run with its arguments."""
    fc = stmt.funccall
    names = [n.sval for n in fc.funcname]
    given = fc.args or ()
    cat = ex.s.catalog
    found = cat.find_functions(names[0] if len(names) == 2 else None, names[-1], ex.s.search_path())
    fn = next((f for f in found if f.required <= len(given) <= len(f.params)), None)
    shown = ", ".join(map(type_guess, given))
    if fn is None or any(isinstance(a, A.NamedArgExpr) for a in given):
        raise UndefinedFunction(
            f"procedure {'.'.join(names)}({shown}) does not exist",
            hint="No procedure matches the given name and argument types."
            " You might need to add explicit type casts.",
        )
    if fn.prokind != "p":
        raise WrongObjectType(
            f"{'.'.join(names)}({shown}) is not a procedure",
            hint="To call a function, use SELECT.",
        )
    _may_execute(ex, fn, "procedure")
    args = await _arguments(ex, fn, given, params)
    with _nested():
        if fn.language == "plpgsql":
            tree = _parsed(fn)
            controls = ex.s.status == "I"  # COMMIT inside: only outside a transaction block
            _, notices = await plpgsql_exec.execute(ex, tree, args, _shown(fn), controls=controls)
        else:
            notices = await _sql_procedure(ex, fn, args)
    return Result("CALL", notices=notices)


async def evaluated(ex: Executor, stmt: A.SelectStmt, params: list[Any]) -> tuple[Any, list[Any]]:
    """A SELECT without FROM with its PL/pgSQL calls run, innermost first, each replaced
    by its result as one more parameter (`SELECT f(1) + 1`, an expression of a
    PL/pgSQL body calling another function or itself)."""
    stmt, params = copy_tree(stmt), list(params)
    for target in stmt.targetList:
        if target.name is None and (fn := user_functions.plpgsql_function(ex.s, target.val)):
            target.name = fn.name  # the column is named after the function

    async def run(node: Any) -> Any:
        if isinstance(node, tuple | list):
            return type(node)([await run(n) for n in node])
        if not isinstance(node, A.Node):
            return node
        for attr in node:
            setattr(node, attr, await run(getattr(node, attr)))
        fn = user_functions.plpgsql_function(ex.s, node)
        if fn is None:
            return node
        params.append(await _call_function(ex, fn, node.args or (), params))
        ref = A.ParamRef(number=len(params))
        result = "text" if fn.returns == "void" else fn.returns
        return A.TypeCast(arg=ref, typeName=user_functions.type_name(result))

    stmt.targetList = await run(stmt.targetList)
    return stmt, params


async def _call_function(
    ex: Executor, fn: Function, given: tuple[Any, ...], params: list[Any]
) -> Any:
    _may_execute(ex, fn, "function")
    args = await _arguments(ex, fn, given, params)
    if fn.strict and any(a is None for a in args):
        return None
    returns = None if fn.returns == "void" else user_functions.type_name(fn.returns)
    with _nested():
        value, notices = await plpgsql_exec.execute(
            ex, _parsed(fn), args, _shown(fn), controls=False, returns=returns
        )
    ex.s.settings.notices.extend(notices)  # (sent before ReadyForQuery)
    return "" if fn.returns == "void" else value


def _may_execute(ex: Executor, fn: Function, kind: str) -> None:
    role = ex.s.catalog.roles.get(ex.s.role_oid)
    if role is not None and not role.superuser:
        if not user_functions.may_execute(ex.s.catalog, ex.s.role_oid, fn):
            raise InsufficientPrivilege(f"permission denied for {kind} {fn.name}")


async def _arguments(
    ex: Executor, fn: Function, given: tuple[Any, ...], params: list[Any]
) -> list[Any]:
    """The call's argument values, defaults for those left out, in one SELECT (each
    cast to its parameter's type)."""
    exprs = list(given) + [
        parse_sql(f"SELECT {p.default}")[0].stmt.targetList[0].val for p in fn.params[len(given) :]
    ]
    if not exprs:
        return []
    targets = tuple(
        A.ResTarget(val=A.TypeCast(arg=e, typeName=user_functions.type_name(p.type)))
        for e, p in zip(exprs, fn.params, strict=True)
    )
    result = await ex.execute(A.SelectStmt(targetList=targets), params)
    return list(result.rows[0])


async def _sql_procedure(ex: Executor, fn: Function, args: list[Any]) -> list[Any]:
    """A LANGUAGE sql procedure: its statements in order, its parameters as $1, $2, ..."""
    names = {p.name: i + 1 for i, p in enumerate(fn.params) if p.name}

    def swap(node: A.Node) -> Any:
        if isinstance(node, A.ColumnRef) and len(node.fields) == 1:
            field = node.fields[0]
            if isinstance(field, A.String) and field.sval in names:
                return A.ParamRef(number=names[field.sval])
        return None

    s = ex.s
    implicit = s.status == "I"
    notices: list[Any] = []
    if implicit:
        await ex.execute(A.TransactionStmt(kind=TransactionStmtKind.TRANS_STMT_BEGIN), [])
    try:
        for raw in parse_sql(fn.source):
            stmt = replaced(raw.stmt, swap)
            notices.extend((await ex.execute(stmt, args)).notices)
        if implicit:
            commit = A.TransactionStmt(kind=TransactionStmtKind.TRANS_STMT_COMMIT)
            notices.extend((await ex.execute(commit, [])).notices)
    except BaseException:
        if implicit and s.status != "I":
            rollback = A.TransactionStmt(kind=TransactionStmtKind.TRANS_STMT_ROLLBACK)
            await ex.execute(rollback, [])
        raise
    return notices


def _parsed(fn: Function) -> dict[str, Any]:
    typed = tuple((p.name, p.type) for p in fn.params)
    return parse_function(fn.source, f"function {fn.name}", fn.returns, typed, fn.prokind == "p")


def _shown(fn: Function) -> str:
    """How CONTEXT names it: `f(integer)`."""
    return f"{quote_ident(fn.name)}({','.join(p.type for p in fn.params)})"


class _nested:
    """One level of nested PL/pgSQL calls; 54001 past MAX_DEPTH (recursion)."""

    def __enter__(self) -> None:
        depth = _depth.get() + 1
        if depth > MAX_DEPTH:
            raise SQLError(
                "stack depth limit exceeded",
                "54001",
                hint="PL/pgSQL calls nested more than 100 levels deep (recursion?).",
            )
        self.token = _depth.set(depth)

    def __exit__(self, *exc: object) -> None:
        _depth.reset(self.token)
