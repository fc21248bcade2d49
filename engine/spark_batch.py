"""One micro-batch of a view's program run by Spark: the rules' steps, rendered.

`batch_steps` lists, for one batch, every step of every operator's rule and of the
view's output fold, in the order `ViewProgram.advance` (engine/delta.py) runs them:
the rules are pure (they run nothing), so the list is the batch's whole program.
`SparkBatch` runs such a list on a SparkSession over relations registered as temp
views (the batch's changes and the operators' states, e.g. read from Parquet):

    Fill(t, q)   t becomes the relation q (lazy; `eager` checkpoints it)
    Append(s, q) s becomes s UNION ALL q (q cast to s's columns by position)
    Run(DML)     s becomes the relation the DELETE / UPDATE / INSERT leaves
                 (engine/spark_sql.py `state_update`)

The state tables' new values are then relations the caller reads or writes out
(Parquet). Appended states are not compacted here (the DuckDB program compacts
when a state doubles; the caller decides when Spark does).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.engine import rules
from headwater.engine.rules.context import (
    Append,
    BatchContext,
    Fill,
    Fixpoint,
    Operator,
    Run,
    Step,
)
from headwater.engine.rules.output import output
from headwater.engine.spark_sql import state_update, to_spark
from headwater.planner.ir import unique_columns

if TYPE_CHECKING:
    from headwater.engine.delta import ViewProgram


def batch_steps(prog: ViewProgram, ctx: BatchContext) -> list[Step]:
    """Every step of one batch of `prog`, in the order the DuckDB program runs them:
    each operator's (children first), then the output fold's."""
    steps: list[Step] = []
    done: dict[int, str] = {}

    def changes(node: Any) -> str:
        i = prog.index[id(node)]
        if i not in done:
            kids = tuple(changes(c) for c in node.children())
            delta = rules.changes(node, Operator(i, tuple(prog.types[i]), kids), ctx)
            steps.extend(delta.steps)
            done[i] = delta.changes
        return done[i]

    root = changes(prog.plan.root)
    out = output(list(prog.plan.root.columns), root, ctx, unique_columns(prog.plan.root))
    return [*steps, out.ranked, *out.fold]


def column_types(prog: ViewProgram) -> dict[str, str]:
    """DuckDB type of every internal column of the program (names are unique)."""
    types: dict[str, str] = {}
    for i, node in enumerate(prog.nodes):
        types.update(zip(node.columns, prog.types[i], strict=True))
    return types


def tables_written(steps: Iterable[Step]) -> list[str]:
    """The state (and output) tables a batch's steps change, in first-change order."""
    names: list[str] = []
    for step in steps:
        if isinstance(step, Append):
            name = step.table
        elif isinstance(step, Run):
            name = state_update(step.sql, []).table
        else:
            continue
        if name not in names:
            names.append(name)
    return names


