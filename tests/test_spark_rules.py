"""The delta rules run by Spark equal the same rules run by DuckDB (issue 13, step 1).

For each view shape, a ViewProgram runs batches in an in-memory DuckDB (its real
`advance`), and Spark runs the same batches' steps (engine/spark_batch.py
`batch_steps`), rendered to Spark SQL (engine/spark_sql.py), over its own copy of
the program's tables (operator states, output versions, change log: exported from
DuckDB once, empty, as Arrow, then carried from batch to batch by Spark,
checkpointed at each batch's end). Each batch's input changes go to both. After
every batch, every table the batch wrote must hold the same rows in both, as
multisets.

Batches per shape: the backfill (one epoch: the rules' one-epoch form), three
epochs (their self-join form) and 40 epochs (their window-function form).
"""

from __future__ import annotations

import doctest
import os
import random
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from headwater.engine import spark_sql
from headwater.engine.delta import Batch, ViewProgram
from headwater.engine.rules.context import BatchContext
from headwater.engine.spark_batch import SparkBatch, batch_steps, column_types, tables_written
from headwater.engine.spark_executor import SparkExecutor, register_udfs
from headwater.planner.incremental import incrementalize
from headwater.planner.pg_compat import install_functions

from tests.test_engine_support import TABLES, catalog, plan_of, scans

