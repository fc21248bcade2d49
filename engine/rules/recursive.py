"""WITH RECURSIVE (monotone): recompute the fixpoint at each epoch its tables changed.

The rule keeps each input's rows (`m0`, `m1`, ...: a multiset with weights, one per
Scan the two terms read) and the fixpoint's last output (`o`, rows with their
multiplicity). For each epoch of the batch at which an input changed, DuckDB
evaluates the recursive query over the inputs' rows at that epoch (the state plus
the batch's changes up to it; a LATERAL recursive CTE per epoch), and the rule
emits the difference with the fixpoint of the previous such epoch, or with `o` at
the first. Exact at every epoch; the cost per changed epoch is the whole fixpoint
(DBSP's incremental fixpoint would pay only for the derivations that change).

e.g. reachability over edges {1->2, 2->3}, the edge 2->3 deleted at epoch 5: the
fixpoint at 5 is {(1,2)}, the previous {(1,2), (2,3), (1,3)}: emits (2,3) and (1,3)
with -1 at 5.
"""

from __future__ import annotations

import os

from headwater.catalog.identifiers import quote as q
from headwater.engine.rules.context import (
    Append,
    BatchContext,
    Delta,
    Fill,
    Fixpoint,
    Operator,
    Run,
    Step,
    materialized,
    state_table,
)
from headwater.planner.ir import RECURSIVE_OID, Recursive, Scan
from headwater.planner.render import full_sql, recursive_sql

# Iterations a recursion may take at one epoch before the view's batch fails (as
# Spark's spark.sql.cteRecursionLevelLimit): one that never terminates (n + 1 without
# a bound, a cycle under UNION ALL) would otherwise stall the engine.
RECURSION_LIMIT = int(os.environ.get("HW_RECURSION_LIMIT", "1000"))


def recursive(node: Recursive, op: Operator, ctx: BatchContext) -> Delta:
    steps: list[Step] = []
    o = op.state(ctx, "o")
    cols = list(node.names)
    cl = ", ".join(cols)
    # the epochs at which an input changed (a query without tables: its first epoch)
    changed = [f"SELECT _e FROM {src}" for src in op.inputs]
    if not changed or ctx.first:
        changed.append(f"SELECT {ctx.end_sql}::BIGINT AS _e")
    CH = ctx.scratch("_ch", op.index)
    steps.append(
        Fill(
            CH,
            f"SELECT _t, lag(_t) OVER (ORDER BY _t) AS _prev FROM"
            f" (SELECT DISTINCT _e AS _t FROM ({' UNION ALL '.join(changed)}) AS _c) AS _d",
        )
    )

    def rows_at(s: Scan, at: str = "_ep._t") -> str:
        """An input's rows at the epoch `at`, one row per copy, as the table's."""
        i = node.inputs.index(s)
        m, src = op.state(ctx, f"m{i}"), op.inputs[i]
        nl = ", ".join(s.names)
        named = ", ".join(f"{n} AS {q(c)}" for n, c in zip(s.names, s.source, strict=True))
        rows = (
            f"SELECT {nl}, sum(_w)::BIGINT AS _c FROM (SELECT {nl}, _w, -1 AS _e FROM {m}"
            f" UNION ALL SELECT {nl}, _w, _e FROM {src}) AS _x WHERE _x._e <= {at}"
            f" GROUP BY ALL HAVING sum(_w) > 0"
        )
        return f"(SELECT {named} FROM ({rows}) AS _a, range(_a._c))"

    NV = ctx.scratch("_nv", op.index)
    fix = recursive_sql(node, rows_at, RECURSION_LIMIT)
    stop = (
        f"WITH RECURSIVE did not terminate within {RECURSION_LIMIT} iterations; bound its"
        " recursive term (e.g. a depth column with WHERE depth < n; UNION instead of"
        " UNION ALL over cycles), or raise HW_RECURSION_LIMIT in the server's environment"
    )
    literal = "'" + stop.replace("'", "''") + "'"
    # the same fixpoint in parts, for Spark (no recursive CTE per epoch there)
    work = f"_hw_w{ctx.program}_{op.index}"
    names = {s: f"_hw_in{ctx.program}_{op.index}_{i}" for i, s in enumerate(node.inputs)}

    def named(s: Scan) -> str:
        return work if s.table == RECURSIVE_OID else names[s]

    steps.append(
        Fixpoint(
            NV,
            f"SELECT _ep._t, {', '.join(f'_f.{c}' for c in cols)}, count(*)::BIGINT AS _n"
            f" FROM {CH} AS _ep, LATERAL {fix} AS _f"
            f" WHERE CASE WHEN _f._hw_d > {RECURSION_LIMIT} THEN error({literal}) ELSE true END"
            " GROUP BY ALL",
            epochs=CH,
            inputs=tuple((names[s], rows_at(s, "{t}")) for s in node.inputs),
            base=full_sql(node.base, named),
            step=full_sql(node.step, named),
            work=work,
            columns=tuple(node.ref.source),
            names=tuple(cols),
            all=node.all,
            limit=RECURSION_LIMIT,
            error=stop,
        )
    )
    # new rows at each changed epoch, the previous changed epoch's (or the kept
    # output at the first) retracted, consolidated per row and epoch
    diff = (
        f"SELECT {cl}, _n AS _w, _t AS _e FROM {NV}"
        f" UNION ALL SELECT {', '.join(f'_p.{c}' for c in cols)}, -_p._n, _ch._t"
        f" FROM {CH} AS _ch JOIN {NV} AS _p ON _p._t = _ch._prev"
        f" UNION ALL SELECT {', '.join(f'_o.{c}' for c in cols)}, -_o._n, _ch._t"
        f" FROM {CH} AS _ch, {o} AS _o WHERE _ch._prev IS NULL"
    )
    select = (
        f"SELECT {cl}, sum(_w)::BIGINT AS _w, _e FROM ({diff}) AS _d"
        f" GROUP BY ALL HAVING sum(_w) <> 0"
    )
    after: list[Step] = [
        Run(f"DELETE FROM {o} WHERE EXISTS (SELECT 1 FROM {CH})"),
        Run(f"INSERT INTO {o} SELECT {cl}, _n FROM {NV} WHERE _t = (SELECT max(_t) FROM {CH})"),
    ]
    for i, (s, src) in enumerate(zip(node.inputs, op.inputs, strict=True)):
        if not op.is_empty(i):
            after.append(
                Append(op.state(ctx, f"m{i}"), f"SELECT {', '.join(s.names)}, _w FROM {src}")
            )
    delta = materialized(node, op, ctx, select, tuple(after))
    return Delta(delta.changes, (*steps, *delta.steps))


def recursive_states(
    node: Recursive, program: int | str, op: int, inputs: list[str], empty_self: str
) -> list[tuple[str, str]]:
    """The state tables (name, a query of their columns): each input's rows with
    weights, and the fixpoint's last output with each row's multiplicity."""
    out = [
        (state_table(program, op, f"m{i}"), f"SELECT * EXCLUDE (_e) FROM {empty}")
        for i, empty in enumerate(inputs)
    ]
    out.append(
        (
            state_table(program, op, "o"),
            f"SELECT * EXCLUDE (_e, _w), 0::BIGINT AS _n FROM {empty_self}",
        )
    )
    return out
