"""The two executors side by side (issue 13): state commits, backfill, batches, COPY, SDP.

    python bench/executors.py state      # per-batch commit: Parquet manifest vs Delta
    python bench/executors.py backfill --rows 100000,1000000 [--master local[2]]
    python bench/executors.py backfill --large          # 5 M and 10 M rows
    python bench/executors.py batches --state 1000000 --batch 1000,10000,100000,1000000
    python bench/executors.py scaling --rows 1000000    # local[1], local[2], standalone
    python bench/executors.py copy                      # 200 k rows; the full figure:
    python bench/executors.py copy --rows 5000000
    python bench/executors.py sdp                       # 100 k rows + 3 x 10 k; full figure:
    python bench/executors.py sdp --state 10000000 --batch 100000 --batches 5 [--sdp-cli]

`state`: what one batch's state commit costs with each candidate format: Parquet
files listed in the engine's DuckDB (a row per file, in the frontier's transaction)
and Delta Lake through the `deltalake` package (delta-rs committing files written
by others, then the frontier in DuckDB: two commits). Also what a switch of
executor costs: a DuckDB table exported as Parquet (Spark's next batch reads it)
and Spark's Parquet loaded into DuckDB.

`backfill`: a table of N rows (and a 1,000-row dimension) backfilled into 3 views
(aggregate, join, distinct) by Engine with `executor="duckdb"` and `"spark"`; rows
per second, and the crossover of the two lines fitted as fixed cost + cost per row.

`batches`: maintenance, not backfill: the same 3 views over a table of `--state`
rows, then one epoch per size of `--batch` (half deletes of existing rows, half
inserts), each advanced by `Engine.advance` on each executor: seconds per batch and
the crossover, which is what `auto`'s rows floor should be (engine/executors.py).

`scaling`: the Spark executor's backfill under local[1], local[2] and a standalone
master with one 2-core worker on loopback (tests/test_spark_cluster.start_cluster),
each in its own process (one SparkSession per process).

`copy` (through a real server, bench/common.py): a Headwater server per `--executor`
(duckdb, spark, auto), tables t and u (1,000 rows), 5 views (VIEWS5: aggregate,
join, distinct, min/max per group, join + aggregate), the Spark stage warmed up, then
COPY FROM STDIN of `--rows` rows into t: the seconds from the COPY's start until one
read of all 5 views under `headwater.freshness = 'latest'` returns (it waits until
every view includes the COPY), rows/s, the executor of the views' batches and the
Spark tasks they ran. Under `auto` with a local master, a COPY of 5 M rows or more
goes to Spark (engine/executors.py SPARK_MIN_ROWS_LOCAL), smaller ones to DuckDB.

`sdp`: the peer a Spark user would pick, Spark Declarative Pipelines (bench/sdp.py,
in a process of its own): the same 5 views as SDP `CREATE MATERIALIZED VIEW`s over
Parquet directories; after each of `--batches` batches of `--batch` rows appended to
t (a Parquet file), the pipeline runs (a full recompute of every view in open-source
Spark). Then Headwater with `--executor spark` and `auto`, same table, same batches
(COPY): the time from the batch to views that reflect it, side by side with the load
average and the ratio. `--sdp-cli`: `spark-pipelines run` per batch (a JVM each)
instead of the pipelines API on one Spark Connect session. Needs the `bench` extra
(pip install -e '.[test,bench]': the Spark Connect client packages).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f}"


def state(rows: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hw-bench-state-"))
    try:
        t = pa.table({"k": pa.array(range(rows), pa.int64()), "v": pa.array(range(rows))})
        db = duckdb.connect(str(tmp / "e.duckdb"))
        db.execute("CREATE TABLE hw_views (view BIGINT, frontier BIGINT)")
        db.execute("INSERT INTO hw_views VALUES (1, 0)")
        db.execute("CREATE TABLE hw_parquet (tbl VARCHAR, dir VARCHAR)")
        pq.write_table(t.slice(0, 10), tmp / "f.parquet")
        n = 200
        t0 = time.perf_counter()
        for i in range(n):
            db.execute("BEGIN")
            db.execute("INSERT INTO hw_parquet VALUES ('s1_0_g', ?)", [f"d{i}"])
            db.execute("DELETE FROM hw_parquet WHERE tbl = 's1_0_g' AND dir <> ?", [f"d{i}"])
            db.execute("UPDATE hw_views SET frontier = ? WHERE view = 1", [i])
            db.execute("COMMIT")
        manifest = (time.perf_counter() - t0) / n
        print(f"manifest in DuckDB (+ frontier, one transaction): {manifest * 1e3:.2f} ms/batch")
        try:
            from deltalake import DeltaTable, write_deltalake
            from deltalake.transaction import AddAction, CommitProperties, Transaction

            uri = str(tmp / "delta")
            write_deltalake(uri, t.slice(0, 10))
            dt = DeltaTable(uri)
            size = (tmp / "f.parquet").stat().st_size
            t0 = time.perf_counter()
            for i in range(n):
                shutil.copy(tmp / "f.parquet", Path(uri) / f"p{i}.parquet")
                add = AddAction(f"p{i}.parquet", size, {}, int(time.time() * 1000), True, None)
                if (dt.transaction_version("hw") or -1) < i:  # idempotence (research note)
                    dt.create_write_transaction(
                        [add],
                        "append",
                        dt.schema(),
                        commit_properties=CommitProperties(app_transactions=[Transaction("hw", i)]),
                    )
                    dt.update_incremental()
                db.execute("UPDATE hw_views SET frontier = ? WHERE view = 1", [i])
            delta = (time.perf_counter() - t0) / n
            print(f"Delta (delta-rs commit + frontier in DuckDB): {delta * 1e3:.2f} ms/batch")
        except ImportError:
            print("Delta: the deltalake package is not installed")
        db.execute("CREATE TABLE s AS SELECT * FROM t")
        t0 = time.perf_counter()
        d = tmp / "export"
        d.mkdir()
        pq.write_table(db.sql("SELECT * FROM s").to_arrow_table(), d / "part-0.parquet")
        export = time.perf_counter() - t0
        t0 = time.perf_counter()
        db.execute("DELETE FROM s")
        db.execute(f"INSERT INTO s BY NAME SELECT * FROM read_parquet('{d}/*.parquet')")
        load = time.perf_counter() - t0
        print(
            f"switch DuckDB -> Spark (export {rows:,} rows as Parquet): {export:.3f} s;"
            f" Spark -> DuckDB (load them): {load:.3f} s"
        )
        print(_load())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


VIEWS = {
    "aggregate": "SELECT a, count(*) AS n, sum(b) AS sb FROM t GROUP BY a",
    "join": "SELECT t.id, t.b, u.x FROM t JOIN u ON t.a = u.a",
    "distinct": "SELECT DISTINCT a, s FROM t",
}


def table_t(first: int, n: int) -> pa.Table:
    ids = np.arange(first, first + n, dtype=np.int32)
    return pa.table(
        {
            "id": ids,
            "a": ids % 1000,
            "b": ids % 7,
            "s": pa.array((ids % 13).astype(str)),
        }
    )


def table_u() -> pa.Table:
    ids = np.arange(1000, dtype=np.int32)
    return pa.table({"id": ids, "a": ids, "x": ids % 5})


def _engine_test_helpers() -> tuple:
    from headwater.engine import delta

    from tests import test_engine_support as support

    delta.CHECKS = False  # the tests' consistency checks: not part of what is measured
    return support.catalog, support.plan_of, support.scans


def backfill(sizes: list[int], master: str, executors: list[str]) -> None:
    from headwater.engine import stage
    from headwater.engine.engine import Engine

    catalog, plan_of, scans = _engine_test_helpers()

    if "spark" in executors:
        t0 = time.perf_counter()
        stage.spark_session(master)
        print(f"SparkSession {master}: started in {time.perf_counter() - t0:.1f} s")
    cat, sc = catalog(), scans()
    times: dict[str, list[tuple[int, float]]] = {e: [] for e in executors}
    for n in [1000, *sizes]:  # the first, untimed: JVM and Catalyst warm-up
        t, u = table_t(0, n), table_u()
        snaps = {16400: t, 16401: u}
        for ex in executors:
            tmp = Path(tempfile.mkdtemp(prefix="hw-bench-backfill-"))
            try:
                engine = Engine(
                    tmp / "state",
                    tmp / "spool",
                    master=master,
                    snapshot=lambda oid, e, snaps=snaps: snaps[oid],
                    executor=ex,
                )
                t0 = time.perf_counter()
                for i, sql in enumerate(VIEWS.values()):
                    plan = plan_of(sql, cat)
                    engine.create_view(60000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=1)
                dt = time.perf_counter() - t0
                tasks = sum(engine.spark.tasks.values())
                engine.close()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if n == 1000:
                continue
            times[ex].append((n, dt))
            print(
                f"backfill {n:>10,} rows into 3 views, {ex:>6}: {dt:7.2f} s,"
                f" {n / dt:>12,.0f} rows/s, {tasks} Spark tasks ({_load()})",
                flush=True,
            )
    if len(executors) == 2 and len(sizes) >= 2:
        fits = {}
        for ex, pts in times.items():
            (n1, t1), (n2, t2) = pts[0], pts[-1]
            per_row = (t2 - t1) / (n2 - n1)
            fits[ex] = (t1 - per_row * n1, per_row)
            print(f"{ex}: fixed {fits[ex][0]:.2f} s + {fits[ex][1] * 1e6:.3f} s per M rows")
        (fs, ps), (fd, pd) = fits["spark"], fits["duckdb"]
        if ps < 0 or pd < 0:
            print("crossover: not measurable (the load changed between runs)")
        elif pd > ps:
            print(f"crossover: Spark is faster from ~{(fs - fd) / (pd - ps):,.0f} rows")
        else:
            print("crossover: none (Spark's cost per row is not below DuckDB's here)")


def _changes(first: int, n: int, weight: int) -> pa.Table:
    t = table_t(first, n)
    return t.append_column("_hw_w", pa.array(np.full(n, weight, dtype=np.int32)))


def _fit(pts: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares: seconds = fixed + per_row * rows."""
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    per_row, fixed = np.polyfit(x, y, 1) if len(pts) > 1 else (0.0, y[0])
    return float(fixed), float(per_row)


