"""CALL of a procedure, and the calls of PL/pgSQL functions, run a statement at a time
in the calling session.

A PL/pgSQL body runs in server/plpgsql_exec.py with the call's arguments (computed
first, by one SELECT of them) as its parameters; a SQL procedure's statements run in
order with its parameters bound as $n. Both are atomic as in PostgreSQL: outside a
transaction block a call runs in a transaction of its own (a procedure called so may
COMMIT and ROLLBACK inside). A PL/pgSQL function runs before the statement that calls
it: alone or in expressions of a SELECT without FROM, in VALUES, in FROM (the relation
of its rows), or per row of a SELECT once per distinct argument list (STABLE or
IMMUTABLE functions only); elsewhere (a view, GROUP BY, a subquery, UPDATE) the inliner
refuses it (planner/sql_functions.py).
"""

from __future__ import annotations

import contextvars
import functools
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Function
from headwater.planner.pg_compat import copy_tree
from headwater.planner.plpgsql import parse_function
from headwater.planner.sql_functions import type_guess
from headwater.planner.syntax import nodes, replaced
from headwater.server import plpgsql_exec, user_functions
from headwater.server.results import Field, Result
from pglast import parse_sql
from pglast.enums import LimitOption, SubLinkType, TransactionStmtKind

from headwater.errors import (
    FeatureNotSupported,
    InsufficientPrivilege,
    SQLError,
    UndefinedFunction,
    WrongObjectType,
)

if TYPE_CHECKING:
    from headwater.server.executor import Executor

MAX_DEPTH = 100  # nested calls (a function calling itself): 54001 past it
_depth: contextvars.ContextVar[int] = contextvars.ContextVar("plpgsql_depth", default=0)


async def call(ex: Executor, stmt: A.CallStmt, params: list[Any]) -> Result:
    """CALL p(args): a procedure, run with its arguments; a row of its OUT and INOUT
    parameters' values if it has some."""
    fn = _procedure(ex.s, stmt.funccall)
    _may_execute(ex, fn, "procedure")
    args, outputs = _body_args(fn, await _arguments(ex, fn, stmt.funccall.args or (), params))
    with _nested():
        if fn.language == "plpgsql":
            tree = _parsed(fn)
            controls = ex.s.status == "I"  # COMMIT inside: only outside a transaction block
            values, notices = await plpgsql_exec.execute(
                ex, tree, args, _shown(fn), controls=controls, outputs=outputs
            )
        else:
            values, notices = await _sql_procedure(ex, fn, args, bool(outputs))
    if not outputs:
        return Result("CALL", notices=notices)
    return Result("CALL", out_fields(ex.s, stmt), [tuple(values)], notices=notices)


def out_fields(s: Any, stmt: A.CallStmt) -> list[Field] | None:
    """The row CALL returns (Describe): the procedure's OUT and INOUT parameters."""
    fn = _procedure(s, stmt.funccall)
    if not fn.declared:
        return None
    return [Field(n, user_functions.column_type(s, t)) for n, t in fn.columns]


def _procedure(s: Any, fc: A.FuncCall) -> Function:
    names = [n.sval for n in fc.funcname]
    given = fc.args or ()
    cat = s.catalog
    found = cat.find_functions(names[0] if len(names) == 2 else None, names[-1], s.search_path())
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
    return fn


def _body_args(fn: Function, inputs: list[Any]) -> tuple[list[Any], tuple[int, ...]]:
    """The body's parameter values in declared order (OUT ones NULL; RETURNS TABLE's
    columns last), from a call's `inputs`, and the positions of those it returns."""
    if not fn.declared:
        n, width = len(inputs), len(fn.columns)
        return [*inputs, *[None] * width], tuple(range(n, n + width))
    given = iter(inputs)
    args = []
    for p in fn.declared:
        value = next(given) if p.mode != "o" or fn.prokind == "p" else None
        args.append(None if p.mode == "o" else value)
    return args, tuple(i for i, p in enumerate(fn.declared) if p.mode != "i")


