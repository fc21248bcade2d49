"""INTERSECT [ALL] and EXCEPT [ALL]: counts per row value on each side.

The state `c` keeps, per row value, its multiplicity on each side `(l, r)`; the
output multiplicity is `min(l, r)`, `[l > 0 and r > 0]`, `max(l - r, 0)` or
`[l > 0 and r = 0]`, and the rule emits its change at each epoch the counts changed.
(UNION ALL is linear, rules/linear.py; UNION is DISTINCT of UNION ALL.)

e.g. EXCEPT ALL of (1) x3 and (1) x1, one more (1) on the right at epoch 2:
multiplicity 2 -> 1, changes ((1), -1, 2).
"""

from __future__ import annotations

from headwater.engine.rules.context import (
    BatchContext,
    Delta,
    Fill,
    Operator,
    Run,
    inline,
    state_table,
)
from headwater.engine.rules.running import running_sums
from headwater.planner.ir import SetOp
from headwater.planner.render import ns_eq

MULTIPLICITY = {
    ("intersect", True): "least({a}, {b})",
    ("intersect", False): "CASE WHEN {a} > 0 AND {b} > 0 THEN 1 ELSE 0 END",
    ("except", True): "greatest({a} - {b}, 0)",
    ("except", False): "CASE WHEN {a} > 0 AND {b} <= 0 THEN 1 ELSE 0 END",
}


def setop(node: SetOp, op: Operator, ctx: BatchContext) -> Delta:
    dl, dr = op.inputs
    ln = ", ".join(f"{a} AS {b}" for a, b in zip(node.left.columns, node.columns, strict=True))
    rn = ", ".join(f"{a} AS {b}" for a, b in zip(node.right.columns, node.columns, strict=True))
    sep = ", " if ln else ""
    state = op.state(ctx, "c")
    names = list(node.columns)
    nl = ", ".join(names)
    partial = (
        f"SELECT {nl}{sep}_e,"
        " sum(_a)::BIGINT AS _a, sum(_b)::BIGINT AS _b FROM"
        f" (SELECT {ln}{sep}_w AS _a, 0 AS _b, _e FROM {dl} AS _l UNION ALL"
        f" SELECT {rn}{sep}0, _w, _e FROM {dr} AS _r) GROUP BY ALL"
    )
    pk = [f"_p.{c}" for c in names]
    on = ns_eq(pk, [f"_s.{c}" for c in names])
    R = ctx.scratch("_r", op.index)
    if ctx.multi:  # running counts over the batch's epochs
        run = ", ".join(
            f"coalesce(_s.{x}, 0) + _p.{x}_r AS {x},"
            f" coalesce(_s.{x}, 0) + _p.{x}_r - _p.{x}_d AS {x}_old"
            for x in ("_a", "_b")
        )
        src_p = running_sums("_pp", names, ["_a", "_b"], ctx.wide)
        fill = Fill(
            R,
            f"SELECT * FROM (WITH _pp AS ({partial}) SELECT {', '.join(pk + ['_p._e'])},"
            f" {run}, _p._last FROM {src_p} AS _p LEFT JOIN {state} _s ON {on})",
        )
    else:  # one epoch: the state plus the change
        run = ", ".join(
            f"coalesce(_s.{x}, 0) + _p.{x} AS {x}, coalesce(_s.{x}, 0) AS {x}_old"
            for x in ("_a", "_b")
        )
        tail = f" true AS _last FROM ({partial}) AS _p LEFT JOIN {state} _s ON {on}"
        fill = Fill(R, f"SELECT {', '.join(pk + ['_p._e'])}, {run},{tail}")
    f = MULTIPLICITY[(node.op, node.all)]
    new, old = f.format(a="_a", b="_b"), f.format(a="_a_old", b="_b_old")
    cond = ns_eq([f"{state}.{c}" for c in names], [f"_q.{c}" for c in names])
    return inline(
        node,
        op,
        f"SELECT {nl}{sep}({new}) - ({old}) AS _w, _e FROM {R} WHERE ({new}) <> ({old})",
        (
            fill,
            Run(f"DELETE FROM {state} USING (SELECT DISTINCT {nl} FROM {R}) _q WHERE {cond}"),
            Run(
                f"INSERT INTO {state} SELECT {nl}{sep}_a, _b FROM {R}"
                " WHERE _last AND (_a <> 0 OR _b <> 0)"
            ),
        ),
    )


def setop_states(program: int | str, op: int, empty_self: str) -> list[tuple[str, str]]:
    """The state table (name, a query of its columns), from the operator's empty
    change table: the two sides' counts per row value."""
    return [
        (
            state_table(program, op, "c"),
            f"SELECT * EXCLUDE (_e, _w), 0::BIGINT AS _a, 0::BIGINT AS _b FROM {empty_self}",
        )
    ]
