"""Linear aggregates (COUNT/SUM/AVG, with FILTER) and DISTINCT: running accumulators.

Per group and epoch, the change of each accumulator (rows `_n`, and per call a
non-NULL count and a sum); added to the group's accumulators kept in the state `g`
(in epoch order inside the batch: running sums) they give the group's old and new
value at each epoch it changed, and the rule emits `-old row, +new row`. DISTINCT is
the aggregate of no calls grouped by every column: a row is there while its count
is positive (emitted when the count crosses zero).

An aggregate without GROUP BY (and a family's `ViewScalarAggregate`, per view) has
its one group from the view's first epoch on, also on no rows (count 0, sum NULL).

e.g. count(*) of group 1 going from 2 rows to 0 at epoch 5: state `_n` 2, change
`_n` -2 -> changes ((1, 2), -1, 5); the group leaves the state.
"""

from __future__ import annotations

from headwater.engine.family import ViewScalarAggregate, tag_of
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
from headwater.planner.ir import Aggregate, Distinct, Node
from headwater.planner.render import ns_eq


def is_linear(node: Node) -> bool:
    """DISTINCT, or an aggregate of linear calls only: this rule's."""
    if isinstance(node, Distinct):
        return True
    return isinstance(node, Aggregate) and all(a.linear for a in node.aggs)


def group_of(node: Aggregate | Distinct) -> list[tuple[str, str]]:
    """(name, expression) of the group keys."""
    if isinstance(node, Distinct):
        return [(c, c) for c in node.columns]
    return list(node.group)


def accumulators(
    node: Aggregate | Distinct, family: bool
) -> tuple[list[tuple[str, str]], dict[str, tuple[str, str]]]:
    """The accumulators (name, partial SQL), `_n` (rows) first, and for each call the
    accumulators it reads: (non-NULL count, sum).

    In a family's program, calls share accumulators: COUNT(*) is `_n`, and COUNT,
    SUM and AVG of one argument (and FILTER) share a count and a sum, so that a
    window sums fewer columns (DuckDB's cost grows with each). Other programs
    keep one count (and sum) per call, as their state tables were created."""
    accs: list[tuple[str, str]] = [("_n", "sum(_w)::BIGINT")]
    uses: dict[str, tuple[str, str]] = {}
    shared: dict[tuple[str | None, str | None], list[str]] = {}
    for a in getattr(node, "aggs", ()):
        f = f"({a.filter})" if a.filter else "true"
        nn = "true" if a.arg is None else f"({a.arg}) IS NOT NULL"
        count = f"sum(CASE WHEN {f} AND {nn} THEN _w ELSE 0 END)::BIGINT"
        total = f"coalesce(sum(CASE WHEN {f} THEN _w * ({a.arg}) END), 0)"
        if not family:
            accs.append((f"{a.name}_c", count))
            if a.func != "count":
                accs.append((f"{a.name}_s", total))
            uses[a.name] = (f"{a.name}_c", f"{a.name}_s")
            continue
        if a.func == "count" and a.arg is None and a.filter is None:
            uses[a.name] = ("_n", "")
            continue
        names = shared.setdefault((a.arg, a.filter), [])
        if not names:
            names.append(f"{a.name}_c")
            accs.append((names[0], count))
        if a.func != "count" and len(names) == 1:
            names.append(f"{a.name}_s")
            accs.append((names[1], total))
        uses[a.name] = (names[0], names[1] if len(names) > 1 else "")
    return accs, uses


def partial_sql(node: Aggregate | Distinct, src: str, family: bool, with_epoch: bool = True) -> str:
    """Per group (and epoch): the change of each accumulator."""
    keys = group_of(node)
    sel = [f"{e} AS {n}" for n, e in keys]
    if with_epoch:
        sel.append("_e")
    sel.append("sum(_w)::BIGINT AS _n")
    sel += [f"{sql} AS {x}" for x, sql in accumulators(node, family)[0][1:]]
    group = " GROUP BY ALL" if keys or with_epoch else ""
    return f"SELECT {', '.join(sel)} FROM {src}{group}"


