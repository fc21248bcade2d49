"""EXPLAIN's output: plans as PostgreSQL prints them (text, JSON, YAML, XML), from
DuckDB's plan of a read and from a materialized view's incremental plan.

Pure rendering, no I/O: server/explain.py runs DuckDB's `EXPLAIN (FORMAT JSON)` (or
`EXPLAIN ANALYZE` with its JSON profile) and the engine's description of a view,
and hands the trees here.

    node = from_duckdb(json.loads(plan_json)[0], relation_name)   # DuckDB -> PlanNode
    lines = render(node, Options(analyze=True), planning_ms=0.1, execution_ms=2.3)

DuckDB's operators get PostgreSQL's names where there is an obvious one (SEQ_SCAN ->
Seq Scan on t, HASH_JOIN -> Hash Join over a Hash of its build side, HASH_GROUP_BY ->
HashAggregate, ORDER_BY -> Sort, TOP_N -> Limit over Sort, UNION -> Append, ...).
PROJECTIONs vanish (PostgreSQL projects inside nodes; VERBOSE shows them as Output)
and FILTERs become their input's `Filter:` line. The replica's version predicates
(`_hw_from`, `_hw_to`: which rows are visible at the statement's epoch) are left out,
so a plan reads like a plan over the user's tables. Costs are DuckDB's estimated
cardinalities (DuckDB has no cost units): startup 0, total the estimated rows its
subtree produces, a unit per row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("text", "json", "yaml", "xml")
_INTERNAL_NAME = re.compile(r"(?<![\w.\"'])(c\d+)(?![\w(])")


@dataclass
class Options:
    """EXPLAIN's options, defaulted as PostgreSQL 15 defaults them."""

    analyze: bool = False
    verbose: bool = False
    costs: bool = True
    buffers: bool = False  # accepted; DuckDB keeps no buffer counts
    timing: bool = True
    summary: bool | None = None  # None: on with ANALYZE
    format: str = "text"

    @property
    def show_summary(self) -> bool:
        return self.analyze if self.summary is None else self.summary


@dataclass
class PlanNode:
    """One node of a plan, in PostgreSQL's vocabulary."""

    node_type: str  # "Seq Scan", "Hash Join", "Aggregate", ...
    label: str = ""  # the text format's name when it differs ("HashAggregate", ...)
    relation: str | None = None  # scanned relation
    schema: str | None = None
    alias: str | None = None
    props: list[tuple[str, Any]] = field(default_factory=list)  # before the costs
    details: list[tuple[str, Any]] = field(default_factory=list)  # after: Filter, keys...
    rows: float = 0.0  # estimated
    width: int = 0
    cost: float = 0.0  # total, see the module docstring
    startup: float = 0.0
    actual: tuple[float, float, float] | None = None  # (startup ms, total ms, rows)
    children: list[PlanNode] = field(default_factory=list)
    relationship: str | None = None  # "Outer", "Inner", "Member", "Subquery"
    output: list[str] = field(default_factory=list)  # VERBOSE's Output
    subplan: str | None = None  # "CTE x": printed above the node, as PostgreSQL does


def _walk(n: PlanNode) -> list[PlanNode]:
    return [n, *(d for k in n.children for d in _walk(k))]


# -- DuckDB's plan to PostgreSQL's nodes -----------------------------------------------------
RelationName = Callable[[str], "tuple[str, str] | None"]  # DuckDB table -> (schema, name)

# the replica's row versions and a materialized view's stored versions
_VERSION_COLUMN = re.compile(r"\b_(hw_)?(from|to)\b")
_INTERNAL_CALL = re.compile(r"__internal_\w+\(")
_CAST = re.compile(r"CAST\((#\d+) AS [A-Z]+\)")
_JOIN_TYPES = {
    "INNER": "Inner",
    "LEFT": "Left",
    "RIGHT": "Right",
    "OUTER": "Full",
    "FULL": "Full",
    "SEMI": "Semi",
    "ANTI": "Anti",
    "RIGHT_SEMI": "Semi",
    "RIGHT_ANTI": "Anti",
    "MARK": "Semi",
    "SINGLE": "Left",
}


def _list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(v) for v in value if str(v) != ""]
    return [v for v in str(value).split("\n") if v]


