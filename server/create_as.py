"""CREATE TABLE ... AS and SELECT ... INTO: a table made from a query's result.

The columns are named and typed as the query's result is described (server/ddl.py
`_view_columns`: unconstrained numeric, varchar(n) passed through, text for unknown
literals), the table is created and the query's rows inserted through INSERT ... SELECT
(server/writes.py), all in one writing transaction: a query that fails leaves no table.
The tag is `SELECT n`, or `CREATE TABLE AS` for WITH NO DATA and IF NOT EXISTS.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import duckdb
import pglast.ast as A
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import BPCHAR, NUMERIC, TEXT, VARCHAR, ColumnType
from headwater.planner.ddl import type_of
from headwater.planner.naming import name_targets, output_select
from headwater.planner.output_types import output_sources
from headwater.server import temp_tables, writes
from headwater.server.ddl import _view_columns
from headwater.server.results import Result
from headwater.server.session import Session, WriteTxn
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import HIDDEN, Replica
from pglast import parse_sql
from pglast.enums import ObjectType, SetOperation

from headwater.errors import FeatureNotSupported, SQLError


def into_clause(stmt: A.SelectStmt) -> A.IntoClause | None:
    """SELECT ... INTO's target (on the leftmost SELECT of a set operation)."""
    while stmt.intoClause is None and stmt.op and stmt.larg is not None:
        stmt = stmt.larg
    return stmt.intoClause


def from_select_into(stmt: A.SelectStmt) -> A.CreateTableAsStmt:
    """SELECT ... INTO t: the CREATE TABLE t AS of the same query (the client's tree,
    perhaps a prepared statement's, is copied, not changed)."""
    return A.CreateTableAsStmt(
        query=_without_into(stmt),
        into=into_clause(stmt),
        objtype=ObjectType.OBJECT_TABLE,
        is_select_into=True,
    )


def _without_into(stmt: A.SelectStmt) -> A.SelectStmt:
    fields = {k: getattr(stmt, k) for k in stmt}
    if stmt.intoClause is not None:
        fields["intoClause"] = None
    elif stmt.op and stmt.larg is not None:
        fields["larg"] = _without_into(stmt.larg)
    return A.SelectStmt(**fields)


def execute(s: Session, w: WriteTxn, stmt: A.CreateTableAsStmt, params: list[Any]) -> Result:
    """CREATE TABLE AS / SELECT INTO in the writing transaction `w` (blocking)."""
    cat = w.catalog
    into = stmt.into
    rv = into.rel
    if into.accessMethod or into.tableSpaceName:
        raise FeatureNotSupported("access methods and tablespaces are not supported")
    if not isinstance(stmt.query, A.SelectStmt):
        raise FeatureNotSupported(f"CREATE TABLE AS {type(stmt.query).__name__} is not supported")
    temp_tables.check_on_commit(rv, into.onCommit)
    if temp_tables.wants_temp(rv):
        schema = temp_tables.creation_schema(s, w, rv)
    else:
        schema = cat.creation_schema(rv.schemaname, s.search_path())
    if cat.resolve(schema, rv.relname, ()) is not None:
        if stmt.if_not_exists:
            notice = SQLError(
                f'relation "{rv.relname}" already exists, skipping', "42P07", severity="NOTICE"
            )
            return Result("CREATE TABLE AS", notices=[notice])
        raise SQLError(f'relation "{rv.relname}" already exists', "42P07")
    _check_duplicates(stmt.query, into.colNames)
    try:
        definition, cols, _ = _view_columns(
            s, w, stmt.query, into.colNames, "CREATE TABLE AS", params
        )
    except SQLError as e:
        if e.sqlstate == "42601" and "more column names" in str(e):
            raise SQLError("too many column names were specified", "42601") from None
        raise
    cols = _declared_types(s, w, definition, cols)
    for c in cols:
        if c.name in HIDDEN:
            raise FeatureNotSupported(f'column name "{c.name}" is reserved by Headwater')
        try:
            c.type.duckdb()
        except KeyError:
            raise FeatureNotSupported(f"type {c.type.sql()} is not supported yet") from None
    table = Table(cat.allocate_oid(), schema, rv.relname, cols)
    cat.add_relation(table)
    w.fresh.add(table.oid)
    try:
        Replica.create_table(w.cur, table)
    except duckdb.Error as e:
        raise translate(e) from None
    w.touched.add(table.oid)
    if temp_tables.wants_temp(rv):
        temp_tables.created(s, table, into.onCommit)
    if into.skipData:
        return Result("CREATE TABLE AS")
    insert = A.InsertStmt(
        relation=A.RangeVar(schemaname=schema, relname=rv.relname, inh=True, relpersistence="p"),
        selectStmt=parse_sql(definition)[0].stmt,
        override=0,
    )
    done = writes.change(s, w, insert, params)
    return Result(f"SELECT {done.tag.rsplit(' ', 1)[-1]}")


def _declared_types(
    s: Session, w: WriteTxn, definition: str, cols: tuple[Column, ...]
) -> tuple[Column, ...]:
    """The types PostgreSQL gives where DuckDB's differ: a cast to varchar(n) or
    char(n) keeps its type (DuckDB says VARCHAR); a numeric keeps its typmod only
    through a plain column reference or a cast to numeric(p,s), so a computed numeric
    (amount * 2, sum(...), 1.5) is unconstrained."""
    query = parse_sql(definition)[0].stmt
    sources = output_sources(query, w.catalog, s.search_path())
    targets = query.targetList if query.op == SetOperation.SETOP_NONE else None
    if not targets or len(targets) != len(cols):
        return cols
    out = []
    for i, c in enumerate(cols):
        val = targets[i].val
        kept = (sources is not None and sources[i] is not None) or (
            isinstance(val, A.TypeCast) and val.typeName.typmods
        )
        if c.type.pg is NUMERIC and not kept:
            c = replace(c, type=ColumnType(NUMERIC))
        elif isinstance(val, A.TypeCast) and c.type.pg is TEXT:
            try:
                cast = type_of(val.typeName)
            except SQLError:
                cast = c.type
            if cast.pg in (VARCHAR, BPCHAR):
                c = replace(c, type=cast)
        out.append(c)
    return tuple(out)


def _check_duplicates(query: A.SelectStmt, aliases: Any) -> None:
    """Two output columns of one name (`SELECT 1, 2`: ?column? twice): 42701."""
    name_targets(query)
    sel = output_select(query)
    targets = sel.targetList if sel is not None else None
    if not targets or any(not isinstance(t, A.ResTarget) or t.name is None for t in targets):
        return
    names = [t.name for t in targets]
    given = [a.sval for a in aliases or ()]
    names[: len(given)] = given[: len(names)]
    for n in names:
        if names.count(n) > 1:
            raise SQLError(f'column "{n}" specified more than once', "42701")
