"""The relational IR that materialized views compile to.

A plan is a tree of frozen dataclasses. Every node has `columns`: the internal names
of its output columns, unique within the plan (`c0`, `c1`, ...), so that rewrites
never have to think about qualification or shadowing. Scalar expressions are kept as
SQL text over those internal names, in PostgreSQL syntax as pglast deparses it (an
`Expr`); the engine evaluates them with DuckDB, which the serving replica already
uses for PostgreSQL-shaped SQL (integer division on). Keeping expressions as text is
the simplest thing that is right for projections, CASE, casts and functions; a
typed expression IR comes when Spark has to evaluate them natively (docs/engine.md).

    Scan(table=16384, source=("a", "b"), columns=("c0", "c1"))
    Filter(input, "(c0 > 3)")
    Aggregate(input, group=(("c2", "c0"),), aggs=(AggCall("c3", "sum", "c1"),))

Nodes (one operator each; docs/engine.md gives each one's incremental rule):

    Scan       a table's rows (or a materialized view's, by oid)
    Filter     rows where the predicate is true
    Project    scalar expressions of each row (duplicates kept)
    Join       inner/left/right/full/cross on equi-keys plus a residual predicate
    SemiJoin   rows of the left input with (anti: without) a match on the keys
    Aggregate  GROUP BY keys and aggregate calls; no keys = one row even on no input
    Distinct   set semantics
    SetOp      UNION/INTERSECT/EXCEPT, ALL or DISTINCT
    Values     a constant relation (one row for SELECT without FROM)
    Difference Z-set subtraction (only made by rewrites)
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace

import pglast.ast as A
from headwater.catalog.objects import Table, View
from headwater.planner.naming import pg_column_name
from headwater.planner.pg_compat import interval_literal
from headwater.planner.relations import deparse
from pglast import enums, parse_sql

from headwater.errors import (
    AmbiguousColumn,
    FeatureNotSupported,
    GroupingError,
    InvalidColumnReference,
    SQLError,
    SyntaxErr,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
)

Expr = str  # SQL text over internal column names (see the module docstring)


@dataclass(frozen=True)
class Node:
    @property
    def columns(self) -> tuple[str, ...]:
        raise NotImplementedError

    def children(self) -> tuple[Node, ...]:
        return tuple(
            getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Node)
        )

    def with_children(self, *kids: Node) -> Node:
        it = iter(kids)
        changes = {
            f.name: next(it) for f in fields(self) if isinstance(getattr(self, f.name), Node)
        }
        return replace(self, **changes)


@dataclass(frozen=True)
class Scan(Node):
    table: int  # oid of a table or materialized view
    source: tuple[str, ...]  # its column names, as stored
    names: tuple[str, ...]  # internal names, one per source column

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names


@dataclass(frozen=True)
class Values(Node):
    """Constant rows (each a tuple of SQL literals); SELECT without FROM is one empty row."""

    rows: tuple[tuple[Expr, ...], ...]
    names: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names


@dataclass(frozen=True)
class Filter(Node):
    input: Node
    predicate: Expr

    @property
    def columns(self) -> tuple[str, ...]:
        return self.input.columns


@dataclass(frozen=True)
class Project(Node):
    input: Node
    exprs: tuple[tuple[str, Expr], ...]  # (output name, expression)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.exprs)


JOIN_KINDS = ("inner", "left", "right", "full", "cross")


@dataclass(frozen=True)
class Join(Node):
    kind: str  # one of JOIN_KINDS
    left: Node
    right: Node
    left_keys: tuple[Expr, ...] = ()  # equi-join: left_keys[i] = right_keys[i]
    right_keys: tuple[Expr, ...] = ()
    residual: Expr | None = None  # the rest of the ON condition
    null_safe: bool = False  # keys compare with IS NOT DISTINCT FROM (made by rewrites)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns + self.right.columns


@dataclass(frozen=True)
class SemiJoin(Node):
    """EXISTS / IN (anti: NOT EXISTS; `null_aware` for NOT IN's NULL semantics)."""

    left: Node
    right: Node
    left_keys: tuple[Expr, ...]
    right_keys: tuple[Expr, ...]
    residual: Expr | None = None  # over left and right columns
    anti: bool = False
    null_aware: bool = False  # NOT IN: a NULL on either side makes the test unknown

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns


AGG_FUNCS = ("count", "sum", "avg", "min", "max", "bool_and", "bool_or", "string_agg", "every")
LINEAR_AGGS = ("count", "sum", "avg")  # integrable as running sums


@dataclass(frozen=True)
class AggCall:
    name: str  # output column
    func: str  # one of AGG_FUNCS; count with arg None is COUNT(*)
    arg: Expr | None = None
    distinct: bool = False
    extra: tuple[Expr, ...] = ()  # STRING_AGG's delimiter
    order: tuple[Expr, ...] = ()  # ORDER BY inside the call (STRING_AGG)
    filter: Expr | None = None  # FILTER (WHERE ...)

    @property
    def linear(self) -> bool:
        return self.func in LINEAR_AGGS and not self.distinct and not self.order


@dataclass(frozen=True)
class Aggregate(Node):
    input: Node
    group: tuple[tuple[str, Expr], ...]  # (output name, key expression)
    aggs: tuple[AggCall, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.group) + tuple(a.name for a in self.aggs)

    @property
    def scalar(self) -> bool:
        """No GROUP BY: exactly one output row, also on empty input."""
        return not self.group


@dataclass(frozen=True)
class Distinct(Node):
    input: Node

    @property
    def columns(self) -> tuple[str, ...]:
        return self.input.columns


SET_OPS = ("union", "intersect", "except")


@dataclass(frozen=True)
class SetOp(Node):
    op: str  # one of SET_OPS
    all: bool
    left: Node
    right: Node
    names: tuple[str, ...] = field(default=())

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names or self.left.columns


@dataclass(frozen=True)
class Difference(Node):
    """Z-set subtraction `left - right` (made by rewrites, where right is a sub-bag of
    left: the anti-join is the left input minus its semi-join)."""

    left: Node
    right: Node

    @property
    def columns(self) -> tuple[str, ...]:
        return self.left.columns


@dataclass(frozen=True)
class Plan:
    """A bound SELECT: the root node and the output column names users see."""

    root: Node
    output: tuple[str, ...]  # user-visible names, one per root column
    tables: frozenset[int] = frozenset()  # oids the plan scans

    def explain(self) -> str:
        return explain(self.root)


# -- helpers ------------------------------------------------------------------------------
def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, children before parents."""
    for child in node.children():
        yield from walk(child)
    yield node


def transform(node: Node, rule: object) -> Node:
    """Apply `rule(node) -> node` bottom-up (children first)."""
    kids = tuple(transform(c, rule) for c in node.children())
    if kids != node.children():
        node = node.with_children(*kids)
    return rule(node)  # type: ignore[operator]


def explain(node: Node, depth: int = 0) -> str:
    pad = "  " * depth
    attrs = []
    for f in fields(node):
        v = getattr(node, f.name)
        if isinstance(v, Node):
            continue
        if f.name in ("names",) and isinstance(node, Scan | Values):
            continue
        attrs.append(f"{f.name}={v!r}")
    head = f"{pad}{type(node).__name__}({', '.join(attrs)}) -> {', '.join(node.columns)}"
    return "\n".join([head] + [explain(c, depth + 1) for c in node.children()])


# -- building a plan from a pglast SELECT --------------------------------------------------
# (The builder binds names against the catalog, expands views inline, turns EXISTS/IN
# subqueries of WHERE into semi-joins and refuses everything outside the scope of
# incremental maintenance with 0A000 naming the construct.)

SUPPORTED_AGGS = {
    "count": "count",
    "sum": "sum",
    "avg": "avg",
    "min": "min",
    "max": "max",
    "bool_and": "bool_and",
    "bool_or": "bool_or",
    "every": "bool_and",
    "string_agg": "string_agg",
}
OTHER_AGGS = {
    "array_agg",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "bit_and",
    "bit_or",
    "bit_xor",
    "xmlagg",
    "percentile_cont",
    "percentile_disc",
    "mode",
    "corr",
    "covar_pop",
    "covar_samp",
    "regr_slope",
    "regr_intercept",
    "regr_count",
    "regr_r2",
    "regr_avgx",
    "regr_avgy",
    "regr_sxx",
    "regr_syy",
    "regr_sxy",
    "range_agg",
    "any_value",
}
VOLATILE_FUNCS = {
    "random",
    "now",
    "current_timestamp",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timeofday",
    "gen_random_uuid",
    "nextval",
    "setseed",
    "current_date",
    "current_time",
    "localtime",
    "localtimestamp",
    "txid_current",
}
# Set-returning functions in a target list (PostgreSQL: one output row per element;
# DuckDB evaluates most of them as a scalar returning a list).
SET_RETURNING_FUNCS = {
    "generate_series",
    "generate_subscripts",
    "unnest",
    "regexp_matches",
    "regexp_split_to_table",
    "string_to_table",
    "json_array_elements",
    "json_array_elements_text",
    "jsonb_array_elements",
    "jsonb_array_elements_text",
    "json_each",
    "json_each_text",
    "jsonb_each",
    "jsonb_each_text",
    "json_object_keys",
    "jsonb_object_keys",
}


def _unsupported(what: str) -> Exception:
    return FeatureNotSupported(f"{what} is not supported in materialized views")


@dataclass
class _Item:
    """One FROM item in scope: its alias and its columns (visible name -> expression)."""

    alias: str | None
    cols: list[tuple[str, str]]


@dataclass
class _Scope:
    items: list[_Item]
    merged: dict[str, str] = field(default_factory=dict)  # JOIN USING columns
    star: list[tuple[str, str]] = field(default_factory=list)
    parent: _Scope | None = None
    outer_refs: set[str] = field(default_factory=set)  # names resolved in a parent

    def lookup(self, fields_: list[str], location: int | None) -> str:

        scope: _Scope | None = self
        depth = 0
        while scope is not None:
            found = scope._find(fields_)
            if found is not None:
                if depth:
                    self.outer_refs.add(found)
                return found
            scope = scope.parent
            depth += 1
        pos = location + 1 if location is not None and location >= 0 else None
        if len(fields_) >= 2:
            alias = fields_[-2]
            if not any(i.alias == alias for s in self._chain() for i in s.items):
                raise UndefinedTable(f'missing FROM-clause entry for table "{alias}"', position=pos)
            raise UndefinedColumn(f"column {alias}.{fields_[-1]} does not exist", position=pos)
        raise UndefinedColumn(f'column "{fields_[-1]}" does not exist', position=pos)

    def _chain(self) -> Iterator[_Scope]:
        s: _Scope | None = self
        while s is not None:
            yield s
            s = s.parent

    def _find(self, fields_: list[str]) -> str | None:

        name = fields_[-1]
        if len(fields_) == 1:
            if name in self.merged:
                return self.merged[name]
            hits = [e for i in self.items for n, e in i.cols if n == name]
            if len(hits) > 1:
                raise AmbiguousColumn(f'column reference "{name}" is ambiguous')
            return hits[0] if hits else None
        alias = fields_[-2]
        items = [i for i in self.items if i.alias == alias]
        if not items:
            return None
        hits = [e for n, e in items[0].cols if n == name]
        return hits[0] if hits else None


class PlanBuilder:
    """Builds a `Plan` from a pglast SELECT, binding names against a `Catalog`.

    >>> plan = PlanBuilder(catalog, ("public",)).build(parse_sql(sql)[0].stmt)
    """

    def __init__(self, catalog: object, search_path: tuple[str, ...] = ("public",)) -> None:
        self.catalog = catalog
        self.search_path = search_path
        self._n = 0
        self.tables: set[int] = set()
        self.depends: set[int] = set()
        self._view_depth = 0

    def fresh(self) -> str:
        self._n += 1
        return f"c{self._n}"

    # -- statements -------------------------------------------------------------------
    def build(self, stmt: object) -> Plan:

        if not isinstance(stmt, A.SelectStmt):
            raise _unsupported(type(stmt).__name__)
        node, names = self.select(stmt, None, {})
        return Plan(node, tuple(names), frozenset(self.tables))

    def select(
        self, stmt: object, parent: _Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, list[str]]:

        assert isinstance(stmt, A.SelectStmt)
        if stmt.withClause is not None:
            if stmt.withClause.recursive:
                raise _unsupported("WITH RECURSIVE")
            ctes = dict(ctes)
            for cte in stmt.withClause.ctes:
                if cte.aliascolnames:
                    raise _unsupported("column names on a WITH query")
                ctes[cte.ctename] = cte.ctequery
        if stmt.limitCount is not None or stmt.limitOffset is not None:
            raise _unsupported("LIMIT/OFFSET")
        if getattr(stmt, "lockingClause", None):
            raise _unsupported("FOR UPDATE/SHARE")
        if stmt.op != enums.SetOperation.SETOP_NONE:
            left, lnames = self.select(stmt.larg, parent, ctes)
            right, rnames = self.select(stmt.rarg, parent, ctes)
            if len(lnames) != len(rnames):
                op = ("UNION", "INTERSECT", "EXCEPT")[int(stmt.op) - 1]
                raise SyntaxErr(f"each {op} query must have the same number of columns")
            op = ("union", "intersect", "except")[int(stmt.op) - 1]
            names = tuple(self.fresh() for _ in lnames)
            return SetOp(op, bool(stmt.all), left, right, names), lnames
        if stmt.valuesLists:
            return self.values(stmt.valuesLists)
        if stmt.windowClause:
            raise _unsupported("window functions")
        if stmt.intoClause is not None:
            raise _unsupported("SELECT INTO")

        # FROM
        scope = _Scope([], parent=parent)
        node: Node | None = None
        for item in stmt.fromClause or ():
            n, s = self.from_item(item, parent, ctes)
            node = n if node is None else Join("cross", node, n)
            scope.items.extend(s.items)
            scope.merged.update(s.merged)
            scope.star.extend(s.star)
        if node is None:
            node = Values(((),), ())

        # WHERE (EXISTS / IN subqueries of top-level conjuncts become semi-joins)
        if stmt.whereClause is not None:
            node = self.where(node, stmt.whereClause, scope, ctes)

        # target list (with * expanded)
        targets: list[tuple[str, object]] = []
        for rt in stmt.targetList or ():
            val = rt.val
            if isinstance(val, A.ColumnRef) and isinstance(val.fields[-1], A.A_Star):
                if len(val.fields) == 1:
                    cols = scope.star
                else:
                    alias = val.fields[-2].sval
                    items = [i for i in scope.items if i.alias == alias]
                    if not items:
                        raise UndefinedTable(f'missing FROM-clause entry for table "{alias}"')
                    cols = items[0].cols
                for name, expr in cols:
                    targets.append((name, _Internal(expr)))
                continue

            targets.append((rt.name or pg_column_name(val), val))

        aggs_found = _find_aggs([v for _, v in targets] + [stmt.havingClause])
        if stmt.groupClause or aggs_found or stmt.havingClause is not None:
            node, exprs, having = self.aggregate(node, stmt, targets, scope)
        else:
            exprs = [(name, self.expr(v, scope)) for name, v in targets]
            having = None
        proj = tuple((self.fresh(), e) for _, e in exprs)
        if having is not None:
            node = Filter(node, having)
        node = Project(node, proj)
        names = [n for n, _ in exprs]
        if stmt.distinctClause:
            if any(d is not None for d in stmt.distinctClause):
                raise _unsupported("DISTINCT ON")
            node = Distinct(node)
        # ORDER BY without LIMIT does not change a view's contents (a relation is a set)
        return node, names

    def values(self, lists: tuple) -> tuple[Node, list[str]]:

        rows = []
        for row in lists:
            texts = []
            for v in row:
                _check_expr(v)
                texts.append(deparse(v))
            rows.append(tuple(texts))
        if len({len(r) for r in rows}) != 1:
            raise SyntaxErr("VALUES lists must all be the same length")
        names = tuple(self.fresh() for _ in rows[0])
        return Values(tuple(rows), names), [f"column{i + 1}" for i in range(len(names))]

    # -- FROM -------------------------------------------------------------------------
    def from_item(
        self, item: object, parent: _Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, _Scope]:

        if isinstance(item, A.RangeVar):
            alias = item.alias.aliasname if item.alias else item.relname
            colnames = (
                [c.sval for c in item.alias.colnames] if item.alias and item.alias.colnames else []
            )
            if item.schemaname is None and item.relname in ctes:
                node, names = self.select(ctes[item.relname], None, ctes)
            else:
                node, names = self.relation(item)
            return self._scoped(node, names, alias, colnames)
        if isinstance(item, A.RangeSubselect):
            if item.lateral:
                raise _unsupported("LATERAL")
            node, names = self.select(item.subquery, None, ctes)
            alias = item.alias.aliasname if item.alias else None
            colnames = (
                [c.sval for c in item.alias.colnames] if item.alias and item.alias.colnames else []
            )
            return self._scoped(node, names, alias, colnames)
        if isinstance(item, A.JoinExpr):
            left, ls = self.from_item(item.larg, parent, ctes)
            right, rs = self.from_item(item.rarg, parent, ctes)
            kind = {
                enums.JoinType.JOIN_INNER: "inner",
                enums.JoinType.JOIN_LEFT: "left",
                enums.JoinType.JOIN_RIGHT: "right",
                enums.JoinType.JOIN_FULL: "full",
            }.get(item.jointype)
            if kind is None:
                raise _unsupported(f"join type {item.jointype.name}")
            scope = _Scope(
                ls.items + rs.items, {**ls.merged, **rs.merged}, ls.star + rs.star, parent
            )
            using: list[str] = []
            if item.isNatural:
                lnames = [n for n, _ in ls.star]
                using = [n for n, _ in rs.star if n in lnames]
            elif item.usingClause:
                using = [u.sval for u in item.usingClause]
            lkeys: list[str] = []
            rkeys: list[str] = []
            residual = None
            if using:
                merged = {}
                for u in using:
                    le = ls.merged.get(u) or _single(ls, u)
                    re_ = rs.merged.get(u) or _single(rs, u)
                    lkeys.append(le)
                    rkeys.append(re_)
                    merged[u] = {"inner": le, "left": le, "right": re_}.get(
                        kind, f"COALESCE({le}, {re_})"
                    )
                # merged columns first in *, then the rest of each side
                star = [(u, merged[u]) for u in using]
                star += [(n, e) for n, e in ls.star if n not in using]
                star += [(n, e) for n, e in rs.star if n not in using]
                scope.merged.update(merged)
                scope.star = star
            elif item.quals is not None:
                lkeys, rkeys, residual = self.split_on(
                    item.quals, scope, set(left.columns), set(right.columns)
                )
            elif kind != "inner":
                raise SyntaxErr("syntax error: JOIN requires ON or USING")
            if kind == "inner" and not lkeys and residual is None and not using:
                kind = "cross"
            node = Join(kind, left, right, tuple(lkeys), tuple(rkeys), residual)
            if item.alias is not None:
                raise _unsupported("an alias on a JOIN")
            return node, scope
        if isinstance(item, A.RangeFunction):
            raise _unsupported("a function in FROM")
        raise _unsupported(type(item).__name__)

    def _scoped(
        self, node: Node, names: list[str], alias: str | None, colnames: list[str]
    ) -> tuple[Node, _Scope]:
        visible = list(names)
        for i, c in enumerate(colnames[: len(visible)]):
            visible[i] = c
        cols = list(zip(visible, node.columns, strict=True))
        return node, _Scope([_Item(alias, cols)], star=list(cols))

    def relation(self, rv: object) -> tuple[Node, list[str]]:

        schema, name = rv.schemaname, rv.relname  # type: ignore[attr-defined]
        if schema in ("pg_catalog", "information_schema", "headwater_catalog"):
            raise _unsupported(f'system relation "{schema}.{name}"')
        try:
            rel = self.catalog.get_relation(schema, name, self.search_path)  # type: ignore[attr-defined]
        except UndefinedTable as e:
            loc = getattr(rv, "location", None)
            if loc is not None and loc >= 0:
                e.position = loc + 1
            raise
        self.depends.add(rel.oid)
        cols = [c.name for c in rel.columns]
        if isinstance(rel, View):
            if self._view_depth > 32:
                raise SQLError(
                    f'infinite recursion detected in rules for relation "{rel.name}"', "42P17"
                )
            self._view_depth += 1
            try:
                node, _ = self.select(parse_sql(rel.definition)[0].stmt, None, {})
            finally:
                self._view_depth -= 1
            return node, cols
        if isinstance(rel, Table) or getattr(rel, "kind", "") in ("matview", "materialized view"):
            self.tables.add(rel.oid)
            return Scan(rel.oid, tuple(cols), tuple(self.fresh() for _ in cols)), cols
        raise _unsupported(f'relation "{rel.name}" of kind {getattr(rel, "kind", "?")}')

    # -- WHERE and subqueries ---------------------------------------------------------
    def where(self, node: Node, cond: object, scope: _Scope, ctes: dict[str, object]) -> Node:

        plain = []
        for c in _conjuncts(cond):
            neg = False
            inner = c
            if isinstance(c, A.BoolExpr) and c.boolop == enums.BoolExprType.NOT_EXPR:
                neg, inner = True, c.args[0]
            if isinstance(inner, A.SubLink):
                node = self.sublink(node, inner, neg, scope, ctes)
            else:
                plain.append(c)
        if plain:
            node = Filter(node, " AND ".join(f"({self.expr(c, scope)})" for c in plain))
        return node

    def sublink(
        self, node: Node, link: object, neg: bool, scope: _Scope, ctes: dict[str, object]
    ) -> Node:

        kind = link.subLinkType  # type: ignore[attr-defined]
        sub = link.subselect  # type: ignore[attr-defined]
        if kind == enums.SubLinkType.EXISTS_SUBLINK:
            test = None
        elif kind == enums.SubLinkType.ANY_SUBLINK and (
            not link.operName or link.operName[-1].sval == "="  # type: ignore[attr-defined]
        ):
            test = link.testexpr  # type: ignore[attr-defined]
        else:
            raise _unsupported(
                "a subquery in this position (only [NOT] EXISTS and [NOT] IN in WHERE)"
            )
        inner_scope = _Scope([], parent=scope)
        simple = (
            isinstance(sub, A.SelectStmt)
            and sub.op == enums.SetOperation.SETOP_NONE
            and not sub.groupClause
            and sub.havingClause is None
            and not sub.distinctClause
            and sub.withClause is None
            and not _find_aggs([rt.val for rt in sub.targetList or ()])
        )
        if simple:
            # Build FROM and the uncorrelated part of WHERE; correlated conjuncts become keys.
            rnode: Node | None = None
            for item in sub.fromClause or ():
                n, s = self.from_item(item, scope, ctes)
                rnode = n if rnode is None else Join("cross", rnode, n)
                inner_scope.items.extend(s.items)
                inner_scope.merged.update(s.merged)
                inner_scope.star.extend(s.star)
            if rnode is None:
                rnode = Values(((),), ())
            lkeys: list[str] = []
            rkeys: list[str] = []
            residual: list[str] = []
            local: list[object] = []
            inner_cols = set(rnode.columns)
            outer_cols = set(node.columns)
            for c in _conjuncts(sub.whereClause) if sub.whereClause is not None else []:
                if isinstance(c, A.SubLink) or (
                    isinstance(c, A.BoolExpr) and any(isinstance(a, A.SubLink) for a in c.args)
                ):
                    if _mentions_outer(self, c, inner_scope):
                        raise _unsupported("a correlated subquery inside a subquery")
                    local.append(c)
                    continue
                inner_scope.outer_refs = set()
                text = self.expr(c, inner_scope)
                outer = set(inner_scope.outer_refs)
                if not outer:
                    local.append(c)
                    continue
                if outer - outer_cols:
                    raise _unsupported("a reference to an outer query more than one level up")
                pair = equality_sides(c)
                if pair is not None:
                    inner_scope.outer_refs = set()
                    a = self.expr(pair[0], inner_scope)
                    a_outer = bool(inner_scope.outer_refs)
                    inner_scope.outer_refs = set()
                    b = self.expr(pair[1], inner_scope)
                    b_outer = bool(inner_scope.outer_refs)
                    if (
                        a_outer != b_outer
                        and _refs_only(a if a_outer else b, outer_cols)
                        and _refs_only(b if a_outer else a, inner_cols)
                    ):
                        lkeys.append(a if a_outer else b)
                        rkeys.append(b if a_outer else a)
                        continue
                residual.append(f"({text})")
            if local:
                rnode = self.where(rnode, _and(local), inner_scope, ctes)
            if test is not None:
                targets = sub.targetList or ()
                if len(targets) != 1:
                    raise SyntaxErr("subquery has too many columns")
                inner_scope.outer_refs = set()
                r = self.expr(targets[0].val, inner_scope)
                if inner_scope.outer_refs:
                    raise _unsupported("an outer reference in the select list of an IN subquery")
                lkeys.insert(0, self.expr(test, scope))
                rkeys.insert(0, r)
        else:
            rnode, names = self.select(sub, None, ctes)
            lkeys, rkeys, residual = [], [], []
            if test is not None:
                if len(names) != 1:
                    raise SyntaxErr("subquery has too many columns")
                lkeys = [self.expr(test, scope)]
                rkeys = [rnode.columns[0]]
        if test is not None and isinstance(test, A.RowExpr):
            raise _unsupported("a row value in IN")
        return SemiJoin(
            node,
            rnode,
            tuple(lkeys),
            tuple(rkeys),
            " AND ".join(residual) or None,
            anti=neg,
            null_aware=neg and test is not None,
        )

    def split_on(
        self, quals: object, scope: _Scope, lcols: set[str], rcols: set[str]
    ) -> tuple[list[str], list[str], str | None]:
        lkeys: list[str] = []
        rkeys: list[str] = []
        rest: list[str] = []
        for c in _conjuncts(quals):
            _check_no_sublink(c)
            pair = equality_sides(c)
            if pair is not None:
                a, b = self.expr(pair[0], scope), self.expr(pair[1], scope)
                if _refs_only(a, lcols) and _refs_only(b, rcols) and refs(a) and refs(b):
                    lkeys.append(a), rkeys.append(b)
                    continue
                if _refs_only(a, rcols) and _refs_only(b, lcols) and refs(a) and refs(b):
                    lkeys.append(b), rkeys.append(a)
                    continue
            rest.append(f"({self.expr(c, scope)})")
        return lkeys, rkeys, " AND ".join(rest) or None

    # -- aggregation ------------------------------------------------------------------
    def aggregate(
        self, node: Node, stmt: object, targets: list[tuple[str, object]], scope: _Scope
    ) -> tuple[Node, list[tuple[str, str]], str | None]:

        group: list[tuple[str, str]] = []
        for g in stmt.groupClause or ():  # type: ignore[attr-defined]
            if isinstance(g, A.GroupingSet):
                raise _unsupported("GROUPING SETS, ROLLUP and CUBE")
            if isinstance(g, A.A_Const) and isinstance(g.val, A.Integer):
                i = g.val.ival
                if not 1 <= i <= len(targets):
                    raise InvalidColumnReference(f"GROUP BY position {i} is not in select list")
                g = targets[i - 1][1]
            elif (
                isinstance(g, A.ColumnRef)
                and len(g.fields) == 1
                and isinstance(g.fields[0], A.String)
            ):
                name = g.fields[0].sval
                try:
                    scope.lookup([name], None)
                except Exception:
                    alias = [v for n, v in targets if n == name]
                    if not alias:
                        raise
                    g = alias[0]
            text = self.expr(g, scope)
            if text not in [t for _, t in group]:
                group.append((self.fresh(), text))
        calls: list[AggCall] = []
        by_text: dict[str, str] = {}

        def agg_col(fc: object) -> str:
            call = self.agg_call(fc, scope)
            key = repr((call.func, call.arg, call.distinct, call.extra, call.order, call.filter))
            if key not in by_text:
                by_text[key] = call.name
                calls.append(call)
            return by_text[key]

        keys = {t: n for n, t in group}

        def post(v: object) -> str:
            return self.expr(v, scope, group_keys=keys, agg=agg_col)

        exprs = [(name, post(v)) for name, v in targets]
        having = post(stmt.havingClause) if stmt.havingClause is not None else None  # type: ignore[attr-defined]
        return Aggregate(node, tuple(group), tuple(calls)), exprs, having

    def agg_call(self, fc: object, scope: _Scope) -> AggCall:
        name = fc.funcname[-1].sval.lower()  # type: ignore[attr-defined]
        func = SUPPORTED_AGGS[name]
        if fc.agg_within_group:  # type: ignore[attr-defined]
            raise _unsupported("WITHIN GROUP")
        args = list(fc.args or ())  # type: ignore[attr-defined]
        for a in args:
            if _find_aggs([a]):
                raise GroupingError("aggregate function calls cannot be nested")
        if fc.agg_star:  # type: ignore[attr-defined]
            arg = None
        elif func == "string_agg":
            if len(args) != 2:
                raise UndefinedFunction("function string_agg requires two arguments")
            arg = self.expr(args[0], scope)
        else:
            if len(args) != 1:
                raise UndefinedFunction(
                    f"function {name} with {len(args)} arguments does not exist"
                )
            arg = self.expr(args[0], scope)
        extra = (self.expr(args[1], scope),) if func == "string_agg" else ()
        order = ()
        if fc.agg_order:  # type: ignore[attr-defined]
            if func != "string_agg":
                order = ()  # ORDER BY does not change count/sum/min/max/bool results
            else:
                order = tuple(self.sort_text(s, scope) for s in fc.agg_order)  # type: ignore[attr-defined]
        filt = self.expr(fc.agg_filter, scope) if fc.agg_filter is not None else None  # type: ignore[attr-defined]
        return AggCall(self.fresh(), func, arg, bool(fc.agg_distinct), extra, order, filt)  # type: ignore[attr-defined]

    def sort_text(self, s: object, scope: _Scope) -> str:

        text = self.expr(s.node, scope)  # type: ignore[attr-defined]
        tail = deparse(s)  # e.g. "x DESC NULLS LAST": keep the direction part
        node_text = deparse(s.node)  # type: ignore[attr-defined]
        return text + tail[len(node_text) :]

    # -- expressions ------------------------------------------------------------------
    def expr(
        self,
        node: object,
        scope: _Scope,
        group_keys: dict[str, str] | None = None,
        agg: object = None,
    ) -> str:
        """SQL text of a scalar expression over internal column names."""

        return deparse(self._rewrite(node, scope, group_keys, agg))

    def _rewrite(
        self, node: object, scope: _Scope, group_keys: dict[str, str] | None, agg: object
    ) -> object:

        if isinstance(node, tuple | list):
            return type(node)(self._rewrite(n, scope, group_keys, agg) for n in node)
        if isinstance(node, _Internal):
            if group_keys is not None and node.expr not in group_keys:
                raise GroupingError(
                    "a column of * must appear in the GROUP BY clause or be used in an "
                    "aggregate function"
                )
            return _ref(group_keys[node.expr] if group_keys is not None else node.expr)
        if not isinstance(node, A.Node):
            return node
        if group_keys is not None and not isinstance(node, A.A_Const):
            try:
                text = deparse(self._rewrite(node, scope, None, None))
            except Exception:
                text = None
            if text is not None and text in group_keys:
                return _ref(group_keys[text])
        if isinstance(node, A.FuncCall):
            fname = node.funcname[-1].sval.lower()
            if node.over is not None:
                raise _unsupported("window functions")
            if fname in SUPPORTED_AGGS and (node.args or node.agg_star):
                if agg is None:
                    raise GroupingError("aggregate functions are not allowed here")
                return _ref(agg(node))  # type: ignore[operator]
            if fname in OTHER_AGGS:
                raise _unsupported(f"aggregate function {fname}")
            if fname in VOLATILE_FUNCS:
                raise _unsupported(f"volatile function {fname}()")
            if fname in SET_RETURNING_FUNCS:
                raise _unsupported(f"set-returning function {fname}()")
        if isinstance(node, A.SQLValueFunction):
            raise _unsupported("a time-dependent value (CURRENT_TIMESTAMP, ...)")
        if isinstance(node, A.SubLink):
            raise _unsupported(
                "a subquery in this position (only [NOT] EXISTS and [NOT] IN in WHERE)"
            )
        if isinstance(node, A.ColumnRef):
            if isinstance(node.fields[-1], A.A_Star):
                raise _unsupported("* in this position")
            if group_keys is not None:
                text = scope.lookup([f.sval for f in node.fields], node.location)
                if text in group_keys:
                    return _ref(group_keys[text])
                shown = ".".join(f.sval for f in node.fields)
                raise GroupingError(
                    f'column "{shown}" must appear in the GROUP BY clause or be used in an '
                    "aggregate function"
                )
            return _ref(scope.lookup([f.sval for f in node.fields], node.location))
        if isinstance(node, A.ParamRef):
            raise _unsupported("parameters ($n)")
        if isinstance(node, A.TypeCast):
            fixed = interval_literal(node)
            if fixed is not None:
                return fixed
        new = copy.copy(node)
        for name in node:
            child = getattr(node, name)
            if isinstance(child, A.Node | tuple | list):
                setattr(new, name, self._rewrite(child, scope, group_keys, agg))
        return new


@dataclass(frozen=True)
class _Internal:
    """A target that is already an internal expression (from * expansion)."""

    expr: str


def _ref(expr: str) -> object:
    """A node that deparses to `expr` (an internal name or a merged USING column)."""

    if expr.isidentifier():
        return A.ColumnRef(fields=(A.String(sval=expr),))

    return parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val


def _single(scope: _Scope, name: str) -> str:

    hits = [e for i in scope.items for n, e in i.cols if n == name]
    if len(hits) != 1:
        raise UndefinedColumn(
            f'column "{name}" specified in USING clause does not exist in both tables'
        )
    return hits[0]


def _conjuncts(node: object) -> list[object]:

    if isinstance(node, A.BoolExpr) and node.boolop == enums.BoolExprType.AND_EXPR:
        return [c for a in node.args for c in _conjuncts(a)]
    return [node]


def _and(nodes: list[object]) -> object:

    return (
        nodes[0]
        if len(nodes) == 1
        else A.BoolExpr(boolop=enums.BoolExprType.AND_EXPR, args=tuple(nodes))
    )


def equality_sides(node: object) -> tuple[object, object] | None:

    if (
        isinstance(node, A.A_Expr)
        and node.kind == enums.A_Expr_Kind.AEXPR_OP
        and len(node.name) == 1
        and node.name[0].sval == "="
        and node.lexpr is not None
    ):
        return node.lexpr, node.rexpr
    return None


def _find_aggs(nodes: list[object]) -> bool:

    def visit(n: object) -> bool:
        if isinstance(n, tuple | list):
            return any(visit(x) for x in n)
        if not isinstance(n, A.Node):
            return False
        if isinstance(n, A.SubLink):
            return False
        if isinstance(n, A.FuncCall) and n.over is None:
            if n.funcname[-1].sval.lower() in SUPPORTED_AGGS.keys() | OTHER_AGGS and (
                n.args or n.agg_star
            ):
                return True
        return any(visit(getattr(n, name)) for name in n)

    return visit(nodes)


def _check_expr(node: object) -> None:
    _check_no_sublink(node)


def _check_no_sublink(node: object) -> None:

    def visit(n: object) -> None:
        if isinstance(n, tuple | list):
            for x in n:
                visit(x)
            return
        if not isinstance(n, A.Node):
            return
        if isinstance(n, A.SubLink):
            raise _unsupported(
                "a subquery in this position (only [NOT] EXISTS and [NOT] IN in WHERE)"
            )
        for name in n:
            visit(getattr(n, name))

    visit(node)


def _mentions_outer(builder: PlanBuilder, node: object, scope: _Scope) -> bool:
    return False  # nested subqueries are built with their own scope chain


def refs(expr: Expr) -> set[str]:
    """Internal column names an expression mentions."""

    return set(re.findall(r"(?<![\w.\"'])c\d+(?![\w(])", _strip_strings(expr)))


def _strip_strings(expr: str) -> str:

    return re.sub(r"'(?:[^']|'')*'", "''", expr)


def _refs_only(expr: Expr, cols: set[str]) -> bool:
    return refs(expr) <= cols
