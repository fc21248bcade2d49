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
    Window     window functions over the input's rows (and top-N: row_number() <= n)
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace

import pglast.ast as A
from headwater.catalog.objects import Table, View
from headwater.planner import functions, pg_compat
from headwater.planner.naming import pg_column_name
from headwater.planner.pg_compat import interval_literal
from headwater.planner.relations import deparse
from headwater.planner.scope import (
    Item,
    Scope,
    TypeNames,
    in_system_schema,
    names_cte,
    resolve_relation,
    type_kind,
)
from headwater.planner.temporal import CLOCK_COLUMN, CLOCK_FUNCS, CLOCK_OID
from headwater.planner.time_windows import (
    TIME_WINDOW_FUNCS,
    hop_count,
    interval_seconds,
    origin_for,
)
from pglast import enums, parse_sql

from headwater.errors import (
    FeatureNotSupported,
    GroupingError,
    InvalidColumnReference,
    SQLError,
    SyntaxErr,
    UndefinedFunction,
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

    @property
    def expands(self) -> bool:
        """Does an expression unnest (a set-returning function: each input row gives one
        output row per element)? Still linear; but rows are not kept one for one."""
        return any(_UNNEST.search(_strip_strings(e)) for _, e in self.exprs)


_UNNEST = re.compile(r"\bunnest\s*\(", re.IGNORECASE)


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
# ordered-set aggregates: percentile_cont/disc(fraction) WITHIN GROUP (ORDER BY arg)
ORDERED_SET_AGGS = ("percentile_cont", "percentile_disc")
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
class Window(Node):
    """The input's rows, each with its window function calls (PostgreSQL's semantics;
    each call is SQL text with its OVER clause, over the input's columns), then kept
    where `keep` holds: ORDER BY ... LIMIT n is `row_number() OVER (ORDER BY ...)`
    kept where it is <= n. `partition`: the PARTITION BY keys every call has (none:
    the whole input is one partition); a change of the input changes the calls of
    its partition only, which is what the engine recomputes."""

    input: Node
    calls: tuple[tuple[str, Expr], ...]  # (output name, the call with its OVER clause)
    partition: tuple[Expr, ...] = ()
    keep: Expr | None = None  # over the input's columns and the calls' names

    @property
    def columns(self) -> tuple[str, ...]:
        return self.input.columns + tuple(n for n, _ in self.calls)


def window_partitioned(call: Expr, column: str) -> Expr:
    """The call with `column` first in the PARTITION BY of each window it has (the
    engine evaluates a partition at several epochs at once, partitioned by epoch)."""
    tree = parse_sql(f"SELECT {call}")[0].stmt.targetList[0].val
    key = A.ColumnRef(fields=(A.String(sval=column),))

    def visit(n: object) -> None:
        if isinstance(n, tuple | list):
            for x in n:
                visit(x)
            return
        if not isinstance(n, A.Node):
            return
        if isinstance(n, A.FuncCall) and n.over is not None:
            n.over.partitionClause = (key, *(n.over.partitionClause or ()))
        for name in n:
            visit(getattr(n, name))

    visit(tree)
    return deparse(tree)


# the Scan of a recursive WITH query's own rows inside its recursive term
RECURSIVE_OID = 2  # below every catalog oid, as the clock's


@dataclass(frozen=True)
class Recursive(Node):
    """WITH RECURSIVE r AS (base UNION [ALL] step): the fixpoint of `step` (which reads
    r through the Scan `ref`, oid RECURSIVE_OID) from `base`. Its children, whose
    changes the operator reads, are the Scans of tables the two terms read (`inputs`);
    the terms are templates the engine evaluates from scratch over those Scans' rows
    at an epoch (planner/render.py), not operators. `step` is monotone: scans,
    filters, projections and inner joins only (planner/ir.py `recursive_cte`)."""

    inputs: tuple[Scan, ...]
    base: Node
    step: Node
    ref: Scan
    names: tuple[str, ...]
    all: bool

    @property
    def columns(self) -> tuple[str, ...]:
        return self.names

    def children(self) -> tuple[Node, ...]:
        return self.inputs

    def with_children(self, *kids: Node) -> Node:
        return replace(self, inputs=tuple(kids))


@dataclass(frozen=True)
class Plan:
    """A bound SELECT: the root node and the output column names users see."""

    root: Node
    output: tuple[str, ...]  # user-visible names, one per root column (see `order`)
    tables: frozenset[int] = frozenset()  # oids the plan scans
    # The top-level ORDER BY, LIMIT and OFFSET of a plain read (`PlanBuilder(serving=
    # True)`). Sort keys are SQL over root columns: `c4 DESC NULLS FIRST`; root columns
    # past `output` are sort keys that are not in the select list. A view has no LIMIT
    # here (its top-N is a Window node); `order` is then the order its rows are read in
    # (a view of ORDER BY ... LIMIT, as PostgreSQL's matview holds them sorted).
    order: tuple[Expr, ...] = ()
    limit: Expr | None = None
    offset: Expr | None = None

    def explain(self) -> str:
        return explain(self.root)


def unique_columns(node: Node) -> frozenset[str] | None:
    """Columns whose values no two of `node`'s rows share (empty: at most one row), or
    None when rows may repeat. A view whose rows never repeat is read without expanding
    each stored row by its multiplicity (engine/engine.py `read_sql`).

        Project(Filter(Aggregate(group c1, sum -> c2)), c5 = c1, c6 = c2) -> {c5}
    """
    if isinstance(node, Aggregate):
        return frozenset(n for n, _ in node.group)
    if isinstance(node, Distinct):
        return frozenset(node.columns)
    if isinstance(node, Filter | Window):  # (a window keeps rows, adds columns)
        return unique_columns(node.input)
    if isinstance(node, Project):
        if node.expands:
            return None
        keys = unique_columns(node.input)
        renamed = {expr: name for name, expr in node.exprs}  # plain columns carried
        if keys is None or not keys <= renamed.keys():
            return None
        return frozenset(renamed[k] for k in keys)
    return None


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
    "percentile_cont": "percentile_cont",
    "percentile_disc": "percentile_disc",
    "mode": "mode",
    "array_agg": "array_agg",
    "json_agg": "json_agg",
    "jsonb_agg": "jsonb_agg",
    "json_object_agg": "json_object_agg",
    "jsonb_object_agg": "jsonb_object_agg",
}
# Statistics: PostgreSQL's float8 or exact numeric results, as planner/pg_compat.py
# translates them for reads (render.py `agg_sql`); re-aggregated per changed group.
STATISTICS_AGGS = {
    "stddev": "stddev_samp",
    "stddev_samp": "stddev_samp",
    "stddev_pop": "stddev_pop",
    "variance": "var_samp",
    "var_samp": "var_samp",
    "var_pop": "var_pop",
    "bit_and": "bit_and",
    "bit_or": "bit_or",
    "bit_xor": "bit_xor",
    **{f: f for f in (*pg_compat.PAIR_STATISTICS, "regr_count")},
}
SUPPORTED_AGGS |= STATISTICS_AGGS
# calls whose value depends on the order of their rows: ORDER BY inside them is kept
ORDERED_AGGS = (
    "string_agg",
    "array_agg",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
)
# calls of two arguments (the second in AggCall.extra)
TWO_ARG_AGGS = (
    "string_agg",
    "json_object_agg",
    "jsonb_object_agg",
    *(f for f in STATISTICS_AGGS if f.startswith(("corr", "covar", "regr"))),
)
# aggregates bound here in views only: not as window functions (the window rule
# renders the others) nor in plain reads (relations.Binder binds those)
VIEW_ONLY_AGGS = ("mode", *ORDERED_AGGS[1:], *STATISTICS_AGGS)
OTHER_AGGS = {"xmlagg", "range_agg", "any_value"}
# functions whose every call gives another value: an expression that calls one is not
# computed once for many rows, nor copied where a SQL function's parameter is used twice
PER_CALL_FUNCS = frozenset(
    (
        *("random", "random_normal", "gen_random_uuid", "gen_random_bytes"),
        *("uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v4"),
    )
)
VOLATILE_FUNCS = PER_CALL_FUNCS | {
    "now",
    "current_timestamp",
    "clock_timestamp",
    "statement_timestamp",
    "transaction_timestamp",
    "timeofday",
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


# Set-returning functions a view may call in its SELECT list or FROM: each row's
# elements become rows (a Project that unnests, `function_rows`); others are 0A000.
VIEW_SRFS = frozenset({"unnest", "generate_series"})


def _unsupported(what: str) -> Exception:
    return FeatureNotSupported(f"{what} is not supported in materialized views")


class PlanBuilder:
    """Builds a `Plan` from a pglast SELECT, binding names against a `Catalog`.

    >>> plan = PlanBuilder(catalog, ("public",)).build(parse_sql(sql)[0].stmt)

    `serving=True` builds a plain read (planner/serving.py): the top-level ORDER BY,
    LIMIT and OFFSET are kept on the Plan, and time-dependent and volatile functions
    are allowed (a read evaluates them once).
    """

    def __init__(
        self, catalog: object, search_path: tuple[str, ...] = ("public",), serving: bool = False
    ) -> None:
        self.catalog = catalog
        self.search_path = search_path
        self.serving = serving
        self._n = 0
        self.tables: set[int] = set()
        self.depends: set[int] = set()
        self._view_depth = 0
        self._used_ctes: set[int] = set()  # the WITH queries read (by id)
        # window calls of the SELECT being bound: (name, call, its PARTITION BY keys);
        # None where window functions are not allowed (FROM, WHERE, GROUP BY, ...)
        self._windows: list[tuple[str, Expr, tuple[Expr, ...]]] | None = None
        self._window_defs: dict[str, object] = {}  # WINDOW w AS (...) of that SELECT
        # scalar subqueries bound but not yet joined in: each joins its value to a node
        self._scalars: list[Callable[[Node], Node]] = []
        self._ctes: dict[str, object] = {}
        self._cte_names: dict[int, list[str]] = {}  # WITH q (a, b): id(query) -> names
        self._recursive: dict[int, object] = {}  # WITH RECURSIVE's self-reading queries
        # the recursive query whose recursive term is being bound: its name, the Scan
        # of its rows, how often the term read it (None: binding the base term)
        self._rec_ref: dict[str, list] = {}
        self._probing = False  # binding an expression only to compare it with GROUP BY's
        # grouping()'s context in a grouped SELECT: (the set-number column or None, the
        # grouping sets as sets of key texts, the scope), None elsewhere
        self._grouping: tuple[str | None, list[frozenset[str]], Scope] | None = None
        self._clock: str | None = None  # the clock's column while binding a temporal filter
        # a decorrelated LATERAL subquery (by id): how many of its last output columns
        # are its correlation keys, the partition of its LIMIT (`lateral_grouped`)
        self._lateral_keys: dict[int, int] = {}
        self._srfs = False  # binding a view's SELECT list or FROM function: VIEW_SRFS allowed
        # the types of internal columns (a table's, or carried by a projection), for the
        # translation's type-dependent rewrites (`data @> '{"a": 1}'` on a jsonb column)
        self._types = TypeNames(lambda names: catalog.type_named(names, search_path))

    def fresh(self) -> str:
        self._n += 1
        return f"c{self._n}"

    # -- statements -------------------------------------------------------------------
    def build(self, stmt: object) -> Plan:

        if not isinstance(stmt, A.SelectStmt):
            raise _unsupported(type(stmt).__name__)
        self._top = stmt if self.serving else None
        self._root = stmt
        self._read_order: tuple[Expr, ...] = ()
        node, names = self.select(stmt, None, {})
        if self._top is not None:
            return Plan(node, tuple(names), frozenset(self.tables), *self._order)
        return Plan(node, tuple(names), frozenset(self.tables), self._read_order)

    def select(
        self, stmt: object, parent: Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, list[str]]:
        saved = (self._windows, self._window_defs, self._ctes, self._srfs)
        self._windows, self._window_defs, self._srfs = None, {}, False
        try:
            return self._select(stmt, parent, ctes)
        finally:
            self._windows, self._window_defs, self._ctes, self._srfs = saved

    def _select(
        self, stmt: object, parent: Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, list[str]]:
        assert isinstance(stmt, A.SelectStmt)
        if stmt.withClause is None:
            return self._select_body(stmt, parent, ctes)
        ctes = dict(ctes)
        for cte in stmt.withClause.ctes:
            if cte.aliascolnames:
                self._cte_names[id(cte.ctequery)] = [c.sval for c in cte.aliascolnames]
            ctes[cte.ctename] = cte.ctequery
            if stmt.withClause.recursive and _reads_name(cte.ctequery, cte.ctename):
                self._recursive[id(cte.ctequery)] = cte
        out = self._select_body(stmt, parent, ctes)
        self._check_unused(stmt.withClause.ctes, ctes)
        return out

    def _check_unused(self, defined: tuple, ctes: dict[str, object]) -> None:
        """PostgreSQL analyzes every WITH query, read or not: plan the unread ones for
        their errors (42P10, 42803, ...) and drop the plans. What the IR does not cover
        in them is no error."""
        tables = set(self.tables)
        for cte in defined:
            if id(cte.ctequery) not in self._used_ctes:
                try:
                    self.select(cte.ctequery, None, ctes)
                except FeatureNotSupported:
                    pass
        self.tables = tables

    def _select_body(
        self, stmt: A.SelectStmt, parent: Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, list[str]]:
        self._ctes = ctes
        top = stmt is getattr(self, "_top", None)
        lateral_keys = self._lateral_keys.pop(id(stmt), 0)
        # LIMIT/OFFSET below the top of a read, or anywhere in a view: a top-N node
        limited = not top and (stmt.limitCount is not None or stmt.limitOffset is not None)
        limit = self.limit_text(stmt, "limitCount", ties=True) if limited else None
        ties = limited and stmt.limitOption == enums.LimitOption.LIMIT_OPTION_WITH_TIES
        offset = self.limit_text(stmt, "limitOffset") if limited else None
        if top:
            self._order: tuple[tuple[Expr, ...], Expr | None, Expr | None] = (
                (),
                self.limit_text(stmt, "limitCount"),
                self.limit_text(stmt, "limitOffset"),
            )
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
            node = SetOp(op, bool(stmt.all), left, right, names)
            if (top or limited) and stmt.sortClause:
                keys = self.sort_keys(stmt, lnames, None)
                order = tuple(f"{names[k]}{suffix}" for k, suffix in keys)  # type: ignore[index]
                if top:
                    self._order = (order, *self._order[1:])
            else:
                order = ()
            if limited:
                node = self.top_n(node, order, limit, offset, len(names), ties)
            return node, lnames
        if stmt.valuesLists:
            if (top or limited) and stmt.sortClause:
                raise _unsupported("ORDER BY of VALUES")
            if limited:
                raise _unsupported("LIMIT/OFFSET of VALUES")
            return self.values(stmt.valuesLists)
        for wd in stmt.windowClause or ():
            self._window_defs[wd.name] = wd
        if stmt.intoClause is not None:
            raise _unsupported("SELECT INTO")

        # FROM
        scope = Scope([], parent=parent)
        node: Node | None = None
        for item in stmt.fromClause or ():
            if isinstance(item, A.RangeSubselect) and item.lateral and node is not None:
                node, s = self.lateral(item, node, scope, ctes)
            elif _set_returning(item) and node is not None:
                node, s = self.function_rows(item, node, scope)
            else:
                n, s = self.from_item(item, parent, ctes)
                node = n if node is None else Join("cross", node, n)
            scope.items.extend(s.items)
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
                    cols = scope.star_of(val.fields[-2].sval)
                for name, expr in cols:
                    targets.append((name, _Internal(expr)))
                continue

            targets.append((rt.name or pg_column_name(val), val))

        # DISTINCT ON (exprs): a per-group top-1 in the ORDER BY's order (`distinct_on`)
        on = tuple(d for d in stmt.distinctClause or () if d is not None)
        if on and self.serving:
            raise _unsupported("DISTINCT ON")  # a read binds it with relations.Binder
        # the top-level ORDER BY of a plain read: output columns, or expressions
        ordered = top or limited or bool(on)
        names_ = [n for n, _ in targets]
        keys = self.sort_keys(stmt, names_, scope) if ordered else []
        on_keys = self.sort_keys(_SortList(on), names_, scope) if on else []
        for sort in stmt.sortClause or () if not ordered else ():  # ignored, but checked
            pos = sort.node
            if isinstance(pos, A.A_Const) and isinstance(pos.val, A.Integer):
                if not 1 <= pos.val.ival <= len(targets):
                    raise InvalidColumnReference(
                        f"ORDER BY position {pos.val.ival} is not in select list"
                    )
        sorts = [k for k, _ in keys + on_keys if not isinstance(k, int)]
        aggs_found = _find_aggs([v for _, v in targets] + [stmt.havingClause] + sorts)
        self._windows = []
        mark = len(self._scalars)
        if stmt.groupClause or aggs_found or stmt.havingClause is not None:
            node, exprs, having, sort_texts = self.aggregate(node, stmt, targets, scope, sorts)
        else:
            self._srfs = not self.serving  # reads: relations.Binder binds them
            try:
                exprs = [(name, self.expr(v, scope)) for name, v in targets]
            finally:
                self._srfs = False
            sort_texts = [self.expr(v, scope) for v in sorts]
            having = None
        node = self.join_scalars(node, mark)
        windows, self._windows = self._windows, None
        proj = [(self.fresh(), e) for _, e in exprs]
        self._types.update((c, self._types[e]) for c, e in proj if e in self._types)
        order = []
        on_cols: list[str] = []
        if keys or on_keys:
            texts = iter(sort_texts)
            for i, (key, suffix) in enumerate(keys + on_keys):
                if isinstance(key, int):
                    col = proj[key][0]
                else:
                    text = next(texts)
                    same = [c for c, e in proj if e == text]
                    if not same:
                        if stmt.distinctClause and not on:
                            raise InvalidColumnReference(
                                "for SELECT DISTINCT, ORDER BY expressions must appear in select"
                                " list"
                            )
                        proj.append((self.fresh(), text))
                        same = [proj[-1][0]]
                    col = same[0]
                if i < len(keys):
                    order.append(col + suffix)
                else:
                    on_cols.append(col)
            if top:
                self._order = (tuple(order), *self._order[1:])
        if having is not None:
            node = Filter(node, having)
        if windows:
            node = window_node(node, windows)
        node = Project(node, tuple(proj))
        names = [n for n, _ in exprs]
        if on:
            node = self.distinct_on(node, tuple(dict.fromkeys(on_cols)), tuple(order))
            if not limited:
                node = Project(node, tuple((c, c) for c in node.columns[: len(names)]))
        elif stmt.distinctClause:
            node = Distinct(node)
        if limited:
            part = tuple(c for c, _ in proj[len(names) - lateral_keys : len(names)])
            node = self.top_n(node, tuple(order), limit, offset, len(names), ties, part)
            kept = set(node.columns)
            if stmt is self._root and all(refs(o) <= kept for o in order):
                self._read_order = tuple(_explicit_nulls(o) for o in order)
        # ORDER BY without LIMIT does not change a view's contents (a relation is a set)
        return node, names

    def top_n(
        self,
        node: Node,
        order: tuple[Expr, ...],
        limit: Expr | None,
        offset: Expr | None,
        width: int,
        ties: bool = False,
        partition: tuple[Expr, ...] = (),
    ) -> Node:
        """ORDER BY ... LIMIT/OFFSET below the top of a read, or in a view: the rows
        whose row_number() in that order is past the offset and within the limit (ties
        broken arbitrarily, as PostgreSQL does), without the sort-only columns. FETCH
        ... WITH TIES: the limit on rank() instead (the rows tying with the last one).
        `partition`: a top-N of each group of those columns (a LATERAL's keys)."""
        if ties and not order:
            raise SyntaxErr("WITH TIES cannot be specified without ORDER BY clause")
        by = f"ORDER BY {', '.join(_explicit_nulls(o) for o in order)}" if order else ""
        if partition:
            by = f"PARTITION BY {', '.join(partition)} {by}".rstrip()
        rn, rk = self.fresh(), self.fresh()
        calls = [(rn, f"row_number() OVER ({by})")]
        if ties:
            calls.append((rk, f"rank() OVER ({by})"))
        keep = []
        if offset is not None:
            keep.append(f"{rn} > ({offset})")
        if limit is not None:
            base = f"({offset}) + " if offset is not None else ""
            keep.append(f"{rk if ties else rn} <= {base}({limit})")
        win = Window(node, tuple(calls), partition, " AND ".join(keep) or None)
        return Project(win, tuple((c, c) for c in node.columns[:width]))

    def distinct_on(self, node: Node, on: tuple[str, ...], order: tuple[Expr, ...]) -> Node:
        """SELECT DISTINCT ON (on) ... ORDER BY order: the first row of each group of `on`
        in that order, a per-group top-1 (a Window keeping row_number() = 1; the window
        rule recomputes only the groups a batch touched). As PostgreSQL, the ORDER BY
        must start with the DISTINCT ON expressions (42P10)."""
        lead = [o.split(" ", 1)[0] for o in order[: len(on)]]
        if any(c not in on for c in lead):
            raise SQLError(
                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions", "42P10"
            )
        by = f" ORDER BY {', '.join(_explicit_nulls(o) for o in order)}" if order else ""
        rn = self.fresh()
        call = f"row_number() OVER (PARTITION BY {', '.join(on)}{by})"
        win = Window(node, ((rn, call),), on, f"{rn} = 1")
        return Project(win, tuple((c, c) for c in node.columns))

    def join_scalars(self, node: Node, mark: int) -> Node:
        """Join in the values of the scalar subqueries bound since `mark`."""
        for joiner in self._scalars[mark:]:
            node = joiner(node)
        del self._scalars[mark:]
        return node

    def sort_keys(
        self, stmt: object, names: list[str], scope: Scope | None
    ) -> list[tuple[int | object, str]]:
        """The top-level ORDER BY: each key an output column's position (a position, or a
        bare name of one output column, as PostgreSQL looks first) or an expression to
        bind, with its direction and NULLs as written (the serving path's semantics)."""
        keys: list[tuple[int | object, str]] = []
        for s in stmt.sortClause or ():  # type: ignore[attr-defined]
            direction = s.sortby_dir
            if direction == enums.SortByDir.SORTBY_USING:
                raise _unsupported("ORDER BY ... USING")
            suffix = {
                enums.SortByDir.SORTBY_ASC: " ASC",
                enums.SortByDir.SORTBY_DESC: " DESC",
            }.get(direction, "")
            suffix += {
                enums.SortByNulls.SORTBY_NULLS_FIRST: " NULLS FIRST",
                enums.SortByNulls.SORTBY_NULLS_LAST: " NULLS LAST",
            }.get(s.sortby_nulls, "")
            n = s.node
            if isinstance(n, A.A_Const) and isinstance(n.val, A.Integer):
                if not 1 <= n.val.ival <= len(names):
                    raise InvalidColumnReference(
                        f"ORDER BY position {n.val.ival} is not in select list"
                    )
                keys.append((n.val.ival - 1, suffix))
                continue
            if isinstance(n, A.A_Const):
                continue  # a constant orders nothing
            if isinstance(n, A.ColumnRef) and len(n.fields) == 1:
                name = getattr(n.fields[0], "sval", None)
                hits = [i for i, x in enumerate(names) if x == name]
                if len(hits) > 1:
                    raise _unsupported("ORDER BY a name of several output columns")
                if hits:
                    keys.append((hits[0], suffix))
                    continue
            if scope is None:
                raise _unsupported("ORDER BY an expression of a set operation")
            keys.append((n, suffix))
        return keys

    def limit_text(self, stmt: object, attr: str, ties: bool = False) -> Expr | None:
        """LIMIT or OFFSET of the top-level SELECT as SQL (None: none, or LIMIT ALL);
        `ties`: FETCH ... WITH TIES is allowed (a top-N node keeps the ties)."""
        n = getattr(stmt, attr)
        with_ties = stmt.limitOption == enums.LimitOption.LIMIT_OPTION_WITH_TIES  # type: ignore[attr-defined]
        if attr == "limitCount" and with_ties and not ties:
            raise _unsupported("FETCH ... WITH TIES")
        if n is None or (isinstance(n, A.A_Const) and n.isnull):
            return None
        return self.expr(n, Scope([]))

    def values(self, lists: tuple) -> tuple[Node, list[str]]:

        rows = []
        for row in lists:
            texts = []
            for v in row:
                _check_expr(v)
                texts.append(deparse(pg_semantics(v)))
            rows.append(tuple(texts))
        if len({len(r) for r in rows}) != 1:
            raise SyntaxErr("VALUES lists must all be the same length")
        names = tuple(self.fresh() for _ in rows[0])
        return Values(tuple(rows), names), [f"column{i + 1}" for i in range(len(names))]

    # -- FROM -------------------------------------------------------------------------
    def from_item(
        self, item: object, parent: Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, Scope]:

        if isinstance(item, A.RangeVar):
            alias = item.alias.aliasname if item.alias else item.relname
            colnames = (
                [c.sval for c in item.alias.colnames] if item.alias and item.alias.colnames else []
            )
            if names_cte(item, ctes) and id(ctes[item.relname]) in self._recursive:
                self._used_ctes.add(id(ctes[item.relname]))
                node, names = self.recursive_cte(self._recursive[id(ctes[item.relname])], ctes)
            elif names_cte(item, ctes):
                query = ctes[item.relname]
                self._used_ctes.add(id(query))
                node, names = self.select(query, None, ctes)
                renamed = self._cte_names.get(id(query), [])
                if len(renamed) > len(names):
                    raise SQLError(
                        f'WITH query "{item.relname}" has {len(names)} columns available but'
                        f" {len(renamed)} columns specified",
                        "42P10",
                    )
                names = renamed + names[len(renamed) :]
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
        if isinstance(item, A.JoinExpr) and _set_returning(item.rarg):
            return self.function_join(item, parent, ctes)
        if isinstance(item, A.JoinExpr) and getattr(item.rarg, "lateral", False):
            return self.lateral_join(item, parent, ctes)
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
            # unqualified names see the join's columns (its USING columns once)
            scope = Scope(ls.items + rs.items, ls.star + rs.star, parent)
            using: list[str] = []
            if item.isNatural:
                rnames = {n for n, _ in rs.star}
                using = [n for n in dict.fromkeys(n for n, _ in ls.star) if n in rnames]
            elif item.usingClause:
                using = [u.sval for u in item.usingClause]
                for u in using:
                    if using.count(u) > 1:
                        raise SQLError(
                            f'column name "{u}" appears more than once in USING clause', "42701"
                        )
            lkeys: list[str] = []
            rkeys: list[str] = []
            residual = None
            if using:
                merged = {}
                for u in using:
                    le = ls.using_column(u, "left")
                    re_ = rs.using_column(u, "right")
                    lkeys.append(le)
                    rkeys.append(re_)
                    merged[u] = {"inner": le, "left": le, "right": re_}.get(
                        kind, f"COALESCE({le}, {re_})"
                    )
                # merged columns first in *, then the rest of each side
                star = [(u, merged[u]) for u in using]
                star += [(n, e) for n, e in ls.star if n not in using]
                star += [(n, e) for n, e in rs.star if n not in using]
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
            calls = item.functions or ()
            fc = calls[0][0] if len(calls) == 1 else None
            name = fc.funcname[-1].sval.lower() if isinstance(fc, A.FuncCall) else ""
            if name in TIME_WINDOW_FUNCS and not item.lateral and not item.ordinality:
                return self.time_window(name, fc, item.alias, parent, ctes)
            if _set_returning(item):
                return self.function_rows(item, None, Scope([], parent=parent))
            raise _unsupported("a function in FROM")
        raise _unsupported(type(item).__name__)

    def function_rows(
        self, item: A.RangeFunction, left: Node | None, scope: Scope
    ) -> tuple[Node, Scope]:
        """`FROM T, unnest(T.arr) AS u(x)`, `generate_series(a, b) AS g` (a function in
        FROM reads earlier FROM items' columns: LATERAL is implicit): T's rows, each
        once per element of the call, the element a column; without T, the elements.
        A Project that unnests (`Project.expands`): linear, so its changes are its
        input's changes unnested. Returns the node and the function's own scope."""
        if item.ordinality:
            raise _unsupported("WITH ORDINALITY")
        if len(item.functions) != 1 or item.functions[0][1]:
            raise _unsupported("ROWS FROM (...) or a column definition list")
        fc = item.functions[0][0]
        name = fc.funcname[-1].sval.lower()
        if self.serving:
            raise _unsupported("a function in FROM")  # reads: relations.Binder
        self._srfs = True
        try:
            call = self.expr(fc, scope)
        finally:
            self._srfs = False
        base = left if left is not None else Values(((),), ())
        col = self.fresh()
        node = Project(base, tuple((c, c) for c in base.columns) + ((col, call),))
        alias = item.alias.aliasname if item.alias else name
        colnames = (
            [c.sval for c in item.alias.colnames] if item.alias and item.alias.colnames else []
        )
        if len(colnames) > 1:
            raise SQLError(f"too many column aliases specified for function {name}", "42601")
        # a function of one column: the column takes the alias's name (PostgreSQL)
        visible = [(colnames[0] if colnames else alias, col)]
        return node, Scope([Item(alias, visible)], star=list(visible))

    def function_join(
        self, item: A.JoinExpr, parent: Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, Scope]:
        """`T [CROSS] JOIN [LATERAL] unnest(T.arr) AS u(x) [ON cond]`: `function_rows`
        over T, filtered by the condition (an inner join; LEFT JOIN keeps T's rows
        without elements, which this does not)."""
        if item.jointype != enums.JoinType.JOIN_INNER or item.usingClause or item.isNatural:
            raise _unsupported("a set-returning function in FROM joined other than by [CROSS] JOIN")
        left, ls = self.from_item(item.larg, parent, ctes)
        lscope = Scope(ls.items, ls.star, parent)
        node, fs = self.function_rows(item.rarg, left, lscope)
        scope = Scope(ls.items + fs.items, ls.star + fs.star, parent)
        if item.quals is not None:
            node = Filter(node, self.expr(item.quals, scope))
        if item.alias is not None:
            raise _unsupported("an alias on a JOIN")
        return node, scope

    def time_window(
        self, name: str, fc: A.FuncCall, alias: object, parent: Scope | None, ctes: dict
    ) -> tuple[Node, Scope]:
        """TUMBLE(relation, time_col, size) / HOP(relation, time_col, slide, size): the
        relation's rows with window_start and window_end (planner/time_windows.py)."""
        args = list(fc.args or ())
        if len(args) != (3 if name == "tumble" else 4) or not isinstance(args[0], A.ColumnRef):
            raise UndefinedFunction(f"function {name} with {len(args)} arguments does not exist")
        parts = [f.sval for f in args[0].fields]
        rv = A.RangeVar(
            relname=parts[-1], schemaname=parts[-2] if len(parts) > 1 else None, inh=True
        )
        node, scope = self.from_item(rv, parent, ctes)
        time_col = self.expr(args[1], scope)
        type_name = None
        if isinstance(node, Scan) and time_col in node.names:
            rel = self.catalog.by_oid(node.table)  # type: ignore[attr-defined]
            cols = getattr(rel, "columns", ())
            i = node.names.index(time_col)
            type_name = cols[i].type.pg.name if i < len(cols) else None
        origin = origin_for(type_name)
        sizes = [self.expr(a, Scope([])) for a in args[2:]]
        size = sizes[-1]
        start, end = self.fresh(), self.fresh()

        def pg(text: str) -> Expr:  # PostgreSQL's date_bin, as the serving path has it
            return deparse(pg_semantics(parse_sql(f"SELECT {text}")[0].stmt.targetList[0].val))

        if name == "tumble":
            interval_seconds(size)
            first = f"date_bin({size}, {time_col}, {origin})"
            node = Project(
                node,
                tuple((c, c) for c in node.columns)
                + ((start, pg(first)), (end, pg(f"{first} + {size}"))),
            )
        else:
            slide = sizes[0]
            n = hop_count(slide, size)
            k = self.fresh()
            offsets = Values(tuple((str(i),) for i in range(n)), (k,))
            latest = f"date_bin({slide}, {time_col}, {origin})"
            first = f"{latest} - {k} * {slide}"
            node = Project(
                Filter(Join("cross", node, offsets), f"{time_col} IS NOT NULL"),
                tuple((c, c) for c in node.columns)
                + ((start, pg(first)), (end, pg(f"{first} + {size}"))),
            )
        names = [n for n, _ in scope.star] + ["window_start", "window_end"]
        table_alias = alias.aliasname if alias is not None else parts[-1]  # type: ignore[attr-defined]
        colnames = [c.sval for c in alias.colnames] if alias is not None and alias.colnames else []  # type: ignore[attr-defined]
        return self._scoped(node, names, table_alias, colnames)

    def _scoped(
        self, node: Node, names: list[str], alias: str | None, colnames: list[str]
    ) -> tuple[Node, Scope]:
        visible = list(names)
        for i, c in enumerate(colnames[: len(visible)]):
            visible[i] = c
        cols = list(zip(visible, node.columns, strict=True))
        return node, Scope([Item(alias, cols)], star=list(cols))

    def lateral(
        self,
        item: A.RangeSubselect,
        left: Node,
        scope: Scope,
        ctes: dict[str, object],
        outer: bool = False,
    ) -> tuple[Node, Scope]:
        """`FROM T, LATERAL (SELECT ... FROM R WHERE ...) AS s`, decorrelated: an
        aggregate's values (one row per T row) as correlated scalar subqueries joined
        in; other rows as T JOIN R on the correlated conditions, the subquery's targets
        projected over the join. Uncorrelated, it is a plain subquery."""
        sub = item.subquery
        alias = item.alias.aliasname if item.alias else None
        colnames = (
            [c.sval for c in item.alias.colnames] if item.alias and item.alias.colnames else []
        )
        try:
            n, names = self.select(sub, None, ctes)
        except SQLError as e:
            if e.sqlstate not in ("42703", "42P01"):
                raise
        else:
            node, sc = self._scoped(n, names, alias, colnames)
            return Join("left" if outer else "cross", left, node), sc
        targets = list(sub.targetList or ())
        if not (_simple_subquery(sub) and not sub.sortClause) or _has_window(targets):
            return self.lateral_grouped(sub, left, scope, ctes, outer, alias, colnames)
        if all(_find_aggs([rt.val]) for rt in targets):
            mark = len(self._scalars)
            outs = [self.correlated_scalar(replace_targets(sub, (rt,)), scope) for rt in targets]
            node = self.join_scalars(left, mark)
            names = [rt.name or pg_column_name(rt.val) for rt in targets]
            return node, self._scoped_cols(list(zip(names, outs, strict=True)), alias, colnames)
        if any(_find_aggs([rt.val]) for rt in targets):
            return self.lateral_grouped(sub, left, scope, ctes, outer, alias, colnames)
        rnode, inner_scope = self.inner_from(sub, scope, ctes)
        local: list[object] = []
        correlated: list[str] = []
        for c in _conjuncts(sub.whereClause) if sub.whereClause is not None else []:
            if _has_sublink(c):
                local.append(c)
                continue
            inner_scope.outer_refs = set()
            text = self.expr(c, inner_scope)
            (correlated.append(text) if inner_scope.outer_refs else local.append(c))
        if local:
            rnode = self.where(rnode, _and(local), inner_scope, ctes)
        cond = " AND ".join(f"({c})" for c in correlated) or None
        kind = "left" if outer else "inner" if cond else "cross"
        joined = Join(kind, left, rnode, (), (), cond)
        exprs: list[tuple[str, str]] = []
        for rt in targets:
            val = rt.val
            if isinstance(val, A.ColumnRef) and isinstance(val.fields[-1], A.A_Star):
                cols = (
                    inner_scope.star
                    if len(val.fields) == 1
                    else inner_scope.star_of(val.fields[-2].sval)
                )
                exprs += [(name, internal) for name, internal in cols]
                continue
            exprs.append((rt.name or pg_column_name(val), self.expr(val, inner_scope)))
        return self._lateral_out(joined, left, exprs, alias, colnames)

    def lateral_grouped(
        self,
        sub: A.SelectStmt,
        left: Node,
        scope: Scope,
        ctes: dict[str, object],
        outer: bool,
        alias: str | None,
        colnames: list[str],
    ) -> tuple[Node, Scope]:
        """A LATERAL subquery with GROUP BY, HAVING, DISTINCT [ON], ORDER BY ... LIMIT or
        window functions, correlated by equalities `inner = outer` of its WHERE only:
        the subquery without them, its inner sides k added as grouping, DISTINCT ON and
        window partition keys (a LIMIT becomes a per-k top-N), joined to the outer rows
        on outer = k. Outer rows with the same values share k's rows; a NULL matches
        nothing, as `inner = NULL` never holds.

            T, LATERAL (SELECT x FROM R WHERE R.k = T.k ORDER BY x LIMIT 3) s
                -> T JOIN (SELECT x, k FROM R, row_number() OVER (PARTITION BY k
                   ORDER BY x) <= 3) ON T.k = k

        An aggregate without GROUP BY has one row per outer row even on no rows:
        `_lateral_scalar`."""
        what = "a LATERAL subquery with GROUP BY, DISTINCT, ORDER BY, LIMIT or windows"
        if sub.op != enums.SetOperation.SETOP_NONE:
            raise _unsupported("a correlated LATERAL subquery with UNION, INTERSECT or EXCEPT")
        if sub.withClause is not None or not sub.fromClause:
            raise _unsupported("a correlated LATERAL subquery with WITH or without FROM")
        rnode, inner_scope = self.inner_from(sub, scope, ctes)
        inner_cols = set(rnode.columns)
        local: list[object] = []
        lkeys: list[str] = []  # outer sides, over the outer columns
        ksides: list[object] = []  # inner sides, as written
        for c in _conjuncts(sub.whereClause) if sub.whereClause is not None else []:
            if _has_sublink(c):
                local.append(c)  # (an outer reference in there is refused below)
                continue
            inner_scope.outer_refs = set()
            self.expr(c, inner_scope)
            if not inner_scope.outer_refs:
                local.append(c)
                continue
            sides = []
            for side in equality_sides(c) or ():
                inner_scope.outer_refs = set()
                sides.append((side, self.expr(side, inner_scope), bool(inner_scope.outer_refs)))
            if len(sides) == 2 and sides[0][2] != sides[1][2]:
                (a, at, a_outer), (b, bt, _) = sides
                (o, ot), (i, it) = ((a, at), (b, bt)) if a_outer else ((b, bt), (a, at))
                if refs(it) and _refs_only(it, inner_cols) and not (refs(ot) & inner_cols):
                    lkeys.append(ot)
                    ksides.append(i)
                    continue
            raise _unsupported(f"{what} correlated other than by equalities inner = outer")
        if not ksides:
            raise _unsupported(f"{what} correlated outside its WHERE clause")
        base = copy.deepcopy(sub)
        base.whereClause = _and(local) if local else None
        keys = tuple(
            A.ResTarget(name=f"?lateral{i}?", val=copy.deepcopy(k)) for i, k in enumerate(ksides)
        )
        aggregated = not sub.groupClause and (
            sub.havingClause is not None
            or _find_aggs(
                [rt.val for rt in base.targetList] + [s.node for s in sub.sortClause or ()]
            )
        )

        def plan(stmt: A.SelectStmt) -> tuple[Node, list[str]]:
            """`stmt` planned alone: an outer column left in it is not decorrelated."""
            try:
                return self.select(stmt, None, ctes)
            except SQLError as e:
                if e.sqlstate not in ("42703", "42P01"):
                    raise
                self.select(sub, scope, ctes)  # the error of the subquery as written
                raise _unsupported(
                    f"{what} reading outer columns other than in equalities of its WHERE"
                ) from None
            finally:  # (planned or not: no other statement may take its id)
                self._lateral_keys.pop(id(stmt), None)

        if aggregated:
            return self._lateral_scalar(base, keys, lkeys, left, outer, plan, alias, colnames)
        base.targetList = (*base.targetList, *keys)
        width = len(keys)
        ksides = [k.val for k in keys]
        if sub.groupClause:
            base.groupClause = (*sub.groupClause, *ksides)
        on = [d for d in sub.distinctClause or () if d is not None]
        if on:  # DISTINCT ON (k, ...) ORDER BY k, ...
            base.distinctClause = (*copy.deepcopy(ksides), *base.distinctClause)
            base.sortClause = (
                *(
                    A.SortBy(node=copy.deepcopy(k), sortby_dir=_ASC, sortby_nulls=_NULLS)
                    for k in ksides
                ),
                *(base.sortClause or ()),
            )
        _partition_windows(base, ksides)
        self._lateral_keys[id(base)] = width
        node, names = plan(base)
        n = len(names) - width
        kcols = node.columns[n : len(names)]
        joined = Join("left" if outer else "inner", left, node, tuple(lkeys), kcols)
        exprs = list(zip(names[:n], node.columns, strict=False))
        return self._lateral_out(joined, left, exprs, alias, colnames)

    def _lateral_scalar(
        self,
        base: A.SelectStmt,
        keys: tuple[A.ResTarget, ...],
        lkeys: list[str],
        left: Node,
        outer: bool,
        plan: Callable[[A.SelectStmt], tuple[Node, list[str]]],
        alias: str | None,
        colnames: list[str],
    ) -> tuple[Node, Scope]:
        """An aggregate without GROUP BY in a LATERAL subquery (HAVING, DISTINCT, ORDER BY
        or LIMIT too): per outer row, its row grouped by the correlation keys k, or
        where no row has the outer row's k the row on no input (the subquery with WHERE
        false: count 0, sum NULL, ...). HAVING is a column of both, chosen the same
        way; a constant LIMIT/OFFSET keeps the one row or none.

            T, LATERAL (SELECT count(*) n FROM R WHERE R.k = T.k HAVING h) s
                -> T LEFT JOIN (SELECT count(*), h, k FROM R GROUP BY k) q ON T.k = q.k
                   CROSS JOIN (SELECT count(*), h FROM R WHERE false) e,
                   CASE WHEN q.k IS NULL THEN e.n ELSE q.n END, kept where that of h holds
        """
        kept = _one_row_kept(base)
        targets = tuple(base.targetList)
        if base.havingClause is not None:
            targets += (A.ResTarget(name="?having?", val=base.havingClause),)
        base.havingClause = base.sortClause = base.distinctClause = None
        base.limitCount = base.limitOffset = None
        grouped = copy.deepcopy(base)
        grouped.targetList = (*copy.deepcopy(targets), *keys)
        grouped.groupClause = tuple(copy.deepcopy(k.val) for k in keys)
        _partition_windows(grouped, [k.val for k in keys])
        empty = copy.deepcopy(base)
        empty.targetList = copy.deepcopy(targets)
        empty.whereClause = A.A_Const(val=A.Boolean(boolval=False))
        q, qnames = plan(grouped)
        e, _ = plan(empty)
        m = len(targets)
        qk = q.columns[m : len(qnames)]
        node: Node = Join("cross", Join("left", left, q, tuple(lkeys), qk), e)
        picks = [
            f"CASE WHEN {qk[0]} IS NULL THEN {ev} ELSE {qv} END"
            for qv, ev in zip(q.columns[:m], e.columns[:m], strict=True)
        ]
        n = len(base.targetList)
        names = qnames[:n]
        cond = picks[n] if len(picks) > n else None
        if not kept:
            cond = "false"
        if cond is not None and not outer:
            node = Filter(node, cond)
        elif cond is not None:
            picks = [f"CASE WHEN {cond} THEN {p} END" for p in picks]
        exprs = list(zip(names, picks, strict=False))
        return self._lateral_out(node, left, exprs, alias, colnames)

    def _lateral_out(
        self,
        node: Node,
        left: Node,
        exprs: list[tuple[str, Expr]],
        alias: str | None,
        colnames: list[str],
    ) -> tuple[Node, Scope]:
        """The outer rows' columns and a LATERAL subquery's (name, expression over
        `node`), and the scope of the subquery's columns."""
        outs = [(name, self.fresh(), text) for name, text in exprs]
        node = Project(
            node, tuple((c, c) for c in left.columns) + tuple((o, t) for _, o, t in outs)
        )
        return node, self._scoped_cols([(name, o) for name, o, _ in outs], alias, colnames)

    def lateral_join(
        self, item: A.JoinExpr, parent: Scope | None, ctes: dict[str, object]
    ) -> tuple[Node, Scope]:
        """`T [CROSS | INNER | LEFT] JOIN LATERAL (...) s [ON cond]`: `lateral`, then the
        ON condition as a filter (LEFT JOIN: ON true only, the unmatched T rows padded)."""
        kind = {enums.JoinType.JOIN_INNER: "inner", enums.JoinType.JOIN_LEFT: "left"}.get(
            item.jointype
        )
        if kind is None or item.usingClause or item.isNatural or item.alias is not None:
            raise _unsupported("LATERAL in this kind of join")
        left, ls = self.from_item(item.larg, parent, ctes)
        lscope = Scope(ls.items, ls.star, parent)
        assert isinstance(item.rarg, A.RangeSubselect)
        node, rs = self.lateral(item.rarg, left, lscope, ctes, kind == "left")
        scope = Scope(ls.items + rs.items, ls.star + rs.star, parent)
        quals = item.quals
        always = (
            isinstance(quals, A.A_Const) and isinstance(quals.val, A.Boolean) and quals.val.boolval
        )
        if quals is not None and not always:
            if kind == "left":
                raise _unsupported("LEFT JOIN LATERAL with an ON condition other than true")
            node = Filter(node, self.expr(quals, scope))
        return node, scope

    def inner_from(
        self, sub: A.SelectStmt, scope: Scope, ctes: dict[str, object]
    ) -> tuple[Node, Scope]:
        """A correlated subquery's FROM items cross joined, and its scope (whose parent,
        `scope`, binds the outer columns)."""
        inner_scope = Scope([], parent=scope)
        rnode: Node | None = None
        for item in sub.fromClause:
            n, sc = self.from_item(item, scope, ctes)
            rnode = n if rnode is None else Join("cross", rnode, n)
            inner_scope.items.extend(sc.items)
            inner_scope.star.extend(sc.star)
        assert rnode is not None
        return rnode, inner_scope

    def _scoped_cols(
        self, cols: list[tuple[str, str]], alias: str | None, colnames: list[str]
    ) -> Scope:
        """The scope of a FROM item's columns (name, internal), renamed by AS s(a, b)."""
        visible = [(colnames[i] if i < len(colnames) else n, c) for i, (n, c) in enumerate(cols)]
        return Scope([Item(alias, visible)], star=list(visible))

    def recursive_cte(self, cte: object, ctes: dict[str, object]) -> tuple[Node, list[str]]:
        """A WITH RECURSIVE query read by the query: its own reference inside its
        recursive term, or the Recursive node of its fixpoint (maintained by
        recomputing it at each epoch its tables changed: engine/rules/recursive.py)."""
        name, query = cte.ctename, cte.ctequery  # type: ignore[attr-defined]
        if name in self._rec_ref:
            ref = self._rec_ref[name]
            if ref[1] is None:
                raise SQLError(
                    f'recursive reference to query "{name}" must not appear within its'
                    " non-recursive term",
                    "42P19",
                )
            ref[1] += 1
            if ref[1] > 1:
                raise SQLError(
                    f'recursive reference to query "{name}" must not appear more than once',
                    "42P19",
                )
            return ref[0], list(ref[2])
        if self.serving:
            raise _unsupported("WITH RECURSIVE")  # reads: relations.Binder
        if query.op != enums.SetOperation.SETOP_UNION:  # type: ignore[attr-defined]
            raise SQLError(
                f'recursive query "{name}" does not have the form non-recursive-term UNION'
                " [ALL] recursive-term",
                "42P19",
            )
        if query.sortClause or query.limitCount or query.limitOffset:  # type: ignore[attr-defined]
            raise _unsupported("ORDER BY/LIMIT in a recursive query")
        self._rec_ref[name] = [None, None, None]
        try:
            base, bnames = self.select(query.larg, None, ctes)  # type: ignore[attr-defined]
            names = self._cte_names.get(id(query), []) + bnames
            names = names[: len(bnames)]
            pos = tuple(f"_r{i}" for i in range(len(bnames)))
            ref = Scan(RECURSIVE_OID, pos, tuple(self.fresh() for _ in pos))
            self._rec_ref[name] = [ref, 0, names]
            step, snames = self.select(query.rarg, None, ctes)  # type: ignore[attr-defined]
        finally:
            del self._rec_ref[name]
        if len(snames) != len(bnames):
            raise SyntaxErr("each UNION query must have the same number of columns")
        for n in walk(step):
            if isinstance(n, Aggregate):  # as PostgreSQL's parser says
                raise SQLError(
                    "aggregate functions are not allowed in a recursive query's recursive term",
                    "42P19",
                )
            what = _not_monotone(n)
            if what:
                raise _unsupported(f"WITH RECURSIVE with {what} in its recursive term")
        inputs: list[Scan] = []
        for n in (*walk(base), *walk(step)):
            if isinstance(n, Scan) and n.table != RECURSIVE_OID and n not in inputs:
                inputs.append(n)
        out = tuple(self.fresh() for _ in bnames)
        return Recursive(tuple(inputs), base, step, ref, out, bool(query.all)), names  # type: ignore[attr-defined]

    def relation(self, rv: object) -> tuple[Node, list[str]]:

        assert isinstance(rv, A.RangeVar)
        if in_system_schema(rv):
            raise _unsupported(f'system relation "{rv.schemaname}.{rv.relname}"')
        rel = resolve_relation(self.catalog, rv, self.search_path)  # type: ignore[arg-type]
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
            names = tuple(self.fresh() for _ in cols)
            self._types.update(
                (name, type_kind(col.type)) for name, col in zip(names, rel.columns, strict=True)
            )
            return Scan(rel.oid, tuple(cols), names), cols
        raise _unsupported(f'relation "{rel.name}" of kind {getattr(rel, "kind", "?")}')

    # -- WHERE and subqueries ---------------------------------------------------------
    def where(self, node: Node, cond: object, scope: Scope, ctes: dict[str, object]) -> Node:

        plain = []
        links = []
        for c in _conjuncts(cond):
            neg = False
            inner = c
            if isinstance(c, A.BoolExpr) and c.boolop == enums.BoolExprType.NOT_EXPR:
                neg, inner = True, c.args[0]
            if isinstance(inner, A.SubLink):
                links.append((inner, neg))
            else:
                plain.append(c)
        # the conjuncts without subqueries first: over a comma join they become its
        # keys (push_down_filters), before a semi-join or a scalar's join reads it
        simple = [c for c in plain if not _has_sublink(c)]
        timed = [c for c in simple if not self.serving and _reads_clock(c)]
        simple = [c for c in simple if c not in timed]
        if simple:
            node = Filter(node, " AND ".join(f"({self.expr(c, scope)})" for c in simple))
        for inner, neg in links:
            node = self.sublink(node, inner, neg, scope, ctes)
        rest = [c for c in plain if _has_sublink(c)]  # scalar subqueries, joined in first
        if rest:
            mark = len(self._scalars)
            pred = " AND ".join(f"({self.expr(c, scope)})" for c in rest)
            node = Filter(self.join_scalars(node, mark), pred)
        if timed:
            node = self.clocked(node, timed, scope)
        return node

    def clocked(self, node: Node, conjuncts: list[object], scope: Scope) -> Node:
        """A temporal filter (planner/temporal.py): the rows where the conjuncts hold at
        the epoch's time, `now()` read from the clock relation crossed with the input."""
        clock = self.fresh()
        self._clock = clock
        try:
            pred = " AND ".join(f"({self.expr(c, scope)})" for c in conjuncts)
        finally:
            self._clock = None
        self.tables.add(CLOCK_OID)
        timed = Join("cross", node, Scan(CLOCK_OID, (CLOCK_COLUMN,), (clock,)))
        return Project(Filter(timed, pred), tuple((c, c) for c in node.columns))

    def sublink(
        self, node: Node, link: object, neg: bool, scope: Scope, ctes: dict[str, object]
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
        inner_scope = Scope([], parent=scope)
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
                mark = len(self._scalars)
                text = self.expr(c, inner_scope)
                del self._scalars[mark:]  # (bound again with `local`, joined in there)
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
        self, quals: object, scope: Scope, lcols: set[str], rcols: set[str]
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
        self,
        node: Node,
        stmt: object,
        targets: list[tuple[str, object]],
        scope: Scope,
        sorts: list[object] | None = None,
    ) -> tuple[Node, list[tuple[str, str]], str | None, list[str]]:

        group: list[tuple[str, str]] = []

        def bind_key(g: object) -> str:
            """A GROUP BY item's SQL text (a position, an output name or an expression)."""
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
            mark = len(self._scalars)
            text = self.expr(g, scope)
            if len(self._scalars) > mark:
                raise _unsupported("a subquery in GROUP BY")
            if text not in [t for _, t in group]:
                group.append((self.fresh(), text))
            return text

        sets = grouping_sets(stmt.groupClause or ())  # type: ignore[attr-defined]
        if len(sets) > 1 and self.serving:
            raise _unsupported("GROUPING SETS, ROLLUP and CUBE")  # reads: relations.Binder
        if getattr(stmt, "groupDistinct", False):
            raise _unsupported("GROUP BY DISTINCT")
        set_texts = [frozenset(bind_key(g) for g in one) for one in sets]
        gid = self.fresh() if len(sets) > 1 else None  # which grouping set a row is of
        calls: list[AggCall] = []
        by_text: dict[str, str] = {}

        def agg_col(fc: object) -> str:
            mark = len(self._scalars)
            call = self.agg_call(fc, scope)
            if len(self._scalars) > mark:
                raise _unsupported("a subquery in an aggregate's arguments")
            key = repr((call.func, call.arg, call.distinct, call.extra, call.order, call.filter))
            if key not in by_text:
                by_text[key] = call.name
                calls.append(call)
            return by_text[key]

        keys = {t: n for n, t in group}

        def post(v: object) -> str:
            return self.expr(v, scope, group_keys=keys, agg=agg_col)

        saved, self._grouping = self._grouping, (gid, set_texts, scope)
        try:
            exprs = [(name, post(v)) for name, v in targets]
            having = post(stmt.havingClause) if stmt.havingClause is not None else None  # type: ignore[attr-defined]
            sort_texts = [post(v) for v in sorts or ()]
        finally:
            self._grouping = saved
        if gid is None:
            return Aggregate(node, tuple(group), tuple(calls)), exprs, having, sort_texts
        out = self.grouping_aggregate(node, gid, group, set_texts, calls)
        return out, exprs, having, sort_texts

    def grouping_aggregate(
        self,
        node: Node,
        gid: str,
        group: list[tuple[str, Expr]],
        sets: list[frozenset[str]],
        calls: list[AggCall],
    ) -> Node:
        """GROUP BY GROUPING SETS / ROLLUP / CUBE as one incremental aggregate: the input
        crossed with the sets' numbers (`gid`), grouped by the number and by each key,
        NULLed in the rows of sets without it. The empty set's row exists on no input (a
        LEFT JOIN from its number: count 0, the others NULL, as PostgreSQL). The output
        has the Aggregate's columns, `gid` (the set's number, for grouping()) first."""
        numbers = Values(tuple((str(i),) for i in range(len(sets))), (self.fresh(),))
        crossed = Join("cross", node, numbers)
        keyed = [(gid, numbers.names[0])]
        for name, text in group:
            having = [str(i) for i, s in enumerate(sets) if text in s]
            if len(having) == len(sets):
                keyed.append((name, text))
            else:
                keyed.append(
                    (
                        name,
                        f"CASE WHEN {numbers.names[0]} IN ({', '.join(having)}) THEN ({text}) END",
                    )
                )
        agg = Aggregate(crossed, tuple(keyed), tuple(calls))
        empty = [str(i) for i, s in enumerate(sets) if not s]
        if not empty:
            return agg
        cols = agg.columns
        rest = Filter(agg, f"{gid} NOT IN ({', '.join(empty)})")
        rest_p = Project(rest, tuple((self.fresh(), c) for c in cols))
        none = Values(tuple((e,) for e in empty), (self.fresh(),))
        joined = Join("left", none, agg, (none.names[0],), (gid,))
        counts = {a.name for a in calls if a.func == "count"}
        pad = [(self.fresh(), none.names[0])]
        pad += [(self.fresh(), c) for c, _ in group]
        pad += [
            (self.fresh(), f"COALESCE({a.name}, 0)" if a.name in counts else a.name) for a in calls
        ]
        return SetOp("union", True, rest_p, Project(joined, tuple(pad)), cols)

    def agg_call(self, fc: object, scope: Scope) -> AggCall:
        name = fc.funcname[-1].sval.lower()  # type: ignore[attr-defined]
        func = SUPPORTED_AGGS[name]
        if func in ORDERED_SET_AGGS:
            return self.ordered_set_call(fc, func, scope)
        if self.serving and func in VIEW_ONLY_AGGS:
            raise _unsupported(f"aggregate function {func}")  # reads: relations.Binder
        if func == "mode":
            return self.mode_call(fc, scope)
        if fc.agg_within_group:  # type: ignore[attr-defined]
            raise _unsupported("WITHIN GROUP")
        args = list(fc.args or ())  # type: ignore[attr-defined]
        for a in args:
            if _find_aggs([a]):
                raise GroupingError("aggregate function calls cannot be nested")
        if fc.agg_star:  # type: ignore[attr-defined]
            arg = None
        elif func in TWO_ARG_AGGS:
            if len(args) != 2:
                raise UndefinedFunction(f"function {func} requires two arguments")
            arg = self.expr(args[0], scope)
        else:
            if len(args) != 1:
                raise UndefinedFunction(
                    f"function {name} with {len(args)} arguments does not exist"
                )
            arg = self.expr(args[0], scope)
        extra = (self.expr(args[1], scope),) if func in TWO_ARG_AGGS else ()
        if fc.agg_distinct and fc.agg_order:  # type: ignore[attr-defined]
            _check_distinct_order(fc, {self.expr(a, scope) for a in args}, self, scope)
        order = ()
        if fc.agg_order:  # type: ignore[attr-defined]
            if func not in ORDERED_AGGS:
                order = ()  # ORDER BY does not change count/sum/min/max/bool results
            else:  # a constant key orders nothing (DuckDB refuses `ORDER BY 'x'`)
                order = tuple(self.sort_text(s, scope) for s in fc.agg_order)  # type: ignore[attr-defined]
                order = tuple(o for o in order if refs(o))
        filt = self.expr(fc.agg_filter, scope) if fc.agg_filter is not None else None  # type: ignore[attr-defined]
        return AggCall(self.fresh(), func, arg, bool(fc.agg_distinct), extra, order, filt)  # type: ignore[attr-defined]

    def ordered_set_call(self, fc: object, func: str, scope: Scope) -> AggCall:
        """percentile_cont/percentile_disc(fraction) WITHIN GROUP (ORDER BY x): re-aggregated
        per changed group (the general aggregate), a constant fraction; percentile_cont
        in either order (its `order`: the sorted values' order), percentile_disc ascending."""
        if self.serving:
            raise _unsupported(f"aggregate function {func}")  # reads: relations.Binder
        if not fc.agg_within_group:  # type: ignore[attr-defined]
            raise SQLError(f"WITHIN GROUP is required for ordered-set aggregate {func}", "42809")
        args, order = list(fc.args or ()), list(fc.agg_order or ())  # type: ignore[attr-defined]
        if len(args) != 1 or len(order) != 1:
            raise UndefinedFunction(f"function {func} with these arguments does not exist")
        fraction = self.expr(args[0], scope)
        if refs(fraction) or _has_sublink(args[0]):
            raise _unsupported(f"{func} with a fraction that is not a constant")
        desc = order[0].sortby_dir == enums.SortByDir.SORTBY_DESC
        if desc and func != "percentile_cont":
            raise _unsupported(f"{func} WITHIN GROUP (ORDER BY ... DESC)")
        if fc.agg_distinct:  # type: ignore[attr-defined]
            raise _unsupported(f"{func}(DISTINCT ...)")
        arg = self.expr(order[0].node, scope)
        filt = self.expr(fc.agg_filter, scope) if fc.agg_filter is not None else None  # type: ignore[attr-defined]
        by = (self.sort_text(order[0], scope),) if desc else ()  # (ascending: by the value)
        return AggCall(self.fresh(), func, arg, False, (fraction,), by, filt)

    def mode_call(self, fc: object, scope: Scope) -> AggCall:
        """mode() WITHIN GROUP (ORDER BY x): the most frequent non-NULL x, of equally
        frequent ones the first in the order (PostgreSQL's); re-aggregated per changed
        group. The sort key (with its direction) is the call's `order`."""
        if not fc.agg_within_group:  # type: ignore[attr-defined]
            raise SQLError("WITHIN GROUP is required for ordered-set aggregate mode", "42809")
        args, order = list(fc.args or ()), list(fc.agg_order or ())  # type: ignore[attr-defined]
        if args or len(order) != 1:
            raise UndefinedFunction("function mode with these arguments does not exist")
        if fc.agg_distinct:  # type: ignore[attr-defined]
            raise _unsupported("mode(DISTINCT ...)")
        arg = self.expr(order[0].node, scope)
        filt = self.expr(fc.agg_filter, scope) if fc.agg_filter is not None else None  # type: ignore[attr-defined]
        key = (self.sort_text(order[0], scope),)
        return AggCall(self.fresh(), "mode", arg, False, (), key, filt)

    # -- window functions and scalar subqueries ---------------------------------------
    def window_call(
        self, fc: object, scope: Scope, group_keys: dict[str, str] | None, agg: object
    ) -> str:
        """Bind a window function call of the SELECT list (or ORDER BY) as a column of
        the SELECT's Window node; returns the column's name."""
        if self._windows is None or self._probing:
            raise _unsupported("window functions in this position")
        name = fc.funcname[-1].sval.lower()  # type: ignore[attr-defined]
        if name not in WINDOW_FUNCS and name not in SUPPORTED_AGGS or name in VIEW_ONLY_AGGS:
            raise _unsupported(f"window function {name}")
        if fc.agg_distinct or fc.agg_order or fc.agg_within_group:  # type: ignore[attr-defined]
            raise _unsupported(f"DISTINCT or ORDER BY in window function {name}")
        over = self._window_def(fc.over)  # type: ignore[attr-defined]
        windows, self._windows = self._windows, None  # no window calls inside one

        def bind(n: object) -> object:
            return self._rewrite(n, scope, group_keys, agg) if n is not None else None

        try:
            new = copy.copy(fc)
            new.args = tuple(bind(a) for a in fc.args) if fc.args else None  # type: ignore[attr-defined]
            new.agg_filter = bind(fc.agg_filter)  # type: ignore[attr-defined]
            parts = tuple(bind(p) for p in over.partitionClause or ())  # type: ignore[attr-defined]
            order = []
            for sb in over.orderClause or ():  # type: ignore[attr-defined]
                if sb.sortby_dir == enums.SortByDir.SORTBY_USING:
                    raise _unsupported("ORDER BY ... USING")
                sb = copy.copy(sb)
                sb.node = bind(sb.node)
                if sb.sortby_nulls == enums.SortByNulls.SORTBY_NULLS_DEFAULT:
                    desc = sb.sortby_dir == enums.SortByDir.SORTBY_DESC
                    sb.sortby_nulls = (
                        enums.SortByNulls.SORTBY_NULLS_FIRST
                        if desc
                        else enums.SortByNulls.SORTBY_NULLS_LAST
                    )
                order.append(sb)
            new.over = A.WindowDef(
                partitionClause=parts or None,
                orderClause=tuple(order) or None,
                frameOptions=over.frameOptions,  # type: ignore[attr-defined]
                startOffset=bind(over.startOffset),  # type: ignore[attr-defined]
                endOffset=bind(over.endOffset),  # type: ignore[attr-defined]
            )
            text = deparse(pg_semantics(new, self._types))
            keys = tuple(deparse(pg_semantics(p, self._types)) for p in parts)
        finally:
            self._windows = windows
        col = self.fresh()
        windows.append((col, text, keys))
        return col

    def _window_def(self, over: object) -> object:
        """An OVER clause with the named window it refers to (WINDOW w AS ...) merged in."""
        ref = over.name or over.refname  # type: ignore[attr-defined]
        if not ref:
            return over
        base = self._window_defs.get(ref)
        if base is None:
            raise SQLError(f'window "{ref}" does not exist', "42704")
        base = copy.copy(base)
        base.name = None  # type: ignore[attr-defined]
        if over.name:  # OVER w
            return self._window_def(base)
        merged = copy.copy(self._window_def(base))  # OVER (w ORDER BY ...)
        if over.orderClause:  # type: ignore[attr-defined]
            merged.orderClause = over.orderClause  # type: ignore[attr-defined]
        if over.frameOptions != _DEFAULT_FRAME:  # type: ignore[attr-defined]
            merged.frameOptions = over.frameOptions  # type: ignore[attr-defined]
            merged.startOffset = over.startOffset  # type: ignore[attr-defined]
            merged.endOffset = over.endOffset  # type: ignore[attr-defined]
        return merged

    def scalar_subquery(self, link: object, scope: Scope, grouped: bool = False) -> str:
        """A scalar subquery's value as a column joined in where the expression is used
        (`join_scalars`); returns the column's name. Uncorrelated: its one-row node,
        cross joined (no row gives NULL; more than one row is PostgreSQL's error 21000
        when the view runs). Correlated: `correlated_scalar`."""
        if self._probing:
            raise _unsupported("a subquery in this position")
        sub = link.subselect  # type: ignore[attr-defined]
        try:
            node, names = self.select(sub, None, self._ctes)
        except SQLError as e:
            if e.sqlstate not in ("42703", "42P01"):
                raise
            if grouped:  # its outer columns are gone once the query is aggregated
                try:
                    self.select(sub, scope, self._ctes)
                except Exception:
                    raise e from None
                raise _unsupported("a correlated scalar subquery in an aggregated query") from None
            return self.correlated_scalar(sub, scope)
        if len(names) != 1:
            raise SyntaxErr("subquery must return only one column")
        value = node.columns[0]
        if not _one_row(node):
            n, v, out = self.fresh(), self.fresh(), self.fresh()
            stats = Aggregate(node, (), (AggCall(n, "count"), AggCall(v, "max", value)))
            check = (
                f"CASE WHEN {n} > 1 THEN error('more than one row returned by a subquery"
                f" used as an expression') ELSE {v} END"
            )
            node = Project(stats, ((out, check),))
            value = out
        elif len(node.columns) != 1:
            node = Project(node, ((value, value),))
        one = node
        self._scalars.append(lambda n: Join("cross", n, one))
        return value

    def correlated_scalar(self, sub: object, scope: Scope) -> str:
        """`(SELECT f(aggregates) FROM R WHERE R.k = outer.k AND ...)`, correlated by
        equalities only: R's aggregate grouped by k, LEFT JOINed on the outer keys; an
        outer row without a group gets the value on no rows (count 0, others NULL).

            x < (SELECT avg(y) FROM R WHERE R.k = T.k)
                -> T LEFT JOIN (SELECT k, avg(y) FROM R GROUP BY k) ON T.k = k
        """
        if not (
            _simple_subquery(sub)
            and len(sub.targetList or ()) == 1
            and _find_aggs([sub.targetList[0].val])
        ):
            raise _unsupported("a correlated scalar subquery other than an aggregate's value")
        rnode, inner_scope = self.inner_from(sub, scope, self._ctes)
        inner_cols = set(rnode.columns)
        lkeys: list[str] = []
        rkeys: list[str] = []
        local: list[object] = []
        # correlated conjuncts other than equalities: their text (outer columns by their
        # internal names) and the outer columns they read
        general: list[str] = []
        outer_cols: list[str] = []
        conds = _conjuncts(sub.whereClause) if sub.whereClause is not None else []
        for c in conds:
            if _has_sublink(c):
                local.append(c)  # (an outer reference in there fails to bind)
                continue
            inner_scope.outer_refs = set()
            text = self.expr(c, inner_scope)
            found = set(inner_scope.outer_refs)
            if not found:
                local.append(c)
                continue
            pair = equality_sides(c)
            sides = []
            for side in pair or ():
                inner_scope.outer_refs = set()
                sides.append((self.expr(side, inner_scope), bool(inner_scope.outer_refs)))
            if len(sides) == 2 and sides[0][1] != sides[1][1]:
                (a, a_outer), (b, _) = sides
                outer, inner = (a, b) if a_outer else (b, a)
                if refs(inner) and _refs_only(inner, inner_cols) and not (refs(outer) & inner_cols):
                    lkeys.append(outer)
                    rkeys.append(inner)
                    continue
            if not all(isinstance(f, str) and f.isidentifier() for f in found):
                raise _unsupported("a correlated scalar subquery correlated other than by equality")
            general.append(text)
            outer_cols += [f for f in sorted(found) if f not in outer_cols]  # type: ignore[misc]
        if local:
            rnode = self.where(rnode, _and(local), inner_scope, self._ctes)
        windows, self._windows = self._windows, None
        try:
            inner_scope.outer_refs = set()
            val = sub.targetList[0].val
            agg, exprs, _, _ = self.aggregate(rnode, A.SelectStmt(), [("v", val)], inner_scope)
        finally:
            self._windows = windows
        if inner_scope.outer_refs:
            raise _unsupported("an outer column in the select list of a correlated subquery")
        assert isinstance(agg, Aggregate)
        if general:
            return self._correlated_general(agg, exprs[0][1], lkeys, rkeys, general, outer_cols)
        keys = tuple((self.fresh(), k) for k in rkeys)
        grouped = Aggregate(agg.input, keys, agg.aggs)
        v, present, out = self.fresh(), self.fresh(), self.fresh()
        value = exprs[0][1]
        inner = Project(grouped, tuple((n, n) for n, _ in keys) + ((v, value), (present, "1")))
        empty = substitute_columns(
            value, {a.name: "0" if a.func == "count" else "NULL" for a in agg.aggs}
        )
        pick = f"CASE WHEN {present} IS NULL THEN {empty} ELSE {v} END"
        rnames = tuple(n for n, _ in keys)

        def joiner(node: Node) -> Node:
            joined = Join("left", node, inner, tuple(lkeys), rnames)
            return Project(joined, tuple((c, c) for c in node.columns) + ((out, pick),))

        self._scalars.append(joiner)
        return out

    def _correlated_general(
        self,
        agg: Aggregate,
        value: Expr,
        lkeys: list[str],
        rkeys: list[str],
        general: list[str],
        outer_cols: list[str],
    ) -> str:
        """A correlated scalar subquery with non-equality predicates, decorrelated over
        the outer rows' distinct correlated values D (a "magic set"): D LEFT JOIN R on
        the predicates, aggregated per D row over the matched rows only (each call
        FILTERed on a marker of R's side: a D row without matches gets the value on no
        rows, count 0 and the others NULL), joined back to the outer rows on the
        correlated columns, NULL-safe (every outer row has its D row).

            x < (SELECT max(y) FROM R WHERE R.k < T.k)
                -> T JOIN (SELECT d, max(y) FILTER (WHERE m) FROM DISTINCT(T.k) AS d
                   LEFT JOIN (R, true AS m) ON R.k < d GROUP BY d) ON T.k IS NOT DISTINCT FROM d
        """
        cols = list(outer_cols)
        for k in lkeys:  # the outer expressions the equalities compare
            cols += [c for c in sorted(refs(k)) if c not in cols]
        mark, v, out = self.fresh(), self.fresh(), self.fresh()
        right = Project(agg.input, tuple((c, c) for c in agg.input.columns) + ((mark, "true"),))
        calls = tuple(
            replace(a, filter=f"{mark} AND ({a.filter})" if a.filter else mark) for a in agg.aggs
        )

        def joiner(node: Node) -> Node:
            d = {c: self.fresh() for c in cols}
            magic = Distinct(Project(node, tuple((d[c], c) for c in cols)))
            residual = " AND ".join(f"({substitute_columns(g, d)})" for g in general)
            lk = tuple(substitute_columns(k, d) for k in lkeys)
            matched = Join("left", magic, right, lk, tuple(rkeys), residual)
            g = {c: self.fresh() for c in cols}
            grouped = Aggregate(matched, tuple((g[c], d[c]) for c in cols), calls)
            inner = Project(grouped, tuple((g[c], g[c]) for c in cols) + ((v, value),))
            keys = tuple(g[c] for c in cols)
            joined = Join("inner", node, inner, tuple(cols), keys, None, True)
            return Project(joined, tuple((c, c) for c in node.columns) + ((out, v),))

        self._scalars.append(joiner)
        return out

    def sort_text(self, s: object, scope: Scope) -> str:
        """`x ASC|DESC NULLS FIRST|LAST`, the NULLs where PostgreSQL puts them by
        default (last ascending, first descending; DuckDB: last both ways)."""
        text = self.expr(s.node, scope)  # type: ignore[attr-defined]
        direction = s.sortby_dir  # type: ignore[attr-defined]
        if direction == enums.SortByDir.SORTBY_USING:
            raise _unsupported("ORDER BY ... USING")
        desc = direction == enums.SortByDir.SORTBY_DESC
        nulls = s.sortby_nulls  # type: ignore[attr-defined]
        first = nulls == enums.SortByNulls.SORTBY_NULLS_FIRST
        if nulls == enums.SortByNulls.SORTBY_NULLS_DEFAULT:
            first = desc
        return f"{text} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if first else 'LAST'}"

    def grouping_call(self, fc: A.GroupingFunc) -> object:
        """grouping(a, b, ...): bit i (from the right, the last argument first) set where
        the i-th argument is not in the row's grouping set; a constant per set."""
        if self._grouping is None:
            raise GroupingError("GROUPING is not allowed here (only in a grouped query)")
        gid, sets, scope = self._grouping
        texts = [self.expr(a, scope) for a in fc.args]
        if any(t not in frozenset().union(*sets) for t in texts):
            raise GroupingError(
                "arguments to GROUPING must be grouping expressions of the associated query level"
            )
        values = [
            sum(1 << (len(texts) - 1 - i) for i, t in enumerate(texts) if t not in s) for s in sets
        ]
        if gid is None or len(set(values)) == 1:
            text = str(values[0])
        else:
            whens = " ".join(f"WHEN {i} THEN {v}" for i, v in enumerate(values))
            text = f"(CASE {gid} {whens} END)"
        return parse_sql(f"SELECT {text}")[0].stmt.targetList[0].val

    # -- expressions ------------------------------------------------------------------
    def expr(
        self,
        node: object,
        scope: Scope,
        group_keys: dict[str, str] | None = None,
        agg: object = None,
    ) -> str:
        """SQL text of a scalar expression over internal column names, with the
        serving path's PostgreSQL semantics (`pg_semantics`)."""
        out = self._rewrite(node, scope, group_keys, agg)
        if type(out) is A.ColumnRef and len(out.fields) == 1 and type(out.fields[0]) is A.String:
            return column_sql(out.fields[0].sval)  # (most output columns: `*`, `a, b`)
        return deparse(pg_semantics(out, self._types))

    def _rewrite(
        self, node: object, scope: Scope, group_keys: dict[str, str] | None, agg: object
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
        if self._srfs and (
            isinstance(node, A.CaseExpr | A.CoalesceExpr)
            or (isinstance(node, A.FuncCall) and node.over is not None)
        ):  # PostgreSQL: not in CASE, COALESCE or a window call (0A000)
            self._srfs = False
            try:
                return self._rewrite(node, scope, group_keys, agg)
            finally:
                self._srfs = True
        if group_keys is not None and not isinstance(node, A.A_Const):
            # (a probe: windows and subqueries are not bound, nor registered, by it)
            probing, self._probing = self._probing, True
            try:
                text = deparse(pg_semantics(self._rewrite(node, scope, None, None), self._types))
            except Exception:
                text = None
            finally:
                self._probing = probing
            if text is not None and text in group_keys:
                return _ref(group_keys[text])
        if isinstance(node, A.FuncCall):
            fname = node.funcname[-1].sval.lower()
            if node.over is not None:
                return _ref(self.window_call(node, scope, group_keys, agg))
            if fname in SUPPORTED_AGGS and (node.args or node.agg_star or node.agg_within_group):
                if agg is None:
                    raise GroupingError("aggregate functions are not allowed here")
                return _ref(agg(node))  # type: ignore[operator]
            if fname in OTHER_AGGS:
                raise _unsupported(f"aggregate function {fname}")
            if fname in CLOCK_FUNCS and not self.serving and not node.args:
                if self._clock is None:
                    raise _unsupported(f"{fname}() outside WHERE's top-level conditions")
                return _ref(self._clock)
            if fname in VOLATILE_FUNCS and not self.serving:
                raise _unsupported(f"volatile function {fname}()")
            if fname in SET_RETURNING_FUNCS:
                if not (self._srfs and fname in VIEW_SRFS):
                    raise _unsupported(f"set-returning function {fname}()")
                if fname == "unnest" and len(node.args or ()) != 1:
                    raise _unsupported("unnest() of several arrays")
        if isinstance(node, A.SQLValueFunction) and not self.serving:
            if _is_current_timestamp(node) and self._clock is not None:
                return _ref(self._clock)
            raise _unsupported("a time-dependent value (CURRENT_TIMESTAMP, ...)")
        if isinstance(node, A.GroupingFunc):
            return self.grouping_call(node)
        if isinstance(node, A.SubLink):
            if node.subLinkType == enums.SubLinkType.EXPR_SUBLINK:
                return _ref(self.scalar_subquery(node, scope, group_keys is not None))
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
            if not self.serving:  # a view has no parameters
                raise _unsupported("parameters ($n)")
            return node  # a read's $n, bound with the client's values
        if isinstance(node, A.TypeCast):
            fixed = functions.typed_literal(node) or interval_literal(node)  # as pg_compat
            if fixed is not None:
                return fixed
        new = copy.copy(node)
        for name in node:
            child = getattr(node, name)
            if isinstance(child, A.Node | tuple | list):
                setattr(new, name, self._rewrite(child, scope, group_keys, agg))
        return new


def _set_returning(item: object) -> bool:
    """A FROM item that is one call of a set-returning function views take."""
    if not isinstance(item, A.RangeFunction) or len(item.functions or ()) != 1:
        return False
    fc = item.functions[0][0]
    return isinstance(fc, A.FuncCall) and fc.funcname[-1].sval.lower() in VIEW_SRFS


def _is_current_timestamp(node: A.SQLValueFunction) -> bool:
    return node.op == enums.SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP


def _reads_clock(node: object) -> bool:
    """Whether an expression reads the clock: now(), mz_now(), CURRENT_TIMESTAMP."""
    if isinstance(node, tuple | list):
        return any(_reads_clock(x) for x in node)
    if not isinstance(node, A.Node):
        return False
    if isinstance(node, A.FuncCall) and not node.args and node.over is None:
        if node.funcname[-1].sval.lower() in CLOCK_FUNCS:
            return True
    if isinstance(node, A.SQLValueFunction) and _is_current_timestamp(node):
        return True
    return any(_reads_clock(getattr(node, name)) for name in node)


def grouping_sets(items: tuple[object, ...]) -> list[list[object]]:
    """GROUP BY's items as a list of grouping sets (each a list of expressions): one
    set for a plain GROUP BY; ROLLUP, CUBE and GROUPING SETS expanded, several items
    combined by their cross product (PostgreSQL's semantics; duplicates are kept)."""
    out: list[list[object]] = [[]]
    for g in items:
        out = [a + b for a in out for b in _expand(g)]
    return out


def _expand(g: object) -> list[list[object]]:
    kind = enums.GroupingSetKind
    if isinstance(g, A.GroupingSet):
        content = list(g.content or ())
        if g.kind == kind.GROUPING_SET_EMPTY:
            return [[]]
        if g.kind == kind.GROUPING_SET_SIMPLE:
            return [[x for c in content for x in _element(c)]]
        if g.kind == kind.GROUPING_SET_ROLLUP:
            parts = [_element(c) for c in content]
            return [[x for p in parts[:n] for x in p] for n in range(len(parts), -1, -1)]
        if g.kind == kind.GROUPING_SET_CUBE:
            parts = [_element(c) for c in content]
            n = len(parts)
            return [
                [x for i, p in enumerate(parts) if not mask >> (n - 1 - i) & 1 for x in p]
                for mask in range(1 << n)
            ]
        # GROUPING SETS (...): each item a set, `(a, b)` one set of two expressions
        return [
            s for c in content for s in ([_element(c)] if isinstance(c, A.RowExpr) else _expand(c))
        ]
    return [[g]]


def _element(c: object) -> list[object]:
    """One element of ROLLUP/CUBE/GROUPING SETS: `(a, b)` is a group of expressions."""
    if isinstance(c, A.RowExpr) and c.row_format == enums.CoercionForm.COERCE_IMPLICIT_CAST:
        return list(c.args or ())
    if isinstance(c, A.GroupingSet):
        return [x for s in _expand(c) for x in s]
    return [c]


@dataclass
class _SortList:
    """DISTINCT ON's expressions in the shape of an ORDER BY (`sort_keys` binds both)."""

    exprs: tuple[object, ...]

    @property
    def sortClause(self) -> tuple[object, ...]:  # noqa: N802 (pglast's name)
        return tuple(
            A.SortBy(
                node=e,
                sortby_dir=enums.SortByDir.SORTBY_DEFAULT,
                sortby_nulls=enums.SortByNulls.SORTBY_NULLS_DEFAULT,
            )
            for e in self.exprs
        )


WINDOW_FUNCS = {
    "row_number",
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
}
# frameOptions of an OVER clause without a frame (RANGE UNBOUNDED PRECEDING to CURRENT ROW)
_DEFAULT_FRAME = 1058


def window_node(node: Node, calls: list[tuple[str, Expr, tuple[Expr, ...]]]) -> Window:
    """The Window node of a SELECT's window calls: recomputed per partition of the keys
    every call partitions by (their common PARTITION BY keys)."""
    common = [k for k in calls[0][2] if all(k in c[2] for c in calls)]
    return Window(node, tuple((n, t) for n, t, _ in calls), tuple(dict.fromkeys(common)))


def _explicit_nulls(key: Expr) -> Expr:
    """A sort key with PostgreSQL's default NULLs placement spelled out (DuckDB puts
    NULLs last both ways)."""
    if re.search(r"\sNULLS (?:FIRST|LAST)$", key):
        return key
    desc = re.search(r"\sDESC$", key) is not None
    return f"{key} NULLS {'FIRST' if desc else 'LAST'}"


def _has_sublink(node: object) -> bool:
    try:
        _check_no_sublink(node)
    except FeatureNotSupported:
        return True
    return False


def substitute_columns(expr: Expr, values: dict[str, Expr]) -> Expr:
    """The expression with some column references replaced by expressions."""
    tree = parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val

    def visit(n: object) -> object:
        if isinstance(n, tuple | list):
            return type(n)(visit(x) for x in n)
        if not isinstance(n, A.Node):
            return n
        if isinstance(n, A.ColumnRef) and len(n.fields) == 1:
            name = getattr(n.fields[0], "sval", None)
            if name in values:
                return parse_sql(f"SELECT ({values[name]})")[0].stmt.targetList[0].val
        for attr in n:
            setattr(n, attr, visit(getattr(n, attr)))
        return n

    return deparse(visit(tree))


def _one_row(node: Node) -> bool:
    """Does the node always hold exactly one row (an aggregate without GROUP BY)?"""
    while isinstance(node, Project):
        node = node.input
    return isinstance(node, Aggregate) and node.scalar


@functools.lru_cache(maxsize=4096)
def column_sql(name: str) -> str:
    """A bare column reference's SQL, as `deparse(pg_semantics(ref))` gives it (no rule
    rewrites one): each output column of a read went through both, ~0.1 ms apiece (a
    `SELECT *` of 16 columns spent ~2 ms of the event loop on them)."""
    return deparse(A.ColumnRef(fields=(A.String(sval=name),)))


def pg_semantics(node: object, column_types: Mapping[str, str] | None = None) -> object:
    """A bound scalar expression as the serving path runs it (planner/pg_compat.py:
    LIKE's backslash escapes, btrim, numeric division, ...), so that the engine's
    DuckDB computes what PostgreSQL does, as plain SELECTs do. Rewrites that read the
    catalog (scalar subqueries over pg_catalog) are outside the scope."""
    stmt = pg_compat.translate(
        A.SelectStmt(targetList=(A.ResTarget(val=node),)), column_types=column_types
    )
    out = stmt.targetList[0].val  # type: ignore[index]
    try:
        _check_no_sublink(out)
    except FeatureNotSupported:
        raise _unsupported(f"the function in {deparse(node)!r}") from None
    return out


@dataclass(frozen=True)
class _Internal:
    """A target that is already an internal expression (from * expansion)."""

    expr: str


def _ref(expr: str) -> object:
    """A node that deparses to `expr` (an internal name or a merged USING column)."""

    if expr.isidentifier():
        return A.ColumnRef(fields=(A.String(sval=expr),))

    return parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val


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


def _simple_subquery(sub: object) -> bool:
    """SELECT ... FROM ... [WHERE ...]: no set operation, grouping, DISTINCT, WITH, LIMIT."""
    return (
        isinstance(sub, A.SelectStmt)
        and sub.op == enums.SetOperation.SETOP_NONE
        and not sub.groupClause
        and sub.havingClause is None
        and not sub.distinctClause
        and sub.withClause is None
        and sub.limitCount is None
        and sub.limitOffset is None
        and bool(sub.fromClause)
    )


_ASC, _NULLS = enums.SortByDir.SORTBY_DEFAULT, enums.SortByNulls.SORTBY_NULLS_DEFAULT


def _has_window(nodes: object) -> bool:
    """Is there a window function call in the (AST) nodes, outside subqueries?"""
    if isinstance(nodes, tuple | list):
        return any(_has_window(x) for x in nodes)
    if not isinstance(nodes, A.Node) or isinstance(nodes, A.SubLink):
        return False
    if isinstance(nodes, A.FuncCall) and nodes.over is not None:
        return True
    return any(_has_window(getattr(nodes, name)) for name in nodes)


def _partition_windows(stmt: A.SelectStmt, keys: list[object]) -> None:
    """Put `keys` first in the PARTITION BY of every window of the SELECT: its WINDOW
    definitions and its calls' own OVER clauses (not `OVER w`, nor one built on another
    window, which has its PARTITION BY from there)."""

    def visit(n: object, definition: bool = False) -> None:
        if isinstance(n, tuple | list):
            for x in n:
                visit(x, definition)
            return
        if not isinstance(n, A.Node) or isinstance(n, A.SubLink):
            return
        if isinstance(n, A.WindowDef):
            if not n.refname and (definition or not n.name):
                n.partitionClause = (*copy.deepcopy(keys), *(n.partitionClause or ()))
            return
        for name in n:
            visit(getattr(n, name))

    visit(stmt.windowClause, True)
    visit((stmt.targetList, stmt.sortClause))


def _one_row_kept(stmt: A.SelectStmt) -> bool:
    """Does the SELECT's LIMIT/OFFSET keep a one-row result (constants only)?"""

    def value(n: object, what: str, code: str) -> int | None:
        if n is None or (isinstance(n, A.A_Const) and n.isnull):
            return None
        if isinstance(n, A.A_Const) and isinstance(n.val, A.Integer):
            if n.val.ival < 0:
                raise SQLError(f"{what} must not be negative", code)
            return n.val.ival
        raise _unsupported(f"a LATERAL aggregate with a {what} other than a constant")

    limit = value(stmt.limitCount, "LIMIT", "2201W")
    offset = value(stmt.limitOffset, "OFFSET", "2201X")
    return (limit is None or limit >= 1) and not offset


def replace_targets(stmt: A.SelectStmt, targets: tuple) -> A.SelectStmt:
    """A copy of the SELECT with other targets."""
    new = copy.copy(stmt)
    new.targetList = targets
    return new


def _not_monotone(node: Node) -> str | None:
    """What makes a recursive term's operator not monotone (a row it derives could be
    withdrawn by another row), or None."""
    if isinstance(node, Window):
        return "a window function or LIMIT"
    if isinstance(node, SemiJoin) and node.anti:
        return "NOT EXISTS/NOT IN"
    if isinstance(node, Join) and node.kind not in ("inner", "cross"):
        return f"a {node.kind.upper()} JOIN"
    if isinstance(node, SetOp) and node.op != "union":
        return node.op.upper()
    if isinstance(node, Difference | Recursive):
        return "EXCEPT" if isinstance(node, Difference) else "a nested WITH RECURSIVE"
    return None


def _reads_name(query: object, name: str) -> bool:
    """Does a WITH query mention the relation `name` (unqualified) anywhere?"""

    def visit(n: object) -> bool:
        if isinstance(n, tuple | list):
            return any(visit(x) for x in n)
        if not isinstance(n, A.Node):
            return False
        if isinstance(n, A.RangeVar) and n.schemaname is None and n.relname == name:
            return True
        return any(visit(getattr(n, k)) for k in n)

    return visit(query)


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
                n.args or n.agg_star or n.agg_within_group
            ):
                return True
        return any(visit(getattr(n, name)) for name in n)

    return visit(nodes)


def _check_distinct_order(
    fc: object, arg_texts: set[str], builder: PlanBuilder, scope: Scope
) -> None:
    """With DISTINCT, an aggregate's ORDER BY keys must be among its arguments (42P10).
    An untyped string literal never is (PostgreSQL compares it before giving it the
    argument's type): `string_agg(DISTINCT s, ',' ORDER BY ',')` is refused."""
    for sort in fc.agg_order:  # type: ignore[attr-defined]
        key = sort.node
        untyped = isinstance(key, A.A_Const) and isinstance(key.val, A.String)
        if untyped or builder.expr(key, scope) not in arg_texts:
            raise InvalidColumnReference(
                "in an aggregate with DISTINCT, ORDER BY expressions must appear in argument list"
            )


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


def _mentions_outer(builder: PlanBuilder, node: object, scope: Scope) -> bool:
    return False  # nested subqueries are built with their own scope chain


def refs(expr: Expr) -> set[str]:
    """Internal column names an expression mentions."""

    return set(re.findall(r"(?<![\w.\"'])c\d+(?![\w(])", _strip_strings(expr)))


def _strip_strings(expr: str) -> str:

    return re.sub(r"'(?:[^']|'')*'", "''", expr)


def _refs_only(expr: Expr, cols: set[str]) -> bool:
    return refs(expr) <= cols