def batches(state_rows: int, sizes: list[int], master: str, executors: list[str]) -> None:
    """Maintenance batches of growing size on each executor; the per-batch crossover."""
    from headwater.engine import stage
    from headwater.engine.engine import Engine
    from headwater.engine.spool import SpoolWriter

    catalog, plan_of, scans = _engine_test_helpers()
    if "spark" in executors:
        t0 = time.perf_counter()
        stage.spark_session(master)
        print(f"SparkSession {master}: started in {time.perf_counter() - t0:.1f} s")
    cat, sc = catalog(), scans()
    snaps = {16400: table_t(0, state_rows), 16401: table_u()}
    times: dict[str, list[tuple[int, float]]] = {e: [] for e in executors}
    for ex in executors:
        tmp = Path(tempfile.mkdtemp(prefix="hw-bench-batches-"))
        try:
            spool = SpoolWriter(tmp / "spool")
            engine = Engine(
                tmp / "state",
                tmp / "spool",
                master=master,
                snapshot=lambda oid, e: snaps[oid],
                executor=ex,
            )
            t0 = time.perf_counter()
            for i, sql in enumerate(VIEWS.values()):
                plan = plan_of(sql, cat)
                engine.create_view(60000 + i, plan, {o: sc[o] for o in plan.tables}, at_epoch=1)
            print(
                f"{ex:>6}: backfill of {state_rows:,} rows into 3 views"
                f" {time.perf_counter() - t0:.2f} s ({_load()})",
                flush=True,
            )
            low, high, epoch = 0, state_rows, 1
            for k in [100, *sizes]:  # the first, untimed: warm-up of the batch path
                half = k // 2
                d = pa.concat_tables([_changes(low, half, -1), _changes(high, k - half, 1)])
                low, high, epoch = low + half, high + k - half, epoch + 1
                spool.write_epoch(epoch, {16400: d})
                tasks0 = sum(engine.spark.tasks.values())
                t0 = time.perf_counter()
                engine.advance(epoch)
                dt = time.perf_counter() - t0
                failed = [s.error for s in engine.status() if s.status != "running"]
                assert not failed, failed
                if k == 100 and sizes:
                    continue
                times[ex].append((k, dt))
                tasks = sum(engine.spark.tasks.values()) - tasks0
                print(
                    f"batch of {k:>9,} changed rows, {ex:>6}: {dt:7.2f} s,"
                    f" {k / dt:>11,.0f} rows/s, {tasks} Spark tasks ({_load()})",
                    flush=True,
                )
            engine.close()
            spool.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if len(times) == 2 and len(sizes) >= 2:
        (fs, ps), (fd, pd) = _fit(times["spark"]), _fit(times["duckdb"])
        print(f"spark: fixed {fs:.2f} s + {ps * 1e6:.2f} s per M changed rows")
        print(f"duckdb: fixed {fd:.2f} s + {pd * 1e6:.2f} s per M changed rows")
        if pd > ps and fs > fd:
            print(f"crossover: Spark is faster from ~{(fs - fd) / (pd - ps):,.0f} changed rows")
        else:
            print("crossover: none (Spark costs more per batch and per row here)")