def _unwrap_internal(expr: str) -> str:
    """DuckDB's compression calls (`__internal_compress_string_uinteger(#0)`) and the
    casts around them are its own business: keep their argument."""
    while True:
        m = _INTERNAL_CALL.search(expr)
        if m is None:
            break
        depth, j = 1, m.end()
        while j < len(expr) and depth:
            depth += {"(": 1, ")": -1}.get(expr[j], 0)
            j += 1
        inner = expr[m.end() : j - 1]
        # a second argument (a constant offset) is part of the compression
        top, depth2 = [], 0
        for k, ch in enumerate(inner):
            depth2 += {"(": 1, ")": -1}.get(ch, 0)
            if ch == "," and depth2 == 0:
                top.append(k)
        if top:
            inner = inner[: top[0]]
        expr = expr[: m.start()] + inner + expr[j:]
    return _CAST.sub(r"\1", expr).replace("count_star()", "count(*)")


def _conjuncts(expr: str) -> list[str]:
    """Top-level AND terms of a predicate."""
    out, depth, start = [], 0, 0
    upper = expr.upper()
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "'":
            i = expr.find("'", i + 1)
            if i < 0:
                break
        elif depth == 0 and upper.startswith(" AND ", i):
            out.append(expr[start:i])
            start = i + 5
            i += 4
        i += 1
    out.append(expr[start:])
    terms = []
    for t in (t.strip() for t in out):
        if t.startswith("(") and t.endswith(")") and _balanced(t[1:-1]):
            inner = _conjuncts(t[1:-1])
            if len(inner) > 1:
                terms.extend(inner)
                continue
        terms.append(t)
    return [t for t in terms if t]


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def user_predicate(terms: list[str]) -> str | None:
    """The conjunction PostgreSQL would print, without the replica's version terms."""
    kept = [
        _unwrap_internal(t)
        for t in terms
        if not _VERSION_COLUMN.search(t) and not t.startswith("optional: Dynamic Filter")
    ]
    if not kept:
        return None
    kept = [
        k if k.startswith("(") and k.endswith(")") and _balanced(k[1:-1]) else f"({k})"
        for k in kept
    ]
    return kept[0] if len(kept) == 1 else "(" + " AND ".join(kept) + ")"


