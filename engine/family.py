"""Families: views whose plans differ only in integer constants share their statements.

DuckDB spends ~1-2 ms on every statement however few rows it reads (parsing,
binding, optimizing and starting the pipelines, docs/engine.md), and a view's rules
are several statements per batch, so N views cost N times that. Views of the same
shape (the same query but for its integer constants: `k % 3` and `k % 4`, `v > 10`
and `v > 20`, ...) share one program instead: its rows carry the view they belong
to and the view's constants as columns, and one statement per rule advances every
view of the family. The first view of a shape stays a plain program (the tags cost a
lone view's rules ~5-15%); the second starts the family (engine/engine.py `_family`).

`tag_plan(plan)` rewrites a lowered plan (planner/incremental.py) into its family's
template:

    Scan(t, (k, v), (c1, c2))
        -> Scan(t, (_hw_v, _hw_p0, ..., k, v), (hv0, hp0_0, ..., c1, c2))
    Filter(x, "(c2 % 3) <> 0")       -> Filter(x', "(c2 % hp0_0) <> 0")
    Aggregate(x, ((c3, c1 % 3),))    -> Aggregate(x', ((hv1, hv0), (hp0_1, hp0_0), ...,
                                                       (c3, c1 % hp0_0)))

A scan of a table yields, for each view of the family being advanced, the table's
changes tagged with the view (`_hw_v`) and its constants (`_hw_pj`); every operator
passes the tags through (projections and aggregates under fresh names `hv{k}`,
`hp{j}_{k}`; aggregates group by them; joins match on them), so each view's rows
only ever meet rows of the same view. An aggregate without GROUP BY becomes a
`ViewScalarAggregate`: grouped by the tags, and like a scalar aggregate each view's
group exists from the view's first epoch on, also on no rows. The output table of
the family holds every view's versions and each view reads its own through a SQL
view `o{view}` (`l{view}` for its changes), so readers see what they saw before.

Only integer literals become parameters (a string literal compared with a column of
another type is cast differently when it is a column); the engine also checks that
every operator of the view has the same column types in the family as alone, and
keeps a view out of families when they differ (or when the plan scans a
materialized view or holds a VALUES list).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

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
    Scan,
    SetOp,
    walk,
)
from headwater.planner.relations import deparse
from headwater.planner.syntax import replaced
from pglast import parse_sql

TAG_V = "_hw_v"  # the view a row belongs to, as a scan's source column


def tag_source(j: int) -> str:
    """The scan's source column of the j-th constant."""
    return f"_hw_p{j}"


_TAG = re.compile(r"hv\d+|hp(\d+)_\d+")
TAG_REFS = re.compile(r"(?<![\w.\"'])(?:hv\d+|hp\d+_\d+)(?![\w(])")


def is_tag(column: str) -> bool:
    return _TAG.fullmatch(column) is not None


def tag_of(column: str) -> str:
    """The `_pv` column (tag source) a tag column holds: `_hw_v` or `_hw_pj`."""
    m = _TAG.fullmatch(column)
    assert m is not None
    return TAG_V if m.group(1) is None else tag_source(int(m.group(1)))


@dataclass(frozen=True)
class ViewScalarAggregate(Aggregate):
    """An aggregate without GROUP BY in a family: its group keys are only the tags,
    and each view's group exists from the view's first epoch (count 0 on no rows)."""


# -- integer literals in expressions ------------------------------------------------------
def _rewrite(n: Any, fn: Any) -> Any:
    """Apply `fn` to every A_Const (pre-order, attributes in their declared order),
    replacing it by what `fn` returns; type names (their modifiers) are left alone."""
    return replaced(
        n, lambda x: x if isinstance(x, A.TypeName) else fn(x) if isinstance(x, A.A_Const) else None
    )


def _is_int(c: A.A_Const) -> bool:
    return not c.isnull and isinstance(c.val, A.Integer)


