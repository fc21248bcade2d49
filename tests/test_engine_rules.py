"""Each operator's rule (engine/rules/) alone, in an in-memory DuckDB, on small Z-sets.

A Z-set literal is a list of `(row..., weight, epoch)`; a rule's inputs are such
literals loaded as change tables, its state tables are created as the program
creates them, and the test checks the rule's changes (consolidated per row and
epoch) and its state after one or more batches.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import duckdb
import pytest
from headwater.engine import rules
from headwater.engine.rules.context import Append, BatchContext, Fill, Operator, Run
from headwater.engine.rules.output import LIVE, output
from headwater.planner.ir import (
    AggCall,
    Aggregate,
    Difference,
    Distinct,
    Filter,
    Join,
    Node,
    Project,
    Scan,
    SetOp,
    Values,
)

P = "t"  # the program's name in table names
ZSet = Sequence[tuple[Any, ...]]  # rows of (columns..., weight, epoch)


def leaf(*cols: str, table: int = 1) -> Scan:
    """A child operator with these columns (its changes are given as literals)."""
    return Scan(table, cols, cols)


class Harness:
    """An in-memory DuckDB in which rules run as the program runs them."""

    def __init__(self) -> None:
        self.db = duckdb.connect()
        self.n = 0

    def zset(self, types: dict[str, str], rows: ZSet) -> str:
        """A change table holding `rows`."""
        self.n += 1
        name = f"z{self.n}"
        cols = ", ".join(f"{c} {t}" for c, t in types.items())
        self.db.execute(f"CREATE TEMP TABLE {name} ({cols}, _w BIGINT, _e BIGINT)")
        for r in rows:
            self.db.execute(f"INSERT INTO {name} VALUES ({', '.join('?' * len(r))})", list(r))
        return name

    def states(self, node: Node, types: dict[int, dict[str, str]]) -> None:
        """Create the operator's state tables; `types`: id(node) -> its column types,
        for the node and its children."""

        def empty(n: Node) -> str:
            return self.zset(types[id(n)], [])

        for name, sql in rules.state_schemas(node, P, 0, empty, False):
            self.db.execute(f"CREATE TABLE IF NOT EXISTS {name} AS {sql} LIMIT 0")

    def run(
        self, node: Node, types: Sequence[str], inputs: Sequence[str], ctx: BatchContext
    ) -> str:
        """Run the rule's steps; its changes' relation."""
        delta = rules.changes(node, Operator(0, tuple(types), tuple(inputs)), ctx)
        for step in delta.steps:
            if isinstance(step, Fill):
                self.db.execute(f"CREATE OR REPLACE TEMP TABLE {step.table} AS {step.select}")
            elif isinstance(step, Append):
                self.db.execute(f"INSERT INTO {step.table} {step.select}")
            else:
                assert isinstance(step, Run)
                self.db.execute(step.sql)
        return delta.changes

    def rows(self, rel: str) -> list[tuple]:
        """A change relation consolidated: (row..., weight, epoch), weights non-zero."""
        return self.db.execute(
            f"SELECT * EXCLUDE (_e, _w), sum(_w)::BIGINT AS _w, _e FROM {rel} AS _x"
            " GROUP BY ALL HAVING sum(_w) <> 0 ORDER BY ALL"
        ).fetchall()

    def state(self, kind: str) -> list[tuple]:
        return self.db.execute(f"SELECT * FROM s{P}_0_{kind} ORDER BY ALL").fetchall()

    def zstate(self, kind: str) -> list[tuple]:
        """An appended state (a Z-set) consolidated."""
        return self.db.execute(
            f"SELECT * EXCLUDE (_w), sum(_w)::BIGINT FROM s{P}_0_{kind}"
            " GROUP BY ALL HAVING sum(_w) <> 0 ORDER BY ALL"
        ).fetchall()


def ctx(
    end: int, epochs: int = 1, frontier: int | None = None, first: bool = False
) -> BatchContext:
    """The batch (frontier, end]: by default, the `epochs` epochs before `end`."""

    def changes(oid: int, after: str, end: str) -> str:
        return f"(SELECT * FROM src{oid} WHERE _hw_epoch > {after})"

    start = end - epochs if frontier is None else frontier
    return BatchContext(P, start, end, first, epochs, changes)


# multi-epoch batches run their rules by a self-join of epochs (<= 32) or by windows
EPOCHS = [pytest.param(2, id="self-join"), pytest.param(40, id="window")]


# -- sources and linear operators ------------------------------------------------------
def test_scan_renames_columns_and_reads_changes_after_the_frontier() -> None:
    h = Harness()
    h.db.execute(
        "CREATE TABLE src7 AS SELECT * FROM (VALUES (1, 1, 1), (2, -1, 2), (3, 1, 3))"
        " AS _v(a, _hw_w, _hw_epoch)"
    )
    node = Scan(7, ("a",), ("c1",))
    out = h.run(node, ["INTEGER"], [], ctx(end=3, frontier=1))
    assert h.rows(out) == [(2, -1, 2), (3, 1, 3)]


def test_values_once_at_the_first_batch() -> None:
    h = Harness()
    node = Values((("1", "'a'"), ("2", "'b'")), ("c1", "c2"))
    types = ["INTEGER", "VARCHAR"]
    assert h.rows(h.run(node, types, [], ctx(end=5, first=True))) == [
        (1, "a", 1, 5),
        (2, "b", 1, 5),
    ]
    assert h.rows(h.run(node, types, [], ctx(end=6))) == []


def test_filter_and_project_map_changes_keeping_weights_and_epochs() -> None:
    h = Harness()
    x = leaf("k", "v")
    dx = h.zset({"k": "INTEGER", "v": "INTEGER"}, [(1, 5, 2, 1), (2, 9, -1, 2), (3, 1, 1, 2)])
    f = Filter(x, "v > 2")
    out = h.run(f, ["INTEGER", "INTEGER"], [dx], ctx(end=2, epochs=2))
    assert h.rows(out) == [(1, 5, 2, 1), (2, 9, -1, 2)]
    p = Project(f, (("s", "k + v"),))
    assert h.rows(h.run(p, ["INTEGER"], [out], ctx(end=2, epochs=2))) == [(6, 2, 1), (11, -1, 2)]


def test_difference_negates_the_right_and_union_all_adds() -> None:
    h = Harness()
    left, right = leaf("k"), leaf("j", table=2)
    dl = h.zset({"k": "INTEGER"}, [(1, 2, 1), (2, 1, 1)])
    dr = h.zset({"j": "INTEGER"}, [(1, 1, 1)])
    types = ["INTEGER"]
    # (the right input of a difference has the left's columns: a projection of R)
    diff = Difference(left, Project(right, (("k", "j"),)))
    dp = h.zset({"k": "INTEGER"}, [(1, 1, 1)])
    assert h.rows(h.run(diff, types, [dl, dp], ctx(end=1))) == [(1, 1, 1), (2, 1, 1)]
    union = SetOp("union", True, left, right)
    assert h.rows(h.run(union, types, [dl, dr], ctx(end=1))) == [(1, 3, 1), (2, 1, 1)]


# -- join ------------------------------------------------------------------------------
def _join(h: Harness) -> tuple[Join, list[str]]:
    left, right = leaf("k", "a"), leaf("j", "b", table=2)
    node = Join("inner", left, right, ("k",), ("j",))
    lt, rt = {"k": "INTEGER", "a": "VARCHAR"}, {"j": "INTEGER", "b": "VARCHAR"}
    h.states(node, {id(left): lt, id(right): rt})
    return node, ["INTEGER", "VARCHAR", "INTEGER", "VARCHAR"]


def test_join_is_bilinear_over_batches() -> None:
    h = Harness()
    node, types = _join(h)
    lt, rt = {"k": "INTEGER", "a": "VARCHAR"}, {"j": "INTEGER", "b": "VARCHAR"}
    # {(1,'a'):+1} joined with {(1,'x'):+1, (1,'y'):-1}: dL⋈dR
    dl = h.zset(lt, [(1, "a", 1, 1)])
    dr = h.zset(rt, [(1, "x", 1, 1), (1, "y", -1, 1)])
    out = h.run(node, types, [dl, dr], ctx(end=1))
    assert h.rows(out) == [(1, "a", 1, "x", 1, 1), (1, "a", 1, "y", -1, 1)]
    assert h.zstate("l") == [(1, "a", 1)]
    assert h.zstate("r") == [(1, "x", 1), (1, "y", -1)]
    # a new left row meets the right side's state (dL⋈R); a right change meets L (L⋈dR)
    dl = h.zset(lt, [(1, "b", 1, 2)])
    dr = h.zset(rt, [(1, "y", 1, 2), (2, "z", 1, 2)])
    out = h.run(node, types, [dl, dr], ctx(end=2))
    assert h.rows(out) == [(1, "a", 1, "y", 1, 2), (1, "b", 1, "x", 1, 2)]
    assert h.zstate("r") == [(1, "x", 1), (2, "z", 1)]


def test_join_pairs_inside_a_batch_take_the_later_epoch() -> None:
    h = Harness()
    node, types = _join(h)
    dl = h.zset({"k": "INTEGER", "a": "VARCHAR"}, [(1, "a", 1, 1), (1, "a", -1, 3)])
    dr = h.zset({"j": "INTEGER", "b": "VARCHAR"}, [(1, "x", 1, 2)])
    out = h.run(node, types, [dl, dr], ctx(end=3, epochs=3))
    assert h.rows(out) == [(1, "a", 1, "x", -1, 3), (1, "a", 1, "x", 1, 2)]


# -- linear aggregates and DISTINCT ----------------------------------------------------
def _count_sum(h: Harness) -> tuple[Aggregate, list[str]]:
    x = leaf("k", "v")
    node = Aggregate(x, (("g", "k"),), (AggCall("n", "count"), AggCall("s", "sum", "v")))
    h.states(node, {id(x): {"k": "INTEGER", "v": "INTEGER"}})
    return node, ["INTEGER", "BIGINT", "HUGEINT"]


def test_linear_aggregate_group_from_two_rows_to_none() -> None:
    h = Harness()
    node, types = _count_sum(h)
    xt = {"k": "INTEGER", "v": "INTEGER"}
    out = h.run(node, types, [h.zset(xt, [(1, 5, 1, 1), (1, 7, 1, 1)])], ctx(end=1))
    assert h.rows(out) == [(1, 2, 12, 1, 1)]
    assert [r[:2] for r in h.state("g")] == [(1, 2)]
    out = h.run(node, types, [h.zset(xt, [(1, 5, -1, 2), (1, 7, -1, 2)])], ctx(end=2))
    assert h.rows(out) == [(1, 2, 12, -1, 2)]
    assert h.state("g") == []  # the group left the state


@pytest.mark.parametrize("epochs", EPOCHS)
def test_linear_aggregate_is_exact_at_each_epoch_of_a_batch(epochs: int) -> None:
    h = Harness()
    node, types = _count_sum(h)
    xt = {"k": "INTEGER", "v": "INTEGER"}
    dx = h.zset(xt, [(1, 5, 1, 1), (1, 7, 1, 2), (2, 3, 1, 2)])
    out = h.run(node, types, [dx], ctx(end=2, epochs=epochs))
    assert h.rows(out) == [(1, 1, 5, -1, 2), (1, 1, 5, 1, 1), (1, 2, 12, 1, 2), (2, 1, 3, 1, 2)]
    assert [r[:2] for r in h.state("g")] == [(1, 2), (2, 1)]


def test_scalar_aggregate_exists_from_the_first_batch_on_no_rows() -> None:
    h = Harness()
    x = leaf("v")
    node = Aggregate(x, (), (AggCall("n", "count"), AggCall("s", "sum", "v")))
    h.states(node, {id(x): {"v": "INTEGER"}})
    types = ["BIGINT", "HUGEINT"]
    out = h.run(node, types, [h.zset({"v": "INTEGER"}, [])], ctx(end=4, first=True))
    assert h.rows(out) == [(0, None, 1, 4)]
    out = h.run(node, types, [h.zset({"v": "INTEGER"}, [(3, 1, 5)])], ctx(end=5))
    assert h.rows(out) == [(0, None, -1, 5), (1, 3, 1, 5)]


@pytest.mark.parametrize("epochs", [pytest.param(1, id="one-epoch-batches"), *EPOCHS])
def test_distinct_emits_when_the_count_crosses_zero(epochs: int) -> None:
    h = Harness()
    x = leaf("k")
    node = Distinct(x)
    h.states(node, {id(x): {"k": "INTEGER"}})
    changes = [(1, 2, 1), (2, 1, 1), (1, -1, 2), (1, -1, 3), (2, 1, 3)]
    if epochs == 1:  # a batch per epoch
        got = []
        for e in (1, 2, 3):
            dx = h.zset({"k": "INTEGER"}, [c for c in changes if c[2] == e])
            got += h.rows(h.run(node, ["INTEGER"], [dx], ctx(end=e)))
    else:
        dx = h.zset({"k": "INTEGER"}, changes)
        got = h.rows(h.run(node, ["INTEGER"], [dx], ctx(end=3, epochs=epochs)))
    assert sorted(got) == [(1, -1, 3), (1, 1, 1), (2, 1, 1)]
    assert h.state("g") == [(2, 2)]


# -- general aggregates ----------------------------------------------------------------
# (they keep the input columns their calls use, found by their internal names: c1, c2, ...)
@pytest.mark.parametrize("epochs", [pytest.param(1, id="one-epoch-batches"), *EPOCHS])
def test_general_aggregate_max_falls_back_when_the_max_goes(epochs: int) -> None:
    h = Harness()
    x = leaf("c1", "c2")
    node = Aggregate(x, (("c3", "c1"),), (AggCall("m", "max", "c2"),))
    xt = {"c1": "INTEGER", "c2": "INTEGER"}
    h.states(node, {id(x): xt, id(node): {"c3": "INTEGER", "m": "INTEGER"}})
    types = ["INTEGER", "INTEGER"]
    changes = [(1, 3, 1, 1), (1, 7, 1, 1), (1, 7, 1, 2), (1, 7, -1, 3), (1, 7, -1, 4)]
    if epochs == 1:
        got = []
        for e in (1, 2, 3, 4):
            dx = h.zset(xt, [c for c in changes if c[3] == e])
            got += h.rows(h.run(node, types, [dx], ctx(end=e)))
    else:
        got = h.rows(h.run(node, types, [h.zset(xt, changes)], ctx(end=4, epochs=epochs)))
    # the 7 is there twice at epoch 2: max stays 7 until both copies are gone
    assert sorted(got) == [(1, 3, 1, 4), (1, 7, -1, 4), (1, 7, 1, 1)]
    assert h.state("o") == [(1, 3, 1)]
    assert h.zstate("m") == [(1, 3, 1)]


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "scalar"])
def test_general_aggregate_extremes_from_the_old_value_equal_a_recount(grouped: bool) -> None:
    """One-epoch batches of MIN/MAX/BOOL_*/COUNT take the new value from the old one
    and the batch where no deleted row held it (rules/general_aggregate.py
    `_extremes`): random inserts and deletes (duplicates, NULLs, FILTER, extremes
    deleted), each batch's changes equal to recomputing every group."""
    rng = random.Random(16)
    h = Harness()
    x = leaf("c1", "c2", "c3")
    calls = (
        AggCall("lo", "min", "c2"),
        AggCall("hi", "max", "c2"),
        AggCall("n", "count"),
        AggCall("nv", "count", "c2"),
        AggCall("ba", "bool_and", "c3"),
        AggCall("bo", "bool_or", "c3"),
        AggCall("fhi", "max", "c2", filter="c3"),
    )
    group = (("k", "c1"),) if grouped else ()
    node = Aggregate(x, group, calls)
    xt = {"c1": "INTEGER", "c2": "INTEGER", "c3": "BOOLEAN"}
    out = ["INTEGER", "INTEGER", "BIGINT", "BIGINT", "BOOLEAN", "BOOLEAN", "INTEGER"]
    types = (["INTEGER"] if grouped else []) + out
    ot = dict(zip(node.columns, types, strict=True))
    h.states(node, {id(x): xt, id(node): ot})
    rows: list[tuple] = []  # the input (a multiset)

    def view() -> Counter:
        groups: dict[Any, list[tuple]] = {}
        for r in rows:
            groups.setdefault(r[0] if grouped else None, []).append(r)
        if not grouped:
            groups.setdefault(None, [])
        res: Counter = Counter()
        for k, rs in groups.items():
            vs = [r[1] for r in rs if r[1] is not None]
            bs = [r[2] for r in rs if r[2] is not None]
            fv = [r[1] for r in rs if r[2] and r[1] is not None]
            res[
                (*([k] if grouped else []),)
                + (min(vs, default=None), max(vs, default=None), len(rs), len(vs))
                + (all(bs) if bs else None, any(bs) if bs else None, max(fv, default=None))
            ] += 1
        return res

    before: Counter = Counter()  # nothing before the first batch
    for e in range(1, 60):
        batch = []
        for _ in range(rng.randrange(0, 8)):
            if rows and rng.random() < 0.45:
                r = rows.pop(rng.randrange(len(rows)))
                batch.append((*r, -1, e))
            else:
                r = (
                    rng.randrange(3),
                    rng.choice([None, *range(6)]),
                    rng.choice([None, True, False]),
                )
                rows.append(r)
                batch.append((*r, 1, e))
        got = h.rows(h.run(node, types, [h.zset(xt, batch)], ctx(end=e, first=e == 1)))
        after = view()
        want = [(*r, 1, e) for r in after - before] + [(*r, -1, e) for r in before - after]
        key = repr  # (None sorts with nothing)
        assert sorted(got, key=key) == sorted(want, key=key), f"epoch {e}"
        before = after