def _resolve(expr: str, projections: list[str] | None) -> str:
    """`#k` (DuckDB's reference to its input's k-th column) as that column's expression,
    when the input is a projection that names it."""
    expr = _unwrap_internal(expr)
    if not projections:
        return expr

    def sub(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return _unwrap_internal(projections[k]) if k < len(projections) else m.group(0)

    return re.sub(r"#(\d+)", sub, expr)


def _estimate(info: dict[str, Any]) -> float:
    try:
        return float(info.get("Estimated Cardinality", 0) or 0)
    except ValueError:
        return 0.0


def from_duckdb(op: dict[str, Any], relation: RelationName) -> PlanNode:
    """DuckDB's plan (a node of `EXPLAIN (FORMAT JSON)` or of its JSON profile) as
    PostgreSQL's nodes. RESULT_COLLECTOR and EXPLAIN_ANALYZE wrappers are skipped."""
    name = op.get("name") or op.get("operator_type") or op.get("type") or ""
    kids = op.get("children") or []
    if name in ("RESULT_COLLECTOR", "EXPLAIN_ANALYZE", "EXPLAIN", "QUERY") and len(kids) == 1:
        return from_duckdb(kids[0], relation)
    node = _convert(op, relation)
    assert node is not None
    return node


def _info(op: dict[str, Any]) -> dict[str, Any]:
    info = op.get("extra_info") or {}
    return info if isinstance(info, dict) else {}


def _projections(op: dict[str, Any] | None) -> list[str] | None:
    """The expressions a PROJECTION (or a scan) outputs, by position."""
    if op is None:
        return None
    name = op.get("name") or op.get("operator_type") or op.get("type") or ""
    info = _info(op)
    if name == "PROJECTION":
        inner = op.get("children") or []
        below = _projections(inner[0]) if inner else None
        return [_resolve(p, below) for p in _list(info.get("Projections"))]
    if name in ("SEQ_SCAN", "TABLE_SCAN"):
        return _list(info.get("Projections")) or None
    kids = op.get("children") or []
    if name in ("FILTER", "ORDER_BY", "TOP_N", "LIMIT", "STREAMING_LIMIT") and kids:
        return _projections(kids[0])
    if name == "HASH_JOIN" and len(kids) == 2:
        left = _projections(kids[0])
        if str(info.get("Join Type", "")).upper() in ("SEMI", "ANTI", "MARK"):
            return left
        right = _projections(kids[1])
        return left + right if left is not None and right is not None else None
    return None


def _actual(op: dict[str, Any], kids: list[PlanNode]) -> tuple[float, float, float] | None:
    if "operator_timing" not in op and "timing" not in op:
        return None
    own = float(op.get("operator_timing", op.get("timing", 0.0)) or 0.0) * 1000.0
    rows = op.get("operator_cardinality", op.get("intermediate_rows", 0)) or 0
    below = sum(k.actual[1] for k in kids if k.actual is not None)
    return (below if kids else 0.0, below + own, float(rows))


def _convert(op: dict[str, Any], relation: RelationName) -> PlanNode:
    name = op.get("name") or op.get("operator_type") or op.get("type") or ""
    info = _info(op)
    raw_kids = op.get("children") or []
    first = raw_kids[0] if raw_kids else None
    below = _projections(first)
    kids = [from_duckdb(k, relation) for k in raw_kids]
    est = _estimate(info)
    actual = _actual(op, kids)

    def make(node_type: str, label: str = "", **kw: Any) -> PlanNode:
        n = PlanNode(node_type, label, rows=est, **kw)
        n.children = kids
        n.actual = actual
        return n

    if name in ("PROJECTION",) and len(kids) == 1:
        child = kids[0]
        child.output = [_resolve(p, below) for p in _list(info.get("Projections"))]
        if actual is not None and child.actual is not None:
            child.actual = (child.actual[0], actual[1], child.actual[2])
        return child
    if name == "FILTER" and len(kids) == 1:
        child = kids[0]
        pred = user_predicate(_conjuncts(_resolve(str(info.get("Expression", "")), below)))
        if pred is not None:
            child.details.append(("Filter", pred))
        child.rows = est or child.rows
        if actual is not None and child.actual is not None:
            child.actual = (child.actual[0], actual[1], actual[2])
        return child
    if name in ("SEQ_SCAN", "TABLE_SCAN", "READ_PARQUET", "ARROW_SCAN") and "Table" in info:
        named = relation(str(info["Table"]))
        schema, rel = named if named is not None else (None, str(info["Table"]))
        n = make("Seq Scan", relation=rel, schema=schema, alias=rel)
        pred = user_predicate([t for f in _list(info.get("Filters")) for t in _conjuncts(f)])
        if pred is not None:
            n.details.append(("Filter", pred))
        n.output = [p for p in _list(info.get("Projections")) if not _VERSION_COLUMN.search(p)]
        return n
    if name in ("SEQ_SCAN", "TABLE_SCAN", "GENERATE_SERIES", "RANGE") or "Function" in info:
        fn = str(info.get("Function", info.get("Text", name))).lower()
        if fn in ("arrow_scan", "arrow_scan_dumb", "arrow_scan_pandas"):
            return make("Seq Scan", relation="*registered*", alias="*registered*")
        return make("Function Scan", relation=fn, alias=fn)
    if name in (
        "HASH_JOIN",
        "NESTED_LOOP_JOIN",
        "BLOCKWISE_NL_JOIN",
        "PIECEWISE_MERGE_JOIN",
        "DELIM_JOIN",
        "LEFT_DELIM_JOIN",
        "RIGHT_DELIM_JOIN",
        "IE_JOIN",
        "CROSS_PRODUCT",
        "POSITIONAL_JOIN",
        "ASOF_JOIN",
    ):
        jt = _JOIN_TYPES.get(str(info.get("Join Type", "INNER")).upper(), "Inner")
        sides = [_only_relation(k) for k in kids[:2]]
        cols = [_projections(k) for k in raw_kids[:2]] + [None, None]
        conds = [
            _qualify(_unwrap_internal(c), *sides, *cols[:2]) for c in _list(info.get("Conditions"))
        ]
        cond = "(" + " AND ".join(f"({c})" if len(conds) > 1 else c for c in conds) + ")"
        if name in ("HASH_JOIN", "DELIM_JOIN", "LEFT_DELIM_JOIN", "RIGHT_DELIM_JOIN"):
            n = make("Hash Join", "Hash Join" if jt == "Inner" else f"Hash {jt} Join")
            n.props.append(("Join Type", jt))
            if conds:
                n.details.append(("Hash Cond", cond))
            if len(kids) == 2:
                inner = kids[1]
                hashed = PlanNode(
                    "Hash",
                    rows=inner.rows,
                    width=inner.width,
                    cost=inner.cost,
                    startup=inner.cost,
                    children=[inner],
                )
                if inner.actual is not None:
                    hashed.actual = (inner.actual[1], inner.actual[1], inner.actual[2])
                n.children = [kids[0], hashed]
            return n
        if name == "PIECEWISE_MERGE_JOIN":
            n = make("Merge Join", "Merge Join" if jt == "Inner" else f"Merge {jt} Join")
            n.props.append(("Join Type", jt))
            if conds:
                n.details.append(("Merge Cond", cond))
            return n
        n = make("Nested Loop", "Nested Loop" if jt == "Inner" else f"Nested Loop {jt} Join")
        if name == "CROSS_PRODUCT" and not est and len(kids) == 2:
            n.rows = kids[0].rows * kids[1].rows
        n.props.append(("Join Type", jt))
        if conds:
            n.details.append(("Join Filter", cond))
        return n
    if name in ("HASH_GROUP_BY", "PERFECT_HASH_GROUP_BY", "PARTITIONED_AGGREGATE"):
        n = make("Aggregate", "HashAggregate")
        n.props += [("Strategy", "Hashed"), ("Partial Mode", "Simple")]
        keys = [_resolve(g, below) for g in _list(info.get("Groups"))]
        if keys:
            n.details.append(("Group Key", keys))
        return n
    if name in ("UNGROUPED_AGGREGATE", "SIMPLE_AGGREGATE", "STREAMING_AGGREGATE"):
        n = make("Aggregate")
        n.props += [("Strategy", "Plain"), ("Partial Mode", "Simple")]
        return n
    if name in ("ORDER_BY",):
        n = make("Sort")
        n.details.append(("Sort Key", _sort_keys(info.get("Order By"), below)))
        return n
    if name == "TOP_N":
        sort = PlanNode("Sort", rows=_estimate(info), children=kids)
        sort.details.append(("Sort Key", _sort_keys(info.get("Order By"), below)))
        if actual is not None:
            sort.actual = actual
        n = PlanNode("Limit", rows=est, children=[sort], actual=actual)
        return n
    if name in ("LIMIT", "STREAMING_LIMIT", "LIMIT_PERCENT"):
        return make("Limit")
    if name == "UNION":
        return make("Append")
    if name in ("WINDOW", "STREAMING_WINDOW"):
        return make("WindowAgg")
    if name in ("DUMMY_SCAN", "EMPTY_RESULT"):
        n = make("Result")
        n.rows = 1.0 if name == "DUMMY_SCAN" else 0.0
        if name == "EMPTY_RESULT":
            n.details.append(("One-Time Filter", "false"))
        return n
    if name == "COLUMN_DATA_SCAN":
        return make("Values Scan", relation='"*VALUES*"', alias='"*VALUES*"')
    if name in ("CTE", "MATERIALIZED_CTE") and len(kids) == 2:
        # PostgreSQL: the main plan, the CTE's plan as its subplan "CTE name"
        cte, main = kids
        label = str(info.get("CTE Name", "cte"))
        index = str(info.get("Table Index", ""))
        for n in _walk(main):
            if n.node_type == "CTE Scan" and n.relation == index:
                n.relation = n.alias = label
        cte.relationship, cte.subplan = "InitPlan", f"CTE {label}"
        main.children.insert(0, cte)
        return main
    if name == "CTE_SCAN":
        index = str(info.get("CTE Index", "cte"))
        return make("CTE Scan", relation=index, alias=index)
    if name in ("RECURSIVE_CTE", "REC_CTE"):
        return make("Recursive Union")
    if name in ("REC_CTE_SCAN", "RECURSIVE_CTE_SCAN"):
        return make("WorkTable Scan")
    if name in ("UNNEST",):
        return make("ProjectSet")
    if name in ("INSERT", "UPDATE", "DELETE"):
        return make("ModifyTable", name.title())
    return make(name.replace("_", " ").title())


def rename_columns(root: PlanNode, names: dict[str, str]) -> PlanNode:
    """Columns stored under internal names (a materialized view's `c6`) as the user's."""
    if not names:
        return root

    def sub(text: str) -> str:
        return _INTERNAL_NAME.sub(lambda m: names.get(m.group(1), m.group(1)), text)

    for n in _walk(root):
        n.output = [sub(o) for o in n.output]
        n.details = [
            (k, [sub(x) for x in v] if isinstance(v, list) else sub(v) if isinstance(v, str) else v)
            for k, v in n.details
        ]
    return root


def _only_relation(n: PlanNode) -> str | None:
    """The one relation a subtree scans, if it scans one."""
    rels = {k.alias or k.relation for k in _walk(n) if k.node_type == "Seq Scan"}
    return rels.pop() if len(rels) == 1 else None


_COMPARISON = re.compile(r"^(#?\w+) (=|<|>|<=|>=|<>|!=|IS NOT DISTINCT FROM) (#?\w+)$")


def _qualify(
    cond: str,
    left: str | None,
    right: str | None,
    left_cols: list[str] | None = None,
    right_cols: list[str] | None = None,
) -> str:
    """`a = #0` as PostgreSQL prints a join condition: `t.a = u.a` (`#k` is the k-th
    column of that side)."""
    m = _COMPARISON.match(cond)
    if m is None:
        return cond
    a, op, b = _resolve(m.group(1), left_cols), m.group(2), _resolve(m.group(3), right_cols)
    if left is not None and re.fullmatch(r"\w+", a):
        a = f"{left}.{a}"
    if right is not None and re.fullmatch(r"\w+", b):
        b = f"{right}.{b}"
    return f"{a} {op} {b}"


def _sort_keys(value: Any, below: list[str] | None) -> list[str]:
    keys = []
    for k in _list(value):
        for part in _split_top(k):
            part = _resolve(part.strip(), below)
            part = re.sub(r" ASC( NULLS LAST)?$", "", part)
            part = re.sub(r" DESC NULLS FIRST$", " DESC", part)
            keys.append(part)
    return keys


def _split_top(s: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return out


def finish(node: PlanNode) -> PlanNode:
    """Costs (cumulative estimated rows), widths, and the children's relationships."""
    for k in node.children:
        finish(k)
    node.cost = node.rows + sum(k.cost for k in node.children)
    if node.node_type in ("Sort", "Aggregate", "Hash"):  # blocking: all input first
        node.startup = sum(k.cost for k in node.children)
    if node.node_type == "Hash" and node.children:
        node.rows = node.children[0].rows
        node.cost = node.startup = node.children[0].cost
    if not node.width:
        cols = (
            len(node.output)
            if node.output
            else (node.children[0].width // 4 if node.children else 1)
        )
        node.width = 4 * max(cols, 1)
    if node.node_type in ("Append",):
        for k in node.children:
            k.relationship = "Member"
    else:
        plain = [k for k in node.children if k.subplan is None]
        for k, rel in zip(plain, ("Outer", "Inner"), strict=False):
            k.relationship = rel
    return node


def modify_node(
    kind: str, table: str, schema: str, child: PlanNode | None, alias: str | None = None
) -> PlanNode:
    """INSERT/UPDATE/DELETE on a table over the plan of the rows it writes."""
    n = PlanNode(
        "ModifyTable", f"{kind} on {table}", relation=table, schema=schema, alias=alias or table
    )
    n.props.append(("Operation", kind))
    if child is not None:
        n.children = [child]
    return n


# -- text ---------------------------------------------------------------------------------
def _label(n: PlanNode, opts: Options) -> str:
    if n.node_type == "ModifyTable":
        op = dict(n.props).get("Operation", "")
        rel = f"{n.schema}.{n.relation}" if opts.verbose and n.schema else n.relation
        return f"{op} on {rel}" + (f" {n.alias}" if n.alias and n.alias != n.relation else "")
    label = n.label or n.node_type
    if n.relation is not None and n.node_type in (
        "Seq Scan",
        "Function Scan",
        "Values Scan",
        "CTE Scan",
        "Scan",
    ):
        rel = f"{n.schema}.{n.relation}" if opts.verbose and n.schema else n.relation
        label += f" on {rel}"
        if n.alias and n.alias != n.relation:
            label += f" {n.alias}"
    return label


def _head(n: PlanNode, opts: Options) -> str:
    s = _label(n, opts)
    rows, width = (0, 0) if n.node_type == "ModifyTable" else (n.rows, n.width)
    if opts.costs:
        s += f"  (cost={n.startup:.2f}..{n.cost:.2f} rows={rows:.0f} width={width})"
    if opts.analyze:
        a = n.actual or (0.0, 0.0, 0.0)
        arows = 0 if n.node_type == "ModifyTable" else a[2]
        if opts.timing:
            s += f" (actual time={a[0]:.3f}..{a[1]:.3f} rows={arows:.0f} loops=1)"
        else:
            s += f" (actual rows={arows:.0f} loops=1)"
    return s


def _text(n: PlanNode, opts: Options, indent: int, out: list[str]) -> None:
    if n.subplan is not None:
        out.append(" " * (indent * 2) + n.subplan)
        indent += 1
    if indent:
        out.append(" " * (indent * 2) + "->  " + _head(n, opts))
        indent += 2
    else:
        out.append(_head(n, opts))
    pad = " " * ((indent + 1) * 2)
    if opts.verbose and n.output:
        out.append(f"{pad}Output: {', '.join(n.output)}")
    for key, value in n.details:
        text = ", ".join(value) if isinstance(value, list) else str(value)
        out.append(f"{pad}{key}: {text}")
    for k in n.children:
        _text(k, opts, indent + 1, out)


# -- structured formats ---------------------------------------------------------------------
class Num(str):
    """A number as PostgreSQL prints it in a structured format (`0.00`, `1.234`)."""


_NUM_MARK = "\u0001num:"
_NUM_JSON = re.compile(r'"\\u0001num:([^"]*)"')


def _json(doc: Any) -> str:
    """json.dumps with Num printed as a bare number with its digits (PostgreSQL's)."""

    def mark(o: Any) -> Any:
        if isinstance(o, Num):
            return _NUM_MARK + str(o)
        if isinstance(o, dict):
            return {k: mark(v) for k, v in o.items()}
        if isinstance(o, list):
            return [mark(v) for v in o]
        return o

    return _NUM_JSON.sub(r"\1", json.dumps(mark(doc), indent=2))


def _props(n: PlanNode, opts: Options) -> dict[str, Any]:
    d: dict[str, Any] = {"Node Type": n.node_type}
    for key, value in n.props:
        d[key] = value
    if n.relationship is not None:
        d["Parent Relationship"] = n.relationship
    if n.subplan is not None:
        d["Subplan Name"] = n.subplan
    d["Parallel Aware"] = False
    d["Async Capable"] = False
    if n.relation is not None:
        d["Relation Name" if n.node_type != "Function Scan" else "Function Name"] = n.relation
        if opts.verbose and n.schema:
            d["Schema"] = n.schema
        d["Alias"] = n.alias or n.relation
    if opts.costs:
        d["Startup Cost"] = Num(f"{n.startup:.2f}")
        d["Total Cost"] = Num(f"{n.cost:.2f}")
        d["Plan Rows"] = 0 if n.node_type == "ModifyTable" else int(n.rows)
        d["Plan Width"] = 0 if n.node_type == "ModifyTable" else n.width
    if opts.analyze:
        a = n.actual or (0.0, 0.0, 0.0)
        if opts.timing:
            d["Actual Startup Time"] = Num(f"{a[0]:.3f}")
            d["Actual Total Time"] = Num(f"{a[1]:.3f}")
        d["Actual Rows"] = 0 if n.node_type == "ModifyTable" else int(a[2])
        d["Actual Loops"] = 1
    if opts.verbose and n.output:
        d["Output"] = list(n.output)
    for key, value in n.details:
        d[key] = value
    if n.children:
        d["Plans"] = [_props(k, opts) for k in n.children]
    return d


def _document(
    root: PlanNode, opts: Options, planning_ms: float | None, execution_ms: float | None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"Plan": _props(root, opts)}
    if planning_ms is not None and opts.show_summary:
        doc["Planning Time"] = Num(f"{planning_ms:.3f}")
    if opts.analyze:
        doc["Triggers"] = []
    if execution_ms is not None and opts.show_summary and opts.analyze:
        doc["Execution Time"] = Num(f"{execution_ms:.3f}")
    return doc


def _yaml_scalar(v: Any) -> str:
    if isinstance(v, Num):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return f"{v:.2f}" if isinstance(v, float) else str(v)
    return json.dumps(str(v))


def _yaml(d: dict[str, Any], indent: int, out: list[str], first_prefix: str) -> None:
    pad = " " * indent
    for i, (k, v) in enumerate(d.items()):
        lead = first_prefix if i == 0 else pad
        if isinstance(v, dict):
            out.append(f"{lead}{k}: ")
            _yaml(v, indent + 2, out, " " * (indent + 2))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out.append(f"{lead}{k}: ")
            for item in v:
                _yaml(item, indent + 4, out, pad + "  - ")
        elif isinstance(v, list):
            out.append(f"{lead}{k}: ")
            out.extend(f"{pad}  - {_yaml_scalar(x)}" for x in v)
        else:
            out.append(f"{lead}{k}: {_yaml_scalar(v)}")


def _xml(d: dict[str, Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for k, v in d.items():
        tag = k.replace(" ", "-")
        if isinstance(v, dict):
            out.append(f"{pad}<{tag}>")
            _xml(v, indent + 2, out)
            out.append(f"{pad}</{tag}>")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out.append(f"{pad}<{tag}>")
            for item in v:
                out.append(f"{pad}  <Plan>")
                _xml(item, indent + 4, out)
                out.append(f"{pad}  </Plan>")
            out.append(f"{pad}</{tag}>")
        elif isinstance(v, list):
            out.append(f"{pad}<{tag}>")
            out.extend(f"{pad}  <Item>{_xml_text(x)}</Item>" for x in v)
            out.append(f"{pad}</{tag}>")
        else:
            out.append(f"{pad}<{tag}>{_xml_text(v)}</{tag}>")


def _xml_text(v: Any) -> str:
    s = _yaml_scalar(v)
    if s.startswith('"'):
        s = json.loads(s)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render(
    root: PlanNode,
    opts: Options,
    planning_ms: float | None = None,
    execution_ms: float | None = None,
) -> list[str]:
    """EXPLAIN's rows: one per line in text format, one document otherwise."""
    finish(root)
    if opts.format == "text":
        out: list[str] = []
        _text(root, opts, 0, out)
        if planning_ms is not None and opts.show_summary:
            out.append(f"Planning Time: {planning_ms:.3f} ms")
        if execution_ms is not None and opts.show_summary and opts.analyze:
            out.append(f"Execution Time: {execution_ms:.3f} ms")
        return out
    doc = _document(root, opts, planning_ms, execution_ms)
    if opts.format == "json":
        return [_json([doc])]
    if opts.format == "yaml":
        lines: list[str] = []
        _yaml(doc, 2, lines, "- ")
        return ["\n".join(lines)]
    lines = ['<explain xmlns="http://www.postgresql.org/2009/explain">', "  <Query>"]
    _xml(doc, 4, lines)
    lines += ["  </Query>", "</explain>"]
    return ["\n".join(lines)]


# -- a materialized view's incremental plan --------------------------------------------------
OperatorInfo = Callable[[Any], "tuple[int, str, tuple[str, ...]] | None"]  # node -> (i, rule,
# state tables)


def _readable(expr: str, names: dict[str, str]) -> str:
    """An IR expression with internal column names (`c12`) as the user's (`t.a`);
    string literals are left alone."""
    parts = expr.split("'")
    for i in range(0, len(parts), 2):
        parts[i] = _INTERNAL_NAME.sub(lambda m: names.get(m.group(1), m.group(1)), parts[i])
    return "'".join(parts)


def _column_names(root: Any, output: tuple[str, ...], relation: Callable[[int], str]) -> dict:
    from headwater.planner import ir

    names: dict[str, str] = {}
    for n in ir.walk(root):
        if isinstance(n, ir.Scan):
            rel = relation(n.table)
            for internal, src in zip(n.names, n.source, strict=False):
                names.setdefault(internal, f"{rel}.{src}")
        elif isinstance(n, ir.Project):
            for out, expr in n.exprs:
                names.setdefault(out, _readable(expr, names))
        elif isinstance(n, ir.Aggregate):
            for out, expr in n.group:
                names.setdefault(out, _readable(expr, names))
            for a in n.aggs:
                names.setdefault(a.name, _agg_text(a, names))
        elif isinstance(n, ir.Window):
            for out, call in n.calls:
                names.setdefault(out, _readable(call, names))
    for internal, user in zip(root.columns, output, strict=False):
        if internal not in names or _INTERNAL_NAME.fullmatch(names[internal]):
            names[internal] = user
    return names


def _agg_text(a: Any, names: dict[str, str]) -> str:
    arg = "*" if a.arg is None else _readable(a.arg, names)
    extra = "".join(", " + _readable(e, names) for e in a.extra)
    text = f"{a.func}({'DISTINCT ' if a.distinct else ''}{arg}{extra})"
    if a.filter is not None:
        text += f" FILTER (WHERE {_readable(a.filter, names)})"
    return text


def incremental_tree(
    root: Any,
    output: tuple[str, ...],
    operator: OperatorInfo,
    relation: Callable[[int], str],
) -> PlanNode:
    """A lowered plan (planner/incremental.py) as a tree of nodes: each operator with
    its delta rule (engine/rules/) and the state tables it keeps."""
    from headwater.planner import ir

    names = _column_names(root, output, relation)

    def r(e: str) -> str:
        return _readable(e, names)

    def node(n: Any) -> PlanNode:
        kids = [node(k) for k in n.children()]
        details: list[tuple[str, Any]] = []
        relation_name = None
        if isinstance(n, ir.Scan):
            kind, relation_name = "Scan", relation(n.table)
            details.append(("Changes", "the relation's change rows of each epoch"))
        elif isinstance(n, ir.Values):
            kind = "Values"
            details.append(("Rows", len(n.rows)))
        elif isinstance(n, ir.Filter):
            kind = "Filter"
            details.append(("Predicate", r(n.predicate)))
        elif isinstance(n, ir.Project):
            kind = "Project"
            details.append(("Output", [r(e) for _, e in n.exprs]))
        elif isinstance(n, ir.Join):
            kind = f"{n.kind.title()} Join"
            if n.left_keys:
                eq = " IS NOT DISTINCT FROM " if n.null_safe else " = "
                conds = [
                    f"{r(a)}{eq}{r(b)}" for a, b in zip(n.left_keys, n.right_keys, strict=True)
                ]
                details.append(("Join Keys", conds))
            if n.residual:
                details.append(("Join Filter", r(n.residual)))
        elif isinstance(n, ir.Aggregate):
            kind = "Aggregate"
            if n.group:
                details.append(("Group Key", [r(e) for _, e in n.group]))
            if n.aggs:
                details.append(("Aggregates", [_agg_text(a, names) for a in n.aggs]))
        elif isinstance(n, ir.Distinct):
            kind = "Distinct"
        elif isinstance(n, ir.SetOp):
            kind = {"union": "Union", "intersect": "Intersect", "except": "Except"}[n.op]
            kind += " All" if n.all else ""
        elif isinstance(n, ir.Difference):
            kind = "Difference"
        elif isinstance(n, ir.Window):
            kind = "Window"
            details.append(("Window Functions", [r(c) for _, c in n.calls]))
            details.append(("Partition Key", [r(e) for e in n.partition] or "none"))
            if n.keep:
                details.append(("Keep", r(n.keep)))
        elif isinstance(n, ir.Recursive):
            kind = "Recursive Union"  # PostgreSQL's name for WITH RECURSIVE's node
            details.append(("Union", "UNION ALL" if n.all else "UNION"))
            details.append(("Fixpoint", "recomputed at each epoch its tables changed"))
        else:
            kind = type(n).__name__
        info = operator(n)
        if info is not None:
            i, rule, states = info
            details.append(("Operator", i))
            details.append(("Rule", f"engine/rules/{rule.split('.')[0]}.py {rule}"))
            details.append(("State", list(states) if states else "none"))
        out = PlanNode(
            kind, relation=relation_name, alias=relation_name, details=details, children=kids
        )
        return out

    return node(root)
