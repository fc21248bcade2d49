"""Linear operators: the changes of the output are the input's changes mapped.

    Filter      filter the changes (`_e` kept)
    Project     project the changes
    Difference  L's changes and R's changes negated (made by rewrites: anti-joins)
    UNION ALL   both inputs' changes

No state; the changes stay an inline subquery (a chain of them is one SELECT).
"""

from __future__ import annotations

from headwater.engine.rules.context import BatchContext, Delta, Operator, inline
from headwater.planner.ir import Difference, Filter, Project, SetOp


def filter_(node: Filter, op: Operator, ctx: BatchContext) -> Delta:
    # no casts: the input's changes are typed as the input's output, which is this
    # operator's (a layer of casts of every column costs DuckDB ~1 ms to bind per batch)
    return Delta(f"(SELECT * FROM {op.inputs[0]} AS _i WHERE {node.predicate})")


def project(node: Project, op: Operator, ctx: BatchContext) -> Delta:
    sel = ", ".join(f"{e} AS {n}" for n, e in node.exprs)
    sep = ", " if sel else ""
    return inline(node, op, f"SELECT {sel}{sep}_w, _e FROM {op.inputs[0]} AS _i")


def difference(node: Difference, op: Operator, ctx: BatchContext) -> Delta:
    c = ", ".join(node.columns)
    sep = ", " if c else ""
    dl, dr = op.inputs
    return inline(
        node,
        op,
        f"SELECT * FROM {dl} AS _l UNION ALL SELECT {c}{sep}-_w, _e FROM {dr} AS _r",
    )


def union_all(node: SetOp, op: Operator, ctx: BatchContext) -> Delta:
    assert node.op == "union" and node.all, "UNION is lowered to Distinct(UNION ALL)"
    ln = ", ".join(f"{a} AS {b}" for a, b in zip(node.left.columns, node.columns, strict=True))
    rn = ", ".join(f"{a} AS {b}" for a, b in zip(node.right.columns, node.columns, strict=True))
    sep = ", " if ln else ""
    dl, dr = op.inputs
    return inline(
        node,
        op,
        f"SELECT {ln}{sep}_w, _e FROM {dl} AS _l UNION ALL SELECT {rn}{sep}_w, _e FROM {dr} AS _r",
    )
