"""The view's output: fold the root's changes into versions and the change log.

    o{program}  versions: columns, _n (multiplicity), _from, _to (epochs; LIVE: open)
    l{program}  changes: columns, _w, _e (read by views over this view)

The root's changes are consolidated per row and epoch; one scratch table holds, per
changed row and epoch, the weight, the running multiplicity and the row's next
epoch in the batch; the log, the closing of live versions and the new versions all
come from it.

e.g. row (1) with a live version of _n 1, changes (+1 at 3, -2 at 4): the version
closes at 3, (1) _n 2 lives [3, 4); nothing opens at 4 (_n 0).

A root whose rows are unique by a key (an aggregate's groups: planner/ir.py
`unique_columns`) changes a key by retracting its one live row and adding the new one:
in a one-epoch batch a retracted row had multiplicity 1 and an added row 0 (had it
been live, it would be the retracted row and the two would cancel), so the fold
needs no join with the live versions, and closes them by key.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.engine.rules.context import BatchContext, Fill, Run
from headwater.planner.render import ns_eq
from headwater.storage.replica import LIVE


@dataclass(frozen=True)
class Output:
    """The steps of the fold: fill `ranked`; if it has rows, `fold` (and `negative`,
    a count of rows whose multiplicity went below zero, when checks are on)."""

    ranked: Fill
    negative: str
    fold: tuple[Run, ...]


def output(
    columns: list[str], changes: str, ctx: BatchContext, unique: frozenset[str] | None = None
) -> Output:
    """The fold of the root's changes (`changes`, over `columns`); `unique`: columns
    no two of the root's rows share, if known."""
    # (one epoch only: with several, a key's rows come and go within the batch)
    key = None if unique is None or ctx.multi else sorted(unique)
    v = ctx.program
    names = list(columns)
    nl = ", ".join(names)
    sep = ", " if nl else ""
    qk = [f"_q.{c}" for c in names]
    consolidated = (
        f"SELECT {nl}{sep}_e, sum(_w)::BIGINT AS _w FROM {changes} GROUP BY ALL HAVING sum(_w) <> 0"
    )
    live = (
        f" LEFT JOIN (SELECT * FROM o{v} WHERE _to = {LIVE}) _c"
        f" ON {ns_eq(qk, [f'_c.{c}' for c in names])}"
    )
    R = ctx.scratch("_r", "out")
    if ctx.multi:
        # per row and epoch: the running multiplicity and the row's next epoch in
        # the batch (see rules/running.py)
        if ctx.wide:
            part = ", ".join(names) or "1"
            ranked = (
                f"(SELECT *, sum(_w) OVER _o AS _cum, lead(_e) OVER _o AS _next,"
                f" row_number() OVER _o AS _i FROM _qq WINDOW _o AS (PARTITION BY {part}"
                " ORDER BY _e ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))"
            )
        else:
            eq = ns_eq([f"_a.{c}" for c in names], [f"_b.{c}" for c in names])
            ak = "".join(f"_a.{c}, " for c in names)
            ranked = (
                f"(SELECT {ak}_a._e, any_value(_a._w) AS _w,"
                f" sum(_b._w) FILTER (WHERE _b._e <= _a._e) AS _cum,"
                f" min(_b._e) FILTER (WHERE _b._e > _a._e) AS _next,"
                f" count(*) FILTER (WHERE _b._e <= _a._e) AS _i"
                f" FROM _qq AS _a JOIN _qq AS _b ON {eq} GROUP BY {ak}_a._e)"
            )
        fill = Fill(
            R,
            f"SELECT * FROM (WITH _qq AS ({consolidated}) SELECT {', '.join(qk)}{sep}_q._e,"
            f" _q._w, coalesce(_c._n, 0) + _q._cum AS _n, _q._next, _q._i"
            f" FROM {ranked} AS _q{live})",
        )
    elif key is not None:  # unique keys: -1 leaves _n 0, +1 gives _n 1
        fill = Fill(
            R,
            f"SELECT {nl}{sep}_e, _w, greatest(_w, 0) AS _n, NULL::BIGINT AS _next, 1 AS _i"
            f" FROM ({consolidated})",
        )
    else:  # one epoch: a row changes once
        fill = Fill(
            R,
            f"SELECT {', '.join(qk + ['_q._e', '_q._w'])}, coalesce(_c._n, 0) + _q._w AS _n,"
            f" NULL::BIGINT AS _next, 1 AS _i FROM ({consolidated}) AS _q{live}",
        )
    if key is not None:  # the key's live version is the retracted row
        closed = f"(SELECT {''.join(f'{c}, ' for c in key)}_e FROM {R} WHERE _w < 0)"
        cond = ns_eq([f"o{v}.{c}" for c in key], [f"_m.{c}" for c in key])
    else:
        closed = f"(SELECT * FROM {R} WHERE _i = 1)"
        cond = ns_eq([f"o{v}.{c}" for c in names], [f"_m.{c}" for c in names])
    return Output(
        fill,
        f"SELECT count(*) FROM {R} WHERE _n < 0",
        (
            Run(f"INSERT INTO l{v} SELECT {nl}{sep}_w, _e FROM {R}"),
            Run(f"UPDATE o{v} SET _to = _m._e FROM {closed} _m WHERE o{v}._to = {LIVE} AND {cond}"),
            Run(
                f"INSERT INTO o{v} SELECT {nl}{sep}_n, _e, coalesce(_next, {LIVE}) FROM {R}"
                " WHERE _n > 0"
            ),
        ),
    )
