"""Incremental rules per operator: one view's changes for a range of epochs.

A change table has the operator's columns plus `_w` (weight) and `_e` (epoch): the
Z-set of changes, per epoch, of that operator's output. `ViewProgram.advance`
computes, for the epochs (frontier, end] of one micro-batch, the change table of
every operator bottom-up, updates the operators' states, and integrates the view's
changes into its versioned output. A micro-batch covering many epochs still yields
the view's state at each of them: every rule carries `_e` through, stateful rules
integrate in epoch order inside the batch (window functions over `_e`).

The operator table (docs/engine.md has the same, with the reasoning):

    Scan        the table's change rows of each epoch                     no state
    Values      its rows once, at the view's first epoch                   no state
    Filter      filter the changes                                         no state
    Project     project the changes                                        no state
    Difference  left changes, and right changes negated                   no state
    UNION ALL   both inputs' changes                                       no state
    Join        dL⋈R + L⋈dR + dL⋈dR (epoch = the later of the two),      L and R (rows, weight;
                L and R at the start of the batch                          appended, compacted)
    Aggregate   linear calls (COUNT/SUM/AVG): running sums per group and   one row per group
    (linear)    epoch; emit -old row +new row where the group changed      (accumulators)
    Aggregate   others (MIN/MAX/STRING_AGG/BOOL_*/DISTINCT): re-aggregate   the group's input rows
    (general)   each changed group at each epoch it changed                 (multiset) + last output
    Distinct    a linear count per row; emit when it crosses zero          one row per row value
    INTERSECT / counts per row on each side; multiplicity f(l, r)          one row per row value
    EXCEPT

Scalar expressions are evaluated by DuckDB as SQL text (planner/ir.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
from headwater.engine.family import TAG_REFS, ViewScalarAggregate, tag_of
from headwater.engine.sqlgen import agg_sql, full_sql, join_condition, q
from headwater.planner.ir import (
    AggCall,
    Aggregate,
    Difference,
    Distinct,
    Filter,
    Join,
    Node,
    Plan,
    Project,
    Scan,
    SetOp,
    Values,
    walk,
)

LIVE = 2**63 - 1
# Consistency checks that cost a statement per batch (tests turn them on).
CHECKS = os.environ.get("HW_ENGINE_CHECKS", "") == "1"
# aggregate calls whose value does not depend on how many times a row is there
DUPLICATE_BLIND = ("min", "max", "bool_and", "bool_or", "every")
# Running sums over a batch by a self-join of each key's epochs when the batch changed
# at no more epochs than this, by window functions otherwise (see `running_sums`).
SELF_JOIN_EPOCHS = 32
COMPACT_MIN_ROWS = 10_000  # join/multiset states are compacted when they doubled past this


def fetch_all(
    db: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> list[tuple]:
    """Run and fully consume a statement (DuckDB 2 keeps unfinished results open)."""
    return db.execute(sql, params or []).fetchall()


def ns_eq(a: list[str], b: list[str]) -> str:
    """Null-safe equality of two column lists (GROUP BY semantics)."""
    return (
        " AND ".join(f"{x} IS NOT DISTINCT FROM {y}" for x, y in zip(a, b, strict=True)) or "true"
    )


def running_sums(rel: str, keys: list[str], values: list[str], window: bool) -> str:
    """Per key and epoch of `rel` (keys..., _e, values...; one row per key and epoch):
    each value's running sum over the key's epochs up to this one (`{x}_r`), the
    row's own value (`{x}_d`), its rank among the key's epochs (`_i`, from 1) and
    whether it is the key's last (`_last`).

    `window`: with a window function partitioned by key; otherwise with a self-join
    of each key's epochs. DuckDB's partitioned windows cost ~5 us per row and summed
    column (and per partition), the join a key's epochs squared: the join is the
    cheaper when the batch changed at few epochs (`SELF_JOIN_EPOCHS`)."""
    if window:
        part = ", ".join(keys) or "1"
        vals = "".join(f"{x} AS {x}_d, sum({x}) OVER _w AS {x}_r, " for x in values)
        kl = "".join(f"{k}, " for k in keys)
        return (
            f"(SELECT {kl}_e, {vals}row_number() OVER _w AS _i, lead(_e) OVER _w IS NULL AS _last"
            f" FROM {rel} WINDOW _w AS (PARTITION BY {part} ORDER BY _e"
            " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))"
        )
    eq = ns_eq([f"_a.{k}" for k in keys], [f"_b.{k}" for k in keys])
    ak = "".join(f"_a.{k}, " for k in keys)
    vals = "".join(f"any_value(_a.{x}) AS {x}_d, sum(_b.{x}) AS {x}_r, " for x in values)
    last = ns_eq([f"_q.{k}" for k in keys], [f"_m.{k}" for k in keys])
    kl = "".join(f"{k}, " for k in keys)
    return (
        f"(SELECT _q.*, _q._e = _m._e AS _last FROM (SELECT {ak}_a._e, {vals}count(*) AS _i"
        f" FROM {rel} AS _a JOIN {rel} AS _b ON {eq} AND _b._e <= _a._e"
        f" GROUP BY {ak}_a._e) AS _q"
        f" JOIN (SELECT {kl}max(_e) AS _e FROM {rel} GROUP BY ALL) AS _m ON {last})"
    )


@dataclass
class ScanInfo:
    """A scanned relation: its column names and DuckDB types, and where its changes are."""

    oid: int
    columns: list[str]
    types: list[str]
    view: int | None = None  # a materialized view's id: its changes are the engine's own
    internal: list[str] | None = None  # that view's internal column names (o{v}, l{v})

    def select_from_view(self) -> str:
        """The view's internal columns under the names its readers use."""
        assert self.internal is not None
        return ", ".join(f'{i} AS "{c}"' for i, c in zip(self.internal, self.columns, strict=True))


