"""Other aggregates (MIN/MAX, STRING_AGG, ARRAY_AGG, JSON[B]_AGG, JSON[B]_OBJECT_AGG, MODE,
PERCENTILE_*, BOOL_AND/OR, DISTINCT calls): re-aggregate.

Each group the batch changed is re-aggregated at each epoch it changed, from its
rows at that epoch: the state `m` (the multiset of the group's input rows, only the
columns the calls use, with weights) plus the batch's changes up to that epoch. The
old value is the group's previous new value in the batch, or its last output kept
in the state `o`; the rule emits `-old row, +new row`.

e.g. max(v) of group 1 holding {3, 7}, the 7 deleted at epoch 4:
changes ((1, 7), -1, 4), ((1, 3), +1, 4).
"""

from __future__ import annotations

from headwater.engine.family import TAG_REFS, ViewScalarAggregate, tag_of
from headwater.engine.rules.context import (
    Append,
    BatchContext,
    Delta,
    Fill,
    Operator,
    Run,
    Step,
    inline,
    state_table,
)
from headwater.planner.ir import AggCall, Aggregate, refs
from headwater.planner.render import agg_sql, ns_eq

# aggregate calls whose value does not depend on how many times a row is there
DUPLICATE_BLIND = ("min", "max", "bool_and", "bool_or", "every")


def needed(node: Aggregate) -> list[str]:
    """Input columns a general aggregate keeps per group: those its keys and calls use."""
    used: set[str] = set()
    for _, e in node.group:
        used |= refs(e) | set(TAG_REFS.findall(e))
    for a in node.aggs:
        for e in (a.arg, a.filter, *a.extra, *a.order):
            if e:
                used |= refs(e) | set(TAG_REFS.findall(e))
    return [c for c in node.input.columns if c in used]