async def evaluated(ex: Executor, stmt: Any, params: list[Any]) -> tuple[Any, list[Any]]:
    """A SELECT (or INSERT's) with its PL/pgSQL calls run, innermost first: in a SELECT
    without FROM or in VALUES each call replaced by its result as one more parameter
    (`SELECT f(1) + 1`, an expression of a PL/pgSQL body calling another function or
    itself; a set's values unnested: `SELECT f(3)`), in FROM by the relation of its
    rows (`SELECT * FROM f(1)`)."""
    s = ex.s
    stmt, params = copy_tree(stmt), list(params)
    if isinstance(stmt, A.InsertStmt):
        stmt.selectStmt, params = await evaluated(ex, stmt.selectStmt, params)
        return stmt, params
    for target in stmt.targetList or ():
        if target.name is None and (fn := user_functions.plpgsql_function(s, target.val)):
            target.name = fn.name  # the column is named after the function

    async def run(node: Any) -> Any:
        if isinstance(node, tuple | list):
            return type(node)([await run(n) for n in node])
        if not isinstance(node, A.Node):
            return node
        for attr in node:
            setattr(node, attr, await run(getattr(node, attr)))
        fn = user_functions.plpgsql_function(s, node)
        if fn is None:
            return node
        if fn.returns_set and stmt.valuesLists:
            raise FeatureNotSupported("set-returning functions are not allowed in VALUES")
        result = await _call_function(ex, fn, node.args or (), params)
        if fn.declared and not fn.returns_set:  # OUT parameters: their row
            if len(result) != 1:
                raise FeatureNotSupported(
                    f"function {fn.name}() returns a row of several columns: a composite"
                    " value is not supported",
                    hint=f"Call it in FROM: SELECT * FROM {fn.name}(...).",
                )
            result = result[0]
        if fn.returns_set:
            if not user_functions.result_columns(s, fn)[1]:
                raise FeatureNotSupported(
                    f"function {fn.name}() returns rows of several columns: a composite"
                    " value per row is not supported",
                    hint=f"Call it in FROM: SELECT * FROM {fn.name}(...).",
                )
            result = [] if result is None else [r[0] for r in result]
        params.append(result)
        ref = A.ParamRef(number=len(params))
        typ = "text" if fn.returns == "void" else fn.returns
        if not fn.returns_set:
            return A.TypeCast(arg=ref, typeName=user_functions.type_name(typ))
        array = A.TypeCast(arg=ref, typeName=user_functions.type_name(f"{typ}[]"))
        return A.FuncCall(funcname=(A.String(sval="unnest"),), args=(array,), funcformat=0)

    async def relation(item: Any) -> Any:
        if isinstance(item, A.JoinExpr):
            item.larg, item.rarg = await relation(item.larg), await relation(item.rarg)
            return item
        fn = user_functions.plpgsql_from(s, item)
        if fn is None:
            return item
        call = item.functions[0][0]
        call.args = await run(call.args)
        result = await _call_function(ex, fn, call.args or (), params)
        rows = (result or []) if fn.returns_set else [result if fn.declared else (result,)]
        cells = [_as_params(params, row) for row in rows]
        return user_functions.rows_relation(s, fn, cells, item)

    if stmt.valuesLists:
        stmt.valuesLists = await run(stmt.valuesLists)
    elif stmt.fromClause:
        items = [await relation(item) for item in stmt.fromClause]
        for i, item in enumerate(items):  # FROM t, f(t.x)
            if (fn := user_functions.plpgsql_from(s, item, per_row=True)) is not None:
                items[i] = await _lateral(ex, items, i, fn, params)
        stmt.fromClause = tuple(items)
        while calls := user_functions.per_row_calls(s, stmt):  # innermost first
            await _per_row(ex, stmt, calls, params)
    else:
        stmt.targetList = await run(stmt.targetList)
    return stmt, params


MAX_PER_ROW = 10_000  # distinct arguments a query may call a PL/pgSQL function with


