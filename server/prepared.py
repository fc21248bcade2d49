"""PREPARE, EXECUTE and DEALLOCATE in SQL.

They share the session's prepared statements with the protocol's Parse, Bind and Close
(`Session.prepared`, one namespace as in PostgreSQL): a statement PREPAREd in SQL can
be bound by the protocol and one Parsed by the protocol can be EXECUTEd. Parameter
types are those PREPARE declares, else inferred (planner/params.py), else text.

EXECUTE evaluates its arguments in one SELECT, each cast (as PostgreSQL's assignment
coercion) to its parameter's type, then runs the prepared statement with those values.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pglast.ast as A
from headwater.catalog.pgtypes import binary_decoder, text_decoder
from headwater.catalog.types import TEXT, UNKNOWN, ColumnType, PgType
from headwater.planner.naming import name_targets
from headwater.planner.params import cast_type, count_params, infer_param_types, type_name
from headwater.planner.scope import resolve_relation
from headwater.planner.syntax import nodes
from headwater.server import queries, user_functions
from headwater.server.results import Field, Result
from pglast import parse_sql
from pglast.stream import RawStream

from headwater.errors import SQLError

if TYPE_CHECKING:
    from headwater.server.executor import Executor


@dataclass
class SqlPrepared:
    """A prepared statement made by PREPARE; the fields the protocol's Bind reads are
    those of server/connection.py's `Prepared`."""

    name: str
    sql: str
    param_types: list[ColumnType]
    stmt: Any
    text_decoders: list[Any]
    binary_decoders: list[Any]
    from_sql: bool = True
    prepare_time: datetime = field(default_factory=lambda: datetime.now(UTC))


def _exists(name: str) -> SQLError:
    return SQLError(f'prepared statement "{name}" already exists', "42P05")


def _missing(name: str) -> SQLError:
    return SQLError(f'prepared statement "{name}" does not exist', "26000")


