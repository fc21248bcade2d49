"""Whole-query SQL for a plan (DuckDB), used to type every operator's output.

`full_sql(node, scan)` is the plan evaluated from scratch, what REFRESH would run;
the engine asks DuckDB to DESCRIBE it over empty tables to learn the type of every
column of every operator, so that change tables and state tables are typed exactly
as the query's result would be (NULL paddings of outer joins included).
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.planner.ir import (
    AggCall,
    Aggregate,
    Difference,
    Distinct,
    Filter,
    Join,
    Node,
    Project,
    Scan,
    SemiJoin,
    SetOp,
    Values,
)


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def cols(node: Node, prefix: str = "") -> str:
    return ", ".join(prefix + c for c in node.columns)


def agg_sql(call: AggCall) -> str:
    """The aggregate call as SQL over the input's internal column names."""
    d = "DISTINCT " if call.distinct else ""
    if call.func == "count" and call.arg is None:
        body = "count(*)"
    elif call.func == "string_agg":
        order = f" ORDER BY {', '.join(call.order)}" if call.order else ""
        body = f"string_agg({d}{call.arg}, {call.extra[0]}{order})"
    elif call.func == "avg":
        body = f"avg({d}{call.arg})"
    else:
        body = f"{call.func}({d}{call.arg})"
    if call.filter is not None:
        body += f" FILTER (WHERE {call.filter})"
    return body


def join_condition(
    lkeys: tuple[str, ...], rkeys: tuple[str, ...], residual: str | None, null_safe: bool
) -> str:
    op = " IS NOT DISTINCT FROM " if null_safe else " = "
    parts = [f"({a}){op}({b})" for a, b in zip(lkeys, rkeys, strict=True)]
    if residual:
        parts.append(f"({residual})")
    return " AND ".join(parts) or "true"


def full_sql(node: Node, scan: Callable[[Scan], str]) -> str:
    """A subquery computing `node` from scratch; `scan(node)` names a Scan's rows."""
    if isinstance(node, Scan):
        sel = ", ".join(f"{q(s)} AS {n}" for s, n in zip(node.source, node.names, strict=True))
        return f"(SELECT {sel or 'NULL AS _z'} FROM {scan(node)})"
    if isinstance(node, Values):
        if not node.names:
            return "(SELECT NULL AS _z)"
        rows = ", ".join("(" + ", ".join(r) + ")" for r in node.rows)
        return f"(SELECT * FROM (VALUES {rows}) AS _v({cols(node)}))"
    if isinstance(node, Filter):
        return f"(SELECT * FROM {full_sql(node.input, scan)} AS _i WHERE {node.predicate})"
    if isinstance(node, Project):
        sel = ", ".join(f"{e} AS {n}" for n, e in node.exprs)
        return f"(SELECT {sel or 'NULL AS _z'} FROM {full_sql(node.input, scan)} AS _i)"
    if isinstance(node, Join):
        kind = {
            "inner": "JOIN",
            "cross": "JOIN",
            "left": "LEFT JOIN",
            "right": "RIGHT JOIN",
            "full": "FULL JOIN",
        }[node.kind]
        on = join_condition(node.left_keys, node.right_keys, node.residual, node.null_safe)
        return (
            f"(SELECT {cols(node) or 'NULL AS _z'} FROM {full_sql(node.left, scan)} AS _l "
            f"{kind} {full_sql(node.right, scan)} AS _r ON {on})"
        )
    if isinstance(node, SemiJoin):
        on = join_condition(node.left_keys, node.right_keys, node.residual, False)
        neg = "NOT " if node.anti else ""
        return (
            f"(SELECT * FROM {full_sql(node.left, scan)} AS _l WHERE {neg}EXISTS "
            f"(SELECT 1 FROM {full_sql(node.right, scan)} AS _r WHERE {on}))"
        )
    if isinstance(node, Aggregate):
        sel = [f"{e} AS {n}" for n, e in node.group] + [
            f"{agg_sql(a)} AS {a.name}" for a in node.aggs
        ]
        group = f" GROUP BY {', '.join(e for _, e in node.group)}" if node.group else ""
        src = full_sql(node.input, scan)
        return f"(SELECT {', '.join(sel) or 'NULL AS _z'} FROM {src} AS _i{group})"
    if isinstance(node, Distinct):
        return f"(SELECT DISTINCT * FROM {full_sql(node.input, scan)} AS _i)"
    if isinstance(node, SetOp):
        op = {"union": "UNION", "intersect": "INTERSECT", "except": "EXCEPT"}[node.op]
        op += " ALL" if node.all else ""
        left = ", ".join(
            f"{a} AS {b}" for a, b in zip(node.left.columns, node.columns, strict=True)
        )
        return (
            f"(SELECT {left} FROM {full_sql(node.left, scan)} AS _l {op} "
            f"SELECT {cols(node.right)} FROM {full_sql(node.right, scan)} AS _r)"
        )
    if isinstance(node, Difference):
        return (
            f"(SELECT * FROM {full_sql(node.left, scan)} AS _l EXCEPT ALL "
            f"SELECT * FROM {full_sql(node.right, scan)} AS _r)"
        )
    raise TypeError(f"no SQL for {type(node).__name__}")
