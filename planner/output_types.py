"""Catalog types for output columns that are plain column references.

DuckDB reports its own types (VARCHAR for char(4) and varchar(10), DECIMAL with
our storage precision for numeric, JSON for jsonb). PostgreSQL reports the column's
declared type and typmod, and the table and attribute number, which clients use
(pgjdbc's metadata, char(n) padding). This pass finds, for each output column of
a simple SELECT, the table column it names, if any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Relation, Table
from headwater.catalog.system_shapes import system_columns
from headwater.catalog.types import BPCHAR, CHAR, NAME, VARCHAR
from headwater.planner.ddl import type_of
from headwater.planner.scope import Item, Scope, find_relation, names_cte

from headwater.errors import SQLError


@dataclass(frozen=True)
class Source:
    column: Column
    table_oid: int  # 0 for views
    attnum: int


# The named output columns of a subquery or CTE, each with its Source if any
Outputs = list[tuple[str, "Source | None"]]


def _from_items(
    node: Any, catalog: Catalog, search_path: tuple[str, ...], ctes: dict[str, Outputs | None]
) -> list[Item[Source | None]] | None:
    """The FROM item `node` as scope items whose columns bind to their Source; None
    where the item's shape is not followed (its columns' origins unknown)."""
    if isinstance(node, A.RangeVar):
        if names_cte(node, ctes):
            cte = ctes[node.relname]
            if cte is None:
                return None
            return [Item(node.alias.aliasname if node.alias else node.relname, list(cte))]
        rel = find_relation(catalog, node, search_path)
        alias = node.alias.aliasname if node.alias else node.relname
        if rel is None:
            return _system_items(node, alias)
        return [Item(alias, [(c.name, _source(rel, c)) for c in rel.columns])]
    if isinstance(node, A.RangeSubselect):
        if node.alias is None:
            return None
        outs = _outputs(node.subquery, catalog, search_path, ctes)
        if outs is None:
            return None
        return [Item(node.alias.aliasname, _renamed(outs, node.alias))]
    if isinstance(node, A.JoinExpr):
        if node.alias is not None or node.usingClause or node.isNatural:
            return None  # merged columns and renamed joins: leave to DuckDB
        left = _from_items(node.larg, catalog, search_path, ctes)
        right = _from_items(node.rarg, catalog, search_path, ctes)
        if left is None or right is None:
            return None
        return left + right
    return None


_TEXTS = (NAME, CHAR, VARCHAR)


def _system_items(node: A.RangeVar, alias: str) -> list[Item[Source | None]] | None:
    """A system relation's columns of type name, "char" and varchar, which DuckDB gives
    as text (pg_class.relname, pg_attribute.attgenerated, information_schema's
    character_data): their PostgreSQL types."""
    cols = system_columns(node.schemaname, node.relname)
    if cols is None:
        return None
    return [
        Item(
            alias,
            [(n, Source(Column(n, ct), 0, 0) if ct.pg in _TEXTS else None) for n, ct in cols],
        )
    ]


def _cast_source(val: Any) -> Source | None:
    """A cast to varchar(n), char(n) or name: PostgreSQL reports that type and typmod
    (DuckDB says VARCHAR: text, and pgjdbc's metadata an unbounded text)."""
    if not isinstance(val, A.TypeCast) or val.typeName.arrayBounds:
        return None  # (varchar[]: text[], as its elements are encoded)
    try:
        found = type_of(val.typeName)
    except SQLError:
        return None
    if found.pg not in (VARCHAR, BPCHAR, NAME):
        return None
    return Source(Column("?column?", found), 0, 0)


def _renamed(outs: Outputs, alias: A.Alias | None) -> Outputs:
    """`outs` under the column names of `alias` (AS s(a, b)), the rest as they were."""
    names = [c.sval for c in (alias.colnames or ())] if alias is not None else []
    return [(names[i] if i < len(names) else n, src) for i, (n, src) in enumerate(outs)]


def _name(rt: A.ResTarget) -> str:
    """The output name PostgreSQL gives a target (FigureColname, for the forms a
    subquery's reference can follow)."""
    if rt.name:
        return rt.name
    val = rt.val
    while isinstance(val, A.TypeCast):
        val = val.arg
    if isinstance(val, A.ColumnRef) and isinstance(val.fields[-1], A.String):
        return val.fields[-1].sval
    if isinstance(val, A.FuncCall):
        return val.funcname[-1].sval
    return "?column?"


def _outputs(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...], ctes: dict[str, Outputs | None]
) -> Outputs | None:
    """A subquery's output columns: names and Sources; None for shapes not followed."""
    sources = _sources(stmt, catalog, search_path, ctes)
    if sources is None:
        return None
    names: list[str] = []
    for rt in stmt.targetList:
        if isinstance(rt.val, A.ColumnRef) and isinstance(rt.val.fields[-1], A.A_Star):
            return None  # the star's names: not followed (its sources are)
        names.append(_name(rt))
    return list(zip(names, sources, strict=True))


def _source(rel: Relation, col: Column) -> Source:
    attnum = rel.columns.index(col) + 1
    return Source(col, rel.oid if isinstance(rel, Table) else 0, attnum)


def output_sources(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...]
) -> list[Source | None] | None:
    """One entry per output column, or None when the shape is not a simple SELECT (over
    tables, views, and subqueries and CTEs of such SELECTs)."""
    return _sources(stmt, catalog, search_path, {})


def returning_sources(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...]
) -> list[Source | None] | None:
    """output_sources() of an INSERT, UPDATE or DELETE's RETURNING list: PostgreSQL
    reports a returned column's declared type (varchar(n), char(n) padded, numeric(p,s)),
    table and attnum, as for SELECT."""
    rc = stmt.returningClause
    if rc is None:
        return None
    others = getattr(stmt, "fromClause", None) or getattr(stmt, "usingClause", None) or ()
    select = A.SelectStmt(targetList=rc.exprs, fromClause=(stmt.relation, *others))
    return _sources(select, catalog, search_path, {})


def _sources(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...], ctes: dict[str, Outputs | None]
) -> list[Source | None] | None:
    if not isinstance(stmt, A.SelectStmt) or stmt.op or not stmt.targetList:
        return None
    if stmt.withClause is not None:
        if stmt.withClause.recursive:
            return None
        ctes = dict(ctes)
        for cte in stmt.withClause.ctes:
            outs = _outputs(cte.ctequery, catalog, search_path, ctes)
            if outs is not None and cte.aliascolnames:
                names = [c.sval for c in cte.aliascolnames]
                outs = [(names[i] if i < len(names) else n, b) for i, (n, b) in enumerate(outs)]
            ctes[cte.ctename] = outs
    scope: Scope[Source | None] = Scope([])
    for f in stmt.fromClause or ():
        found = _from_items(f, catalog, search_path, ctes)
        if found is None:
            return None
        scope.items.extend(found)
    out: list[Source | None] = []
    for rt in stmt.targetList:
        val = rt.val
        if not isinstance(val, A.ColumnRef):
            out.append(_cast_source(val))
            continue
        fields = val.fields
        if isinstance(fields[-1], A.A_Star):
            if len(fields) == 2:
                out.extend(b for i in scope.with_alias(fields[0].sval) for _, b in i.cols)
            else:
                out.extend(b for i in scope.items for _, b in i.cols)
            continue
        names = [f.sval for f in fields] if len(fields) <= 2 else None
        hits = scope.candidates(names) if names is not None else []
        out.append(hits[0] if len(hits) == 1 else None)
    return out
