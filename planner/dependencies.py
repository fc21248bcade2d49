"""What a view's definition uses of a table, and rewriting it when the table changes.

PostgreSQL stores a view as a parsed query bound to column and relation identities,
so a renamed table or column is followed by its views and a column a view uses
cannot be dropped or retyped. Headwater stores the definition as SQL text; these
helpers bind its column references to (relation oid, column) the way PostgreSQL's
parser scopes them (innermost FROM first, then the enclosing queries) and rewrite
the references, so the stored text keeps meaning what it meant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.planner.relations import deparse
from headwater.planner.syntax import nodes
from pglast import parse_sql


@dataclass
class _Item:
    """A relation in some FROM clause: the name its columns are qualified by."""

    qualifier: str
    rv: A.RangeVar
    oid: int
    columns: tuple[str, ...]


class _Scopes:
    def __init__(self, catalog: Catalog, search_path: tuple[str, ...]) -> None:
        self.catalog = catalog
        self.search_path = search_path

    def from_items(self, sel: A.SelectStmt) -> tuple[list[_Item], bool]:
        """The RangeVars of a SELECT's FROM, and whether that is everything in it
        (no subqueries, functions or USING/NATURAL joins: `*` expands plainly)."""
        items: list[_Item] = []
        plain = True

        def walk(n: Any) -> None:
            nonlocal plain
            if isinstance(n, A.RangeVar):
                rel = self.catalog.resolve(n.schemaname, n.relname, self.search_path)
                if rel is None:  # a CTE, or a name this helper cannot see
                    plain = False
                    return
                q = n.alias.aliasname if n.alias else n.relname
                items.append(_Item(q, n, rel.oid, tuple(c.name for c in rel.columns)))
            elif isinstance(n, A.JoinExpr):
                if n.usingClause or n.isNatural:
                    plain = False
                walk(n.larg)
                walk(n.rarg)
            else:
                plain = False

        for f in sel.fromClause or ():
            walk(f)
        return items, plain


RefVisitor = Callable[[A.ColumnRef, _Item | None, str], None]


def _visit(
    node: Any,
    scopes: _Scopes,
    chain: list[list[_Item]],
    on_ref: RefVisitor,
    on_select: Callable[[A.SelectStmt, list[_Item], bool], None] | None = None,
) -> None:
    """Call on_ref(ref, the FROM item it binds to or None, column) for every column
    reference, and on_select(select, its FROM items, plain) for every SELECT."""
    if isinstance(node, tuple | list):
        for x in node:
            _visit(x, scopes, chain, on_ref, on_select)
        return
    if not isinstance(node, A.Node):
        return
    if isinstance(node, A.SelectStmt) and not node.op:
        items, plain = scopes.from_items(node)
        if on_select is not None:
            on_select(node, items, plain)
        inner = [*chain, items]
        for name in node:
            _visit(getattr(node, name), scopes, inner, on_ref, on_select)
        return
    if isinstance(node, A.ColumnRef):
        fields = node.fields
        last = fields[-1]
        col = "*" if isinstance(last, A.A_Star) else last.sval
        if len(fields) == 1:
            for items in reversed(chain):
                hit = next((i for i in items if col in i.columns), None)
                if hit is not None:
                    on_ref(node, hit, col)
                    return
            on_ref(node, None, col)
            return
        qual = fields[-2].sval if isinstance(fields[-2], A.String) else None
        for items in reversed(chain):
            hit = next((i for i in items if i.qualifier == qual), None)
            if hit is not None:
                on_ref(node, hit, col)
                return
        on_ref(node, None, col)
        return
    for name in node:
        _visit(getattr(node, name), scopes, chain, on_ref, on_select)


def columns_used(
    definition: str, catalog: Catalog, search_path: tuple[str, ...], oid: int
) -> set[str]:
    """The columns of relation `oid` that the query uses (`*`: all of them)."""
    used: set[str] = set()

    def on_ref(ref: A.ColumnRef, item: _Item | None, col: str) -> None:
        if item is not None and item.oid == oid:
            used.update(item.columns if col == "*" else (col,))

    def on_select(sel: A.SelectStmt, items: list[_Item], plain: bool) -> None:
        for rt in sel.targetList or ():
            v = rt.val if isinstance(rt, A.ResTarget) else None
            if (
                isinstance(v, A.ColumnRef)
                and len(v.fields) == 1
                and isinstance(v.fields[0], A.A_Star)
            ):
                for i in items:
                    if i.oid == oid:
                        used.update(i.columns)

    stmt = parse_sql(definition)[0].stmt
    _visit(stmt, _Scopes(catalog, search_path), [], on_ref, on_select)
    return used


def expand_stars(
    definition: str, catalog: Catalog, search_path: tuple[str, ...], oid: int | None
) -> str:
    """The query with every `*` (or `q.*`) that covers relation `oid` (None: any)
    written out as its columns, as PostgreSQL fixes a view's columns when it is created."""
    changed = False

    def on_select(sel: A.SelectStmt, items: list[_Item], plain: bool) -> None:
        nonlocal changed
        out: list[Any] = []
        for rt in sel.targetList or ():
            v = rt.val if isinstance(rt, A.ResTarget) else None
            if not (isinstance(v, A.ColumnRef) and isinstance(v.fields[-1], A.A_Star)):
                out.append(rt)
                continue
            if len(v.fields) == 1:
                covers = oid is None or any(i.oid == oid for i in items)
                cover = items if plain and covers else []
            else:
                qual = v.fields[-2].sval if isinstance(v.fields[-2], A.String) else None
                cover = [i for i in items if i.qualifier == qual and oid in (None, i.oid)]
            if not cover:
                out.append(rt)
                continue
            changed = True
            for i in cover:
                for c in i.columns:
                    ref = A.ColumnRef(fields=(A.String(sval=i.qualifier), A.String(sval=c)))
                    out.append(A.ResTarget(name=c, val=ref))
        if changed:
            sel.targetList = tuple(out)

    stmt = parse_sql(definition)[0].stmt
    _visit(stmt, _Scopes(catalog, search_path), [], lambda *_: None, on_select)
    return deparse(stmt) if changed else definition