def literals(expr: str | None) -> list[str]:
    """The integer literals of an expression, in the order `substitute` replaces them."""
    if not expr:
        return []
    found: list[str] = []

    def visit(c: A.A_Const) -> A.A_Const:
        if _is_int(c):
            found.append(str(c.val.ival))
        return c

    _rewrite(_parse(expr), visit)
    return found


def _parse(expr: str) -> Any:
    """An expression's tree; a sort key with its direction (`x DESC NULLS FIRST`, an
    aggregate's ORDER BY) as a whole SortBy node."""
    if re.search(r"\s(?:ASC|DESC) NULLS (?:FIRST|LAST)$", expr):
        return parse_sql(f"SELECT 1 ORDER BY {expr}")[0].stmt.sortClause[0]
    return parse_sql(f"SELECT {expr}")[0].stmt.targetList[0].val


def substitute(expr: str | None, names: list[str]) -> str | None:
    """The expression with its integer literals replaced by `names` (taken in order:
    the caller's list is consumed)."""
    if not expr or not literals(expr):
        return expr
    node = _parse(expr)

    def visit(c: A.A_Const) -> Any:
        if _is_int(c):
            return A.ColumnRef(fields=(A.String(sval=names.pop(0)),))
        return c

    return deparse(_rewrite(node, visit))


def _exprs(node: Node) -> list[str | None]:
    """Every expression of a node, in a fixed order."""
    if isinstance(node, Filter):
        return [node.predicate]
    if isinstance(node, Project):
        return [e for _, e in node.exprs]
    if isinstance(node, Join):
        return [*node.left_keys, *node.right_keys, node.residual]
    if isinstance(node, Aggregate):
        out: list[str | None] = [e for _, e in node.group]
        for a in node.aggs:
            out += [a.arg, *a.extra, *a.order, a.filter]
        return out
    return []


# -- the template -------------------------------------------------------------------------
@dataclass
class Tagged:
    plan: Plan  # the family's template (tags and parameters as columns)
    params: list[str]  # this view's integer literals, in parameter order
    pairs: list[tuple[Node, Node]]  # (node of the view's plan, its node in the template)
    key: str  # equal for views whose templates (and scans) are equal

    @property
    def tag_types(self) -> tuple[str, ...]:
        return ("BIGINT",) + ("INTEGER",) * len(self.params)


class _Unsupported(Exception):
    pass