def scaling(rows: str, masters: list[str]) -> None:
    """The Spark executor's backfill under each master, each in a process of its own."""
    from tests.test_spark_cluster import driver_env, start_cluster

    me = str(Path(__file__).resolve())
    for m in masters:
        cluster = None
        env = dict(os.environ)
        master = m
        if m == "standalone":
            root = Path(tempfile.mkdtemp(prefix="hw-bench-cluster-"))
            t0 = time.perf_counter()
            cluster = start_cluster(root, cores=2, memory="1536m")
            print(f"standalone master + 1 worker (2 cores): up in {time.perf_counter() - t0:.1f} s")
            env.update(driver_env(None, "1g"))
            master = cluster.url
        print(f"--- Spark executor, master {m} ({_load()})", flush=True)
        try:
            subprocess.run(
                [sys.executable, me, "backfill", "--rows", rows, "--master", master]
                + ["--executors", "spark"],
                env=env,
                check=False,
            )
        finally:
            if cluster is not None:
                cluster.stop()
                shutil.rmtree(root, ignore_errors=True)


# --- through a real server: COPY into 5 views, and the SDP peer --------------------------

# five common view shapes, over t (id, a, b, s) and the 1,000-row dimension u (id, a, x);
# {t} and {u}: the tables' names (Headwater) or Parquet paths (SDP, bench/sdp.py)
VIEWS5 = {
    "agg": "SELECT a, count(*) AS n, sum(b) AS sb FROM {t} AS t GROUP BY a",
    "joined": "SELECT t.id, t.b, u.x FROM {t} AS t JOIN {u} AS u ON t.a = u.a",
    "dist": "SELECT DISTINCT a, s FROM {t} AS t",
    "minmax": "SELECT s, min(id) AS lo, max(id) AS hi FROM {t} AS t GROUP BY s",
    "join_agg": "SELECT u.x, count(*) AS n, sum(t.b) AS sb"
    " FROM {t} AS t JOIN {u} AS u ON t.a = u.a GROUP BY u.x",
}
# the 5 views' rows of headwater_catalog.views (`name = ANY(%s)` with a list: DuckDB's
# UNNEST of a VARCHAR, an error)
_NAMED = " WHERE name IN (" + ", ".join(["%s"] * len(VIEWS5)) + ")"
WAIT = "3600s"  # freshness_timeout of the reads that wait for the views (5 M rows on Spark)


