"""Sources: a scan's changes are its input's, a VALUES list's rows come once.

    Scan    the table's change rows of each epoch (cols..., _hw_w, _hw_epoch)
    Values  its rows once, with weight 1 at the batch's end, in the view's first batch

e.g. a scan of column "a" of table 7 as `c1`, typed INTEGER:
    (SELECT CAST(c1 AS INTEGER) AS c1, CAST(_w AS BIGINT) AS _w, CAST(_e AS BIGINT) AS _e
     FROM (SELECT "a" AS c1, _hw_w AS _w, _hw_epoch AS _e FROM <changes of 7>) AS _s)
"""

from __future__ import annotations

from headwater.engine.rules.context import BatchContext, Delta, Operator, inline
from headwater.planner.ir import Scan, Values
from headwater.planner.render import q


def scan(node: Scan, op: Operator, ctx: BatchContext) -> Delta:
    rel = ctx.changes(node.table, ctx.after_sql, ctx.end_sql)
    if ctx.family:  # each view's changes since its frontier, tagged with the view
        assert ctx.pv is not None
        rel = (
            f"(SELECT _pv.* EXCLUDE (_after), _c.* FROM {rel} AS _c"
            f" JOIN {ctx.pv} ON _c._hw_epoch > _pv._after)"
        )
    sel = ", ".join(f"{q(s)} AS {n}" for s, n in zip(node.source, node.names, strict=True))
    sep = ", " if sel else ""
    return inline(node, op, f"SELECT {sel}{sep}_hw_w AS _w, _hw_epoch AS _e FROM {rel}")


def values(node: Values, op: Operator, ctx: BatchContext) -> Delta:
    e = ctx.end_sql
    if not node.names:
        sql = f"SELECT 1 AS _w, {e} AS _e WHERE {str(ctx.first).lower()}"
    else:
        rows = ", ".join("(" + ", ".join(r) + ")" for r in node.rows)
        sql = (
            f"SELECT *, 1 AS _w, {e} AS _e FROM (VALUES {rows}) AS _v({', '.join(node.names)})"
            f" WHERE {str(ctx.first).lower()}"
        )
    return inline(node, op, sql)
