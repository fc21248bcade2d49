"""Infer the types of $n parameters from their context, as PostgreSQL's parser does.

Clients such as asyncpg encode parameters by the types the server announces in
ParameterDescription, so `WHERE id = $1` must say the type of `id`. Contexts:
an explicit cast, a comparison or arithmetic with a column, an INSERT value, an
UPDATE assignment, LIMIT/OFFSET. Anything else is text (as PostgreSQL would
resolve an unknown literal).
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Relation
from headwater.catalog.types import INT8, TEXT, ColumnType
from headwater.planner.ddl import type_of

from headwater.errors import SQLError


def _param(node: Any) -> int | None:
    if isinstance(node, A.ParamRef):
        return node.number
    return None


class _Inferrer:
    def __init__(self, catalog: Catalog, search_path: tuple[str, ...], declared: list[int]) -> None:
        self.catalog = catalog
        self.search_path = search_path
        self.types: dict[int, ColumnType] = {}
        self.relations: list[Relation] = []
        self.declared = declared

    def note(self, n: int, ct: ColumnType) -> None:
        self.types.setdefault(n, ct)

    def relation(self, rv: A.RangeVar) -> None:
        rel = self.catalog.resolve(rv.schemaname, rv.relname, self.search_path)
        if rel is not None:
            self.relations.append(rel)

    def column_type(self, ref: A.ColumnRef) -> ColumnType | None:
        last = ref.fields[-1]
        if not isinstance(last, A.String):
            return None
        for rel in self.relations:
            col = rel.column(last.sval)
            if col is not None:
                return col.type
        return None

    def walk(self, node: Any) -> None:
        if isinstance(node, tuple | list):
            for n in node:
                self.walk(n)
            return
        if not isinstance(node, A.Node):
            return
        if isinstance(node, A.RangeVar):
            self.relation(node)
        elif isinstance(node, A.TypeCast) and (n := _param(node.arg)) is not None:
            try:
                self.note(n, type_of(node.typeName))
            except SQLError:
                pass
        elif isinstance(node, A.A_Expr):
            for a, b in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
                n = _param(a)
                if n is not None and isinstance(b, A.ColumnRef):
                    ct = self.column_type(b)
                    if ct is not None:
                        self.note(n, ct)
                if n is not None and isinstance(b, tuple | list):  # IN ($1, $2)
                    pass
            if isinstance(node.rexpr, tuple | list) and isinstance(node.lexpr, A.ColumnRef):
                ct = self.column_type(node.lexpr)
                for item in node.rexpr:
                    if (n := _param(item)) is not None and ct is not None:
                        self.note(n, ct)
        elif isinstance(node, A.SelectStmt):
            for item in (node.limitCount, node.limitOffset):
                if (n := _param(item)) is not None:
                    self.note(n, ColumnType(INT8))
        for name in node:
            self.walk(getattr(node, name))


def infer_param_types(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...], declared: list[int], count: int
) -> list[ColumnType | None]:
    """One entry per parameter: the inferred type, or None where a declared OID rules."""
    inf = _Inferrer(catalog, search_path, declared)
    # Relations first, so that column references in any clause can be typed.
    _collect_relations(stmt, inf)
    if isinstance(stmt, A.InsertStmt):
        rel = catalog.resolve(stmt.relation.schemaname, stmt.relation.relname, search_path)
        if rel is not None:
            cols = [rel.column(rt.name) for rt in stmt.cols] if stmt.cols else list(rel.columns)
            src = stmt.selectStmt
            if isinstance(src, A.SelectStmt) and src.valuesLists:
                for row in src.valuesLists:
                    for v, col in zip(row, cols, strict=False):
                        if (n := _param(v)) is not None and col is not None:
                            inf.note(n, col.type)
    if isinstance(stmt, A.UpdateStmt):
        rel = catalog.resolve(stmt.relation.schemaname, stmt.relation.relname, search_path)
        if rel is not None:
            for rt in stmt.targetList:
                col = rel.column(rt.name)
                if (n := _param(rt.val)) is not None and col is not None:
                    inf.note(n, col.type)
    inf.walk(stmt)
    out: list[ColumnType | None] = []
    for i in range(1, count + 1):
        if i <= len(declared) and declared[i - 1]:
            out.append(None)
        else:
            out.append(inf.types.get(i, ColumnType(TEXT)))
    return out


def _collect_relations(node: Any, inf: _Inferrer) -> None:
    if isinstance(node, tuple | list):
        for n in node:
            _collect_relations(n, inf)
        return
    if not isinstance(node, A.Node):
        return
    if isinstance(node, A.RangeVar):
        inf.relation(node)
        return
    for name in node:
        _collect_relations(getattr(node, name), inf)


def count_params(stmt: Any) -> int:
    top = 0

    def walk(node: Any) -> None:
        nonlocal top
        if isinstance(node, tuple | list):
            for n in node:
                walk(n)
            return
        if not isinstance(node, A.Node):
            return
        if isinstance(node, A.ParamRef):
            top = max(top, node.number)
            return
        for name in node:
            walk(getattr(node, name))

    walk(stmt)
    return top