def test_general_aggregate_reads_duplicates_as_many_times_as_they_are_there() -> None:
    h = Harness()
    x = leaf("c1", "c2")
    call = AggCall("a", "string_agg", "c2", extra=("','",), order=("c2",))
    node = Aggregate(x, (("c3", "c1"),), (call,))
    xt = {"c1": "INTEGER", "c2": "VARCHAR"}
    h.states(node, {id(x): xt, id(node): {"c3": "INTEGER", "a": "VARCHAR"}})
    types = ["INTEGER", "VARCHAR"]
    dx = h.zset(xt, [(1, "x", 2, 1), (1, "y", 1, 2)])
    got = h.rows(h.run(node, types, [dx], ctx(end=2, epochs=2)))
    assert got == [(1, "x,x", -1, 2), (1, "x,x", 1, 1), (1, "x,x,y", 1, 2)]


# -- INTERSECT / EXCEPT ----------------------------------------------------------------
def _setop(h: Harness, op: str, all_: bool) -> SetOp:
    left, right = leaf("k"), leaf("j", table=2)
    node = SetOp(op, all_, left, right)
    h.states(node, {id(left): {"k": "INTEGER"}, id(node): {"k": "INTEGER"}})
    return node


@pytest.mark.parametrize("epochs", [pytest.param(1, id="one-epoch-batches"), *EPOCHS])
def test_except_all_multiplicities(epochs: int) -> None:
    h = Harness()
    node = _setop(h, "except", True)
    left = [(1, 3, 1), (1, 1, 4)]
    right = [(1, 1, 1), (1, 1, 2), (1, 2, 3)]
    # l - r at each epoch: 3-1=2, 3-2=1, 3-4=0 (not below), 4-4=0
    if epochs == 1:
        got = []
        for e in (1, 2, 3, 4):
            dl = h.zset({"k": "INTEGER"}, [c for c in left if c[2] == e])
            dr = h.zset({"j": "INTEGER"}, [c for c in right if c[2] == e])
            got += h.rows(h.run(node, ["INTEGER"], [dl, dr], ctx(end=e)))
    else:
        dl, dr = h.zset({"k": "INTEGER"}, left), h.zset({"j": "INTEGER"}, right)
        got = h.rows(h.run(node, ["INTEGER"], [dl, dr], ctx(end=4, epochs=epochs)))
    assert sorted(got) == [(1, -1, 2), (1, -1, 3), (1, 2, 1)]
    assert h.state("c") == [(1, 4, 4)]