def general_aggregate(node: Aggregate, op: Operator, ctx: BatchContext) -> Delta:
    steps: list[Step] = []
    src = op.inputs[0]
    keys = [n for n, _ in node.group]
    kexpr = [e for _, e in node.group]
    need = needed(node)
    m, o = op.state(ctx, "m"), op.state(ctx, "o")
    if src.startswith("("):
        # an inline input (a chain of scans, filters, projections) is read three
        # times below: once materialized, DuckDB binds and plans it once
        name = ctx.scratch("_src", op.index)
        steps.append(Fill(name, f"SELECT * FROM {src} AS _s"))
        src = name
    # One statement: the groups that changed and the epochs they changed at (_ch),
    # their rows at each of those epochs re-aggregated (_nv), next to the old
    # value: the previous epoch's new value, or the last output kept (o).
    ch_sel = ", ".join([f"{e} AS {n}" for n, e in node.group] + ["_e"])
    ch = f"SELECT DISTINCT {ch_sel} FROM {src}"
    vscalar = isinstance(node, ViewScalarAggregate)
    if node.scalar and ctx.first:
        ch = f"{ch} UNION SELECT {ctx.end_sql}::BIGINT AS _e"
    if vscalar and ctx.first:
        tags = ", ".join(f"_pv.{tag_of(k)} AS {k}" for k in keys)
        ch = f"{ch} UNION SELECT {tags}, {ctx.end_sql}::BIGINT AS _e FROM {ctx.pv}"
    nl = ", ".join(need)
    sep = ", " if nl else ""
    rows = f"(SELECT {nl}{sep}_w, -1 AS _e FROM {m} UNION ALL SELECT {nl}{sep}_w, _e FROM {src})"
    on = ns_eq([f"({e})" for e in kexpr], [f"_ch.{k}" for k in keys])
    if ctx.multi:
        on += " AND _x._e <= _ch._e"
    chk = ", ".join(f"_ch.{k}" for k in keys)
    chk_sep = ", " if chk else ""
    # the groups to re-aggregate from their rows: every changed group, or (`extremes`)
    # only those whose new value the batch's changes and the old value cannot give
    fast = not ctx.multi and _extremes_apply(node)
    regroup = "_chu AS _ch" if fast else "_ch"
    ms = (
        f"SELECT {chk}{chk_sep}_ch._e AS _t{sep}"
        f"{', '.join(f'_x.{c}' for c in need)}, sum(_x._w)::BIGINT AS _cnt"
        f" FROM {regroup} JOIN {rows} _x ON {on} GROUP BY ALL HAVING sum(_x._w) <> 0"
    )
    calls = ", ".join(f"{agg_sql(a)} AS {a.name}" for a in node.aggs)
    gk = ", ".join(keys + ["_t"])
    ctes = ""
    blind = all(a.func in DUPLICATE_BLIND and a.filter is None for a in node.aggs)
    if ctx.multi and need and blind:
        ctes, nv = _blind_nv(node, need, m, src)
    elif all(a.distinct or a.func in DUPLICATE_BLIND for a in node.aggs):
        # calls that ignore duplicates read each distinct row once, with its count
        nv = f"SELECT {gk}, sum(_cnt)::BIGINT AS _n, {calls} FROM ({ms}) AS _x GROUP BY {gk}"
    else:  # the others read each row as many times as it is there
        nv = (
            f"SELECT {gk}, count(*)::BIGINT AS _n, {calls}"
            f" FROM (SELECT * FROM ({ms}) AS _ms, range(_ms._cnt)) AS _x GROUP BY {gk}"
        )
    if fast:
        ctes, known = _extremes(node, op, src, o)
        nv = f"{known} UNION ALL {nv}"
    if node.scalar or vscalar:
        # PostgreSQL's answer on no rows (count 0, the others NULL) where a
        # scalar aggregate's input is empty at an epoch
        empty = f"SELECT {calls} FROM (SELECT {nl or '1 AS _z'} FROM {m} WHERE false) AS _z"
        vals = ", ".join(
            f"CASE WHEN _nv._t IS NULL THEN _em.{a.name} ELSE _nv.{a.name} END AS {a.name}"
            for a in node.aggs
        )
        chk2 = "".join(f"_ch.{k}, " for k in keys)
        nv_on0 = ns_eq([f"_nv.{k}" for k in keys], [f"_ch.{k}" for k in keys])
        nv = (
            f"SELECT {chk2}_ch._e AS _t, coalesce(_nv._n, 0) AS _n, {vals}"
            f" FROM _ch LEFT JOIN ({nv}) AS _nv ON {nv_on0} AND _nv._t = _ch._e,"
            f" ({empty}) AS _em"
        )
    vcols = [a.name for a in node.aggs]
    pk = [f"_ch.{k}" for k in keys]
    nv_on = ns_eq([f"_nv.{k}" for k in keys], pk) + " AND _nv._t = _ch._e"
    o_on = ns_eq([f"_o.{k}" for k in keys], pk)
    cols_new = [f"_nv.{c} AS {c}" for c in vcols]
    window = ""
    if ctx.multi:
        # One window over every group, in (group, epoch) order (a partition per
        # group costs twice as much): a row is its group's first in the batch
        # when the previous row is another group's, and its last likewise.
        g = f"row({', '.join(pk)})" if pk else "1"
        first = f"(lag({g}) OVER _w IS DISTINCT FROM {g})"
        cols_old = [
            f"CASE WHEN {first} THEN _o.{c} ELSE lag(_nv.{c}) OVER _w END AS {c}_old" for c in vcols
        ]
        rest = (
            f" CASE WHEN {first} THEN coalesce(_o._n, 0)"
            f" ELSE coalesce(lag(_nv._n) OVER _w, 0) END AS _n_old,"
            f" _o._n IS NOT NULL AS _had, CASE WHEN {first} THEN 1 ELSE 2 END AS _i,"
            f" lead({g}) OVER _w IS DISTINCT FROM {g} AS _last"
        )
        window = f" WINDOW _w AS (ORDER BY {', '.join(pk + ['_ch._e'])})"
    else:  # one epoch: the old value is the one kept
        cols_old = [f"_o.{c} AS {c}_old" for c in vcols]
        rest = " coalesce(_o._n, 0) AS _n_old, _o._n IS NOT NULL AS _had, 1 AS _i, true AS _last"
    R = ctx.scratch("_r", op.index)
    steps.append(
        Fill(
            R,
            f"SELECT * FROM (WITH _ch AS ({ch}){ctes} SELECT"
            f" {', '.join(pk + ['_ch._e'] + cols_new + cols_old)},"
            f" coalesce(_nv._n, 0) AS _n,{rest}"
            f" FROM _ch LEFT JOIN ({nv}) AS _nv ON {nv_on} LEFT JOIN {o} _o ON {o_on}{window})",
        )
    )
    if node.scalar or vscalar:
        new_exists, old_exists = "true", "(_had OR _i > 1)"
    else:
        new_exists, old_exists = "_n > 0", "_n_old > 0"
    sep2 = ", " if keys or vcols else ""
    newc = ", ".join(keys + vcols)
    oldc = ", ".join(keys + [f"{c}_old AS {c}" for c in vcols])
    cond = ns_eq([f"{o}.{k}" for k in keys], [f"_q.{k}" for k in keys])
    kl = ", ".join(keys) or "1 AS _one"
    keep = "true" if node.scalar or vscalar else "_n > 0"
    steps += [
        Run(f"DELETE FROM {o} USING (SELECT DISTINCT {kl} FROM {R}) _q WHERE {cond}"),
        Run(
            f"INSERT INTO {o} SELECT {', '.join(keys + vcols)}, _n FROM {R} WHERE _last AND {keep}"
        ),
        Append(m, f"SELECT {nl}{sep}_w FROM {src}"),
    ]
    # (the changes are inline: they read only this batch's scratch table, not the state)
    return inline(
        node,
        op,
        f"SELECT {newc}{sep2}1 AS _w, _e FROM {R} WHERE {new_exists}"
        f" UNION ALL SELECT {oldc}{sep2}-1, _e FROM {R} WHERE {old_exists}",
        tuple(steps),
    )


