"""A plan (planner/ir.py) rendered as one DuckDB query, evaluated from scratch.

`full_sql(node, scan)` is a node's rows computed from its inputs, `scan(s)` naming the
rows a Scan reads. Two callers render the same IR:

- the engine (engine/delta.py) asks DuckDB to DESCRIBE a node over empty tables to
  learn the type of every column of every operator, so that change tables and state
  tables are typed exactly as the query's result would be (NULL paddings of outer
  joins included);
- the serving path (planner/serving.py) runs `plan_sql(plan, scan)`, the whole
  SELECT with its output names and its top-level ORDER BY / LIMIT / OFFSET.

`pg_aggregates` renders aggregate calls as plain reads run them (planner/pg_compat.py:
sum and avg with PostgreSQL's result types); the engine keeps DuckDB's own, but for avg,
whose type (numeric, not double) and digits the views must share with reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from headwater.catalog.identifiers import quote as q
from headwater.planner import pg_compat
from headwater.planner.ir import (
    RECURSIVE_OID,
    STATISTICS_AGGS,
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
    Values,
    Window,
)


def cols(node: Node, prefix: str = "") -> str:
    return ", ".join(prefix + c for c in node.columns)


def agg_sql(call: AggCall, pg_aggregates: bool = False) -> str:
    """The aggregate call as SQL over the input's internal column names; with
    `pg_aggregates`, as planner/pg_compat.py translates it for plain reads."""
    d = "DISTINCT " if call.distinct else ""
    order = f" ORDER BY {', '.join(call.order)}" if call.order else ""
    filt = f" FILTER (WHERE {call.filter})" if call.filter is not None else ""
    if call.func in ("array_agg", *JSON_AGGS, "mode"):
        return _collection_agg(call, d, order, filt)
    if call.func in STATISTICS_AGGS or (
        pg_aggregates and call.func in ("sum", "avg") and call.arg is not None
    ):  # (sum, avg: hw_sum/hw_avg however the operand was translated, `hw_text(t) || 'x'`)
        return _as_read(call)
    if call.func == "count" and call.arg is None:
        body = "count(*)"
    elif call.func == "string_agg":
        body = f"string_agg({d}{call.arg}, {call.extra[0]}{order})"
    elif call.func == "avg" and not pg_aggregates:
        # PostgreSQL's avg (pg_compat's hw_avg macro): an exact numeric of integers and
        # numerics, as reads give it; a macro takes no FILTER clause
        arg = call.arg if call.filter is None else f"CASE WHEN {call.filter} THEN {call.arg} END"
        return f"hw_avg{'_distinct' if call.distinct else ''}({arg})"
    elif call.func == "avg":
        body = f"avg({d}{call.arg})"
    elif call.func == "percentile_cont":  # PostgreSQL's: over float8, its interpolation
        x = f"CAST({call.arg} AS DOUBLE)"
        keep = f"{x} IS NOT NULL" + (f" AND ({call.filter})" if call.filter is not None else "")
        by = call.order[0] if call.order else x
        return f"hw_percentile_lerp(list({x} ORDER BY {by}) FILTER (WHERE {keep}), {call.extra[0]})"
    elif call.func == "percentile_disc":  # PostgreSQL's: the first value at the fraction
        body = f"quantile_disc({call.arg}, {call.extra[0]})"
    else:
        body = f"{call.func}({d}{call.arg})"
    body += filt
    if pg_aggregates:
        body = pg_compat.translate_sql(f"SELECT {body}").removeprefix("SELECT ")
    return body


def _as_read(call: AggCall) -> str:
    """The call as planner/pg_compat.py translates it for plain reads (stddev of
    integers exact, corr NULL on a zero variance, ...). Its operands are translated
    already: placeholders stand for them in the translation."""
    operands = [call.arg, *call.extra, call.filter]
    args = ", ".join(f"__hwarg{i}" for i in range(1 + len(call.extra)))
    d = "DISTINCT " if call.distinct else ""
    filt = f" FILTER (WHERE __hwarg{len(operands) - 1})" if call.filter is not None else ""
    sql = pg_compat.translate_sql(f"SELECT {call.func}({d}{args}){filt}")
    return _PLACEHOLDER.sub(lambda m: f"({operands[int(m[1])]})", sql.removeprefix("SELECT "))


_PLACEHOLDER = re.compile(r"\b__hwarg(\d+)\b")


# json_agg & co. as planner/functions/json.py renders them for plain reads: DuckDB's
# list() of the values (or of one-key objects), its JSON text reformatted as
# PostgreSQL prints the aggregate (the function named here)
JSON_AGGS = {
    "json_agg": "hw_json_agg_text",
    "jsonb_agg": "hw_jsonb_in",
    "json_object_agg": "hw_json_object_agg_text",
    "jsonb_object_agg": "hw_jsonb_in",
}


# an expression of type json, as the translation writes one: a cast to json at its end
_JSON_VALUE = re.compile(r"AS json\)\s*$", re.IGNORECASE)


def _collection_agg(call: AggCall, d: str, order: str, filt: str) -> str:
    """array_agg, json_agg & co. and mode() as DuckDB SQL giving PostgreSQL's values
    (array_agg keeps NULLs, as DuckDB's list(); all give NULL on no rows)."""
    if call.func == "array_agg":
        return f"list({d}{call.arg}{order}){filt}"
    if call.func == "mode":
        # DuckDB's mode() picks, of equally frequent values, the one it met first:
        # with its rows in the call's order, PostgreSQL's pick (NULLs skipped)
        return f"mode({call.arg}{order}){filt}"
    if call.func == "json_agg" and _JSON_VALUE.search(call.arg or ""):
        # json values (json_build_object(...), x::json) keep their text, ", " between
        # them, as reads have it (planner/functions/json.py _json_values_agg)
        texts = f"list(coalesce(CAST({call.arg} AS VARCHAR), 'null'){order}){filt}"
        return f"hw_json_values_agg({texts})"
    if call.func in ("json_object_agg", "jsonb_object_agg"):
        pair = f"json_object(CAST({call.arg} AS VARCHAR), {call.extra[0]})"
        listed = f"list({d}{pair}{order}){filt}"
        text = f"hw_json_merge_objects(CAST(to_json({listed}) AS VARCHAR))"
    else:
        text = f"CAST(to_json(list({d}{call.arg}{order}){filt}) AS VARCHAR)"
    return f"CAST({JSON_AGGS[call.func]}({text}) AS JSON)"


def ns_eq(a: list[str], b: list[str]) -> str:
    """Null-safe equality of two column lists (GROUP BY semantics)."""
    return (
        " AND ".join(f"{x} IS NOT DISTINCT FROM {y}" for x, y in zip(a, b, strict=True)) or "true"
    )


def join_condition(
    lkeys: tuple[str, ...], rkeys: tuple[str, ...], residual: str | None, null_safe: bool
) -> str:
    op = " IS NOT DISTINCT FROM " if null_safe else " = "
    parts = [f"({a}){op}({b})" for a, b in zip(lkeys, rkeys, strict=True)]
    if residual:
        parts.append(f"({residual})")
    return " AND ".join(parts) or "true"


def full_sql(node: Node, scan: Callable[[Scan], str], pg_aggregates: bool = False) -> str:
    """A subquery computing `node` from scratch; `scan(node)` names a Scan's rows."""

    def sub(child: Node) -> str:
        return full_sql(child, scan, pg_aggregates)

    if isinstance(node, Scan):
        sel = ", ".join(f"{q(s)} AS {n}" for s, n in zip(node.source, node.names, strict=True))
        return f"(SELECT {sel or 'NULL AS _z'} FROM {scan(node)})"
    if isinstance(node, Values):
        if not node.names:
            return "(SELECT NULL AS _z)"
        rows = ", ".join("(" + ", ".join(r) + ")" for r in node.rows)
        return f"(SELECT * FROM (VALUES {rows}) AS _v({cols(node)}))"
    if _inner_join(node):
        # one FROM list for a tree of inner joins (and the filters over them), so that
        # DuckDB orders the joins itself, as it does for the query as written
        leaves: list[Node] = []
        conds: list[str] = []
        _flatten(node, leaves, conds)
        items = ", ".join(f"{sub(leaf)} AS _j{i}" for i, leaf in enumerate(leaves))
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return f"(SELECT {cols(node) or 'NULL AS _z'} FROM {items}{where})"
    if isinstance(node, Filter):
        return f"(SELECT * FROM {sub(node.input)} AS _i WHERE {node.predicate})"
    if isinstance(node, Project):
        sel = ", ".join(f"{e} AS {n}" for n, e in node.exprs)
        return f"(SELECT {sel or 'NULL AS _z'} FROM {sub(node.input)} AS _i)"
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
            f"(SELECT {cols(node) or 'NULL AS _z'} FROM {sub(node.left)} AS _l "
            f"{kind} {sub(node.right)} AS _r ON {on})"
        )
    if isinstance(node, SemiJoin):
        if node.null_aware:  # NOT IN: a comparison that is not false (true or NULL) excludes
            lk, rk = node.left_keys[1:], node.right_keys[1:]
            test = f"(({node.left_keys[0]}) = ({node.right_keys[0]})) IS NOT FALSE"
            on = f"{join_condition(lk, rk, node.residual, False)} AND {test}"
        else:
            on = join_condition(node.left_keys, node.right_keys, node.residual, False)
        neg = "NOT " if node.anti else ""
        return (
            f"(SELECT * FROM {sub(node.left)} AS _l WHERE {neg}EXISTS "
            f"(SELECT 1 FROM {sub(node.right)} AS _r WHERE {on}))"
        )
    if isinstance(node, Aggregate):
        sel = [f"{e} AS {n}" for n, e in node.group] + [
            f"{agg_sql(a, pg_aggregates)} AS {a.name}" for a in node.aggs
        ]
        group = f" GROUP BY {', '.join(e for _, e in node.group)}" if node.group else ""
        src = sub(node.input)
        return f"(SELECT {', '.join(sel) or 'NULL AS _z'} FROM {src} AS _i{group})"
    if isinstance(node, Distinct):
        return f"(SELECT DISTINCT * FROM {sub(node.input)} AS _i)"
    if isinstance(node, SetOp):
        op = {"union": "UNION", "intersect": "INTERSECT", "except": "EXCEPT"}[node.op]
        op += " ALL" if node.all else ""
        left = ", ".join(
            f"{a} AS {b}" for a, b in zip(node.left.columns, node.columns, strict=True)
        )
        return (
            f"(SELECT {left} FROM {sub(node.left)} AS _l {op} "
            f"SELECT {cols(node.right)} FROM {sub(node.right)} AS _r)"
        )
    if isinstance(node, Window):
        calls = ", ".join(f"{c} AS {n}" for n, c in node.calls)
        inner = f"(SELECT {cols(node.input, '_i.') or 'NULL AS _z'}, {calls}"
        inner += f" FROM {sub(node.input)} AS _i)"
        if node.keep is None:
            return inner
        return f"(SELECT * FROM {inner} AS _w WHERE {node.keep})"
    if isinstance(node, Recursive):
        return recursive_sql(node, scan)
    if isinstance(node, Difference):
        return (
            f"(SELECT * FROM {sub(node.left)} AS _l EXCEPT ALL "
            f"SELECT * FROM {sub(node.right)} AS _r)"
        )
    raise TypeError(f"no SQL for {type(node).__name__}")