@pytest.mark.parametrize(
    ("op", "all_", "expected"),
    [
        ("intersect", True, [(1, 1, 1), (1, 1, 2)]),  # min(2, 1), then min(2, 2)
        ("intersect", False, [(1, 1, 1)]),
        ("except", False, [(2, 1, 1)]),
    ],
)
def test_intersect_and_except(op: str, all_: bool, expected: list[tuple]) -> None:
    h = Harness()
    node = _setop(h, op, all_)
    dl = h.zset({"k": "INTEGER"}, [(1, 2, 1), (2, 1, 1)])
    dr = h.zset({"j": "INTEGER"}, [(1, 1, 1), (1, 1, 2)])
    got = h.rows(h.run(node, ["INTEGER"], [dl, dr], ctx(end=2, epochs=2)))
    assert sorted(got) == expected


# -- the view's output -----------------------------------------------------------------
@pytest.mark.parametrize("epochs", [pytest.param(1, id="one-epoch"), *EPOCHS])
def test_output_closes_and_opens_versions_per_epoch(epochs: int) -> None:
    h = Harness()
    h.db.execute(f"CREATE TABLE o{P} (k INTEGER, _n BIGINT, _from BIGINT, _to BIGINT)")
    h.db.execute(f"CREATE TABLE l{P} (k INTEGER, _w BIGINT, _e BIGINT)")
    h.db.execute(f"INSERT INTO o{P} VALUES (1, 1, 0, {LIVE})")
    if epochs == 1:
        batches = [[(1, 1, 3), (2, 1, 3)], [(1, -1, 4), (1, -1, 4)]]
    else:
        batches = [[(1, 1, 3), (2, 1, 3), (1, -1, 4), (1, -1, 4)]]
    for b in batches:
        ends = max(e for *_, e in b)
        out = output(["k"], h.zset({"k": "INTEGER"}, b), ctx(end=ends, epochs=epochs))
        h.db.execute(f"CREATE OR REPLACE TEMP TABLE {out.ranked.table} AS {out.ranked.select}")
        assert h.db.execute(out.negative).fetchall() == [(0,)]
        for step in out.fold:
            h.db.execute(step.sql)
    versions = h.db.execute(f"SELECT * FROM o{P} ORDER BY ALL").fetchall()
    assert versions == [(1, 1, 0, 3), (1, 2, 3, 4), (2, 1, 3, LIVE)]
    log = h.db.execute(f"SELECT * FROM l{P} ORDER BY ALL").fetchall()
    assert log == [(1, -2, 4), (1, 1, 3), (2, 1, 3)]