async def _per_row(
    ex: Executor, stmt: A.SelectStmt, calls: list[tuple[A.FuncCall, Function]], params: list[Any]
) -> None:
    """PL/pgSQL calls per row of a query (`SELECT f(x) FROM t WHERE ...`): each function
    run once per distinct argument list the query's rows give (`SELECT DISTINCT x FROM
    t WHERE ...`; without the WHERE if the call is in it), and the call replaced by a
    lookup of its result: `(SELECT r FROM (VALUES ($1, $2), ...) v(a0, r) WHERE v.a0 IS
    NOT DISTINCT FROM x)`. As PostgreSQL may for STABLE and IMMUTABLE functions; a
    VOLATILE one (the default) is refused: it might need to run once per row."""
    seen: dict[int, Any] = {}
    for call, fn in calls:
        args = list(call.args or ())
        in_where = any(n is call for n in nodes(stmt.whereClause, skip=A.SubLink))
        distinct = A.SelectStmt(
            targetList=tuple(A.ResTarget(val=copy_tree(a)) for a in args)
            or (A.ResTarget(val=A.A_Const(isnull=True)),),
            fromClause=copy_tree(stmt.fromClause),
            whereClause=None if in_where else copy_tree(stmt.whereClause),
            distinctClause=(None,),
        )
        found = await _distinct_arguments(ex, fn, distinct, params)
        typ = user_functions.type_name(fn.returns)
        cells = []
        for row in found.rows:
            values = list(row)[: len(args)]
            refs = tuple(A.ParamRef(number=i + 1) for i in range(len(values)))
            result = await _call_function(ex, fn, refs, values)
            cells.append(_as_params(params, [*values, result]))
        seen[id(call)] = _lookup(fn, args, cells, typ)
    replaced_calls = replaced(
        (stmt.targetList, stmt.whereClause, stmt.havingClause, stmt.sortClause),
        lambda n: seen.get(id(n)),
    )
    stmt.targetList, stmt.whereClause, stmt.havingClause, stmt.sortClause = replaced_calls


async def _lateral(
    ex: Executor, items: list[Any], i: int, fn: Function, params: list[Any]
) -> A.RangeSubselect:
    """`FROM t, f(t.x)`: the function run once per distinct argument list the other FROM
    items give, and the item replaced by a LATERAL relation of its rows keyed by them."""
    item = items[i]
    args = list(item.functions[0][0].args or ())
    distinct = A.SelectStmt(
        targetList=tuple(A.ResTarget(val=copy_tree(a)) for a in args),
        fromClause=tuple(copy_tree(x) for j, x in enumerate(items) if j != i),
        distinctClause=(None,),
    )
    found = await _distinct_arguments(ex, fn, distinct, params)
    cells: list[tuple[Any, ...]] = []
    for row in found.rows:
        values = list(row)
        refs = tuple(A.ParamRef(number=k + 1) for k in range(len(values)))
        result = await _call_function(ex, fn, refs, values)
        rows = (result or []) if fn.returns_set else [result if fn.declared else (result,)]
        cells += [_as_params(params, [*values, *out]) for out in rows]
    return user_functions.rows_relation(ex.s, fn, cells, item, keys=args)


def _as_params(params: list[Any], values: Any) -> tuple[A.ParamRef, ...]:
    """`values` appended to the statement's parameters, as references to them."""
    first = len(params) + 1
    params.extend(values)
    return tuple(A.ParamRef(number=first + i) for i in range(len(params) - first + 1))


async def _distinct_arguments(
    ex: Executor, fn: Function, distinct: A.SelectStmt, params: list[Any]
) -> Result:
    """The distinct argument lists a function is called with per row (`distinct`'s
    rows); 0A000 for a VOLATILE function, which might have to run once per row, and for
    more than MAX_PER_ROW of them."""
    if fn.volatility == "v":
        raise FeatureNotSupported(
            f"PL/pgSQL function {fn.name} is called per row of a query, and it is VOLATILE",
            hint="Headwater runs a PL/pgSQL function per row once per distinct arguments,"
            " as PostgreSQL may a STABLE or IMMUTABLE one: if it has no side effects,"
            f" declare it so (ALTER FUNCTION {fn.name} STABLE).",
        )
    found = await ex.execute(distinct, params)
    if len(found.rows) > MAX_PER_ROW:
        raise FeatureNotSupported(
            f"PL/pgSQL function {fn.name} would be called with more than {MAX_PER_ROW}"
            " distinct arguments in one query",
            hint="Write it in LANGUAGE sql (inlined into the query), or call it on fewer rows.",
        )
    return found