def _inner_join(node: Node) -> bool:
    """An inner or cross Join, or a Filter over one."""
    if isinstance(node, Filter):
        node = node.input
    return isinstance(node, Join) and node.kind in ("inner", "cross")


def _flatten(node: Node, leaves: list[Node], conds: list[str]) -> None:
    """The inputs of a tree of inner joins in column order, and its conditions."""
    if not _inner_join(node):
        leaves.append(node)
        return
    if isinstance(node, Filter):
        conds.append(f"({node.predicate})")
        node = node.input
    assert isinstance(node, Join)
    _flatten(node.left, leaves, conds)
    _flatten(node.right, leaves, conds)
    on = join_condition(node.left_keys, node.right_keys, node.residual, node.null_safe)
    if on != "true":
        conds.append(f"({on})")


def plan_sql(plan: Plan, scan: Callable[[Scan], str]) -> str:
    """The whole SELECT as plain reads run it: the root's rows under the user-visible
    column names, in the top-level ORDER BY, LIMIT and OFFSET (columns of the root past
    `plan.output` exist only to sort by)."""
    names = ", ".join(
        f"{c} AS {q(n)}" for c, n in zip(plan.root.columns, plan.output, strict=False)
    )
    sql = f"SELECT {names or '*'} FROM {full_sql(plan.root, scan, pg_aggregates=True)} AS _hw_p"
    if plan.order:
        sql += f" ORDER BY {', '.join(plan.order)}"
    if plan.limit is not None:
        sql += f" LIMIT {plan.limit}"
    if plan.offset is not None:
        sql += f" OFFSET {plan.offset}"
    return sql