def linear_aggregate(node: Aggregate | Distinct, op: Operator, ctx: BatchContext) -> Delta:
    src = op.inputs[0]
    keys = [n for n, _ in group_of(node)]
    aggs = list(getattr(node, "aggs", ()))
    scalar = isinstance(node, Aggregate) and node.scalar
    vscalar = isinstance(node, ViewScalarAggregate)
    state = op.state(ctx, "g")
    accs, uses = accumulators(node, ctx.family)
    acc = [x for x, _ in accs]
    partial = partial_sql(node, src, ctx.family)
    if scalar and ctx.first:
        # the empty-input row exists from the view's first epoch on
        zeros = ", ".join(f"0 AS {x}" for x in acc)
        sums = ", ".join(f"sum({x}) AS {x}" for x in acc)
        partial = (
            f"SELECT _e, {sums} FROM ({partial} UNION ALL SELECT {ctx.end_sql} AS _e, {zeros})"
            " GROUP BY _e"
        )
    if vscalar and ctx.first:
        # each view's group exists from the view's first epoch on
        zeros = ", ".join(f"0 AS {x}" for x in acc)
        sums = ", ".join(f"sum({x}) AS {x}" for x in acc)
        tags = ", ".join(f"_pv.{tag_of(k)} AS {k}" for k in keys)
        kl = ", ".join(keys)
        partial = (
            f"SELECT {kl}, _e, {sums} FROM ({partial} UNION ALL"
            f" SELECT {tags}, {ctx.end_sql} AS _e, {zeros} FROM {ctx.pv}) GROUP BY {kl}, _e"
        )
    pk = [f"_p.{k}" for k in keys]
    on = ns_eq(pk, [f"_s.{k}" for k in keys])
    R = ctx.scratch("_r", op.index)
    if ctx.multi:  # running sums over the batch's epochs
        running = [
            f"coalesce(_s.{x}, 0) + _p.{x}_r AS {x},"
            f" coalesce(_s.{x}, 0) + _p.{x}_r - _p.{x}_d AS {x}_old"
            for x in acc
        ]
        src_p = running_sums("_pp", keys, acc, ctx.wide)
        fill = Fill(
            R,
            f"SELECT * FROM (WITH _pp AS ({partial}) SELECT"
            f" {', '.join(pk + ['_p._e'] + running)}, _s._n IS NOT NULL AS _had,"
            f" _p._i, _p._last FROM {src_p} AS _p LEFT JOIN {state} _s ON {on})",
        )
    else:  # one epoch: a group's running value is the state plus its change
        running = [
            f"coalesce(_s.{x}, 0) + _p.{x} AS {x}, coalesce(_s.{x}, 0) AS {x}_old" for x in acc
        ]
        tail = f" 1 AS _i, true AS _last FROM ({partial}) AS _p LEFT JOIN {state} _s ON {on}"
        fill = Fill(
            R,
            f"SELECT {', '.join(pk + ['_p._e'] + running)}, _s._n IS NOT NULL AS _had,{tail}",
        )

    types = dict(zip(node.columns, op.types, strict=True))

    def final(old: bool) -> str:
        sfx = "_old" if old else ""
        out = list(keys)
        for a in aggs:
            c, s = (x + sfx for x in uses[a.name])
            if a.func == "count":
                out.append(f"{c} AS {a.name}")
            elif a.func == "sum":
                out.append(f"CASE WHEN {c} = 0 THEN NULL ELSE {s} END AS {a.name}")
            else:  # avg: exact for integers and numerics (typed a decimal, as hw_avg is)
                if types[a.name].upper().startswith("DECIMAL"):
                    value = f"hw_avg_exact(CAST({s} AS DECIMAL(38,16)), CAST({c} AS BIGINT))"
                else:
                    value = f"CAST({s} AS DOUBLE) / {c}"
                out.append(f"CASE WHEN {c} = 0 THEN NULL ELSE {value} END AS {a.name}")
        return ", ".join(out)

    sep = ", " if keys or aggs else ""
    if scalar or vscalar:
        new_exists, old_exists = "true", "(_had OR _i > 1)"
    else:
        new_exists, old_exists = "_n > 0", "_n_old > 0"
    # state: the last value of every group the batch changed
    cond = ns_eq([f"{state}.{k}" for k in keys], [f"_q.{k}" for k in keys])
    kl = ", ".join(keys) or "1 AS _one"
    keep = "true" if scalar or vscalar else "_n <> 0"
    # (the changes are inline: they read only this batch's scratch table, not the state)
    return inline(
        node,
        op,
        f"SELECT {final(False)}{sep}1 AS _w, _e FROM {R} WHERE {new_exists}"
        f" UNION ALL SELECT {final(True)}{sep}-1, _e FROM {R} WHERE {old_exists}",
        steps=(
            fill,
            Run(f"DELETE FROM {state} USING (SELECT DISTINCT {kl} FROM {R}) _q WHERE {cond}"),
            Run(
                f"INSERT INTO {state} SELECT {', '.join(keys + acc)} FROM {R}"
                f" WHERE _last AND {keep}"
            ),
        ),
    )


def linear_aggregate_states(
    node: Aggregate | Distinct, program: int | str, op: int, empty_input: str, family: bool
) -> list[tuple[str, str]]:
    """The state table (name, a query of its columns), from the input's empty change
    table: one row of accumulators per group."""
    return [(state_table(program, op, "g"), partial_sql(node, empty_input, family, False))]
