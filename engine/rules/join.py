"""Inner and cross joins (bilinear): dL⋈R + L⋈dR + dL⋈dR.

L and R are the inputs integrated up to the batch's start (the states `l`, `r`:
rows with weights, appended each batch); the changes of one side meet the other
side's state, and the two sides' changes of this batch meet each other at the later
of their two epochs. Outer joins are lowered to these by planner/incremental.py.
"""

from __future__ import annotations

from headwater.engine.rules.context import (
    Append,
    BatchContext,
    Delta,
    Operator,
    materialized,
    state_table,
)
from headwater.planner.ir import Join
from headwater.planner.render import join_condition


def join(node: Join, op: Operator, ctx: BatchContext) -> Delta:
    if node.kind not in ("inner", "cross"):
        raise AssertionError("outer joins are lowered by planner/incremental.py")
    dl, dr = op.inputs
    sl, sr = op.state(ctx, "l"), op.state(ctx, "r")
    on = join_condition(node.left_keys, node.right_keys, node.residual, node.null_safe)
    sel = ", ".join(node.columns)
    sep = ", " if sel else ""
    # a side without changes in the batch adds no term and nothing to its state
    left, right = not op.is_empty(0), not op.is_empty(1)
    terms = []
    if left:
        terms.append(
            f"SELECT {sel}{sep}_a._w * _b._w AS _w, _a._e AS _e FROM {dl} _a JOIN {sr} _b ON {on}"
        )
    if right:
        terms.append(
            f"SELECT {sel}{sep}_a._w * _b._w AS _w, _b._e AS _e FROM {sl} _a JOIN {dr} _b ON {on}"
        )
    if left and right:
        terms.append(
            f"SELECT {sel}{sep}_a._w * _b._w AS _w, greatest(_a._e, _b._e) AS _e"
            f" FROM {dl} _a JOIN {dr} _b ON {on}"
        )
    after = []
    if left:
        after.append(Append(sl, f"SELECT * EXCLUDE (_e) FROM {dl}"))
    if right:
        after.append(Append(sr, f"SELECT * EXCLUDE (_e) FROM {dr}"))
    return materialized(node, op, ctx, " UNION ALL ".join(terms), after=tuple(after))


def join_states(program: int | str, op: int, left: str, right: str) -> list[tuple[str, str]]:
    """The state tables (name, a query of their columns) from the empty change
    tables of the two inputs: each side's rows and weights."""
    return [
        (state_table(program, op, "l"), f"SELECT * EXCLUDE (_e) FROM {left}"),
        (state_table(program, op, "r"), f"SELECT * EXCLUDE (_e) FROM {right}"),
    ]