def _copy_blocks(table: pa.Table, block_rows: int = 100_000) -> list[bytes]:
    """COPY FROM STDIN text of `table`, in blocks (made before the clock starts)."""
    from pyarrow import csv

    opts = csv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    out = []
    for off in range(0, table.num_rows, block_rows):
        sink = pa.BufferOutputStream()
        csv.write_csv(table.slice(off, block_rows), sink, opts)
        out.append(sink.getvalue().to_pybytes())
    return out


def _copy(conn: Any, table: str, cols: str, blocks: list[bytes]) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN") as cp:
        for b in blocks:
            cp.write(b)


class HwViews:
    """A Headwater server started with `--executor executor`, tables t and u, the 5 views."""

    def __init__(self, executor: str, master: str, state_rows: int) -> None:
        self.executor, self.master, self.state_rows = executor, master, state_rows
        self.rows = state_rows  # rows of t so far

    def __enter__(self) -> HwViews:
        import psycopg

        from bench import common

        args = ["--executor", self.executor, "--spark-master", self.master]
        self._server = common.headwater_server(extra_args=args)
        dsn = self._server.__enter__()
        self.conn = c = psycopg.connect(dsn, autocommit=True)
        c.execute(f"SET headwater.freshness_timeout = '{WAIT}'")
        c.execute("CREATE TABLE t (id int, a int, b int, s text)")
        c.execute("CREATE TABLE u (id int, a int, x int)")
        _copy(c, "u", "id, a, x", _copy_blocks(table_u()))
        if self.state_rows:
            _copy(c, "t", "id, a, b, s", _copy_blocks(table_t(0, self.state_rows)))
        t0 = time.perf_counter()
        for name, q in VIEWS5.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q.format(t='t', u='u')}")
        self.wait()
        print(
            f"  {self.executor:>6}: 5 views created over {self.state_rows:,} rows and fresh"
            f" in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        self.warm()
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()
        self._server.__exit__(*exc)

    def wait(self) -> None:
        """Until every view reflects every acknowledged write (one read of all five)."""
        self.conn.execute("SET headwater.freshness = 'latest'")
        self.conn.execute(
            "SELECT " + ", ".join(f"(SELECT count(*) FROM {v})" for v in VIEWS5)
        ).fetchall()
        self.conn.execute("SET headwater.freshness = 'session'")

    def warm(self, timeout: float = 600.0) -> None:
        """Small writes until the Spark stage runs them (not 'Spark is starting'), so
        that its start stays out of what is measured."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            self.conn.execute("INSERT INTO t VALUES (-1, -1, 0, 'x')")
            self.conn.execute("DELETE FROM t WHERE id = -1")
            self.wait()
            if not any("starting" in (r or "") for r, _ in self.batches()):
                break
            time.sleep(1.0)
        took = time.perf_counter() - t0
        print(
            f"  {self.executor:>6}: warm-up (small writes until the stage runs them) {took:.1f} s"
        )

    def batches(self) -> list[tuple[str | None, int]]:
        """(executor_reason, spark_tasks) of the 5 views' last batches."""
        return [
            (r[0], int(r[1] or 0))
            for r in self.conn.execute(
                "SELECT executor_reason, spark_tasks FROM headwater_catalog.views" + _NAMED,
                list(VIEWS5),
            ).fetchall()
        ]

    def executors(self) -> str:
        rows = self.conn.execute(
            "SELECT DISTINCT executor FROM headwater_catalog.views" + _NAMED, list(VIEWS5)
        ).fetchall()
        return "+".join(sorted(str(r[0]) for r in rows))

    def apply(self, blocks: list[bytes], n: int) -> tuple[float, float, int, str]:
        """COPY `blocks` (n rows) into t, then wait for the views: (seconds to the COPY's
        acknowledgement, seconds to views that reflect it, Spark tasks, executors)."""
        tasks0 = sum(k for _, k in self.batches())
        t0 = time.perf_counter()
        _copy(self.conn, "t", "id, a, b, s", blocks)
        t1 = time.perf_counter()
        self.wait()
        t2 = time.perf_counter()
        self.rows += n
        got = self.conn.execute("SELECT sum(n) FROM agg").fetchone()
        assert got is not None and got[0] == self.rows, (got, self.rows)
        return t1 - t0, t2 - t0, sum(k for _, k in self.batches()) - tasks0, self.executors()


def copy(rows: int, master: str, executors: list[str]) -> None:
    """COPY FROM STDIN of `rows` rows into a table carrying 5 views, per executor: the
    time from the COPY's start until all 5 views reflect it."""
    blocks = _copy_blocks(table_t(0, rows))
    res: dict[str, float] = {}
    for ex in executors:
        with HwViews(ex, master, 0) as hw:
            took, fresh, tasks, ran = hw.apply(blocks, rows)
        res[ex] = fresh
        print(
            f"COPY {rows:>10,} rows into a table with 5 views, --executor {ex:>6}:"
            f" COPY {took:7.2f} s, views fresh {fresh:7.2f} s after its start,"
            f" {rows / fresh:>10,.0f} rows/s; ran on {ran}, {tasks} Spark tasks ({_load()})",
            flush=True,
        )
    if "spark" in res and "duckdb" in res:
        print(f"spark / duckdb (time to fresh views): {res['spark'] / res['duckdb']:.2f}x")


def sdp(
    state_rows: int, batch: int, nbatches: int, master: str, executors: list[str], cli: bool
) -> None:
    """Batches appended to t; after each, the time until the 5 views reflect it:
    Spark Declarative Pipelines (bench/sdp.py, a full recompute per run) vs Headwater."""
    import json

    from bench import sdp as sdp_peer

    times: dict[str, list[tuple[float, float]]] = {}  # side -> [(seconds, load)]
    label = "SDP (spark-pipelines run)" if cli else "SDP (pipelines API)"
    tmp = Path(tempfile.mkdtemp(prefix="hw-bench-sdp-"))
    try:
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "sdp.py")]
        cmd += ["--dir", str(tmp), "--state", str(state_rows), "--batch", str(batch)]
        cmd += ["--batches", str(nbatches), "--master", master] + (["--cli"] if cli else [])
        print(f"--- {label}, master {master} ({_load()})", flush=True)
        with open(tmp / "spark.log", "wb") as log:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, check=False)
        expect = state_rows
        for line in proc.stdout.decode().splitlines():
            if not line.startswith(sdp_peer.MARK):
                continue
            r = json.loads(line.removeprefix(sdp_peer.MARK))
            if "initial" in r:
                print(
                    f"  first run (5 views created over {state_rows:,} rows): {r['initial']:.1f} s"
                )
                continue
            expect += batch
            assert r["rows"] == expect, (r, expect)
            times.setdefault(label, []).append((r["seconds"], os.getloadavg()[0]))
            print(f"  batch {r['batch']}: {r['seconds']:.2f} s ({_load()})", flush=True)
        if proc.returncode:
            log_tail = (tmp / "spark.log").read_text(errors="replace")[-3000:]
            print(f"  SDP failed ({proc.returncode}):\n{log_tail}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for ex in executors:
        side = f"Headwater --executor {ex}"
        print(f"--- {side}, master {master} ({_load()})", flush=True)
        with HwViews(ex, master, state_rows) as hw:
            first = state_rows
            for i in range(1, nbatches + 1):
                blocks = _copy_blocks(table_t(first, batch))
                first += batch
                _, fresh, tasks, ran = hw.apply(blocks, batch)
                times.setdefault(side, []).append((fresh, os.getloadavg()[0]))
                print(f"  batch {i}: {fresh:.2f} s, on {ran}, {tasks} Spark tasks ({_load()})")
    sides = list(times)
    print(
        f"\nbatch of {batch:,} rows appended to a {state_rows:,}-row table -> 5 views reflect it"
        " (seconds; load = 1-minute load average)"
    )
    head = ["batch", *sides] + [f"{sides[0].split(' (')[0]} / {s[10:]}" for s in sides[1:]]
    print(" | ".join(head))
    for i in range(nbatches):
        cells = [str(i + 1)]
        for s in sides:
            v = times[s][i] if i < len(times[s]) else None
            cells.append("-" if v is None else f"{v[0]:.2f} (load {v[1]:.1f})")
        for s in sides[1:]:
            a = times[sides[0]][i][0] if i < len(times[sides[0]]) else None
            b = times[s][i][0] if i < len(times[s]) else None
            cells.append("-" if a is None or b is None else f"{a / b:.1f}x")
        print(" | ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("section", choices=["state", "backfill", "batches", "scaling", "copy", "sdp"])
    ap.add_argument("--rows", help="backfill: sizes (100000,1000000); copy: rows (200000)")
    ap.add_argument("--large", action="store_true", help="backfill: 5 M and 10 M rows")
    ap.add_argument("--state", type=int, help="batches (1000000), sdp (100000): the table's rows")
    ap.add_argument("--batch", help="batches: sizes (1000,10000,100000,1000000); sdp: (10000)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--masters", default="local[1],local[2],standalone", help="scaling")
    ap.add_argument("--executors", help="duckdb,spark (copy: duckdb,spark,auto; sdp: spark,auto)")
    ap.add_argument("--batches", type=int, default=3, help="sdp: batches appended")
    ap.add_argument("--sdp-cli", action="store_true", help="sdp: spark-pipelines run per batch")
    args = ap.parse_args()
    sec = args.section
    executors = (
        args.executors
        or {"copy": "duckdb,spark,auto", "sdp": "spark,auto"}.get(sec, "duckdb,spark")
    ).split(",")
    rows = "5000000,10000000" if args.large else args.rows
    sizes = [int(x) for x in (rows or ("200000" if sec == "copy" else "100000,1000000")).split(",")]
    if sec == "state":
        state(sizes[-1])
    elif sec == "backfill":
        backfill(sizes, args.master, executors)
    elif sec == "batches":
        batch = [int(x) for x in (args.batch or "1000,10000,100000,1000000").split(",")]
        batches(args.state or 1_000_000, batch, args.master, executors)
    elif sec == "copy":
        copy(sizes[-1], args.master, executors)
    elif sec == "sdp":
        batch = int(args.batch or 10_000)
        sdp(args.state or 100_000, batch, args.batches, args.master, executors, args.sdp_cli)
    else:
        scaling(",".join(map(str, sizes)), args.masters.split(","))


if __name__ == "__main__":
    main()