@dataclass
class Batch:
    """What one micro-batch gives every view: changes of epochs (start, end]."""

    end: int
    changes: Callable[
        [int, int], str
    ]  # (oid, after epoch) -> SQL relation of (cols, _hw_w, _hw_epoch)


@dataclass
class ViewProgram:
    """One materialized view's lowered plan, its operators' states and its output.

    Tables in the engine's DuckDB database (v = view id, i = operator index):
        o{v}        output versions: columns, _n (multiplicity), _from, _to (epochs)
        l{v}        output changes: columns, _w, _e (read by views over this view)
        s{v}_{i}_x  operator states
    """

    view: int
    plan: Plan
    scans: dict[int, ScanInfo]
    nodes: list[Node] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)  # id(node) -> operator index
    types: dict[int, list[str]] = field(default_factory=dict)
    states: dict[str, list[int]] = field(default_factory=dict)  # table -> [rows, at compaction]
    scratch: set[str] = field(default_factory=set)  # temp tables created on the connection
    # a family's program (engine/family.py): the types of the tag columns its scans
    # prepend (`_hw_v`, `_hw_p0`, ...), which the batch's `pv` relation provides
    tag_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for n in walk(self.plan.root):
            if id(n) not in self.index:
                self.index[id(n)] = len(self.nodes)
                self.nodes.append(n)

    # -- setup ------------------------------------------------------------------------
    def prepare(self, db: duckdb.DuckDBPyConnection) -> None:
        """Type every operator and create the state and output tables (idempotent)."""
        self.type_nodes(db)
        self.create_tables(db)

    def type_nodes(self, db: duckdb.DuckDBPyConnection) -> None:
        """Type every operator (DuckDB describes each one's query over empty inputs)."""
        tags = [("_hw_v", self.tag_types[0])] if self.tag_types else []
        tags += [(f"_hw_p{j}", t) for j, t in enumerate(self.tag_types[1:])]
        for oid, info in self.scans.items():
            cols = ", ".join(
                f"{q(c)} {t}" for c, t in tags + list(zip(info.columns, info.types, strict=True))
            )
            db.execute(f"CREATE OR REPLACE TEMP TABLE _t{oid} ({cols or '_z INTEGER'})")

        def scan(node: Scan) -> str:
            return f"_t{node.table}"

        for i, node in enumerate(self.nodes):
            rows = fetch_all(db, f"DESCRIBE SELECT * FROM {full_sql(node, scan)} AS _x")
            by_name = {r[0]: r[1] for r in rows}
            self.types[i] = [_storable(by_name.get(c, "INTEGER")) for c in node.columns]

    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None:
        """Create the state and output tables (idempotent)."""
        for i in range(len(self.nodes)):
            # an empty change table of the operator, to create states from
            db.execute(f"CREATE OR REPLACE TEMP TABLE _e{self.view}_{i} ({self._typed(i)})")
        root = self.index[id(self.plan.root)]
        typed = self._typed(root, with_meta=False)
        db.execute(
            f"CREATE TABLE IF NOT EXISTS o{self.view}"
            f" ({typed}, _n BIGINT, _from BIGINT, _to BIGINT)"
        )
        db.execute(f"CREATE TABLE IF NOT EXISTS l{self.view} ({self._typed(root)})")
        for i, node in enumerate(self.nodes):
            for name, sql in self.state_schemas(i, node):
                db.execute(f"CREATE TABLE IF NOT EXISTS {name} AS {sql} LIMIT 0")

    def _typed(self, i: int, with_meta: bool = True) -> str:
        node = self.nodes[i]
        parts = [f"{c} {t}" for c, t in zip(node.columns, self.types[i], strict=True)]
        if with_meta:
            parts += ["_w BIGINT", "_e BIGINT"]
        return ", ".join(parts)

    def state_schemas(self, i: int, node: Node) -> list[tuple[str, str]]:
        v = self.view
        if isinstance(node, Join):
            li, ri = self.index[id(node.left)], self.index[id(node.right)]
            return [
                (f"s{v}_{i}_l", f"SELECT * EXCLUDE (_e) FROM _e{v}_{li}"),
                (f"s{v}_{i}_r", f"SELECT * EXCLUDE (_e) FROM _e{v}_{ri}"),
            ]
        if isinstance(node, Aggregate | Distinct):
            ii = self.index[id(node.input)]
            if _linear(node):
                return [
                    (f"s{v}_{i}_g", self._linear_partial_sql(node, f"_e{v}_{ii}", with_epoch=False))
                ]
            return [
                (f"s{v}_{i}_m", f"SELECT {', '.join(_needed(node))}, _w FROM _e{v}_{ii}"),
                (f"s{v}_{i}_o", f"SELECT * EXCLUDE (_e, _w), 0::BIGINT AS _n FROM _e{v}_{i}"),
            ]
        if isinstance(node, SetOp) and node.op != "union":
            return [
                (
                    f"s{v}_{i}_c",
                    f"SELECT * EXCLUDE (_e, _w), 0::BIGINT AS _a, 0::BIGINT AS _b FROM _e{v}_{i}",
                )
            ]
        return []

    def drop(self, db: duckdb.DuckDBPyConnection) -> None:
        v = self.view
        for name in [f"o{v}", f"l{v}"] + [
            n for i, node in enumerate(self.nodes) for n, _ in self.state_schemas(i, node)
        ]:
            db.execute(f"DROP TABLE IF EXISTS {name}")

    # -- one micro-batch --------------------------------------------------------------
    def advance(
        self,
        db: duckdb.DuckDBPyConnection,
        batch: Batch,
        frontier: int,
        first: bool,
        multi: bool | int = True,
        pv: str | None = None,
    ) -> int:
        """Process epochs (frontier, batch.end]; `first`: the view's backfill batch, in
        which the inputs' changes are their whole contents at `batch.end`. `multi`:
        the inputs changed at more than one epoch of the batch; when they did not
        (a batch of one epoch, a backfill, ...), every operator's changes are at that
        one epoch, so each key changes at most once and the rules need no window
        functions (DuckDB spends 3-5 ms on one, even over a few rows). Returns the
        number of output changes. The caller holds the transaction.

        `pv` (a family's program): the views to advance, a relation `_pv(_hw_v,
        _hw_p0, ..., _after)` of each view, its constants and its frontier."""
        self._frontier, self._end, self._first = frontier, batch.end, first
        # `multi`: True (a number unknown) or at how many epochs the inputs changed
        epochs = int(multi) if multi is not True else 2**31
        self._multi = epochs > 1
        self._wide = epochs > SELF_JOIN_EPOCHS
        self._pv = pv
        self._batch = batch
        self._done: dict[int, str] = {}
        root = self.delta(self.plan.root)
        return self.integrate(db, root)

    def delta(self, node: Node) -> str:
        i = self.index[id(node)]
        if i in self._done:
            return self._done[i]
        kids = [self.delta(c) for c in node.children()]
        self._op = i
        kind = "aggregate" if isinstance(node, Aggregate) else type(node).__name__.lower()
        rule = getattr(self, f"_{kind}")
        name = rule(node, i, kids)
        self._done[i] = name
        return name

    def _tmp(self, alias: str, select: str, exact: bool = False) -> str:
        """Materialize `select` into a temp table of this operator (the name, unless
        `exact`, gets the view and operator). Creating a table costs ~5 ms in DuckDB
        (DDL) against ~1 ms to refill one, so each is created once per connection and
        refilled by later batches (the same SQL, so the same columns: a rule's
        one-epoch and multi-epoch forms, whose column types may differ, get one
        table each)."""
        mode = "1" if not self._multi else "w" if self._wide else ""
        name = alias if exact else f"{alias}{mode}_{self.view}_{self._op}"
        if name in self.scratch:
            self.db.execute(f"DELETE FROM {name}")
            self.rows = fetch_all(self.db, f"INSERT INTO {name} {select}")[0][0]
        else:
            create = f"CREATE OR REPLACE TEMP TABLE {name} AS {select}"
            self.rows = fetch_all(self.db, create)[0][0]
            self.scratch.add(name)
        return name

    def forget_scratch(self) -> None:
        """After a rollback: temp tables created in that transaction are gone."""
        self.scratch.clear()

    def _put(self, i: int, select: str, inline: bool = False) -> str:
        """An operator's changes, typed as the operator's output: materialized for
        stateful operators, an inline subquery for linear ones (a chain of
        filters and projections is one SELECT, not one table each)."""
        node = self.nodes[i]
        casts = [
            f"CAST({c} AS {t}) AS {c}" for c, t in zip(node.columns, self.types[i], strict=True)
        ]
        casts += ["CAST(_w AS BIGINT) AS _w", "CAST(_e AS BIGINT) AS _e"]
        sql = f"SELECT {', '.join(casts)} FROM ({select}) AS _s"
        if inline:
            return f"({sql})"
        return self._tmp(f"d{self.view}_{i}", sql, exact=True)

    # -- stateless rules --------------------------------------------------------------
    def _scan(self, node: Scan, i: int, kids: list[str]) -> str:
        rel = self._batch.changes(node.table, self._frontier)
        if self.tag_types:  # a family: each view's changes since its frontier, tagged
            assert self._pv is not None
            rel = (
                f"(SELECT _pv.* EXCLUDE (_after), _c.* FROM {rel} AS _c"
                f" JOIN {self._pv} ON _c._hw_epoch > _pv._after)"
            )
        sel = ", ".join(f"{q(s)} AS {n}" for s, n in zip(node.source, node.names, strict=True))
        sep = ", " if sel else ""
        return self._put(i, f"SELECT {sel}{sep}_hw_w AS _w, _hw_epoch AS _e FROM {rel}", True)

    def _values(self, node: Values, i: int, kids: list[str]) -> str:
        e = self._end
        if not node.names:
            sql = f"SELECT 1 AS _w, {e} AS _e WHERE {str(self._first).lower()}"
        else:
            rows = ", ".join("(" + ", ".join(r) + ")" for r in node.rows)
            sql = (
                f"SELECT *, 1 AS _w, {e} AS _e FROM (VALUES {rows}) AS _v({', '.join(node.names)})"
                f" WHERE {str(self._first).lower()}"
            )
        return self._put(i, sql, True)

    def _filter(self, node: Filter, i: int, kids: list[str]) -> str:
        return self._put(i, f"SELECT * FROM {kids[0]} AS _i WHERE {node.predicate}", True)

    def _project(self, node: Project, i: int, kids: list[str]) -> str:
        sel = ", ".join(f"{e} AS {n}" for n, e in node.exprs)
        sep = ", " if sel else ""
        return self._put(i, f"SELECT {sel}{sep}_w, _e FROM {kids[0]} AS _i", True)

    def _difference(self, node: Difference, i: int, kids: list[str]) -> str:
        c = ", ".join(node.columns)
        sep = ", " if c else ""
        return self._put(
            i,
            f"SELECT * FROM {kids[0]} AS _l UNION ALL SELECT {c}{sep}-_w, _e FROM {kids[1]} AS _r",
            True,
        )

    # -- joins ------------------------------------------------------------------------
    def _join(self, node: Join, i: int, kids: list[str]) -> str:
        if node.kind not in ("inner", "cross"):
            raise AssertionError("outer joins are lowered by planner/incremental.py")
        v = self.view
        dl, dr = kids
        sl, sr = f"s{v}_{i}_l", f"s{v}_{i}_r"
        on = join_condition(node.left_keys, node.right_keys, node.residual, node.null_safe)
        sel = ", ".join(node.columns)
        sep = ", " if sel else ""
        sql = (
            f"SELECT {sel}{sep}_a._w * _b._w AS _w, _a._e AS _e FROM {dl} _a JOIN {sr} _b ON {on}"
            f" UNION ALL SELECT {sel}{sep}_a._w * _b._w, _b._e FROM {sl} _a JOIN {dr} _b ON {on}"
            f" UNION ALL SELECT {sel}{sep}_a._w * _b._w, greatest(_a._e, _b._e)"
            f" FROM {dl} _a JOIN {dr} _b ON {on}"
        )
        out = self._put(i, sql)
        self._append_state(sl, f"SELECT * EXCLUDE (_e) FROM {dl}")
        self._append_state(sr, f"SELECT * EXCLUDE (_e) FROM {dr}")
        return out

    def _append_state(self, table: str, select: str) -> None:
        """Append rows (a Z-set: weights add up) and compact when it has doubled."""
        added = fetch_all(self.db, f"INSERT INTO {table} {select}")[0][0]
        track = self.states.get(table)
        if track is None:
            rows = fetch_all(self.db, f"SELECT count(*) FROM {table}")[0][0]
            track = self.states[table] = [rows, rows]
        else:
            track[0] += added
        if track[0] > max(COMPACT_MIN_ROWS, 2 * track[1]):
            self.db.execute(
                f"CREATE OR REPLACE TABLE {table} AS SELECT * EXCLUDE (_w), sum(_w)::BIGINT AS _w"
                f" FROM {table} GROUP BY ALL HAVING sum(_w) <> 0"
            )
            rows = fetch_all(self.db, f"SELECT count(*) FROM {table}")[0][0]
            self.states[table] = [rows, rows]

    # -- aggregation ------------------------------------------------------------------
    def _aggregate(self, node: Aggregate, i: int, kids: list[str]) -> str:
        if _linear(node):
            return self._linear_aggregate(node, i, kids[0])
        return self._general_aggregate(node, i, kids[0])

    def _distinct(self, node: Distinct, i: int, kids: list[str]) -> str:
        return self._linear_aggregate(node, i, kids[0])

    def _linear_partial_sql(
        self, node: Aggregate | Distinct, src: str, with_epoch: bool = True
    ) -> str:
        """Per group (and epoch): the change of each accumulator."""
        keys = _group(node)
        sel = [f"{e} AS {n}" for n, e in keys]
        if with_epoch:
            sel.append("_e")
        sel.append("sum(_w)::BIGINT AS _n")
        sel += [f"{sql} AS {x}" for x, sql in self._accumulators(node)[0][1:]]
        group = " GROUP BY ALL" if keys or with_epoch else ""
        return f"SELECT {', '.join(sel)} FROM {src}{group}"

    def _accumulators(
        self, node: Aggregate | Distinct
    ) -> tuple[list[tuple[str, str]], dict[str, tuple[str, str]]]:
        """A linear aggregate's accumulators (name, partial SQL), `_n` (rows) first,
        and for each call the accumulators it reads: (non-NULL count, sum).

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
            if not self.tag_types:
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

    def _linear_aggregate(self, node: Aggregate | Distinct, i: int, src: str) -> str:
        db, v = self.db, self.view
        keys = [n for n, _ in _group(node)]
        aggs = list(getattr(node, "aggs", ()))
        scalar = isinstance(node, Aggregate) and node.scalar
        vscalar = isinstance(node, ViewScalarAggregate)
        state = f"s{v}_{i}_g"
        accs, uses = self._accumulators(node)
        acc = [x for x, _ in accs]
        partial = self._linear_partial_sql(node, src)
        if scalar and self._first:
            # the empty-input row exists from the view's first epoch on
            zeros = ", ".join(f"0 AS {x}" for x in acc)
            sums = ", ".join(f"sum({x}) AS {x}" for x in acc)
            partial = (
                f"SELECT _e, {sums} FROM ({partial} UNION ALL SELECT {self._end} AS _e, {zeros})"
                " GROUP BY _e"
            )
        if vscalar and self._first:
            # each view's group exists from the view's first epoch on
            zeros = ", ".join(f"0 AS {x}" for x in acc)
            sums = ", ".join(f"sum({x}) AS {x}" for x in acc)
            tags = ", ".join(f"_pv.{tag_of(k)} AS {k}" for k in keys)
            kl = ", ".join(keys)
            partial = (
                f"SELECT {kl}, _e, {sums} FROM ({partial} UNION ALL"
                f" SELECT {tags}, {self._end} AS _e, {zeros} FROM {self._pv}) GROUP BY {kl}, _e"
            )
        pk = [f"_p.{k}" for k in keys]
        on = ns_eq(pk, [f"_s.{k}" for k in keys])
        if self._multi:  # running sums over the batch's epochs
            running = [
                f"coalesce(_s.{x}, 0) + _p.{x}_r AS {x},"
                f" coalesce(_s.{x}, 0) + _p.{x}_r - _p.{x}_d AS {x}_old"
                for x in acc
            ]
            src_p = running_sums("_pp", keys, acc, self._wide)
            R = self._tmp(
                "_r",
                f"SELECT * FROM (WITH _pp AS ({partial}) SELECT"
                f" {', '.join(pk + ['_p._e'] + running)}, _s._n IS NOT NULL AS _had,"
                f" _p._i, _p._last FROM {src_p} AS _p LEFT JOIN {state} _s ON {on})",
            )
        else:  # one epoch: a group's running value is the state plus its change
            running = [
                f"coalesce(_s.{x}, 0) + _p.{x} AS {x}, coalesce(_s.{x}, 0) AS {x}_old" for x in acc
            ]
            tail = f" 1 AS _i, true AS _last FROM ({partial}) AS _p LEFT JOIN {state} _s ON {on}"
            R = self._tmp(
                "_r",
                f"SELECT {', '.join(pk + ['_p._e'] + running)}, _s._n IS NOT NULL AS _had,{tail}",
            )

        def final(old: bool) -> str:
            sfx = "_old" if old else ""
            out = list(keys)
            for a in aggs:
                c, s = (x + sfx for x in uses[a.name])
                if a.func == "count":
                    out.append(f"{c} AS {a.name}")
                elif a.func == "sum":
                    out.append(f"CASE WHEN {c} = 0 THEN NULL ELSE {s} END AS {a.name}")
                else:  # avg
                    out.append(
                        f"CASE WHEN {c} = 0 THEN NULL ELSE CAST({s} AS DOUBLE) / {c} END"
                        f" AS {a.name}"
                    )
            return ", ".join(out)

        sep = ", " if keys or aggs else ""
        if scalar or vscalar:
            new_exists, old_exists = "true", "(_had OR _i > 1)"
        else:
            new_exists, old_exists = "_n > 0", "_n_old > 0"
        # (inline: it reads only this batch's scratch table, not the state below)
        out = self._put(
            i,
            f"SELECT {final(False)}{sep}1 AS _w, _e FROM {R} WHERE {new_exists}"
            f" UNION ALL SELECT {final(True)}{sep}-1, _e FROM {R} WHERE {old_exists}",
            True,
        )
        # state: the last value of every group the batch changed
        cond = ns_eq([f"{state}.{k}" for k in keys], [f"_q.{k}" for k in keys])
        kl = ", ".join(keys) or "1 AS _one"
        db.execute(f"DELETE FROM {state} USING (SELECT DISTINCT {kl} FROM {R}) _q WHERE {cond}")
        keep = "true" if scalar or vscalar else "_n <> 0"
        db.execute(
            f"INSERT INTO {state} SELECT {', '.join(keys + acc)} FROM {R} WHERE _last AND {keep}"
        )
        return out

    def _general_aggregate(self, node: Aggregate, i: int, src: str) -> str:
        """Re-aggregate each changed group at each epoch it changed, from its rows."""
        db, v = self.db, self.view
        keys = [n for n, _ in node.group]
        kexpr = [e for _, e in node.group]
        need = _needed(node)
        m, o = f"s{v}_{i}_m", f"s{v}_{i}_o"
        if src.startswith("("):
            # an inline input (a chain of scans, filters, projections) is read three
            # times below: once materialized, DuckDB binds and plans it once
            src = self._tmp("_src", f"SELECT * FROM {src} AS _s")
        # One statement: the groups that changed and the epochs they changed at (_ch),
        # their rows at each of those epochs re-aggregated (_nv), next to the old
        # value: the previous epoch's new value, or the last output kept (o).
        ch_sel = ", ".join([f"{e} AS {n}" for n, e in node.group] + ["_e"])
        ch = f"SELECT DISTINCT {ch_sel} FROM {src}"
        vscalar = isinstance(node, ViewScalarAggregate)
        if node.scalar and self._first:
            ch = f"{ch} UNION SELECT {self._end}::BIGINT AS _e"
        if vscalar and self._first:
            tags = ", ".join(f"_pv.{tag_of(k)} AS {k}" for k in keys)
            ch = f"{ch} UNION SELECT {tags}, {self._end}::BIGINT AS _e FROM {self._pv}"
        nl = ", ".join(need)
        sep = ", " if nl else ""
        rows = (
            f"(SELECT {nl}{sep}_w, -1 AS _e FROM {m} UNION ALL SELECT {nl}{sep}_w, _e FROM {src})"
        )
        on = ns_eq([f"({e})" for e in kexpr], [f"_ch.{k}" for k in keys])
        if self._multi:
            on += " AND _x._e <= _ch._e"
        chk = ", ".join(f"_ch.{k}" for k in keys)
        chk_sep = ", " if chk else ""
        ms = (
            f"SELECT {chk}{chk_sep}_ch._e AS _t{sep}"
            f"{', '.join(f'_x.{c}' for c in need)}, sum(_x._w)::BIGINT AS _cnt"
            f" FROM _ch JOIN {rows} _x ON {on} GROUP BY ALL HAVING sum(_x._w) <> 0"
        )
        calls = ", ".join(f"{agg_sql(a)} AS {a.name}" for a in node.aggs)
        gk = ", ".join(keys + ["_t"])
        ctes = ""
        if (
            self._multi
            and need
            and all(a.func in DUPLICATE_BLIND and a.filter is None for a in node.aggs)
        ):
            ctes, nv = self._blind_nv(node, need, m, src)
        elif all(a.distinct or a.func in DUPLICATE_BLIND for a in node.aggs):
            # calls that ignore duplicates read each distinct row once, with its count
            nv = f"SELECT {gk}, sum(_cnt)::BIGINT AS _n, {calls} FROM ({ms}) AS _x GROUP BY {gk}"
        else:  # the others read each row as many times as it is there
            nv = (
                f"SELECT {gk}, count(*)::BIGINT AS _n, {calls}"
                f" FROM (SELECT * FROM ({ms}) AS _ms, range(_ms._cnt)) AS _x GROUP BY {gk}"
            )
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
        if self._multi:
            # One window over every group, in (group, epoch) order (a partition per
            # group costs twice as much): a row is its group's first in the batch
            # when the previous row is another group's, and its last likewise.
            g = f"row({', '.join(pk)})" if pk else "1"
            first = f"(lag({g}) OVER _w IS DISTINCT FROM {g})"
            cols_old = [
                f"CASE WHEN {first} THEN _o.{c} ELSE lag(_nv.{c}) OVER _w END AS {c}_old"
                for c in vcols
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
            rest = (
                " coalesce(_o._n, 0) AS _n_old, _o._n IS NOT NULL AS _had, 1 AS _i, true AS _last"
            )
        R = self._tmp(
            "_r",
            f"SELECT * FROM (WITH _ch AS ({ch}){ctes} SELECT"
            f" {', '.join(pk + ['_ch._e'] + cols_new + cols_old)},"
            f" coalesce(_nv._n, 0) AS _n,{rest}"
            f" FROM _ch LEFT JOIN ({nv}) AS _nv ON {nv_on} LEFT JOIN {o} _o ON {o_on}{window})",
        )
        if node.scalar or vscalar:
            new_exists, old_exists = "true", "(_had OR _i > 1)"
        else:
            new_exists, old_exists = "_n > 0", "_n_old > 0"
        sep2 = ", " if keys or vcols else ""
        newc = ", ".join(keys + vcols)
        oldc = ", ".join(keys + [f"{c}_old AS {c}" for c in vcols])
        out = self._put(
            i,
            f"SELECT {newc}{sep2}1 AS _w, _e FROM {R} WHERE {new_exists}"
            f" UNION ALL SELECT {oldc}{sep2}-1, _e FROM {R} WHERE {old_exists}",
            True,
        )
        cond = ns_eq([f"{o}.{k}" for k in keys], [f"_q.{k}" for k in keys])
        kl = ", ".join(keys) or "1 AS _one"
        db.execute(f"DELETE FROM {o} USING (SELECT DISTINCT {kl} FROM {R}) _q WHERE {cond}")
        keep = "true" if node.scalar or vscalar else "_n > 0"
        db.execute(
            f"INSERT INTO {o} SELECT {', '.join(keys + vcols)}, _n FROM {R} WHERE _last AND {keep}"
        )
        self._append_state(m, f"SELECT {nl}{sep}_w FROM {src}")
        return out

    def _blind_nv(self, node: Aggregate, need: list[str], m: str, src: str) -> tuple[str, str]:
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
        ksel = ", ".join(f"{e} AS {n}" for n, e in node.group)
        ctes = (
            f", _g AS (SELECT DISTINCT {kl} FROM _ch)"
            f", _tv AS (SELECT DISTINCT {nl} FROM {src})"
            # the changed groups' rows, consolidated, and whether the batch touches them
            f", _mr AS MATERIALIZED (SELECT {nl}, _c, EXISTS (SELECT 1 FROM _tv WHERE {same})"
            f" AS _touched FROM (SELECT {', '.join(f'_x.{c}' for c in need)},"
            f" sum(_x._w)::BIGINT AS _c FROM {m} AS _x JOIN _g ON {on_g}"
            f" GROUP BY ALL HAVING sum(_x._w) <> 0) AS _r)"
            f", _base AS (SELECT {ksel}, sum(_c)::BIGINT AS _n, {calls} FROM _mr"
            f" WHERE NOT _touched GROUP BY ALL)"
            f", _tn AS (SELECT {', '.join(f'_ch.{k}' for k in keys)}, _ch._e AS _t,"
            f" sum(_cnt)::BIGINT AS _n, {calls} FROM (SELECT {', '.join(f'_ch.{k}' for k in keys)},"
            f" _ch._e, {', '.join(f'_x.{c}' for c in need)}, sum(_x._w)::BIGINT AS _cnt"
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
                f"CASE WHEN {b} IS NULL THEN {t} WHEN {t} IS NULL THEN {b} ELSE {both} END"
                f" AS {a.name}"
            )

        chk = "".join(f"_ch.{k}, " for k in keys)
        b_on = ns_eq([f"_b.{k}" for k in keys], [f"_ch.{k}" for k in keys])
        t_on = ns_eq([f"_tn.{k}" for k in keys], [f"_ch.{k}" for k in keys])
        nv = (
            f"SELECT {chk}_ch._e AS _t, coalesce(_b._n, 0) + coalesce(_tn._n, 0) AS _n,"
            f" {', '.join(combine(a) for a in node.aggs)} FROM _ch"
            f" LEFT JOIN _base AS _b ON {b_on} LEFT JOIN _tn ON {t_on} AND _tn._t = _ch._e"
        )
        return ctes, nv

    # -- set operations ---------------------------------------------------------------
    def _setop(self, node: SetOp, i: int, kids: list[str]) -> str:
        dl, dr = kids
        ln = ", ".join(f"{a} AS {b}" for a, b in zip(node.left.columns, node.columns, strict=True))
        rn = ", ".join(f"{a} AS {b}" for a, b in zip(node.right.columns, node.columns, strict=True))
        sep = ", " if ln else ""
        if node.op == "union":
            assert node.all, "UNION is lowered to Distinct(UNION ALL)"
            return self._put(
                i,
                f"SELECT {ln}{sep}_w, _e FROM {dl} AS _l UNION ALL"
                f" SELECT {rn}{sep}_w, _e FROM {dr} AS _r",
                True,
            )
        db, v = self.db, self.view
        state = f"s{v}_{i}_c"
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
        if self._multi:  # running counts over the batch's epochs
            run = ", ".join(
                f"coalesce(_s.{x}, 0) + _p.{x}_r AS {x},"
                f" coalesce(_s.{x}, 0) + _p.{x}_r - _p.{x}_d AS {x}_old"
                for x in ("_a", "_b")
            )
            src_p = running_sums("_pp", names, ["_a", "_b"], self._wide)
            R = self._tmp(
                "_r",
                f"SELECT * FROM (WITH _pp AS ({partial}) SELECT {', '.join(pk + ['_p._e'])},"
                f" {run}, _p._last FROM {src_p} AS _p LEFT JOIN {state} _s ON {on})",
            )
        else:  # one epoch: the state plus the change
            run = ", ".join(
                f"coalesce(_s.{x}, 0) + _p.{x} AS {x}, coalesce(_s.{x}, 0) AS {x}_old"
                for x in ("_a", "_b")
            )
            tail = f" true AS _last FROM ({partial}) AS _p LEFT JOIN {state} _s ON {on}"
            R = self._tmp("_r", f"SELECT {', '.join(pk + ['_p._e'])}, {run},{tail}")
        f = {
            ("intersect", True): "least({a}, {b})",
            ("intersect", False): "CASE WHEN {a} > 0 AND {b} > 0 THEN 1 ELSE 0 END",
            ("except", True): "greatest({a} - {b}, 0)",
            ("except", False): "CASE WHEN {a} > 0 AND {b} <= 0 THEN 1 ELSE 0 END",
        }[(node.op, node.all)]
        new, old = f.format(a="_a", b="_b"), f.format(a="_a_old", b="_b_old")
        out = self._put(
            i,
            f"SELECT {nl}{sep}({new}) - ({old}) AS _w, _e FROM {R} WHERE ({new}) <> ({old})",
            True,
        )
        cond = ns_eq([f"{state}.{c}" for c in names], [f"_q.{c}" for c in names])
        db.execute(f"DELETE FROM {state} USING (SELECT DISTINCT {nl} FROM {R}) _q WHERE {cond}")
        db.execute(
            f"INSERT INTO {state} SELECT {nl}{sep}_a, _b FROM {R}"
            " WHERE _last AND (_a <> 0 OR _b <> 0)"
        )
        return out

    # -- the view's output ------------------------------------------------------------
    def integrate(self, db: duckdb.DuckDBPyConnection, root: str) -> int:
        """Fold the root's changes into the output versions and the output log.

        One scratch table holds, per changed row and epoch, the consolidated weight,
        the running multiplicity and the next epoch the row changes at; the log,
        the closing of live versions and the new versions all come from it."""
        v = self.view
        self._op = "out"
        names = list(self.plan.root.columns)
        nl = ", ".join(names)
        sep = ", " if nl else ""
        qk = [f"_q.{c}" for c in names]
        changes = (
            f"SELECT {nl}{sep}_e, sum(_w)::BIGINT AS _w FROM {root}"
            " GROUP BY ALL HAVING sum(_w) <> 0"
        )
        live = (
            f" LEFT JOIN (SELECT * FROM o{v} WHERE _to = {LIVE}) _c"
            f" ON {ns_eq(qk, [f'_c.{c}' for c in names])}"
        )
        if self._multi:
            # per row and epoch: the running multiplicity and the row's next epoch in
            # the batch (see `running_sums`)
            if self._wide:
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
            R = self._tmp(
                "_r",
                f"SELECT * FROM (WITH _qq AS ({changes}) SELECT {', '.join(qk)}{sep}_q._e, _q._w,"
                f" coalesce(_c._n, 0) + _q._cum AS _n, _q._next, _q._i"
                f" FROM {ranked} AS _q{live})",
            )
        else:  # one epoch: a row changes once
            R = self._tmp(
                "_r",
                f"SELECT {', '.join(qk + ['_q._e', '_q._w'])}, coalesce(_c._n, 0) + _q._w AS _n,"
                f" NULL::BIGINT AS _next, 1 AS _i FROM ({changes}) AS _q{live}",
            )
        n = self.rows
        if not n:
            return 0
        if CHECKS:
            neg = fetch_all(db, f"SELECT count(*) FROM {R} WHERE _n < 0")[0][0]
            if neg:
                raise RuntimeError(f"view {v}: a row's multiplicity went negative")
        db.execute(f"INSERT INTO l{v} SELECT {nl}{sep}_w, _e FROM {R}")
        cond = ns_eq([f"o{v}.{c}" for c in names], [f"_m.{c}" for c in names])
        db.execute(
            f"UPDATE o{v} SET _to = _m._e FROM (SELECT * FROM {R} WHERE _i = 1) _m"
            f" WHERE o{v}._to = {LIVE} AND {cond}"
        )
        db.execute(
            f"INSERT INTO o{v} SELECT {nl}{sep}_n, _e, coalesce(_next, {LIVE}) FROM {R}"
            " WHERE _n > 0"
        )
        return int(n)

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        return self._db

    @db.setter
    def db(self, value: duckdb.DuckDBPyConnection) -> None:
        self._db = value


def _group(node: Aggregate | Distinct) -> list[tuple[str, str]]:
    if isinstance(node, Distinct):
        return [(c, c) for c in node.columns]
    return list(node.group)


def _linear(node: Node) -> bool:
    if isinstance(node, Distinct):
        return True
    return isinstance(node, Aggregate) and all(a.linear for a in node.aggs)


def _needed(node: Aggregate) -> list[str]:
    """Input columns a general aggregate keeps per group: those its keys and calls use."""
    from headwater.planner.ir import refs

    used: set[str] = set()
    for _, e in node.group:
        used |= refs(e) | set(TAG_REFS.findall(e))
    for a in node.aggs:
        for e in (a.arg, a.filter, *a.extra, *a.order):
            if e:
                used |= refs(e) | set(TAG_REFS.findall(e))
    return [c for c in node.input.columns if c in used]


def _storable(t: str) -> str:
    """DuckDB types of literals that cannot be stored as such."""
    return {"NULL": "INTEGER", '"NULL"': "INTEGER"}.get(t, t)


def arrow_rows(db: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return db.sql(sql).to_arrow_table()
