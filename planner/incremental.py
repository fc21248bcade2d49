"""Rewrites that turn a bound plan into the plan the engine maintains incrementally.

Each rule is a small pure function `rule(node) -> node` over planner/ir.py nodes,
applied bottom-up by `ir.transform`; `incrementalize(plan)` folds them in order:

    merge_filters        Filter(Filter(x, a), b)          -> Filter(x, a AND b)
    push_down_filters    Filter(Join(inner|cross), p)     -> keys, residual, side filters
    lower_set_ops        UNION (distinct)                 -> Distinct(UNION ALL)
    lower_semi_joins     [NOT] EXISTS / [NOT] IN          -> Join + Distinct (+ Difference)
    lower_outer_joins    LEFT/RIGHT/FULL JOIN             -> inner join + padded anti-join
    lower_distinct_aggs  COUNT/SUM/AVG(DISTINCT x) GROUP BY g -> the same calls without
                         DISTINCT over Distinct(g, x)
    fuse_top_n           Filter(Window) (through renames) -> the Window keeping only the
                         rows the filter passes: `rn <= n` per partition is a top-N
    prune_scans          Scan(t, every column)            -> Scan(t, the columns used above)

After them, the plan holds only the operators whose incremental rules the engine
implements (docs/engine.md, "Operators"): Scan, Values, Filter, Project, inner and
cross Join, Aggregate, Distinct, UNION ALL / INTERSECT / EXCEPT, Difference, Window.

    >>> lower_set_ops(SetOp("union", False, a, b, ("c9",)))
    Distinct(input=SetOp(op='union', all=True, ...))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import pglast.ast as A
from headwater.planner.ir import (
    AggCall,
    Aggregate,
    Difference,
    Distinct,
    Filter,
    Join,
    Node,
    Plan,
    Project,
    Recursive,
    Scan,
    SemiJoin,
    SetOp,
    Window,
    equality_sides,
    refs,
    transform,
    walk,
)
from headwater.planner.relations import deparse
from pglast import enums, parse_sql
from pglast.parser import ParseError
from pglast.stream import RawStream

from headwater.errors import FeatureNotSupported

Rule = Callable[[Node], Node]


# -- expression helpers ----------------------------------------------------------------
def conjuncts(expr: str) -> list[str]:
    """The AND-ed parts of a predicate, each as SQL text."""
    node = parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val
    out: list[str] = []

    def visit(n: object) -> None:
        if isinstance(n, A.BoolExpr) and n.boolop == enums.BoolExprType.AND_EXPR:
            for a in n.args:
                visit(a)
        else:
            out.append(deparse(n))

    visit(node)
    return out


def equality(expr: str) -> tuple[str, str] | None:
    """`a = b` -> (a, b)."""
    pair = equality_sides(parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val)
    return (deparse(pair[0]), deparse(pair[1])) if pair is not None else None


def conjoin(parts: list[str]) -> str | None:
    return " AND ".join(f"({p})" for p in parts) or None


class Namer:
    """Fresh internal names past every name a plan already uses."""

    def __init__(self, root: Node) -> None:
        top = 0
        for n in walk(root):
            for c in n.columns:
                m = re.fullmatch(r"c(\d+)", c)
                if m:
                    top = max(top, int(m.group(1)))
            for a in getattr(n, "aggs", ()):
                m = re.fullmatch(r"c(\d+)", a.name)
                if m:
                    top = max(top, int(m.group(1)))
        self.n = top

    def __call__(self) -> str:
        self.n += 1
        return f"c{self.n}"


# -- rules ------------------------------------------------------------------------------
def merge_filters(node: Node) -> Node:
    """Filter(Filter(x, a), b) -> Filter(x, (a) AND (b))."""
    if isinstance(node, Filter) and isinstance(node.input, Filter):
        return Filter(node.input.input, f"({node.input.predicate}) AND ({node.predicate})")
    return node


def push_down_filters(node: Node) -> Node:
    """A filter over an inner or cross join: conjuncts over one side move below the
    join, equalities between the sides become join keys, the rest the residual.

        Filter(Join(cross, A, B), "a1 = b1 AND a2 > 0")
            -> Join(inner, Filter(A, "a2 > 0"), B, keys a1 = b1)
    """
    if not (isinstance(node, Filter) and isinstance(node.input, Join)):
        return node
    join = node.input
    if join.kind not in ("inner", "cross"):
        return node
    lcols, rcols = set(join.left.columns), set(join.right.columns)
    left: list[str] = []
    right: list[str] = []
    lkeys, rkeys = list(join.left_keys), list(join.right_keys)
    residual = [join.residual] if join.residual else []
    for c in conjuncts(node.predicate):
        r = refs(c)
        if r and r <= lcols:
            left.append(c)
            continue
        if r and r <= rcols:
            right.append(c)
            continue
        pair = equality(c)
        if pair is not None:
            a, b = pair
            ra, rb = refs(a), refs(b)
            if ra and rb and ra <= lcols and rb <= rcols:
                lkeys.append(a), rkeys.append(b)
                continue
            if ra and rb and ra <= rcols and rb <= lcols:
                lkeys.append(b), rkeys.append(a)
                continue
        residual.append(c)
    lnode = push_down_filters(Filter(join.left, conjoin(left))) if left else join.left
    rnode = push_down_filters(Filter(join.right, conjoin(right))) if right else join.right
    kind = "inner" if lkeys or residual else "cross"
    res = conjoin(residual) if len(residual) > 1 else (residual[0] if residual else None)
    return Join(kind, lnode, rnode, tuple(lkeys), tuple(rkeys), res, join.null_safe)


def lower_set_ops(node: Node) -> Node:
    """UNION -> Distinct(UNION ALL); INTERSECT/EXCEPT [ALL] stay (a counting operator)."""
    if isinstance(node, SetOp) and node.op == "union" and not node.all:
        return Distinct(replace(node, all=True))
    return node


def _semi(
    left: Node,
    right: Node,
    lkeys: tuple[str, ...],
    rkeys: tuple[str, ...],
    residual: str | None,
    fresh: Namer,
) -> Node:
    """The rows of `left` (with their multiplicity) that have a match in `right`."""
    if residual is None:
        names = tuple(fresh() for _ in rkeys)
        keys = Distinct(Project(right, tuple(zip(names, rkeys, strict=True))))
        joined = Join("inner", left, keys, lkeys, names)
        return Project(joined, tuple((c, c) for c in left.columns))
    # With a residual: the distinct left rows that match, joined back on every column.
    matched = Join("inner", left, right, lkeys, rkeys, residual)
    names = tuple(fresh() for _ in left.columns)
    rows = Distinct(Project(matched, tuple(zip(names, left.columns, strict=True))))
    back = Join("inner", left, rows, left.columns, names, None, True)
    return Project(back, tuple((c, c) for c in left.columns))


def lower_semi_joins(node: Node, fresh: Namer | None = None) -> Node:
    """EXISTS / IN as a join with the distinct matching keys; NOT EXISTS as the left
    input minus that; NOT IN (uncorrelated) also checks the subquery for NULLs:

        x NOT IN (SELECT y FROM R)  ==  R is empty OR (x IS NOT NULL AND no y IS NULL
                                        AND no y = x)
    """
    if not isinstance(node, SemiJoin):
        return node
    fresh = fresh or Namer(node)
    if node.null_aware:
        if len(node.left_keys) != 1 or node.residual is not None:
            raise FeatureNotSupported(
                "NOT IN with a correlated subquery is not supported in materialized views"
            )
        semi = _semi(node.left, node.right, node.left_keys, node.right_keys, None, fresh)
        anti = Difference(node.left, semi)
        n, nn = fresh(), fresh()
        y = node.right_keys[0]
        stats = Aggregate(
            node.right,
            (),
            (AggCall(n, "count"), AggCall(nn, "count", filter=f"({y}) IS NULL")),
        )
        x = node.left_keys[0]
        cond = f"{n} = 0 OR ({nn} = 0 AND ({x}) IS NOT NULL)"
        joined = Filter(Join("cross", anti, stats), cond)
        return Project(joined, tuple((c, c) for c in node.left.columns))
    semi = _semi(node.left, node.right, node.left_keys, node.right_keys, node.residual, fresh)
    return Difference(node.left, semi) if node.anti else semi


def lower_distinct_aggs(node: Node, fresh: Namer | None = None) -> Node:
    """COUNT/SUM/AVG(DISTINCT x) ... GROUP BY g, every call over the same x and without
    FILTER, is the call without DISTINCT over the distinct (g, x) pairs:

        Aggregate(R, g, count(DISTINCT x))
            -> Aggregate(Distinct(Project(R, (g, x))), g, count(x))

    Both are linear (a count per (g, x), then running sums), where the aggregate with
    DISTINCT re-aggregates each changed group at each epoch it changed from all its
    rows. NULLs agree: the calls skip a NULL x either way, and a group whose x are all
    NULL still exists (count 0). Without GROUP BY the answer on no rows is the same
    (count 0, sum and avg NULL)."""
    if not (
        isinstance(node, Aggregate)
        and node.aggs
        and all(
            a.distinct and a.func in ("count", "sum", "avg") and a.filter is None and not a.order
            for a in node.aggs
        )
        and a_single_arg(node)
    ):
        return node
    fresh = fresh or Namer(node)
    keys = tuple((fresh(), e) for _, e in node.group)
    group = tuple((n, k) for (n, _), (k, _) in zip(node.group, keys, strict=True))
    arg = node.aggs[0].arg or "NULL"
    if (fields := row_fields(arg)) is not None and all(a.func == "count" for a in node.aggs):
        # count(DISTINCT (a, b)): a row is never NULL, so it is count(*) over the
        # distinct (g, a, b), with no column of a row type (Spark has no such literal)
        xs = tuple((fresh(), f) for f in fields)
        rows = Distinct(Project(node.input, keys + xs))
        return Aggregate(rows, group, tuple(AggCall(a.name, "count") for a in node.aggs))
    x = fresh()
    pairs = Distinct(Project(node.input, keys + ((x, arg),)))
    aggs = tuple(AggCall(a.name, a.func, x) for a in node.aggs)
    return Aggregate(pairs, group, aggs)


def row_fields(expr: str) -> tuple[str, ...] | None:
    """The fields of a row constructor `(a, b)` / `ROW(a, b)`, or None.

    >>> row_fields("(c3, c4 + 1)"), row_fields("c3")
    (('c3', 'c4 + 1'), None)"""
    try:
        val = parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val
    except ParseError:
        return None
    if isinstance(val, A.FuncCall) and val.funcname[-1].sval == "struct_pack":
        # ROW(a, b) as pg_compat translates it: struct_pack(f1 => a, f2 => b)
        return tuple(RawStream()(getattr(f, "arg", f)) for f in val.args)
    if not isinstance(val, A.RowExpr):
        return None
    return tuple(RawStream()(f) for f in val.args)


def a_single_arg(node: Aggregate) -> bool:
    return len({a.arg for a in node.aggs}) == 1 and node.aggs[0].arg is not None


def lower_outer_joins(node: Node, fresh: Namer | None = None) -> Node:
    """LEFT JOIN = inner join + the unmatched left rows padded with NULLs (the
    unmatched rows: the left input minus its semi-join); RIGHT mirrors it; FULL
    has both paddings."""
    if not (isinstance(node, Join) and node.kind in ("left", "right", "full")):
        return node
    fresh = fresh or Namer(node)
    inner = replace(node, kind="inner" if node.left_keys or node.residual else "cross")
    parts: list[Node] = [inner]
    L, R = node.left, node.right
    if node.kind in ("left", "full"):
        semi = _semi(L, R, node.left_keys, node.right_keys, node.residual, fresh)
        pad = Project(
            Difference(L, semi),
            tuple((c, c) for c in L.columns) + tuple((c, "NULL") for c in R.columns),
        )
        parts.append(pad)
    if node.kind in ("right", "full"):
        semi = _semi(R, L, node.right_keys, node.left_keys, node.residual, fresh)
        pad = Project(
            Difference(R, semi),
            tuple((c, "NULL") for c in L.columns) + tuple((c, c) for c in R.columns),
        )
        parts.append(pad)
    out = parts[0]
    for p in parts[1:]:
        out = SetOp("union", True, out, p, tuple(node.columns))
    return out


def rename_columns(expr: str, names: dict[str, str]) -> str:
    """The expression with its column references renamed (`names`: old -> new)."""
    tree = parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val

    def visit(n: object) -> None:
        if isinstance(n, tuple | list):
            for x in n:
                visit(x)
            return
        if not isinstance(n, A.Node):
            return
        if isinstance(n, A.ColumnRef) and len(n.fields) == 1:
            name = getattr(n.fields[0], "sval", None)
            if name in names:
                n.fields = (A.String(sval=names[name]),)
        for attr in n:
            visit(getattr(n, attr))

    visit(tree)
    return deparse(tree)


def fuse_top_n(node: Node) -> Node:
    """A filter over a Window (directly, or through a projection that renames its
    columns) filters the window's output row by row: it becomes the Window's `keep`,
    so that the Window keeps and emits only those rows. `row_number() OVER (PARTITION
    BY g ORDER BY x) <= n` is then a top-n per group whose state holds n rows a group.

        Filter(Project(Window(R, rn), c9 := rn), "c9 <= 3")
            -> Project(Window(R, rn, keep="rn <= 3"), c9 := rn)
    """
    if not isinstance(node, Filter):
        return node
    inner = node.input
    rename: dict[str, str] = {}
    if isinstance(inner, Project):
        rename = {n: e for n, e in inner.exprs if re.fullmatch(r"c\d+", e)}
        win = inner.input
    else:
        win = inner
    if not isinstance(win, Window):
        return node
    moved, kept = [], []
    for c in conjuncts(node.predicate):
        if refs(c) <= set(rename) or inner is win:
            moved.append(rename_columns(c, rename) if rename else c)
        else:
            kept.append(c)
    if not moved:
        return node
    keep = conjoin(([win.keep] if win.keep else []) + moved)
    fused: Node = replace(win, keep=keep)
    if inner is not win:
        fused = replace(inner, input=fused)
    return Filter(fused, conjoin(kept)) if kept else fused


RULES: tuple[Rule, ...] = (
    merge_filters,
    push_down_filters,
    lower_set_ops,
)


def incrementalize(plan: Plan) -> Plan:
    """Apply every rule; the result holds only operators the engine maintains."""
    # (a view's top-N is a Window node; `plan.order` is the order its rows are read in)
    if plan.limit is not None or plan.offset is not None:
        raise FeatureNotSupported("LIMIT/OFFSET is not supported in materialized views")
    root = plan.root
    for rule in RULES:
        root = transform(root, rule)
    fresh = Namer(root)
    root = transform(root, lambda n: lower_semi_joins(n, fresh))
    root = transform(root, lambda n: lower_outer_joins(n, fresh))
    root = transform(root, lambda n: lower_distinct_aggs(n, fresh))
    root = transform(root, merge_filters)
    root = transform(root, fuse_top_n)
    root = prune_scans(root, set(root.columns))
    return replace(plan, root=root)


def prune_scans(node: Node, needed: set[str] | None) -> Node:
    """Scans read only the columns the operators above them use (`needed`: the columns
    of `node` its parents read; None: all of them). A view reads a few of a table's
    columns; the others would be carried through every rule's SQL (DuckDB binds and
    casts each one per batch) and kept in join states. Filters, projections, joins
    and aggregates narrow what they need; every other operator needs all of its
    input's columns.

        Aggregate(Filter(Scan(t, a b c d), "b > 0"), group a, sum(c))
            -> Aggregate(Filter(Scan(t, a b c), "b > 0"), group a, sum(c))
    """
    if isinstance(node, Scan):
        if needed is None:
            return node
        keep = [i for i, n in enumerate(node.names) if n in needed] or [0]
        if len(keep) == len(node.names):
            return node
        return replace(
            node,
            source=tuple(node.source[i] for i in keep),
            names=tuple(node.names[i] for i in keep),
        )
    if isinstance(node, Filter):
        need = None if needed is None else needed | refs(node.predicate)
        return node.with_children(prune_scans(node.input, need))
    if isinstance(node, Project):
        exprs = node.exprs
        if needed is not None and not node.expands:  # (unnesting: every call counts rows)
            exprs = tuple(x for x in node.exprs if x[0] in needed) or node.exprs[:1]
        need: set[str] = set()
        for _, e in exprs:
            need |= refs(e)
        return replace(node, input=prune_scans(node.input, need), exprs=exprs)
    if isinstance(node, Aggregate):
        need = set()
        for e in [e for _, e in node.group] + [
            e for a in node.aggs for e in (a.arg, a.filter, *a.extra, *a.order) if e
        ]:
            need |= refs(e)
        return node.with_children(prune_scans(node.input, need))
    if isinstance(node, Join):
        if needed is None:
            return node.with_children(prune_scans(node.left, None), prune_scans(node.right, None))
        need = set(needed)
        for e in (*node.left_keys, *node.right_keys, node.residual or ""):
            need |= refs(e)
        return node.with_children(
            prune_scans(node.left, need & set(node.left.columns)),
            prune_scans(node.right, need & set(node.right.columns)),
        )
    if isinstance(node, Recursive):  # its inputs are read by its terms' templates
        return node
    return node.with_children(*(prune_scans(c, None) for c in node.children()))
