"""A view's program: its operators in order, their states, and one micro-batch's walk.

A change table has the operator's columns plus `_w` (weight) and `_e` (epoch): the
Z-set of changes, per epoch, of that operator's output. `ViewProgram.advance`
computes, for the epochs (frontier, end] of one micro-batch, the change relation of
every operator bottom-up by its rule (engine/rules/, one module per operator, the
table of them in engine/rules/__init__.py and docs/engine.md), runs the steps each
rule gives (scratch tables, state updates), and folds the view's changes into its
versioned output (rules/output.py). A micro-batch covering many epochs still yields
the view's state at each of them: every rule carries `_e` through, stateful rules
integrate in epoch order inside the batch.

Scalar expressions are evaluated by DuckDB as SQL text (planner/ir.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
from headwater.engine import rules
from headwater.engine.rules.context import (
    AFTER_PARAM,
    END_PARAM,
    Append,
    BatchContext,
    Fill,
    Operator,
    Run,
    Step,
)
from headwater.engine.rules.output import output
from headwater.planner.ir import Node, Plan, Project, Scan, SetOp, Values, unique_columns, walk
from headwater.planner.render import full_sql, q

# The changes of an operator none of whose inputs changed in a batch (see `advance`).
EMPTY = "<no changes>"
# Consistency checks that cost a statement per batch (tests turn them on).
CHECKS = os.environ.get("HW_ENGINE_CHECKS", "") == "1"
COMPACT_MIN_ROWS = 10_000  # join/multiset states are compacted when they doubled past this
# A program's parsed statements kept (`ViewProgram._parsed`); past this, the cache starts
# over (texts that embed values other than the batch's bounds do not repeat).
PARSED_MAX = 256


def fetch_all(
    db: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> list[tuple]:
    """Run and fully consume a statement (DuckDB 2 keeps unfinished results open)."""
    return db.execute(sql, params or []).fetchall()


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

    view: int | str  # a view's id, or a family's name (`f{view}`)
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
    # statement text -> DuckDB's parse of it: a batch's statements take its epoch bounds
    # as parameters (BatchContext.params), so the next batches run the same texts, and
    # parsing a rule's statement costs DuckDB ~30% of running it on a few thousand rows
    _parsed: dict[str, Any] = field(default_factory=dict, repr=False)
    _bounds: dict[str, int] = field(default_factory=dict, repr=False)

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
        for i, node in enumerate(self.nodes):  # a NULL padding a union's side: its type
            if isinstance(node, SetOp):
                for side in (node.left, node.right):
                    for k, column in enumerate(side.columns):
                        self._type_null(side, column, self.types[i][k])

    def _type_null(self, node: Node, column: str, type_: str) -> bool:
        """Give `column` of `node` the union's `type_` where it is a bare NULL, directly
        or passed through Projects (a family's tags sit on top): DuckDB types a bare
        NULL INTEGER, and Spark cannot union that with a boolean or a string."""
        if not isinstance(node, Project):
            return False
        expr = dict(node.exprs).get(column, "").strip()
        if expr.upper() == "NULL" or self._type_null(node.input, expr, type_):
            self.types[self.index[id(node)]][node.columns.index(column)] = type_
            return True
        return False

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
        """The operator's state tables: (name, a query of their columns)."""
        v = self.view
        return rules.state_schemas(
            node, v, i, lambda n: f"_e{v}_{self.index[id(n)]}", bool(self.tag_types)
        )

    def drop(self, db: duckdb.DuckDBPyConnection) -> None:
        for name in self.tables():
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
        unchanged: frozenset[int] = frozenset(),
    ) -> int:
        """Process epochs (frontier, batch.end]; `first`: the view's backfill batch, in
        which the inputs' changes are their whole contents at `batch.end`. `multi`:
        the inputs changed at more than one epoch of the batch; when they did not
        (a batch of one epoch, a backfill, ...), every operator's changes are at that
        one epoch, so each key changes at most once and the rules need no window
        functions (DuckDB spends 3-5 ms on one, even over a few rows). Returns the
        number of output changes. The caller holds the transaction.

        `pv` (a family's program): the views to advance, a relation `_pv(_hw_v,
        _hw_p0, ..., _after)` of each view, its constants and its frontier.

        `unchanged`: scanned tables without changes in the batch. An operator none
        of whose inputs changed has no changes and runs nothing (a join of a changed
        and an unchanged input only the changed side's term), so a batch that
        changes one table of a view runs only the operators above its scan."""
        ctx = self.context(batch, frontier, first, multi, pv, unchanged, params=True)
        self._bounds = {AFTER_PARAM: frontier, END_PARAM: batch.end}
        done: dict[int, str] = {}
        root = self._changes(self.plan.root, ctx, done)
        if root is EMPTY:
            return 0
        return self._integrate(db, root, ctx)

    def context(
        self,
        batch: Batch,
        frontier: int,
        first: bool,
        multi: bool | int = True,
        pv: str | None = None,
        unchanged: frozenset[int] = frozenset(),
        params: bool = False,
    ) -> BatchContext:
        """What every rule of one batch is given (see `advance`); `params`: the epoch
        bounds as parameters, which `_sql` binds."""
        # `multi`: True (a number unknown) or at how many epochs the inputs changed
        return BatchContext(
            program=self.view,
            frontier=frontier,
            end=batch.end,
            first=first,
            epochs=int(multi) if multi is not True else 2**31,
            changes=batch.changes,
            pv=pv,
            family=bool(self.tag_types),
            unchanged=unchanged,
            params=params,
        )

    def tables(self) -> list[str]:
        """Its output, change-log and state tables."""
        names = self.__dict__.get("_tables")
        if names is None:
            v = self.view
            names = self.__dict__["_tables"] = [f"o{v}", f"l{v}"] + [
                n for i, node in enumerate(self.nodes) for n, _ in self.state_schemas(i, node)
            ]
        return list(names)

    def _changes(self, node: Node, ctx: BatchContext, done: dict[int, str]) -> str:
        """The operator's changes (its children's first), each rule's steps run."""
        i = self.index[id(node)]
        if i in done:
            return done[i]
        kids = tuple(self._changes(c, ctx, done) for c in node.children())
        if not ctx.first and (
            all(k is EMPTY for k in kids)
            if kids
            else isinstance(node, Values) or isinstance(node, Scan) and node.table in ctx.unchanged
        ):
            done[i] = EMPTY  # no input changed: no changes, nothing to run
            return EMPTY
        empty = tuple(k is EMPTY for k in kids)
        kids = tuple(
            f"_e{self.view}_{self.index[id(c)]}" if k is EMPTY else k
            for c, k in zip(node.children(), kids, strict=True)
        )
        delta = rules.changes(node, Operator(i, tuple(self.types[i]), kids, empty), ctx)
        for step in delta.steps:
            self._run(step)
        done[i] = delta.changes
        return delta.changes

    def _integrate(self, db: duckdb.DuckDBPyConnection, root: str, ctx: BatchContext) -> int:
        """Fold the root's changes into the output versions and the output log."""
        out = output(list(self.plan.root.columns), root, ctx, unique_columns(self.plan.root))
        n = self._fill(out.ranked)
        if not n:
            return 0
        if CHECKS and self._sql(out.negative)[0][0]:
            raise RuntimeError(f"view {self.view}: a row's multiplicity went negative")
        for step in out.fold:
            self._sql(step.sql)
        return int(n)

    # -- running a rule's steps -------------------------------------------------------
    def _run(self, step: Step) -> None:
        if isinstance(step, Fill):
            self._fill(step)
        elif isinstance(step, Append):
            self._append_state(step.table, step.select)
        else:
            assert isinstance(step, Run)
            self._sql(step.sql)

    def _sql(self, sql: str) -> list[tuple]:
        """Run one of the batch's statements, parsed once per text, with the batch's
        epoch bounds bound to the parameters it has."""
        parsed = self._parsed.get(sql)
        if parsed is None:
            statements = self.db.extract_statements(sql)
            if len(statements) != 1:  # (no rule writes a script: run it as given)
                bounds = {k: v for k, v in self._bounds.items() if f"${k}" in sql}
                return fetch_all(self.db, sql, bounds or None)
            if len(self._parsed) >= PARSED_MAX:
                self._parsed.clear()
            parsed = self._parsed[sql] = statements[0]
        names = parsed.named_parameters
        return self.db.execute(
            parsed, {k: self._bounds[k] for k in names} if names else None
        ).fetchall()

    def _fill(self, step: Fill) -> int:
        """Materialize into a scratch temp table; returns its rows. Creating a table
        costs ~5 ms in DuckDB (DDL) against ~1 ms to refill one, so each is created
        once per connection and refilled by later batches (the same SQL, so the same
        columns)."""
        if step.table in self.scratch:
            self._sql(f"DELETE FROM {step.table}")
            return self._written(f"INSERT INTO {step.table} {step.select}", step.table)
        create = f"CREATE OR REPLACE TEMP TABLE {step.table} AS {step.select}"
        rows = self._written(create, step.table)
        self.scratch.add(step.table)
        return rows

    def _written(self, sql: str, table: str) -> int:
        """Run a CREATE ... AS / INSERT; the rows it wrote. DuckDB answers with the count,
        but once answered nothing (a view joining a family's backfill on a server with
        many views: tests/test_verify.py after the whole suite): then count the table."""
        rows = self._sql(sql)
        return rows[0][0] if rows else fetch_all(self.db, f"SELECT count(*) FROM {table}")[0][0]

    def forget_scratch(self) -> None:
        """After a rollback: temp tables created in that transaction are gone."""
        self.scratch.clear()

    def _append_state(self, table: str, select: str) -> None:
        """Append rows (a Z-set: weights add up) and compact when it has doubled."""
        added = self._sql(f"INSERT INTO {table} {select}")[0][0]
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

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        return self._db

    @db.setter
    def db(self, value: duckdb.DuckDBPyConnection) -> None:
        self._db = value


def _storable(t: str) -> str:
    """DuckDB types of literals that cannot be stored as such."""
    return {"NULL": "INTEGER", '"NULL"': "INTEGER"}.get(t, t)


def arrow_rows(db: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return db.sql(sql).to_arrow_table()