# (name, view) over t(id, a, b, s) and u(id, a, x)
SHAPES = [
    ("filter_project", "SELECT id, a + b AS ab, b / 2 AS half, s FROM t WHERE b > 1"),
    ("inner_join", "SELECT t.id, t.s, u.x FROM t JOIN u ON t.a = u.a"),
    ("left_join", "SELECT t.id, u.x FROM t LEFT JOIN u ON t.a = u.a"),
    (
        "linear_aggregate",
        "SELECT a, count(*) AS n, count(b) AS nb, sum(b) AS sb, avg(b) AS ab FROM t GROUP BY a",
    ),
    ("scalar_aggregate", "SELECT count(*) AS n, sum(b) AS sb, max(s) AS m FROM t"),
    ("min_max", "SELECT a, min(b) AS lo, max(s) AS hi FROM t GROUP BY a"),
    (
        "count_distinct",
        "SELECT a, count(DISTINCT b) AS nd, sum(DISTINCT b) AS sd FROM t GROUP BY a",
    ),
    ("string_agg", "SELECT a, string_agg(s, ',' ORDER BY s) AS ss FROM t GROUP BY a"),
    ("count_distinct_rows", "SELECT a, count(DISTINCT (b, s)) AS n FROM t GROUP BY a"),
    ("distinct", "SELECT DISTINCT a, s FROM t"),
    ("union", "SELECT a FROM t UNION SELECT a FROM u"),
    ("union_all", "SELECT a FROM t UNION ALL SELECT a FROM u"),
    ("intersect", "SELECT a FROM t INTERSECT SELECT a FROM u"),
    ("intersect_all", "SELECT a FROM t INTERSECT ALL SELECT a FROM u"),
    ("except", "SELECT a FROM t EXCEPT SELECT a FROM u"),
    ("except_all", "SELECT a FROM t EXCEPT ALL SELECT a FROM u"),
    ("exists", "SELECT id, b FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = t.a AND u.x > t.b)"),
    ("not_exists", "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.a = t.a)"),
    (
        "tpch_like",  # Q3-like: join, filter, grouped revenue
        "SELECT t.a, t.s, sum(u.x * t.b) AS revenue, count(*) AS n FROM t JOIN u ON t.a = u.a"
        " WHERE t.b > 0 AND u.x < 5 GROUP BY t.a, t.s",
    ),
    # numeric division at PostgreSQL's scale: the hw_numeric_div Arrow UDF in Spark
    ("numeric_div", "SELECT a, sum(b)::numeric / 3 AS q, count(*) AS n FROM t GROUP BY a"),
    # PostgreSQL's result types, by the argument's type in Spark (spark_sql._SCALAR_FORMS)
    (
        "typed_scalars",
        "SELECT id, sign(b - 2) AS sg, sign(b::numeric) AS sn, octet_length(s) AS ol,"
        " bit_length(s) AS bl FROM t",
    ),
    # a correlated count over another table (a SQL function's body, inlined): its
    # null-padded side's columns typed as the other side's (a boolean was an INT)
    ("correlated_count", "SELECT id, (SELECT count(*) FROM u WHERE u.x > t.b) AS n FROM t"),
]
# (first epoch, last epoch, backfill) of each batch
BATCHES = [(1, 1, True), (2, 4, False), (5, 44, False)]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-spark-rules")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Spark 4.3 fails to plan some rules' UNION ALLs with it on: "NoSuchElement
        # Exception: key not found: _n#362L" in Union.rewriteConstraints
        .config("spark.sql.constraintPropagation.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    register_udfs(s)  # numeric division and avg as the Spark executor runs them
    yield s
    s.stop()


def _changes(rng: random.Random, live: dict[int, dict[int, tuple]], epochs: range) -> dict:
    """Random inserts, updates and deletes of t and u at each epoch: Z-set rows."""
    out: dict[int, list[tuple]] = {oid: [] for oid in TABLES}
    for e in epochs:
        for oid in TABLES:
            rows = live[oid]
            for _ in range(rng.randrange(0, 6 if e > 1 else 40)):
                rid = rng.randrange(1, 60)
                if oid == 16400:
                    new = (rid, rng.choice([None, 0, 1, 2, 3]), rng.choice([None, *range(6)]),
                           rng.choice([None, "a", "b", "c"]))  # fmt: skip
                else:
                    new = (rid, rng.choice([None, 0, 1, 2, 3]), rng.choice([None, *range(6)]))
                if rid in rows:
                    out[oid].append((*rows.pop(rid), -1, e))
                if rng.random() < 0.7:
                    rows[rid] = new
                    out[oid].append((*new, 1, e))
    return out


def _load_changes(db: duckdb.DuckDBPyConnection, changes: dict[int, list[tuple]]) -> None:
    for oid, (_, cols) in TABLES.items():
        decl = ", ".join(f"{c} {d}" for c, _, d in cols)
        db.execute(f"CREATE OR REPLACE TABLE src{oid} ({decl}, _hw_w INTEGER, _hw_epoch BIGINT)")
        if changes[oid]:
            marks = ", ".join("?" * (len(cols) + 2))
            db.executemany(f"INSERT INTO src{oid} VALUES ({marks})", changes[oid])


def _rows(t: pa.Table) -> Counter:
    cols = [c.to_pylist() for c in t.columns]
    return Counter(zip(*cols, strict=True)) if cols else Counter()


def _export(db: duckdb.DuckDBPyConnection, spark: Any, names: list[str]) -> None:
    """DuckDB tables as Spark temp views, through Arrow (types kept: HUGEINT is
    decimal(38, 0) in Arrow and in Spark)."""
    for name in names:
        t = db.sql(f"SELECT * FROM {name}").to_arrow_table()
        spark.createDataFrame(t).createOrReplaceTempView(name)


@pytest.mark.parametrize("name,sql", SHAPES, ids=[n for n, _ in SHAPES])
def test_spark_runs_the_rules_as_duckdb_does(spark: Any, name: str, sql: str) -> None:
    rng = random.Random(sum(name.encode()))
    db = duckdb.connect()
    install_functions(db)
    db.execute("SET integer_division = true")
    plan = incrementalize(plan_of(sql, catalog()))  # as Engine.create_view lowers it
    sc = scans()
    prog = ViewProgram(1, plan, {o: sc[o] for o in plan.tables})
    prog.db = db
    prog.prepare(db)
    types = column_types(prog)
    live: dict[int, dict[int, tuple]] = {oid: {} for oid in TABLES}
    frontier = 0
    for lo, hi, first in BATCHES:
        _load_changes(db, _changes(rng, live, range(lo, hi + 1)))
        ctx = BatchContext(
            program=1,
            frontier=frontier,
            end=hi,
            first=first,
            epochs=hi - lo + 1,
            changes=lambda oid, after, end: f"(SELECT * FROM src{oid} WHERE _hw_epoch > {after})",
        )
        steps = batch_steps(prog, ctx)
        written = tables_written(steps)
        # Spark's tables: DuckDB's (empty) before the first batch, its own after
        _export(db, spark, [*(written if first else []), *(f"src{oid}" for oid in TABLES)])
        prog.advance(db, Batch(hi, ctx.changes), frontier, first, multi=ctx.epochs)
        # eager: each scratch table and state materialized as DuckDB's are (lazily, the
        # batch is one plan that repeats subplans; Spark 4.3 then failed to plan some:
        # `NoSuchElementException: key not found: _e#...`)
        SparkBatch(spark, types, eager=True).run(steps)
        for table in written:
            done = spark.table(table).localCheckpoint(eager=True)
            done.createOrReplaceTempView(table)
            want = _rows(db.sql(f"SELECT * FROM {table}").to_arrow_table())
            assert _rows(done.toArrow()) == want, f"{name}, batch ({lo}, {hi}]: {table} differs"
        frontier = hi


def test_renderer_examples() -> None:
    """The fix-ups' docstring examples hold."""
    assert doctest.testmod(spark_sql).failed == 0


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a, array_agg(b ORDER BY id) AS bs FROM t GROUP BY a",
        "SELECT jsonb_agg(s ORDER BY id) AS j FROM t",
        "SELECT a, mode() WITHIN GROUP (ORDER BY b) AS m FROM t GROUP BY a",
        "WITH RECURSIVE r(v) AS (SELECT a FROM t UNION SELECT u.x FROM r JOIN u ON u.a = r.v)"
        " SELECT v FROM r",
    ],
)
def test_collections_and_recursion_run_on_spark(sql: str, tmp_path: Any) -> None:
    """array_agg, json(b)_agg & co. and mode() (engine/spark_sql.py `collection_aggs`)
    and WITH RECURSIVE (the Fixpoint step, iterated: engine/spark_batch.py) have a Spark
    form: no executor_reason keeps them on DuckDB."""
    plan = incrementalize(plan_of(sql, catalog()))
    sc = scans()
    prog = ViewProgram(1, plan, {o: sc[o] for o in plan.tables})
    db = duckdb.connect()
    install_functions(db)
    prog.prepare(db)
    ex = SparkExecutor(tmp_path, lambda: None, None)  # type: ignore[arg-type]
    ctx = BatchContext(
        program=1, frontier=0, end=1, first=True, epochs=1, changes=lambda o, a, e: f"c{o}"
    )
    assert ex.expressible(prog, ctx) is None
