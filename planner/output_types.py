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


@dataclass(frozen=True)
class Source:
    column: Column
    table_oid: int  # 0 for views
    attnum: int


def _from_items(
    node: Any, catalog: Catalog, search_path: tuple[str, ...]
) -> list[tuple[str, Relation]] | None:
    if isinstance(node, A.RangeVar):
        rel = catalog.resolve(node.schemaname, node.relname, search_path)
        if rel is None:
            return None
        return [(node.alias.aliasname if node.alias else node.relname, rel)]
    if isinstance(node, A.JoinExpr):
        if node.alias is not None or node.usingClause or node.isNatural:
            return None  # merged columns and renamed joins: leave to DuckDB
        left = _from_items(node.larg, catalog, search_path)
        right = _from_items(node.rarg, catalog, search_path)
        if left is None or right is None:
            return None
        return left + right
    return None


def _source(rel: Relation, col: Column) -> Source:
    attnum = rel.columns.index(col) + 1
    return Source(col, rel.oid if isinstance(rel, Table) else 0, attnum)


def output_sources(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...]
) -> list[Source | None] | None:
    """One entry per output column, or None when the shape is not a simple SELECT."""
    if not isinstance(stmt, A.SelectStmt) or stmt.op or stmt.withClause or not stmt.targetList:
        return None
    items: list[tuple[str, Relation]] = []
    for f in stmt.fromClause or ():
        found = _from_items(f, catalog, search_path)
        if found is None:
            return None
        items.extend(found)
    out: list[Source | None] = []
    for rt in stmt.targetList:
        val = rt.val
        if not isinstance(val, A.ColumnRef):
            out.append(None)
            continue
        fields = val.fields
        if isinstance(fields[-1], A.A_Star):
            chosen = items
            if len(fields) == 2:
                chosen = [(a, r) for a, r in items if a == fields[0].sval]
            for _, rel in chosen:
                out.extend(_source(rel, c) for c in rel.columns)
            continue
        name = fields[-1].sval
        if len(fields) == 2:
            matches = [r for a, r in items if a == fields[0].sval]
        elif len(fields) == 1:
            matches = [r for _, r in items if r.column(name) is not None]
        else:
            matches = []
        col = matches[0].column(name) if len(matches) == 1 else None
        out.append(_source(matches[0], col) if col is not None else None)
    return out