# calls whose new value follows from the old one and the batch's changes unless a
# deleted row held the old value (MIN/MAX; BOOL_AND/EVERY are MIN, BOOL_OR MAX of
# booleans), and counts (the old count plus the change)
EXTREMES = {"min": "least", "max": "greatest", "bool_and": "least", "every": "least"}
EXTREMES["bool_or"] = "greatest"


def _extremes_apply(node: Aggregate) -> bool:
    """Whether every call is a count or an extreme (see `_extremes`)."""
    return bool(node.aggs) and all(
        (a.func in EXTREMES or a.func == "count" and not a.distinct) and not a.order
        for a in node.aggs
    )


def _extremes(node: Aggregate, op: Operator, src: str, o: str) -> tuple[str, str]:
    """One epoch's new value of each changed group without reading its rows, where
    the old value (the state `o`) and the batch's net changes per row give it: a
    count is the old count plus the change; MIN is least(old, the inserted rows' min)
    unless a deleted row was <= the old min (it may have been the min), MAX likewise.
    Groups where that fails (`_fa._safe` false) are re-aggregated from their rows
    (`_chu`); on this workload (a few rows per group of hundreds) almost none are.

    Returns the CTEs (after `_ch`: `_dn`, `_fa`, `_chu`) and the query of (keys, _t,
    _n, calls) of the groups it knows.

    e.g. max(v) of group 1 is 7 (its rows 3, 7); the batch deletes 3, inserts 5:
    3 < 7 is safe, so max is greatest(7, 5) = 7 without reading the group's rows."""
    keys = [n for n, _ in node.group]
    types = dict(zip(node.columns, op.types, strict=True))
    sel = [f"{e} AS {k}" for k, e in node.group]
    for i, a in enumerate(node.aggs):  # each call's argument and filter, per row
        if a.arg is not None:
            sel.append(f"{a.arg} AS _a{i}")
        sel.append(f"{a.filter or 'true'} AS _f{i}")
    # per group, epoch and distinct row: its net weight in the batch (0 kept: a group
    # whose changes cancel out is still a changed group, with its old value)
    dn = f"SELECT {', '.join(sel)}, _e, sum(_w)::BIGINT AS _c FROM {src} GROUP BY ALL"
    dk = [f"_dn.{k}" for k in keys]
    out, safe = [], ["true"]
    for i, a in enumerate(node.aggs):
        old = f"_o.{a.name}"
        if a.func == "count":
            counted = f"_f{i}" if a.arg is None else f"_f{i} AND _a{i} IS NOT NULL"
            value = f"coalesce(any_value({old}), 0) + sum(CASE WHEN {counted} THEN _c ELSE 0 END)"
        else:
            fn = EXTREMES[a.func]
            agg = "min" if fn == "least" else "max"
            ins = f"{agg}(_a{i}) FILTER (WHERE _c > 0 AND _f{i})"
            value = (
                f"CASE WHEN any_value({old}) IS NULL THEN {ins} WHEN {ins} IS NULL"
                f" THEN any_value({old}) ELSE {fn}(any_value({old}), {ins}) END"
            )
            beyond = ">" if fn == "least" else "<"
            safe.append(
                f"(_c >= 0 OR NOT coalesce(_f{i}, false) OR _a{i} IS NULL"
                f" OR coalesce(_a{i} {beyond} {old}, false))"
            )
        out.append(f"CAST({value} AS {types[a.name]}) AS {a.name}")
    ksel = "".join(f"{k}, " for k in dk)
    fa = (
        f"SELECT {ksel}_dn._e AS _t, (coalesce(any_value(_o._n), 0) + sum(_c))::BIGINT AS _n,"
        f" {', '.join(out)}, bool_and({' AND '.join(safe)}) AS _safe"
        f" FROM _dn LEFT JOIN {o} AS _o ON {ns_eq([f'_o.{k}' for k in keys], dk)}"
        f" GROUP BY {ksel}_dn._e"
    )
    kl = "".join(f"{k}, " for k in keys)
    ctes = (
        f", _dn AS ({dn}), _fa AS MATERIALIZED ({fa})"
        f", _chu AS (SELECT {kl}_t AS _e FROM _fa WHERE NOT _safe)"
    )
    known = f"SELECT {kl}_t, _n, {', '.join(a.name for a in node.aggs)} FROM _fa WHERE _safe"
    return ctes, known