def _lookup(fn: Function, args: list[Any], cells: list[tuple[Any, ...]], typ: Any) -> Any:
    """The expression a per-row call becomes: its result looked up by its arguments."""
    if not cells:  # no row calls it
        return A.TypeCast(arg=A.A_Const(isnull=True), typeName=typ)
    names = [f"a{i}" for i in range(len(args))] + ["r"]
    types = [user_functions.type_name(p.type) for p in fn.params[: len(args)]] + [typ]
    values = tuple(
        tuple(A.TypeCast(arg=c, typeName=t) for c, t in zip(row, types, strict=True))
        for row in cells
    )
    alias = A.Alias(aliasname="_hw_calls", colnames=tuple(A.String(sval=n) for n in names))
    where = user_functions.matching("_hw_calls", names[:-1], args)
    result = A.ColumnRef(fields=(A.String(sval="_hw_calls"), A.String(sval="r")))
    return A.SubLink(
        subLinkType=SubLinkType.EXPR_SUBLINK,
        subselect=A.SelectStmt(
            targetList=(A.ResTarget(val=result),),
            fromClause=(A.RangeSubselect(subquery=A.SelectStmt(valuesLists=values), alias=alias),),
            whereClause=where,
            limitCount=A.A_Const(val=A.Integer(ival=1)),
            limitOption=LimitOption.LIMIT_OPTION_COUNT,
        ),
    )


async def _call_function(
    ex: Executor, fn: Function, given: tuple[Any, ...], params: list[Any]
) -> Any:
    """The call's result: a value; with OUT parameters, their row; a set-returning
    function's: a list of rows."""
    _may_execute(ex, fn, "function")
    inputs = await _arguments(ex, fn, given, params)
    if fn.strict and any(a is None for a in inputs):
        return [] if fn.returns_set else (None,) * len(fn.columns) if fn.declared else None
    args, outputs = _body_args(fn, inputs)
    returns = None
    if fn.returns != "void" and not fn.declared:
        returns = user_functions.type_name(fn.returns)
    rows = None
    if fn.returns_set:
        columns, _ = user_functions.result_columns(ex.s, fn)
        types = tuple(user_functions.type_name(t) for _, t in columns)
        pg = tuple(user_functions.column_type(ex.s, t).pg for _, t in columns)
        rows, returns = plpgsql_exec.Rows(types, pg), None
    with _nested():
        value, notices = await plpgsql_exec.execute(
            ex,
            _parsed(fn),
            args,
            _shown(fn),
            controls=False,
            returns=returns,
            rows=rows,
            outputs=outputs,
        )
    ex.s.settings.notices.extend(notices)  # (sent before ReadyForQuery)
    return "" if fn.returns == "void" and not fn.returns_set else value


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


async def _sql_procedure(
    ex: Executor, fn: Function, args: list[Any], outputs: bool
) -> tuple[tuple[Any, ...], list[Any]]:
    """A LANGUAGE sql procedure: its statements in order, its parameters as $1, $2, ...;
    with OUT parameters, the first row of its last statement is their values."""
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
    values: tuple[Any, ...] = ()
    try:
        for raw in parse_sql(fn.source):
            stmt = replaced(raw.stmt, swap)
            result = await ex.execute(stmt, args)
            notices.extend(result.notices)
            if outputs:
                width = len(fn.columns)
                values = tuple(result.rows[0])[:width] if result.rows else (None,) * width
        if implicit:
            commit = A.TransactionStmt(kind=TransactionStmtKind.TRANS_STMT_COMMIT)
            notices.extend((await ex.execute(commit, [])).notices)
    except BaseException:
        if implicit and s.status != "I":
            rollback = A.TransactionStmt(kind=TransactionStmtKind.TRANS_STMT_ROLLBACK)
            await ex.execute(rollback, [])
        raise
    return values, notices


def _parsed(fn: Function) -> dict[str, Any]:
    typed, returns = user_functions.plpgsql_signature(fn)
    return _parse(fn.source, f"function {fn.name}", returns, typed, fn.prokind == "p")


# a body is parsed once, not per call (recursion, a loop's calls); the interpreter only
# reads the tree
_parse = functools.lru_cache(maxsize=256)(parse_function)


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
