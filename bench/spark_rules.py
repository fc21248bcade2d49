"""Spark vs DuckDB running the same delta rules, per batch step (issue 13, step 1).

For each view shape, a 1 M-row state is built by a DuckDB backfill and exported as
Parquet; then batches of 10, 10 k and 1 M change rows (one epoch) run
  - in DuckDB (in memory): the batch's steps (engine/spark_batch.py `batch_steps`)
    as the engine runs them, each timed, in a transaction rolled back afterwards;
  - in Spark (local[2] by default): the same steps rendered to Spark SQL, over the
    Parquet state registered as temp views, each step materialized and timed
    (`SparkBatch(eager=True)`), then the tables the batch changed written as Parquet.

    python bench/spark_rules.py [--master local[2]] [--sizes 10,10000,1000000]
                                [--executors duckdb,spark] [--shapes aggregate,join]

Prints one line per (shape, size, executor, step) and a total per batch, with the
load average (the machine is shared: figures at high load are several times slower).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from headwater.engine.delta import Batch, ViewProgram
from headwater.engine.rules.context import Append, BatchContext, Fill, Run, Step
from headwater.engine.spark_batch import SparkBatch, batch_steps, column_types, tables_written
from headwater.planner.incremental import incrementalize
from headwater.planner.pg_compat import install_functions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_engine_support import catalog, plan_of, scans  # noqa: E402

STATE_ROWS = 1_000_000
SHAPES = {
    # 1 M groups in the state; a batch's rows hit existing groups half of the time
    "aggregate": ("SELECT a, count(*) AS n, sum(b) AS sb FROM t GROUP BY a", "t"),
    # the right side's 1 M rows in the state; a batch changes the left side
    "join": ("SELECT t.id, t.b, u.x FROM t JOIN u ON t.a = u.a", "u"),
}
T_COLS = "id INTEGER, a INTEGER, b INTEGER, s VARCHAR, _hw_w INTEGER, _hw_epoch BIGINT"
U_COLS = "id INTEGER, a INTEGER, x INTEGER, _hw_w INTEGER, _hw_epoch BIGINT"


def _fill_src(
    db: duckdb.DuckDBPyConnection, table: str, rows: int, epoch: int, spread: int
) -> None:
    if table == "t":
        db.execute(
            f"INSERT INTO src16400 SELECT i, CAST(hash(i + {epoch}) % {spread} AS INTEGER),"
            f" CAST(i % 7 AS INTEGER), 'x', 1, {epoch} FROM range({rows}) r(i)"
        )
    else:
        db.execute(
            f"INSERT INTO src16401 SELECT i, CAST(i AS INTEGER), CAST(i % 5 AS INTEGER), 1,"
            f" {epoch} FROM range({rows}) r(i)"
        )


def _clear(db: duckdb.DuckDBPyConnection) -> None:
    db.execute("DELETE FROM src16400")
    db.execute("DELETE FROM src16401")


def _ctx(frontier: int, end: int, first: bool) -> BatchContext:
    return BatchContext(
        program=1,
        frontier=frontier,
        end=end,
        first=first,
        epochs=1,
        changes=lambda oid, after, end: f"(SELECT * FROM src{oid} WHERE _hw_epoch > {after})",
    )


def _duckdb_steps(db: duckdb.DuckDBPyConnection, steps: list[Step]) -> list[tuple[str, float]]:
    """The steps as ViewProgram runs them (scratch tables created by the statement)."""
    out = []
    for step in steps:
        t0 = time.perf_counter()
        if isinstance(step, Fill):
            db.execute(f"CREATE OR REPLACE TEMP TABLE {step.table} AS {step.select}").fetchall()
            label = f"fill {step.table}"
        elif isinstance(step, Append):
            db.execute(f"INSERT INTO {step.table} {step.select}").fetchall()
            label = f"append {step.table}"
        else:
            assert isinstance(step, Run)
            db.execute(step.sql).fetchall()
            label = " ".join(step.sql.split()[:3]).lower()
        out.append((label, time.perf_counter() - t0))
    return out


def _spark(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master(master)
        .appName("headwater-spark-rules-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Spark 4.3 fails to plan some rules' UNION ALLs with it on: "NoSuchElement
        # Exception: key not found: _n#362L" in Union.rewriteConstraints
        .config("spark.sql.constraintPropagation.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    return s


def _print(shape: str, size: int, who: str, timings: list[tuple[str, float]], extra: float) -> None:
    for label, s in timings:
        print(f"{shape:9} {size:>8} {who:6} {label:24} {s * 1000:9.1f} ms")
    total = sum(s for _, s in timings) + extra
    print(f"{shape:9} {size:>8} {who:6} {'TOTAL':24} {total * 1000:9.1f} ms", flush=True)


def bench_shape(spark: Any, shape: str, sizes: list[int], work: Path) -> None:
    sql, state_side = SHAPES[shape]
    db = duckdb.connect()
    install_functions(db)
    db.execute("SET integer_division = true")
    db.execute(f"CREATE TABLE src16400 ({T_COLS})")
    db.execute(f"CREATE TABLE src16401 ({U_COLS})")
    plan = incrementalize(plan_of(sql, catalog()))
    sc = scans()
    prog = ViewProgram(1, plan, {o: sc[o] for o in plan.tables})
    prog.db = db
    prog.prepare(db)
    types = column_types(prog)
    # the 1 M-row state: a backfill at epoch 1
    _fill_src(db, state_side, STATE_ROWS, 1, STATE_ROWS)
    t0 = time.perf_counter()
    prog.advance(db, Batch(1, _ctx(0, 1, True).changes), 0, True, multi=1)
    print(f"{shape}: DuckDB backfill of {STATE_ROWS} rows {time.perf_counter() - t0:.2f} s")
    ctx = _ctx(1, 2, False)
    steps = batch_steps(prog, ctx)
    written = tables_written(steps)
    state_dir = work / shape / "state"
    state_dir.mkdir(parents=True)
    for name in written:
        rows = db.sql(f"SELECT * FROM {name}").to_arrow_table()
        pq.write_table(rows, state_dir / f"{name}.parquet")
    _clear(db)
    for size in sizes:
        _fill_src(db, "t", size, 2, 2 * STATE_ROWS)
        src_dir = work / shape / f"src{size}"
        src_dir.mkdir()
        for oid in (16400, 16401):
            rows = db.sql(f"SELECT * FROM src{oid}").to_arrow_table()
            pq.write_table(rows, src_dir / f"src{oid}.parquet")
        for rep in range(2):  # a warm-up, then the measured run
            db.execute("BEGIN")
            timings = _duckdb_steps(db, steps)
            db.execute("ROLLBACK")
            if rep:
                _print(shape, size, "duckdb", timings, 0.0)
        for rep in range(0 if spark is None else 2 if size == sizes[0] else 1):
            for name in written:
                spark.read.parquet(str(state_dir / f"{name}.parquet")).createOrReplaceTempView(name)
            for oid in (16400, 16401):
                spark.read.parquet(str(src_dir / f"src{oid}.parquet")).createOrReplaceTempView(
                    f"src{oid}"
                )
            run = SparkBatch(spark, types, eager=True)
            run.run(steps)
            t0 = time.perf_counter()
            out = work / shape / f"out{size}_{rep}"
            for name in written:
                spark.table(name).write.parquet(str(out / name))
            write = time.perf_counter() - t0
            if rep == (1 if size == sizes[0] else 0):
                _print(shape, size, "spark", [*run.timings, ("write parquet", write)], 0.0)
        _clear(db)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--sizes", default="10,10000,1000000")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--executors", default="duckdb,spark")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"load average at start: {os.getloadavg()}")
    t0 = time.perf_counter()
    spark = _spark(args.master) if "spark" in args.executors else None
    if spark is not None:
        print(f"SparkSession ({args.master}) started in {time.perf_counter() - t0:.1f} s")
    work = Path(tempfile.mkdtemp(prefix="hw-spark-rules-"))
    try:
        for shape in args.shapes.split(","):
            bench_shape(spark, shape, sizes, work)
            print(f"load average: {os.getloadavg()}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    main()