def rename_column(
    definition: str, catalog: Catalog, search_path: tuple[str, ...], oid: int, old: str, new: str
) -> str:
    """The query with references to column `old` of relation `oid` naming `new`.
    Output names stay (targets carry their names: planner/naming.py)."""
    changed = False

    def on_ref(ref: A.ColumnRef, item: _Item | None, col: str) -> None:
        nonlocal changed
        if item is not None and item.oid == oid and col == old:
            ref.fields = (*ref.fields[:-1], A.String(sval=new))
            changed = True

    stmt = parse_sql(definition)[0].stmt
    _visit(stmt, _Scopes(catalog, search_path), [], on_ref)
    return deparse(stmt) if changed else definition


def rename_relation(
    definition: str,
    catalog: Catalog,
    search_path: tuple[str, ...],
    oid: int,
    name: str,
    schema: str | None = None,
) -> str:
    """The query naming relation `oid` as `name` (in `schema`, when it moved):
    its FROM entries and the column references qualified by its old name."""
    stmt = parse_sql(definition)[0].stmt
    renamed: list[tuple[A.RangeVar, str]] = []

    def on_ref(ref: A.ColumnRef, item: _Item | None, col: str) -> None:
        if item is None or item.oid != oid or item.rv.alias is not None or len(ref.fields) < 2:
            return
        ref.fields = (*ref.fields[:-2], A.String(sval=name), ref.fields[-1])

    def on_select(sel: A.SelectStmt, items: list[_Item], plain: bool) -> None:
        for i in items:
            if i.oid == oid:
                renamed.append((i.rv, i.rv.relname))

    _visit(stmt, _Scopes(catalog, search_path), [], on_ref, on_select)
    for rv, _ in renamed:
        rv.relname = name
        if schema is not None:
            rv.schemaname = schema
    return deparse(stmt) if renamed else definition


def rename_output(definition: str, position: int, name: str) -> str:
    """The query with its output column `position` (0-based) named `name` (the left-most
    SELECT of a set operation names the columns)."""
    stmt = parse_sql(definition)[0].stmt
    sel = stmt
    while isinstance(sel, A.SelectStmt) and sel.op:
        sel = sel.larg
    targets = list(sel.targetList or ())
    i = 0
    for k, rt in enumerate(targets):
        v = rt.val
        if isinstance(v, A.ColumnRef) and isinstance(v.fields[-1], A.A_Star):
            raise ValueError("a view with * is expanded first")
        if i == position:
            targets[k] = A.ResTarget(name=name, val=v, indirection=rt.indirection)
            break
        i += 1
    sel.targetList = tuple(targets)
    return deparse(stmt)


def rename_in_expression(expr: str, old: str, new: str) -> str:
    """A table-level expression (a CHECK) with column `old` renamed `new`."""
    node = parse_sql(f"SELECT ({expr})")[0].stmt.targetList[0].val
    changed = False
    for n in nodes(node):
        if isinstance(n, A.ColumnRef):
            last = n.fields[-1]
            if isinstance(last, A.String) and last.sval == old:
                n.fields = (*n.fields[:-1], A.String(sval=new))
                changed = True
    return deparse(node) if changed else expr
