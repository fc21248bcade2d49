"""What a rule is given and what it gives back.

A rule is a function `rule(node, op, ctx) -> Delta`: from its operator's node, the
operator (`op`: its index, output types and its children's change relations) and
the batch (`ctx`, immutable), the SQL relation of the operator's changes and the
statements that produce it and update the operator's state, in the order to run
them. Rules run nothing themselves: the program (engine/delta.py) runs the steps
of each rule before its parent's rule reads the changes.

A change relation has the operator's columns plus `_w` (weight) and `_e` (epoch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from headwater.planner.ir import Node

# Running sums over a batch by a self-join of each key's epochs when the batch changed
# at no more epochs than this, by window functions otherwise (see rules/running.py).
SELF_JOIN_EPOCHS = 32
# The batch's epoch bounds as DuckDB named parameters (`BatchContext.params`): a view's
# statements then keep one text from batch to batch, and DuckDB parses each once.
AFTER_PARAM, END_PARAM = "hw_after", "hw_end"


@dataclass(frozen=True)
class BatchContext:
    """One micro-batch of one program: epochs (frontier, end] and where things are."""

    program: int | str  # the view's id, or a family's name (`f{view}`): names its tables
    frontier: int
    end: int
    # the view's backfill batch: the inputs' changes are their contents at `end`
    first: bool
    # at how many epochs the inputs changed (2**31: unknown); at one, every operator's
    # changes are at that epoch and the rules need no window functions
    epochs: int
    # (table oid, after, end: SQL of epochs) -> SQL relation of (columns, _hw_w, _hw_epoch)
    changes: Callable[[int, str, str], str]
    # a family's program (engine/family.py): the views to advance, a relation
    # `_pv(_hw_v, _hw_p0, ..., _after)` of each view, its constants and its frontier
    pv: str | None = None
    family: bool = False  # the program is a family's (its scans carry tag columns)
    # tables that did not change in the batch: operators whose inputs are all unchanged
    # have no changes and run nothing (engine/delta.py), a join skips the terms of an
    # unchanged side
    unchanged: frozenset[int] = frozenset()
    # the epoch bounds in the SQL as parameters (`after_sql`, `end_sql`), not literals
    params: bool = False

    @property
    def after_sql(self) -> str:
        """The batch's lower epoch bound (exclusive) in SQL."""
        return f"CAST(${AFTER_PARAM} AS BIGINT)" if self.params else str(self.frontier)

    @property
    def end_sql(self) -> str:
        """The batch's last epoch in SQL."""
        return f"CAST(${END_PARAM} AS BIGINT)" if self.params else str(self.end)

    @property
    def multi(self) -> bool:
        return self.epochs > 1

    @property
    def wide(self) -> bool:
        return self.epochs > SELF_JOIN_EPOCHS

    def scratch(self, alias: str, op: int | str) -> str:
        """A scratch table of an operator (`op`: its index, or `out`). One-epoch and
        multi-epoch forms of a rule get a table each: their column types may differ."""
        mode = "1" if not self.multi else "w" if self.wide else ""
        return f"{alias}{mode}_{self.program}_{op}"


def state_table(program: int | str, op: int, kind: str) -> str:
    """An operator's state table: `s{program}_{op}_{kind}`."""
    return f"s{program}_{op}_{kind}"


@dataclass(frozen=True)
class Operator:
    """One operator of a program as its rule sees it."""

    index: int  # its place in the program (names its tables)
    types: tuple[str, ...]  # DuckDB types of its output columns
    inputs: tuple[str, ...]  # SQL relations of its children's changes
    # for each input, whether it has no changes in the batch (empty: not known)
    empty: tuple[bool, ...] = ()

    def is_empty(self, i: int) -> bool:
        return i < len(self.empty) and self.empty[i]

    def state(self, ctx: BatchContext, kind: str) -> str:
        return state_table(ctx.program, self.index, kind)


@dataclass(frozen=True)
class Fill:
    """Materialize `select` into the scratch table `table` (created once per
    connection, then emptied and refilled: DDL costs ~5 ms in DuckDB, a refill ~1)."""

    table: str
    select: str


@dataclass(frozen=True)
class Fixpoint(Fill):
    """A Fill whose relation is a WITH RECURSIVE fixpoint at each epoch of the table
    `epochs` (its `_t`): `select`, a LATERAL recursive CTE per epoch, is how DuckDB
    computes it. Its parts, for an executor without such a query (Spark iterates the
    step itself: engine/spark_batch.py): each input's rows at an epoch (`inputs`:
    a name and the DuckDB SQL of its rows at the epoch `{t}`), the terms over those
    names (`base`; `step`, which reads the last iteration's rows as `work`), the
    recursion's column names (`columns`) and the output's (`names`), UNION ALL or
    UNION (`all`), and the iterations allowed (`limit`, then `error` is raised).
    Its rows: (_t, names..., _n), each distinct row of the fixpoint at epoch _t with
    its multiplicity."""

    epochs: str = ""
    inputs: tuple[tuple[str, str], ...] = ()
    base: str = ""
    step: str = ""
    work: str = ""
    columns: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    all: bool = False
    limit: int = 0
    error: str = ""


@dataclass(frozen=True)
class Run:
    """Run a statement (a state update)."""

    sql: str


@dataclass(frozen=True)
class Append:
    """Append Z-set rows to a state table (weights add up; the program compacts it)."""

    table: str
    select: str


Step = Fill | Run | Append  # (a Fixpoint is a Fill)


@dataclass(frozen=True)
class Delta:
    """An operator's changes (a table or an inline subquery) and the steps that make
    them and update its state."""

    changes: str
    steps: tuple[Step, ...] = ()


def cast_changes(node: Node, op: Operator, select: str) -> str:
    """`select`'s changes typed as the operator's output."""
    casts = [f"CAST({c} AS {t}) AS {c}" for c, t in zip(node.columns, op.types, strict=True)]
    casts += ["CAST(_w AS BIGINT) AS _w", "CAST(_e AS BIGINT) AS _e"]
    return f"SELECT {', '.join(casts)} FROM ({select}) AS _s"


def inline(node: Node, op: Operator, select: str, steps: tuple[Step, ...] = ()) -> Delta:
    """Changes as an inline subquery: a chain of linear operators is one SELECT."""
    return Delta(f"({cast_changes(node, op, select)})", steps)


def materialized(
    node: Node, op: Operator, ctx: BatchContext, select: str, after: tuple[Step, ...] = ()
) -> Delta:
    """Changes materialized into `d{program}_{op}`, then the steps `after`."""
    name = f"d{ctx.program}_{op.index}"
    return Delta(name, (Fill(name, cast_changes(node, op, select)), *after))
