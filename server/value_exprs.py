"""VALUES and SET items that are expressions, computed by DuckDB for the fast paths.

`INSERT INTO t VALUES ($1, lower($2), $3 + 1, ARRAY[$4, $5], now() + interval '1 day')`:
the batcher takes constants, parameters and the clock in Python (server/batcher.py); an
item that is an expression sent the whole INSERT to the general path, a writing
transaction of its own (~10-13 ms, and every other writer waits for its write lock).
Here such items, if they read no table and change nothing (no column, subquery,
sequence call or other function with a side effect), are computed in one DuckDB
statement as the general path computes them (planner/dml.py `cast_sql`: the item cast
to its column's type, after the PostgreSQL translation), off the write lock; the
statement then goes to the batcher with their values as extra parameters. The clock
in an expression (now(), CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE) is one
instant given to DuckDB as a parameter and to the batcher as the statement's clock,
so that `now() + interval '1 day'`, a bare now() and a DEFAULT now() column agree, as
in PostgreSQL (the transaction's start); clock_timestamp(), statement_timestamp() and
timeofday() stay general. An UPDATE's SET items of the same kinds (`SET email =
lower($1)`) are computed the same way, so that a point write (server/point_writes.py)
takes the statement.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from typing import Any

import duckdb
import pglast.ast as A
import pglast.enums as E
from headwater.catalog.objects import Column, Table
from headwater.planner import dml
from headwater.planner.ir import PER_CALL_FUNCS, SET_RETURNING_FUNCS
from headwater.planner.pg_compat import AGGREGATES
from headwater.planner.syntax import nodes, replaced
from headwater.server.binders import current_binder
from headwater.server.duckdb_calls import duckdb_params
from headwater.server.session import Session
from headwater.storage.duckdb_errors import translate

# node types an expression computed here may hold (no ColumnRef, SubLink, RangeVar, ...)
_PURE_NODES = (
    A.A_Const,
    A.ParamRef,
    A.A_Expr,
    A.TypeCast,
    A.TypeName,
    A.FuncCall,
    A.A_ArrayExpr,
    A.CoalesceExpr,
    A.MinMaxExpr,
    A.CaseExpr,
    A.CaseWhen,
    A.BoolExpr,
    A.NullTest,
    A.BooleanTest,
    A.String,
    A.Integer,
    A.Float,
    A.Boolean,
)
# the clock: a bare call is the batcher's (its instant)
_CLOCK = frozenset(
    ("now", "transaction_timestamp", "statement_timestamp", "clock_timestamp", "timeofday")
)
# ... inside an expression, the transaction's start is a parameter (the others: general)
_INSTANT = frozenset(("now", "transaction_timestamp"))
# CURRENT_TIMESTAMP & co. (without a precision): the instant cast as PostgreSQL's are
_INSTANT_KEYWORDS = {
    E.SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP: (),
    E.SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP: ("timestamp",),
    E.SQLValueFunctionOp.SVFOP_CURRENT_DATE: ("date",),
}
# functions that change something or read a table, or the clock: the general path
_SIDE_EFFECTS = (_CLOCK - _INSTANT) | frozenset(
    ("nextval", "currval", "setval", "lastval", "set_config", "pg_notify", "pg_sleep")
    + ("txid_current", "pg_current_xact_id", "pg_cancel_backend", "pg_terminate_backend")
    + ("pg_reload_conf", "pg_rotate_logfile", "pg_switch_wal", "pg_read_file")
)
_SIDE_EFFECT_PREFIXES = ("pg_advisory", "pg_try_advisory", "lo_", "dblink", "pg_stat_reset")


# (tree id, search path, settings) -> (tree, catalog, _select's result)
_SELECTS: dict[tuple[Any, ...], tuple[Any, Any, tuple[Any, str, bool]]] = {}
_SELECTS_MAX = 512


def computable(node: Any) -> bool:
    """Whether `node` is an expression this module computes."""
    for n in nodes(node):
        if isinstance(n, A.SQLValueFunction):  # CURRENT_DATE & co. (not CURRENT_USER ...)
            if n.op not in _INSTANT_KEYWORDS or n.typmod != -1:
                return False
            continue
        if not isinstance(n, _PURE_NODES):
            return False
        if isinstance(n, A.FuncCall):
            name = n.funcname[-1].sval.lower()
            if (
                n.agg_star
                or n.over is not None
                or n.agg_filter is not None
                or n.agg_order
                or name in _SIDE_EFFECTS
                or name.startswith(_SIDE_EFFECT_PREFIXES)
                or name in AGGREGATES  # (42803 in VALUES: the general path says so)
                or name in SET_RETURNING_FUNCS  # (rows, not a value)
            ):
                return False
    return True


def _plain(node: Any) -> bool:
    """An item the batcher takes itself, or leaves to the general path (the clock)."""
    return isinstance(node, A.A_Const | A.ParamRef | A.SetToDefault | A.SQLValueFunction) or (
        isinstance(node, A.FuncCall) and not node.args and node.funcname[-1].sval in _CLOCK
    )


# Where an item to compute is: (row, position) in an INSERT's VALUES lists, or
# (SET, position) in an UPDATE's SET list
SET = -1
Todo = list[tuple[int, int, Column]]


def items(stmt: Any, table: Table) -> Todo | None:
    """(row, item, column) of each VALUES item to compute; None when the statement is
    not an INSERT ... VALUES whose other items the batcher may take, or none is to be
    computed, or one cannot be."""
    src = stmt.selectStmt
    if not isinstance(src, A.SelectStmt) or not src.valuesLists or stmt.withClause is not None:
        return None
    if stmt.cols:
        cols = [table.column(rt.name) for rt in stmt.cols]
    else:
        cols = list(table.columns)[: len(src.valuesLists[0])]
    out: Todo = []
    for r, values in enumerate(src.valuesLists):
        if len(values) != len(cols):
            return None
        for i, (node, col) in enumerate(zip(values, cols, strict=True)):
            if col is None:
                return None
            if not _plain(node):
                if not computable(node):
                    return None
                out.append((r, i, col))
    return out or None


def set_items(stmt: Any, table: Table) -> Todo | None:
    """(SET, item, column) of each of an UPDATE's SET items that is an expression of
    constants, parameters and the clock (`SET email = lower($1)`, `SET expires = now() +
    interval '1 hour'`), computed first so that a point write takes the statement; None
    when there is none (the others are left as they are: `n = n + 1` is the point
    write's). A volatile call (random()) would be one value for every row: not taken."""
    if not isinstance(stmt, A.UpdateStmt) or stmt.withClause is not None or stmt.fromClause:
        return None
    out: Todo = []
    for i, rt in enumerate(stmt.targetList):
        col = table.column(rt.name)
        if col is None or rt.indirection or isinstance(rt.val, A.MultiAssignRef):
            return None
        node = rt.val
        if _plain(node) or not computable(node):
            continue
        if any(isinstance(n, A.FuncCall) and _name(n) in PER_CALL_FUNCS for n in nodes(node)):
            return None
        out.append((SET, i, col))
    return out or None


def _name(call: A.FuncCall) -> str:
    return str(call.funcname[-1].sval).lower()


def _node_at(stmt: Any, row: int, i: int) -> Any:
    if row == SET:
        return stmt.targetList[i].val
    return stmt.selectStmt.valuesLists[row][i]


def with_params(stmt: Any, todo: Todo, first: int) -> Any:
    """A copy of `stmt` whose items `todo` are parameters `first`, `first` + 1, ...
    (the other items are the statement's own nodes)."""
    out = copy.copy(stmt)
    if todo[0][0] == SET:
        targets = list(stmt.targetList)
        for k, (_, i, _) in enumerate(todo, start=first):
            targets[i] = copy.copy(targets[i])
            targets[i].val = A.ParamRef(number=k)
        out.targetList = tuple(targets)
        return out
    rows = [list(v) for v in stmt.selectStmt.valuesLists]
    for k, (r, i, _) in enumerate(todo, start=first):
        rows[r][i] = A.ParamRef(number=k)
    out.selectStmt = copy.copy(stmt.selectStmt)
    out.selectStmt.valuesLists = tuple(tuple(v) for v in rows)
    return out


async def with_values(
    s: Session,
    stmt: Any,
    table: Table,
    params: list[Any],
    todo: Todo,
    started: dt.datetime | None,
) -> tuple[Any, list[Any], dt.datetime | None]:
    """A copy of `stmt` whose items `todo` are parameters, the parameters with their
    values (computed as the general path would: 22003, 22P02 ... as its errors), and
    the statement's clock: `started` (a block's start), or for an autocommitted
    statement whose items read the clock, the instant they read (else None)."""
    out, sql, clocked = _select(s, stmt, todo, len(params))
    args = list(params)
    if clocked:
        started = started or dt.datetime.now(dt.UTC)
        args.append(started)  # parameter len(params) + 1: the instant
    row = await asyncio.to_thread(_compute, s, sql, args)
    return out, [*params, *row], started


def _select(s: Session, stmt: Any, todo: Todo, params: int) -> tuple[Any, str, bool]:
    """`stmt` with the items `todo` as parameters after its `params` own, the DuckDB
    SELECT computing them, and whether they read the clock (its instant: parameter
    `params` + 1 of the SELECT). Remembered for a prepared statement (its translation
    is ~1 ms of the event loop's time, and the batcher's template of the new tree is
    kept by its identity): by the tree, the catalog, the search path and the settings
    (a SELECT naming a system relation is not kept)."""
    key = (id(stmt), s.search_path(), frozenset(s.settings.values.items()))
    hit = _SELECTS.get(key)
    if hit is not None and hit[0] is stmt and hit[1] is s.catalog:
        return hit[2]
    items = [copy.deepcopy(_node_at(stmt, r, i)) for r, i, _ in todo]  # (rewritten below)
    clocked = _clocked(items)
    if clocked:
        items = [_with_instant(item, params + 1) for item in items]
    work = A.SelectStmt(targetList=tuple(A.ResTarget(val=item) for item in items))
    dml.pg_spellings(work, s.catalog, s.search_path())  # as the general path has them
    binder = current_binder(s)
    targets = zip(work.targetList, [col for _, _, col in todo], strict=True)
    sql = "SELECT " + ", ".join(dml.cast_sql(rt.val, col, binder) for rt, col in targets)
    found = (with_params(stmt, todo, params + 1), sql, clocked)
    if params and not binder.uses_system:  # (a literal statement is parsed anew each time)
        if len(_SELECTS) >= _SELECTS_MAX:
            _SELECTS.clear()
        _SELECTS[key] = (stmt, s.catalog, found)
    return found


def _clocked(items: Any) -> bool:
    return any(_instant(n) is not None for item in items for n in nodes(item))


def _instant(node: Any) -> tuple[str, ...] | None:
    """The casts of the transaction's start that `node` is, if it reads the clock."""
    if isinstance(node, A.SQLValueFunction):
        return _INSTANT_KEYWORDS.get(node.op)
    if (
        isinstance(node, A.FuncCall)
        and not node.args
        and node.funcname[-1].sval.lower() in _INSTANT
        and (len(node.funcname) == 1 or node.funcname[0].sval == "pg_catalog")
    ):
        return ()
    return None


def _with_instant(node: Any, number: int) -> Any:
    """`node` with each clock reading replaced by parameter `number`, the instant, cast
    to what the reading returns (timestamptz, then timestamp or date in the session's
    TimeZone, as DuckDB's cursor has it)."""

    def instant(n: A.Node) -> Any | None:
        casts = _instant(n)
        if casts is None:
            return None
        out: Any = A.ParamRef(number=number)
        for name in ("timestamptz", *casts):
            names = (A.String(sval="pg_catalog"), A.String(sval=name))
            out = A.TypeCast(arg=out, typeName=A.TypeName(names=names, typemod=-1))
        return out

    return replaced(node, instant)


def _compute(s: Session, sql: str, params: list[Any]) -> tuple[Any, ...]:
    try:
        (got,) = s.cursor().execute(sql, duckdb_params(sql, params)).fetchall()
    except duckdb.Error as e:
        raise translate(e) from None
    return tuple(got)
