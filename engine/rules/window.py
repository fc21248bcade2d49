"""Window functions and top-N: recompute the partitions a batch touched.

A window call's value for a row depends on every row of its partition, so the rule
keeps the input's rows (`m`, a multiset with weights) and the operator's last output
(`o`, the rows it emitted, with their calls' values) and, for each partition the
batch changed, at each epoch it changed, evaluates the calls over the partition's
rows at that epoch (the state plus the batch's changes up to it). It emits the new
rows of that epoch and retracts the partition's previous output: the rows emitted at
the partition's previous change in the batch, or those kept in `o` at its first.
Retracting what was emitted (rather than recomputing the old value) keeps the output
consistent where ties make a window call's value arbitrary (row_number over equal
keys). A top-N (ORDER BY ... LIMIT) is a window over one partition, the whole input,
kept where row_number() is within the limit: only the top rows are kept in `o`.

e.g. row_number() OVER (PARTITION BY a ORDER BY b), partition a = 1 holding b 5 and
8, a row (1, 3) inserted at epoch 4: retract (1,5,1), (1,8,2); emit (1,3,1),
(1,5,2), (1,8,3) at 4; consolidated per row and epoch.
"""

from __future__ import annotations

from headwater.engine.rules.context import (
    Append,
    BatchContext,
    Delta,
    Fill,
    Operator,
    Run,
    Step,
    materialized,
    state_table,
)
from headwater.planner.ir import Window, window_partitioned
from headwater.planner.render import ns_eq


def window(node: Window, op: Operator, ctx: BatchContext) -> Delta:
    steps: list[Step] = []
    src = op.inputs[0]
    m, o = op.state(ctx, "m"), op.state(ctx, "o")
    inp = list(node.input.columns)
    cols = list(node.columns)
    keys = [f"_k{j}" for j in range(len(node.partition))]
    if src.startswith("("):  # an inline input is read several times: bind it once
        name = ctx.scratch("_src", op.index)
        steps.append(Fill(name, f"SELECT * FROM {src} AS _s"))
        src = name
    # the partitions the batch changed, at each epoch they changed, with the
    # partition's previous change in the batch and whether it is its last
    ksel = "".join(f"{e} AS {k}, " for k, e in zip(keys, node.partition, strict=True))
    ch = f"SELECT DISTINCT {ksel}_e FROM {src}"
    if ctx.multi:
        part = ", ".join(keys) or "1"
        ch = (
            f"SELECT *, lag(_e) OVER _p AS _prev, lead(_e) OVER _p IS NULL AS _last"
            f" FROM ({ch}) AS _c WINDOW _p AS (PARTITION BY {part} ORDER BY _e)"
        )
    else:
        ch = f"SELECT *, NULL::BIGINT AS _prev, true AS _last FROM ({ch}) AS _c"
    CH = ctx.scratch("_ch", op.index)
    steps.append(Fill(CH, ch))
    # each changed partition's rows at each epoch it changed, one row per copy
    il = ", ".join(inp)
    rows = f"(SELECT {il}, _w, -1 AS _e FROM {m} UNION ALL SELECT {il}, _w, _e FROM {src})"
    on = ns_eq([f"({e})" for e in node.partition], [f"_ch.{k}" for k in keys])
    if ctx.multi:
        on += " AND _x._e <= _ch._e"
    at = (
        f"SELECT {''.join(f'_ch.{k}, ' for k in keys)}_ch._e AS _t,"
        f" {', '.join(f'_x.{c}' for c in inp)}, sum(_x._w)::BIGINT AS _cnt"
        f" FROM {CH} AS _ch JOIN {rows} AS _x ON {on} GROUP BY ALL HAVING sum(_x._w) > 0"
    )
    calls = ", ".join(f"{window_partitioned(c, '_t')} AS {n}" for n, c in node.calls)
    kl = "".join(f"{k}, " for k in keys)
    nv = f"SELECT {kl}_t, {il}, {calls} FROM (SELECT * FROM ({at}) AS _a, range(_a._cnt)) AS _x"
    if node.keep is not None:
        nv = f"SELECT * FROM ({nv}) AS _v WHERE {node.keep}"
    NV = ctx.scratch("_nv", op.index)
    steps.append(Fill(NV, nv))
    cl = ", ".join(cols)
    same = ns_eq([f"_v.{k}" for k in keys], [f"_ch.{k}" for k in keys])
    on_o = ns_eq([f"({e})" for e in node.partition], [f"_ch.{k}" for k in keys])
    changes = (
        f"SELECT {cl}, _e, sum(_w)::BIGINT AS _w FROM ("
        f"SELECT {cl}, 1 AS _w, _t AS _e FROM {NV}"
        f" UNION ALL SELECT {', '.join(f'_v.{c}' for c in cols)}, -1, _ch._e"
        f" FROM {CH} AS _ch JOIN {NV} AS _v ON {same} AND _v._t = _ch._prev"
        f" UNION ALL SELECT {', '.join(f'_o.{c}' for c in cols)}, -1, _ch._e"
        f" FROM {CH} AS _ch JOIN (SELECT * FROM {o}) AS _o ON {on_o} WHERE _ch._prev IS NULL"
        f") AS _d GROUP BY ALL HAVING sum(_w) <> 0"
    )
    gone = ns_eq([f"({e})" for e in node.partition], [f"_q.{k}" for k in keys])
    last = ns_eq([f"_v.{k}" for k in keys], [f"_ch.{k}" for k in keys])
    after = (
        Run(f"DELETE FROM {o} USING (SELECT DISTINCT {kl}1 AS _one FROM {CH}) AS _q WHERE {gone}"),
        Run(
            f"INSERT INTO {o} SELECT {', '.join(f'_v.{c}' for c in cols)} FROM {NV} AS _v"
            f" JOIN {CH} AS _ch ON {last} AND _v._t = _ch._e WHERE _ch._last"
        ),
        Append(m, f"SELECT {il}, _w FROM {src}"),
    )
    out = materialized(node, op, ctx, f"SELECT {cl}, _w, _e FROM ({changes}) AS _z", after)
    return Delta(out.changes, (*steps, *out.steps))


def window_states(
    program: int | str, op: int, empty_input: str, empty_self: str
) -> list[tuple[str, str]]:
    """The input's rows (with weights) and the last output of every partition."""
    return [
        (state_table(program, op, "m"), f"SELECT * EXCLUDE (_e) FROM {empty_input}"),
        (state_table(program, op, "o"), f"SELECT * EXCLUDE (_e, _w) FROM {empty_self}"),
    ]