def recursive_sql(node: Recursive, scan: Callable[[Scan], str], limit: int | None = None) -> str:
    """WITH RECURSIVE's fixpoint from scratch, `scan` naming the rows of its inputs
    (the recursive term's reference to its own rows is `_hw_rec`).

    With `limit`, the rows also carry `_hw_d`, the iteration that derived them (the
    base's are 0), and the recursion stops after iteration `limit + 1`: a row with
    `_hw_d > limit` says it would not have stopped within `limit` iterations (the
    engine's guard against a recursion that never terminates). Each iteration's rows
    share their depth: the step stamps max(_hw_d) + 1 of the rows it read. Under
    UNION the depth is not part of a row's identity: the rows are keyed by their
    columns (DuckDB's USING KEY) and the step adds only rows not yet derived (its
    `recurring` table), which is UNION's fixpoint."""

    def rows(s: Scan) -> str:
        return "_hw_rec" if s.table == RECURSIVE_OID else scan(s)

    pos = ", ".join(node.ref.source)
    union = "UNION ALL" if node.all else "UNION"
    out = ", ".join(f"{p} AS {n}" for p, n in zip(node.ref.source, node.names, strict=True))
    base, step = full_sql(node.base, rows), full_sql(node.step, rows)
    if limit is None:
        return (
            f"(WITH RECURSIVE _hw_rec({pos}) AS (SELECT * FROM {base} AS _b"
            f" {union} SELECT * FROM {step} AS _s) SELECT {out} FROM _hw_rec)"
        )
    new = ""
    key = ""
    if not node.all:
        key = f" USING KEY ({pos})"
        same = ns_eq([f"_u.{p}" for p in node.ref.source], [f"_s.{c}" for c in node.step.columns])
        new = f" AND NOT EXISTS (SELECT 1 FROM recurring._hw_rec AS _u WHERE {same})"
    return (
        f"(WITH RECURSIVE _hw_rec({pos}, _hw_d){key} AS (SELECT _b.*, 0 AS _hw_d FROM {base} AS _b"
        f" {union} SELECT _s.*, _k._hw_d + 1 FROM {step} AS _s,"
        f" (SELECT max(_hw_d) AS _hw_d FROM _hw_rec) AS _k WHERE _k._hw_d <= {int(limit)}{new})"
        f" SELECT {out}, _hw_d FROM _hw_rec)"
    )