class _Tagger:
    def __init__(self, nparams: int) -> None:
        self.nparams = nparams
        self.k = 0
        self.params: list[str] = []
        self.memo: dict[int, tuple[Node, str, tuple[str, ...]]] = {}
        self.pairs: list[tuple[Node, Node]] = []

    def tags(self) -> tuple[str, tuple[str, ...]]:
        k = self.k
        self.k += 1
        return f"hv{k}", tuple(f"hp{j}_{k}" for j in range(self.nparams))

    def sub(self, expr: str | None, p: tuple[str, ...]) -> str | None:
        lits = literals(expr)
        if not lits:
            return expr
        start = len(self.params)
        self.params += lits
        return substitute(expr, [p[j] for j in range(start, start + len(lits))])

    def __call__(self, node: Node) -> tuple[Node, str, tuple[str, ...]]:
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit
        out = self._tag(node)
        self.memo[id(node)] = out
        self.pairs.append((node, out[0]))
        return out

    def _tag(self, node: Node) -> tuple[Node, str, tuple[str, ...]]:
        if isinstance(node, Scan):
            v, p = self.tags()
            src = (TAG_V, *(tag_source(j) for j in range(self.nparams)))
            return Scan(node.table, src + node.source, (v, *p) + node.names), v, p
        if isinstance(node, Filter):
            x, v, p = self(node.input)
            return Filter(x, self.sub(node.predicate, p) or "true"), v, p
        if isinstance(node, Project):
            x, v, p = self(node.input)
            fv, fp = self.tags()
            exprs = ((fv, v), *zip(fp, p, strict=True)) + tuple(
                (n, self.sub(e, p) or e) for n, e in node.exprs
            )
            return Project(x, exprs), fv, fp
        if isinstance(node, Distinct):
            x, v, p = self(node.input)
            return Distinct(x), v, p
        if isinstance(node, Join):
            lx, lv, lp = self(node.left)
            rx, rv, rp = self(node.right)
            if set(lx.columns) & set(rx.columns):
                raise _Unsupported("a join of a subtree with itself")
            lk = (lv, *(self.sub(k, lp) or k for k in node.left_keys))
            rk = (rv, *(self.sub(k, rp) or k for k in node.right_keys))
            res = self.sub(node.residual, lp)
            return Join("inner", lx, rx, lk, rk, res, node.null_safe), lv, lp
        if isinstance(node, Aggregate):
            x, v, p = self(node.input)
            fv, fp = self.tags()
            group = ((fv, v), *zip(fp, p, strict=True)) + tuple(
                (n, self.sub(e, p) or e) for n, e in node.group
            )
            aggs = tuple(
                AggCall(
                    a.name,
                    a.func,
                    self.sub(a.arg, p),
                    a.distinct,
                    tuple(self.sub(e, p) or e for e in a.extra),
                    tuple(self.sub(e, p) or e for e in a.order),
                    self.sub(a.filter, p),
                )
                for a in node.aggs
            )
            cls = ViewScalarAggregate if node.scalar else Aggregate
            return cls(x, group, aggs), fv, fp
        if isinstance(node, SetOp):
            lx, lv, lp = self(node.left)
            rx, rv, rp = self(node.right)
            sides = []
            for x, v, p, orig in ((lx, lv, lp, node.left), (rx, rv, rp, node.right)):
                fv, fp = self.tags()
                exprs = ((fv, v), *zip(fp, p, strict=True)) + tuple((c, c) for c in orig.columns)
                sides.append(Project(x, exprs))
            fv, fp = self.tags()
            names = (fv, *fp) + tuple(node.columns)
            return SetOp(node.op, node.all, sides[0], sides[1], names), fv, fp
        if isinstance(node, Difference):
            lx, lv, lp = self(node.left)
            rx, rv, rp = self(node.right)
            mapped = []
            for c in lx.columns:
                if is_tag(c):
                    src = tag_of(c)
                    mapped.append(rv if src == TAG_V else rp[int(src[len("_hw_p") :])])
                elif c in rx.columns:
                    mapped.append(c)
                else:
                    raise _Unsupported("a difference of unlike inputs")
            right = Project(rx, tuple(zip(lx.columns, mapped, strict=True)))
            return Difference(lx, right), lv, lp
        raise _Unsupported(type(node).__name__)


def tag_plan(plan: Plan, scans: dict[int, Any]) -> Tagged | None:
    """The view's family template, or None when the view cannot share one (it scans a
    materialized view, holds VALUES, ...)."""
    if any(getattr(info, "view", None) is not None for info in scans.values()):
        return None
    seen: set[int] = set()
    n = 0
    for node in walk(plan.root):
        if id(node) not in seen:
            seen.add(id(node))
            n += sum(len(literals(e)) for e in _exprs(node))
    tagger = _Tagger(n)
    try:
        root, _, _ = tagger(plan.root)
    except _Unsupported:
        return None
    if len(tagger.params) != n:  # (cannot happen: the same expressions, the same order)
        return None
    template = Plan(root, tuple(root.columns), plan.tables)
    sig = repr(root) + repr(sorted((o, i.columns, i.types) for o, i in scans.items()))
    key = hashlib.sha1(sig.encode()).hexdigest()
    return Tagged(template, tagger.params, tagger.pairs, key)


def view_tag(root: Node) -> str:
    """The column of a template's output that holds the view."""
    return next(c for c in root.columns if c.startswith("hv") and is_tag(c))