async def prepare(ex: Executor, stmt: A.PrepareStmt) -> Result:
    s = ex.s
    if stmt.name in s.prepared:
        raise _exists(stmt.name)
    text = RawStream()(stmt)  # pg_prepared_statements.statement (PostgreSQL: the text sent)
    declared = [_declared_type(tn) for tn in stmt.argtypes or ()]
    query = stmt.query
    nparams = max(count_params(query), len(declared))
    used = _param_numbers(query)
    for n in range(len(declared) + 1, nparams + 1):
        if n not in used:
            raise SQLError(f"could not determine data type of parameter ${n}", "42P18")
    inferred = infer_param_types(
        query, s.catalog, s.search_path(), [t.pg.oid for t in declared], nparams
    )
    types = [
        declared[i] if i < len(declared) else (inferred[i] or ColumnType(TEXT))
        for i in range(nparams)
    ]
    typed = _typed_params(query, types)
    # names resolve now (42P01 at PREPARE, as in PostgreSQL); binding changes the tree
    if isinstance(typed, A.SelectStmt):
        inlined = user_functions.inlined(s, copy.deepcopy(typed))
        await queries.describe(s, ex.waits, inlined, nparams)
    elif isinstance(typed, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
        resolve_relation(s.catalog, typed.relation, s.search_path())
    s.prepared[stmt.name] = SqlPrepared(
        stmt.name,
        text,
        types,
        typed,
        [text_decoder(t) for t in types],
        [binary_decoder(t) for t in types],
    )
    return Result("PREPARE")


def _typed_params(query: Any, types: list[ColumnType]) -> Any:
    """A copy of `query` where each $n is `CAST($n AS its type)`: results and Describe
    show the parameter's type whatever the value (NULL too), as in PostgreSQL. Output
    columns are named first, so `SELECT $1` stays `?column?`."""
    query = copy.deepcopy(query)
    if isinstance(query, A.SelectStmt):
        name_targets(query)
    names = [type_name(t) for t in types]

    def typed(node: Any) -> Any:
        if isinstance(node, A.ParamRef) and 0 < node.number <= len(names):
            return A.TypeCast(arg=node, typeName=names[node.number - 1])
        if isinstance(node, tuple | list):
            return type(node)(typed(n) for n in node)
        if isinstance(node, A.Node):
            for attr in node:
                setattr(node, attr, typed(getattr(node, attr)))
        return node

    return typed(query)


def _declared_type(tn: A.TypeName) -> ColumnType:
    """A parameter's type; PostgreSQL drops its modifier (numeric(6, 2) is numeric)."""
    try:
        return ColumnType(cast_type(tn).pg)
    except SQLError as e:
        loc = getattr(tn, "location", None)
        if e.position is None and isinstance(loc, int):
            e.position = loc + 1
        raise


def _param_numbers(node: Any) -> set[int]:
    return {n.number for n in nodes(node) if isinstance(n, A.ParamRef)}


def deallocate(ex: Executor, stmt: A.DeallocateStmt) -> Result:
    """DEALLOCATE [PREPARE] name | ALL (psycopg evicts its protocol statements so too)."""
    prepared = ex.s.prepared
    if stmt.isall or stmt.name is None:
        for name in [n for n in prepared if n]:
            del prepared[name]
        return Result("DEALLOCATE ALL")
    if prepared.pop(stmt.name, None) is None:
        raise _missing(stmt.name)
    return Result("DEALLOCATE")


def _prepared(ex: Executor, name: str) -> Any:
    prep = ex.s.prepared.get(name)
    if prep is None:
        raise _missing(name)
    return prep


async def execute(ex: Executor, stmt: A.ExecuteStmt, params: list[Any]) -> Result:
    prep = _prepared(ex, stmt.name)
    args = list(stmt.params or ())
    if len(args) != len(prep.param_types):
        raise SQLError(
            f'wrong number of parameters for prepared statement "{stmt.name}"',
            "42601",
            detail=f"Expected {len(prep.param_types)} parameters but got {len(args)}.",
        )
    values = await _argument_values(ex, args, prep.param_types, params) if args else []
    if prep.stmt is None:
        return Result("")
    return await ex.execute(prep.stmt, values)


async def describe(ex: Executor, stmt: A.ExecuteStmt) -> list[Field] | None:
    """EXECUTE's result columns are its prepared statement's."""
    prep = _prepared(ex, stmt.name)
    if prep.stmt is None:
        return None
    return await ex.describe(prep.stmt, prep.param_types)


# -- arguments -------------------------------------------------------------------------
# Assignment coercions PostgreSQL allows between categories (typcategory): numbers among
# themselves, date/time types among themselves, anything to a string type.
_ASSIGNABLE = {("N", "N"), ("D", "D"), ("S", "S")}


def _coercible(source: PgType, target: PgType) -> bool:
    if source.oid == target.oid or source is UNKNOWN or target.category == "S":
        return True
    return (source.category, target.category) in _ASSIGNABLE


def _is_literal(node: Any) -> bool:
    return isinstance(node, A.A_Const) and (node.isnull or isinstance(node.val, A.String))


def _check_param_refs(args: list[Any], params: list[Any]) -> None:
    """`EXECUTE p($1)` outside a statement with parameters: 42P02."""
    for node in nodes(args):
        if isinstance(node, A.ParamRef) and node.number > len(params):
            loc = getattr(node, "location", None)
            raise SQLError(
                f"there is no parameter ${node.number}",
                "42P02",
                position=loc + 1 if isinstance(loc, int) else None,
            )


def _select_of(targets: list[Any]) -> A.SelectStmt:
    stmt = parse_sql("SELECT 1")[0].stmt
    stmt.targetList = tuple(A.ResTarget(val=t) for t in targets)
    return stmt


async def _argument_values(
    ex: Executor, args: list[Any], types: list[ColumnType], params: list[Any]
) -> list[Any]:
    _check_param_refs(args, params)
    typed = [i for i, a in enumerate(args) if not _is_literal(a)]
    if typed:  # the types of the expressions, from a plan over no rows
        fields = await queries.describe(
            ex.s, ex.waits, _select_of([args[i] for i in typed]), len(params)
        )
        for i, f in zip(typed, fields, strict=True):
            if not _coercible(f.type.pg, types[i].pg):
                loc = getattr(args[i], "location", None)
                raise SQLError(
                    f"parameter ${i + 1} of type {f.type.pg.sql_name} cannot be coerced to "
                    f"the expected type {types[i].pg.sql_name}",
                    "42804",
                    hint="You will need to rewrite or cast the expression.",
                    position=loc + 1 if isinstance(loc, int) else None,
                )
    casts = [
        A.TypeCast(arg=a, typeName=type_name(t), location=getattr(a, "location", -1))
        for a, t in zip(args, types, strict=True)
    ]
    try:
        result = await queries.select(ex.s, ex.waits, ex.plans, _select_of(casts), params)
    except SQLError as e:
        _locate_bad_input(e, args)
        raise
    return list(result.rows[0])


def _locate_bad_input(err: SQLError, args: list[Any]) -> None:
    """Point an input error (22P02 `invalid input syntax for type integer: "x"`) at the
    argument holding the value, as PostgreSQL's cursor does."""
    if err.position is not None or not err.sqlstate.startswith("22"):
        return
    for a in args:
        if _is_literal(a) and not a.isnull and f'"{a.val.sval}"' in err.message:
            loc = getattr(a, "location", None)
            if isinstance(loc, int):
                err.position = loc + 1
            return