@dataclass
class SparkBatch:
    """Runs a batch's steps on `spark` (relations named as in the rules' SQL must be
    registered as temp views first). `eager`: materialize each step's relation
    (`localCheckpoint`) and time it; otherwise Spark plans the batch lazily and
    runs it when the caller reads the results."""

    spark: Any
    types: dict[str, str]  # column_types(prog): for `/` of integers
    eager: bool = False
    timings: list[tuple[str, float]] = field(default_factory=list)  # (step, seconds)
    # per state the batch changed: the relations appended to it, or None once it was
    # replaced (the caller then writes it whole; otherwise only the appended rows)
    changed: dict[str, list[Any] | None] = field(default_factory=dict)

    def run(self, steps: Iterable[Step]) -> None:
        for step in steps:
            t0 = time.perf_counter()
            name = self.step(step)
            self.timings.append((name, time.perf_counter() - t0))

    def step(self, step: Step) -> str:
        """Run one step; returns a label naming it (kind and table)."""
        if isinstance(step, Fixpoint):
            self._bind(step.table, self._fixpoint(step))
            return f"fixpoint {step.table}"
        if isinstance(step, Fill):
            self._bind(step.table, self._sql(step.select))
            return f"fill {step.table}"
        if isinstance(step, Append):
            self._append(step.table, self._sql(step.select))
            return f"append {step.table}"
        assert isinstance(step, Run)
        table = state_update(step.sql, []).table
        old = self.spark.table(table)
        update = state_update(step.sql, list(old.columns), self.types)
        new = self.spark.sql(update.select)
        if update.kind == "append":
            self._append(table, new)
        else:
            self._bind(table, new)
            self.changed[table] = None
        return f"{update.kind} {table}"

    def _fixpoint(self, fp: Fixpoint) -> Any:
        """WITH RECURSIVE's fixpoint at each epoch of `fp.epochs`, iterated here (Spark
        4.3's recursive CTEs take UNION ALL only, and no LATERAL one per epoch): the
        base's rows, then the step over the last iteration's new rows (`fp.work`) until
        it adds none; under UNION only rows not derived yet are new (EXCEPT DISTINCT,
        NULLs equal). More than `fp.limit` iterations raise `fp.error`, as DuckDB's
        form of the rule does."""
        from pyspark.sql import functions as F

        cols = list(fp.columns)
        base_sql = to_spark(f"SELECT * FROM {fp.base} AS _b", self.types)
        step_sql = to_spark(f"SELECT * FROM {fp.step} AS _s", self.types)
        epochs = sorted(r[0] for r in self.spark.table(fp.epochs).select("_t").collect())
        parts = []
        try:
            for t in epochs or [-2]:  # (none: an empty relation of the right columns)
                for name, rows in fp.inputs:
                    at = f"SELECT * FROM {rows.replace('{t}', str(int(t)))} AS _x"
                    self._bind(name, self._sql(at))
                found = self.spark.sql(base_sql).toDF(*cols)
                if not fp.all:
                    found = found.distinct()
                found = found.localCheckpoint(eager=True)
                new, depth = found, 0
                while epochs:
                    new.createOrReplaceTempView(fp.work)
                    new = self.spark.sql(step_sql).toDF(*cols)
                    if not fp.all:
                        new = new.distinct().subtract(found)
                    new = new.localCheckpoint(eager=True)
                    if new.isEmpty():
                        break
                    depth += 1  # the iteration that derived `new`
                    if depth > fp.limit:
                        raise ValueError(fp.error)
                    found = found.unionAll(new)
                counted = found.groupBy(*[F.col(f"`{c}`") for c in cols]).count()
                picked = [F.col(f"`{c}`").alias(n) for c, n in zip(cols, fp.names, strict=True)]
                parts.append(
                    counted.select(
                        F.lit(t).cast("bigint").alias("_t"),
                        *picked,
                        F.col("count").cast("bigint").alias("_n"),
                    )
                )
        finally:
            for name in [fp.work, *(n for n, _ in fp.inputs)]:
                self.spark.catalog.dropTempView(name)
        out = parts[0]
        for p in parts[1:]:
            out = out.unionAll(p)
        return out if epochs else out.where("false")

    def _sql(self, duckdb_sql: str) -> Any:
        return self.spark.sql(to_spark(duckdb_sql, self.types))

    def _append(self, table: str, rows: Any) -> None:
        """`rows` added to `table`, cast to its columns by position (as INSERT does).
        Only the new rows are materialized (`eager`): an append adds files."""
        old = self.spark.table(table)
        named = rows.toDF(*old.columns)
        new = named.select(*[named[f.name].cast(f.dataType) for f in old.schema])
        if self.eager:
            new = new.localCheckpoint(eager=True)
        parts = self.changed.setdefault(table, [])
        if parts is not None:
            parts.append(new)
        old.unionAll(new).createOrReplaceTempView(table)

    def _bind(self, name: str, df: Any) -> None:
        if self.eager:
            df = df.localCheckpoint(eager=True)
        df.createOrReplaceTempView(name)