def _blind_nv(node: Aggregate, need: list[str], m: str, src: str) -> tuple[str, str]:
    """MIN/MAX/BOOL_AND/BOOL_OR of each changed group at each epoch it changed,
    without reading the group's rows once per epoch: the rows the batch does not
    touch are aggregated once per group (`_base`), the rows it touches (few) at
    each epoch (`_tn`), and the two combined (these calls are idempotent: the
    aggregate of a union is the aggregate of the parts' aggregates). Reading
    every row of a group at every epoch it changed costs group size x epochs,
    which a batch of hundreds of epochs turns into millions of rows.

    Returns the CTEs (after `_ch`) and the query of (keys, _t, _n, calls)."""
    keys = [n for n, _ in node.group]
    kexpr = [e for _, e in node.group]
    nl = ", ".join(need)
    same = ns_eq([f"_tv.{c}" for c in need], [f"_r.{c}" for c in need])
    calls = ", ".join(f"{agg_sql(a)} AS {a.name}" for a in node.aggs)
    kl = ", ".join(keys)
    on_g = ns_eq([f"({e})" for e in kexpr], [f"_g.{k}" for k in keys])
    on_ch = ns_eq([f"({e})" for e in kexpr], [f"_ch.{k}" for k in keys])
    ksel = "".join(f"{e} AS {n}, " for n, e in node.group)
    chk = "".join(f"_ch.{k}, " for k in keys)
    ctes = (
        f", _g AS (SELECT DISTINCT {kl or '1 AS _one'} FROM _ch)"
        f", _tv AS (SELECT DISTINCT {nl} FROM {src})"
        # the changed groups' rows, consolidated, and whether the batch touches them
        f", _mr AS MATERIALIZED (SELECT {nl}, _c, EXISTS (SELECT 1 FROM _tv WHERE {same})"
        f" AS _touched FROM (SELECT {', '.join(f'_x.{c}' for c in need)},"
        f" sum(_x._w)::BIGINT AS _c FROM {m} AS _x JOIN _g ON {on_g}"
        f" GROUP BY ALL HAVING sum(_x._w) <> 0) AS _r)"
        f", _base AS (SELECT {ksel}sum(_c)::BIGINT AS _n, {calls} FROM _mr"
        f" WHERE NOT _touched GROUP BY ALL)"
        f", _tn AS (SELECT {chk}_ch._e AS _t,"
        f" sum(_cnt)::BIGINT AS _n, {calls} FROM (SELECT {chk}"
        f"_ch._e, {', '.join(f'_x.{c}' for c in need)}, sum(_x._w)::BIGINT AS _cnt"
        f" FROM _ch JOIN (SELECT {nl}, _c AS _w, -1 AS _e FROM _mr WHERE _touched"
        f" UNION ALL SELECT {nl}, _w, _e FROM {src}) AS _x"
        f" ON {on_ch} AND _x._e <= _ch._e GROUP BY ALL HAVING sum(_x._w) <> 0) AS _ch"
        f" GROUP BY ALL)"
    )

    def combine(a: AggCall) -> str:
        b, t = f"_b.{a.name}", f"_tn.{a.name}"
        both = {
            "max": f"greatest({b}, {t})",
            "min": f"least({b}, {t})",
            "bool_and": f"{b} AND {t}",
            "every": f"{b} AND {t}",
            "bool_or": f"{b} OR {t}",
        }[a.func]
        return (
            f"CASE WHEN {b} IS NULL THEN {t} WHEN {t} IS NULL THEN {b} ELSE {both} END AS {a.name}"
        )

    b_on = ns_eq([f"_b.{k}" for k in keys], [f"_ch.{k}" for k in keys])
    t_on = ns_eq([f"_tn.{k}" for k in keys], [f"_ch.{k}" for k in keys])
    nv = (
        f"SELECT {chk}_ch._e AS _t, coalesce(_b._n, 0) + coalesce(_tn._n, 0) AS _n,"
        f" {', '.join(combine(a) for a in node.aggs)} FROM _ch"
        f" LEFT JOIN _base AS _b ON {b_on} LEFT JOIN _tn ON {t_on} AND _tn._t = _ch._e"
    )
    return ctes, nv


def general_aggregate_states(
    node: Aggregate, program: int | str, op: int, empty_input: str, empty_self: str
) -> list[tuple[str, str]]:
    """The state tables (name, a query of their columns), from the empty change
    tables of the input and of the operator: the rows (the columns the calls use,
    with weights) and the last output of each group, with its row count."""
    need = "".join(f"{c}, " for c in needed(node))  # none for min(1)
    return [
        (state_table(program, op, "m"), f"SELECT {need}_w FROM {empty_input}"),
        (
            state_table(program, op, "o"),
            f"SELECT * EXCLUDE (_e, _w), 0::BIGINT AS _n FROM {empty_self}",
        ),
    ]
