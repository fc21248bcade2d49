"""Measure the candidate designs of the maintenance engine on this machine.

    .venv/bin/python bench/engine_candidates.py [all|source|exactness|sharing|idle|restart]

Every section starts its own SparkSession (local[2] unless --master), writes epochs
into a spool directory (engine/spool.py: one Arrow file per table per epoch) and
prints its figures on stdout. Latency ("freshness") of an epoch = from the moment its
spool directory is in place to the moment a sink has committed the view state that
reflects it. Sections:

  source     (a) how Spark reads the change log: Python streaming DataSource, simple
             reader vs partitioned reader (Arrow batches), vs Spark's Parquet file
             source; which process runs the Python source code.
  exactness  (b) per-epoch exactness when one micro-batch covers several epochs:
             native groupBy(key, epoch) + integration per epoch in the sink, vs one
             micro-batch per epoch with Spark's stateful aggregation.
  sharing    (c) N views (1/10/20): one query per view, one query holding the union of
             the views' plans tagged with a view id, or one view-independent "epoch
             pump" query whose sink advances every view.
  idle       (d) CPU with 20 views and no writes, per design and polling setting.
  restart    (e) SIGKILL of the driver in the middle of a stream; restart from Spark's
             checkpoint with an idempotent epoch-keyed sink; exactness at every epoch.
  engine     (f) the chosen design as built (engine/engine.py) with 1/10/20 views.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from headwater.engine.spool import (  # noqa: E402
    ChangeSource,
    EpochSource,
    SpoolWriter,
    read_table_changes,
)

LIVE = 2**63 - 1
TABLE = 16384
SCHEMA = "k int, v int, _hw_w int, _hw_epoch long"
CLK = os.sysconf("SC_CLK_TCK")
CK_ROOT = Path(tempfile.gettempdir())  # checkpoints and view state: on disk, as in production


def ckpt(name: str) -> str:
    return str(CK_ROOT / name)


def out(msg: str) -> None:
    print(msg, flush=True)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ms(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    return f"p50 {pct(xs, 50) * 1000:.0f} ms, p99 {pct(xs, 99) * 1000:.0f} ms (n={len(xs)})"


# -- Spark ------------------------------------------------------------------------------
def spark_session(master: str, polling_ms: int = 10) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("hw-engine-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.streaming.pollingDelay", f"{polling_ms}ms")
        .config("spark.sql.streaming.minBatchesToRetain", "10")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ChangeSource)
    spark.dataSource.register(EpochSource)
    return spark


def tree_cpu(root_pid: int) -> dict[int, float]:
    """user+system CPU seconds of a process and each of its descendants (/proc)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(d))
        stats[int(d)] = (int(fields[11]) + int(fields[12])) / CLK
    out: dict[int, float] = {}
    todo = [root_pid]
    while todo:
        p = todo.pop()
        out[p] = stats.get(p, 0.0)
        todo.extend(children.get(p, []))
    return out


def idle_cpu(seconds: float = 10.0) -> float:
    """Share of one core used by this process tree over `seconds` of no writes
    (per process: a worker that exits during the window takes its CPU with it)."""
    a = tree_cpu(os.getpid())
    time.sleep(seconds)
    b = tree_cpu(os.getpid())
    return sum(max(0.0, cpu - a.get(p, 0.0)) for p, cpu in b.items()) / seconds


def batch_range(checkpoint: str, batch_id: int) -> tuple[int, int]:
    """(start, end] epochs of a micro-batch, from Spark's offset log (written before
    the batch runs): the sink learns its frontier even for epochs without rows."""
    lines = Path(checkpoint, "offsets", str(batch_id)).read_text().splitlines()
    end = max(json.loads(line)["epoch"] for line in lines[2:] if line.startswith("{"))
    if batch_id == 0:
        return 0, int(end)
    prev = Path(checkpoint, "offsets", str(batch_id - 1)).read_text().splitlines()
    start = max(json.loads(line)["epoch"] for line in prev[2:] if line.startswith("{"))
    return int(start), int(end)


# -- workload ---------------------------------------------------------------------------
class Churn:
    """Random inserts, updates (old -1, new +1) and deletes over `keys` keys."""

    def __init__(self, keys: int = 50, seed: int = 1) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.live: dict[int, tuple[int, int]] = {}
        self.next_rid = 1
        self.log: list[pa.Table] = []

    def epoch(self, epoch: int, ops: int) -> pa.Table:
        k: list[int] = []
        v: list[int] = []
        w: list[int] = []
        for _ in range(ops):
            r = self.rng.random()
            if r < 0.6 or len(self.live) < 5:
                row = (self.rng.randrange(self.keys), self.rng.randrange(1000))
                self.live[self.next_rid] = row
                self.next_rid += 1
                k.append(row[0]), v.append(row[1]), w.append(1)
            else:
                rid = self.rng.choice(list(self.live))
                old = self.live.pop(rid)
                k.append(old[0]), v.append(old[1]), w.append(-1)
                if r < 0.8:
                    new = (old[0], self.rng.randrange(1000))
                    self.live[rid] = new
                    k.append(new[0]), v.append(new[1]), w.append(1)
        t = pa.table(
            {
                "k": pa.array(k, pa.int32()),
                "v": pa.array(v, pa.int32()),
                "_hw_w": pa.array(w, pa.int32()),
            }
        )
        self.log.append(t.append_column("_hw_epoch", pa.array([epoch] * len(k), pa.int64())))
        return t


class Writer:
    """Writes epochs into the spool and remembers when each became readable."""

    def __init__(self, root: Path, churn: Churn | None = None) -> None:
        self.spool = SpoolWriter(root)
        self.churn = churn or Churn()
        self.epoch = 0
        self.written: dict[int, float] = {}

    def write(self, ops: int = 10, table: pa.Table | None = None) -> int:
        self.epoch += 1
        t = table if table is not None else self.churn.epoch(self.epoch, ops)
        self.spool.write_epoch(self.epoch, {TABLE: t})
        self.written[self.epoch] = time.monotonic()
        return self.epoch

    def run(self, seconds: float, every_ms: float, ops: int = 10) -> None:
        """Write an epoch every `every_ms` from another process (as the server would:
        spooling in the driver's process would compete with the sink for the GIL)."""
        res = Path(self.spool.root).parent / f"writer-{self.epoch}.arrow"
        subprocess.run(
            [
                sys.executable,
                __file__,
                "_writer",
                str(self.spool.root),
                str(self.epoch),
                str(seconds),
                str(every_ms),
                str(ops),
                str(self.churn.rng.randrange(10**9)),
                str(self.churn.keys),
                str(res),
            ],
            check=True,
        )
        with pa.memory_map(str(res)) as src:
            t = pa.ipc.open_file(src).read_all()
        meta = json.loads(t.schema.metadata[b"written"])
        for e, at in meta.items():
            self.written[int(e)] = at
        self.epoch = max(self.written)
        self.churn.log.append(t.replace_schema_metadata(None))


def writer_proc(
    root: str, start: str, seconds: str, every_ms: str, ops: str, seed: str, keys: str, res: str
) -> None:
    w = Writer(Path(root), Churn(int(keys), int(seed)))
    w.epoch = int(start)
    end = time.monotonic() + float(seconds)
    nxt = time.monotonic()
    while time.monotonic() < end:
        w.write(int(ops))
        nxt += float(every_ms) / 1000.0
        time.sleep(max(0.0, nxt - time.monotonic()))
    t = pa.concat_tables(w.churn.log)
    t = t.replace_schema_metadata({"written": json.dumps(w.written)})
    with pa.ipc.new_file(res, t.schema) as f:
        f.write_table(t)


class Seen:
    """When each epoch reached a sink (first time), and where the sink spent its time."""

    def __init__(self) -> None:
        self.at: dict[int, float] = {}
        self.spark_s: list[float] = []
        self.duckdb_s: list[float] = []
        self.cond = threading.Condition()
        self.batches = 0
        self.epochs_in_batches: list[int] = []

    def mark(self, start: int, end: int) -> None:
        now = time.monotonic()
        with self.cond:
            for e in range(start + 1, end + 1):
                self.at.setdefault(e, now)
            self.batches += 1
            self.epochs_in_batches.append(end - start)
            self.cond.notify_all()

    def wait(self, epoch: int, timeout: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while epoch not in self.at:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def split(self) -> str:
        if not self.spark_s and not self.duckdb_s:
            return ""
        sp = statistics.mean(self.spark_s) * 1000 if self.spark_s else 0.0
        dk = statistics.mean(self.duckdb_s) * 1000 if self.duckdb_s else 0.0
        return f"sink: Spark job {sp:.0f} ms + DuckDB {dk:.0f} ms per batch"

    def latencies(self, w: Writer, epochs: range | list[int]) -> list[float]:
        return [self.at[e] - w.written[e] for e in epochs if e in self.at]


def spaced_latency(w: Writer, seen: Seen, n: int = 20, gap: float = 0.4) -> list[float]:
    """Latency of n 10-row epochs written one at a time with idle gaps between."""
    epochs = []
    for _ in range(n):
        e = w.write(10)
        epochs.append(e)
        seen.wait(e, 30)
        time.sleep(gap)
    return seen.latencies(w, epochs)


# -- view state in DuckDB, versioned per epoch -------------------------------------------
class AggState:
    """COUNT/SUM per (view, group) kept as versions (value, epoch from, epoch to).

    The sink receives per-(view, group, epoch) deltas and integrates them epoch by
    epoch in one SQL statement (a running sum per group), so a micro-batch that
    covers many epochs still yields the state at each of them.
    """

    def __init__(self, path: str = ":memory:") -> None:
        self.db = duckdb.connect(path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS st (view INT, g BIGINT, cnt BIGINT, sm BIGINT,"
            " efrom BIGINT, eto BIGINT)"
        )
        self.db.execute("CREATE TABLE IF NOT EXISTS frontier (view INT PRIMARY KEY, epoch BIGINT)")

    def frontier(self, view: int = 0) -> int:
        rows = self.db.execute("SELECT epoch FROM frontier WHERE view = ?", [view]).fetchall()
        row = rows[0] if rows else None
        return int(row[0]) if row else 0

    def apply(self, deltas: pa.Table, end: int, views: list[int]) -> bool:
        """Integrate deltas (view, g, _hw_epoch, dc, ds) up to epoch `end`, atomically
        and idempotently: views whose frontier is already >= end are skipped."""
        db = self.db
        db.execute("BEGIN")
        try:
            fr = dict(db.execute("SELECT view, epoch FROM frontier").fetchall())
            todo = [v for v in views if fr.get(v, 0) < end]
            if not todo:
                db.execute("ROLLBACK")
                return False
            db.register("d_in", deltas)
            db.execute(
                f"""CREATE OR REPLACE TEMP TABLE d AS
                SELECT view, g, _hw_epoch AS epoch, sum(dc) AS dc, sum(ds) AS ds FROM d_in
                WHERE view IN ({",".join(map(str, todo))})
                  AND _hw_epoch > coalesce(
                      (SELECT epoch FROM frontier f WHERE f.view = d_in.view), 0)
                GROUP BY ALL HAVING sum(dc) <> 0 OR sum(ds) <> 0"""
            )
            db.unregister("d_in")
            db.execute(
                f"""CREATE OR REPLACE TEMP TABLE r AS
                SELECT d.view, d.g, d.epoch,
                  coalesce(c.cnt, 0) + sum(d.dc) OVER w AS cnt,
                  coalesce(c.sm, 0) + sum(d.ds) OVER w AS sm,
                  coalesce(lead(d.epoch) OVER w, {LIVE}) AS eto
                FROM d LEFT JOIN st c ON c.view = d.view AND c.g IS NOT DISTINCT FROM d.g
                  AND c.eto = {LIVE}
                WINDOW w AS (PARTITION BY d.view, d.g ORDER BY d.epoch)"""
            )
            db.execute(
                f"""UPDATE st SET eto = m.e FROM (SELECT view, g, min(epoch) AS e FROM d
                GROUP BY ALL) m WHERE st.view = m.view AND st.g IS NOT DISTINCT FROM m.g
                AND st.eto = {LIVE}"""
            )
            db.execute("INSERT INTO st SELECT view, g, cnt, sm, epoch, eto FROM r WHERE cnt <> 0")
            db.executemany(
                "INSERT OR REPLACE INTO frontier VALUES (?, ?)", [(v, end) for v in todo]
            )
            db.execute("COMMIT")
            return True
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def mismatches(
        self, log: list[pa.Table], view: int, group: str, where: str, epochs: list[int]
    ) -> int:
        """Epochs at which the state differs from the query recomputed from the log."""
        db = self.db
        db.register("lg", pa.concat_tables(log))
        db.register("eps", pa.table({"e": pa.array(epochs, pa.int64())}))
        q = f"""SELECT eps.e, {group} AS g, sum(_hw_w) AS cnt, sum(_hw_w * v) AS sm
                FROM eps JOIN lg ON lg._hw_epoch <= eps.e WHERE {where}
                GROUP BY 1, 2 HAVING sum(_hw_w) <> 0"""
        s = f"""SELECT eps.e, g, cnt, sm FROM eps JOIN st ON st.efrom <= eps.e
                AND st.eto > eps.e WHERE view = {view}"""
        n = db.execute(
            f"SELECT count(DISTINCT e) FROM (({q} EXCEPT ALL {s}) UNION ALL ({s} EXCEPT ALL {q}))"
        ).fetchall()[0][0]
        db.unregister("lg")
        db.unregister("eps")
        return int(n)


# -- view definitions for the sharing figures ---------------------------------------------
def view_defs(n: int) -> list[tuple[str, str]]:
    """n different single-table aggregate views: (group expression, filter)."""
    return [(f"k % {3 + i}", f"v % {2 + i % 5} <> {i % 2}") for i in range(n)]


def tagged_union(df: Any, views: list[tuple[str, str]]) -> Any:
    from pyspark.sql import functions as F

    parts = [
        df.where(where).select(
            F.lit(i).alias("view"),
            F.expr(group).cast("long").alias("g"),
            "_hw_epoch",
            F.col("_hw_w").alias("dc"),
            (F.col("_hw_w") * F.col("v")).cast("long").alias("ds"),
        )
        for i, (group, where) in enumerate(views)
    ]
    u = parts[0]
    for p in parts[1:]:
        u = u.unionAll(p)
    return u


def per_epoch_deltas(df: Any) -> pa.Table:
    """Native (JVM) pre-aggregation per (view, group, epoch) of a batch DataFrame."""
    from pyspark.sql import functions as F

    return (
        df.groupBy("view", "g", "_hw_epoch")
        .agg(F.sum("dc").alias("dc"), F.sum("ds").alias("ds"))
        .toArrow()
    )


def duckdb_deltas(
    db: duckdb.DuckDBPyConnection, changes: pa.Table, views: list[tuple[str, str]]
) -> pa.Table:
    db.register("chg", changes)
    sql = " UNION ALL ".join(
        f"SELECT {i} AS view, CAST({g} AS BIGINT) AS g, _hw_epoch, sum(_hw_w) AS dc,"
        f" sum(_hw_w * v) AS ds FROM chg WHERE {wh} GROUP BY ALL"
        for i, (g, wh) in enumerate(views)
    )
    t = db.execute(sql).to_arrow_table()
    db.unregister("chg")
    return t


# -- sections -----------------------------------------------------------------------------
def start_change_query(
    spark: Any,
    root: Path,
    ckpt: str,
    sink: Callable[[Any, int], None],
    reader: str = "partitioned",
    wait_ms: float = 0,
    transform: Callable[[Any], Any] | None = None,
    max_epochs: int = 0,
    polling: bool = True,
) -> Any:
    df = (
        spark.readStream.format("hw_changes")
        .option("root", str(root))
        .option("table", str(TABLE))
        .option("schema", SCHEMA)
        .option("reader", reader)
        .option("wait_ms", str(wait_ms))
        .option("max_epochs", str(max_epochs))
        .load()
    )
    if transform is not None:
        df = transform(df)
    return df.writeStream.option("checkpointLocation", ckpt).foreachBatch(sink).start()


def section_source(master: str, tmp: Path) -> None:
    out("\n## (a) reading the change log\n")
    spark = spark_session(master)
    driver_pid = os.getpid()
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]

    # Which process runs the Python data source code?
    probe = tmp / "probe"
    probe.mkdir()

    from headwater.engine import spool as S

    class ProbeSource(S.ChangeSource):
        @classmethod
        def name(cls) -> str:
            return "hw_probe"

        def streamReader(self, schema: object) -> Any:
            d = self.options["probe"]

            class R(S._ChangeReader):
                def latestOffset(self, start=None, limit=None):  # type: ignore[no-untyped-def]
                    Path(d, f"latestOffset-{os.getpid()}-{os.getppid()}").touch()
                    return super().latestOffset(start, limit)

                def read(self, partition):  # type: ignore[no-untyped-def]
                    Path(d, f"read-{os.getpid()}-{os.getppid()}").touch()
                    return super().read(partition)

            return R(self.options)

    spark.dataSource.register(ProbeSource)
    root = tmp / "spool-probe"
    w = Writer(root)
    seen = Seen()

    def sink(df: Any, bid: int) -> None:
        Path(probe, f"foreachBatch-{os.getpid()}-{os.getppid()}").touch()
        df.count()
        seen.mark(*batch_range(ckpt("ck-probe"), bid))

    q = (
        spark.readStream.format("hw_probe")
        .option("root", str(root))
        .option("table", str(TABLE))
        .option("schema", SCHEMA)
        .option("probe", str(probe))
        .load()
        .writeStream.option("checkpointLocation", ckpt("ck-probe"))
        .foreachBatch(sink)
        .start()
    )
    for _ in range(3):
        seen.wait(w.write(10), 120)
    q.stop()
    where: dict[str, set[str]] = {}

    def parent_of(pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return -1

    for f in probe.iterdir():
        what, pid_s, ppid_s = f.name.split("-")
        pid, ppid = int(pid_s), int(ppid_s)
        if pid == driver_pid:
            kind = "the driver's Python process (where the server would run)"
        elif ppid == jvm_pid:
            kind = "a Python process started by the JVM"
        elif parent_of(ppid) == jvm_pid:
            kind = "a Python worker forked by the JVM's pyspark.daemon"
        else:
            kind = f"another process (parent {ppid})"
        where.setdefault(what, set()).add(kind)
    out(f"driver Python pid {driver_pid}, JVM pid {jvm_pid}")
    for what, kinds in sorted(where.items()):
        out(f"- {what} ran in: {', '.join(sorted(kinds))}")

    # Latency (10-row epochs, idle between) and throughput (1 M rows in one epoch).
    rows = []
    for variant in ("simple", "partitioned", "parquet"):
        root = tmp / f"spool-{variant}"
        ck = ckpt(f"ck-{variant}")
        w = Writer(root)
        seen = Seen()
        pqdir = tmp / f"pq-{variant}"
        pqdir.mkdir()
        stage = tmp / f"pq-stage-{variant}"
        stage.mkdir()

        def sink(
            df: Any, bid: int, seen: Seen = seen, ck: str = ck, variant: str = variant
        ) -> None:
            from pyspark.sql import functions as F

            lo, hi, _ = df.agg(F.min("_hw_epoch"), F.max("_hw_epoch"), F.count("*")).collect()[0]
            if variant == "parquet":
                if lo is not None:
                    seen.mark(lo - 1, hi)
            else:
                seen.mark(*batch_range(ck, bid))

        if variant == "parquet":
            orig_write = w.write

            def pq_write(
                ops: int = 10,
                table: pa.Table | None = None,
                w: Writer = w,
                pqdir: Path = pqdir,
                stage: Path = stage,
            ) -> int:
                w.epoch += 1
                t = table if table is not None else w.churn.epoch(w.epoch, ops)
                t = t.append_column("_hw_epoch", pa.array([w.epoch] * t.num_rows, pa.int64()))
                tmpf = stage / f"{w.epoch:016x}.parquet"
                pq.write_table(t, tmpf)
                os.rename(tmpf, pqdir / tmpf.name)
                w.written[w.epoch] = time.monotonic()
                return w.epoch

            w.write = pq_write  # type: ignore[method-assign]
            del orig_write
            q = (
                spark.readStream.schema(SCHEMA)
                .parquet(str(pqdir))
                .writeStream.option("checkpointLocation", ck)
                .foreachBatch(sink)
                .start()
            )
        else:
            q = start_change_query(spark, root, ck, sink, reader=variant)
        t0 = time.monotonic()
        seen.wait(w.write(10), 180)
        first = time.monotonic() - t0
        lat = spaced_latency(w, seen, 20, 0.3)
        big = pa.table(
            {
                "k": pa.array([i % 100000 for i in range(1_000_000)], pa.int32()),
                "v": pa.array([i % 1000 for i in range(1_000_000)], pa.int32()),
                "_hw_w": pa.array([1] * 1_000_000, pa.int32()),
            }
        )
        t0 = time.monotonic()
        e = w.write(table=big)
        seen.wait(e, 300)
        thr = 1_000_000 / (time.monotonic() - t0)
        q.stop()
        rows.append((variant, first, lat, thr))
        log(f"source {variant}: {ms(lat)}")
    out("\n| source | first batch | 10-row epoch latency | 1 M rows in one epoch |")
    out("|---|---|---|---|")
    names = {
        "simple": "Python DataSource, SimpleDataSourceStreamReader",
        "partitioned": "Python DataSource, DataSourceStreamReader (Arrow batches, 2 partitions)",
        "parquet": "Spark file source over Parquet (one file per epoch)",
    }
    for variant, first, lat, thr in rows:
        out(f"| {names[variant]} | {first:.1f} s | {ms(lat)} | {thr / 1e6:.2f} M rows/s |")
    spark.stop()


def section_exactness(master: str, tmp: Path, seconds: float = 15.0, every_ms: float = 5.0) -> None:
    out(
        f"\n## (b) per-epoch exactness, epochs every {every_ms:.0f} ms for {seconds:.0f} s,"
        " ~10 changes each\n"
    )
    spark = spark_session(master)
    from pyspark.sql import functions as F

    results = []
    # b1: multi-epoch micro-batches, native groupBy(view, g, epoch), integration per epoch.
    root, ck = tmp / "spool-b1", ckpt("ck-b1")
    w, seen, state = Writer(root, Churn(50, 7)), Seen(), AggState()
    views = [("k", "true")]

    def sink1(df: Any, bid: int) -> None:
        s, e = batch_range(ck, bid)
        t0 = time.monotonic()
        d = per_epoch_deltas(tagged_union(df, views))
        t1 = time.monotonic()
        state.apply(d, e, [0])
        seen.spark_s.append(t1 - t0)
        seen.duckdb_s.append(time.monotonic() - t1)
        seen.mark(s, e)

    q = start_change_query(spark, root, ck, sink1)
    seen.wait(w.write(10), 180)
    warm = w.epoch
    w.run(seconds, every_ms)
    t_end = time.monotonic()
    seen.wait(w.epoch, 120)
    q.stop()
    lat = seen.latencies(w, range(warm + 1, w.epoch + 1))
    bad = state.mismatches(w.churn.log, 0, "k", "true", list(range(1, w.epoch + 1)))
    per = statistics.mean(seen.epochs_in_batches[1:]) if len(seen.epochs_in_batches) > 1 else 0
    results.append(
        (
            "multi-epoch batches: groupBy(k, epoch) + per-epoch integration in the sink",
            ms(lat) + "; " + seen.split(),
            f"{per:.1f}",
            f"{w.epoch} / {w.epoch}",
            f"{bad} of {w.epoch} epochs",
        )
    )
    log(f"b1 {ms(lat)}")

    # b2: one epoch per micro-batch, Spark's stateful groupBy(k) (update mode).
    root, ck = tmp / "spool-b2", ckpt("ck-b2")
    w, seen, state = Writer(root, Churn(50, 7)), Seen(), AggState()

    def sink2(df: Any, bid: int) -> None:
        s, e = batch_range(ck, bid)
        t = df.toArrow()
        # Update mode gives the new totals of the groups changed in this batch (one epoch).
        d = state.db
        d.execute("BEGIN")
        if state.frontier() < e:
            d.register("u", t)
            d.execute(f"UPDATE st SET eto = {e} WHERE eto = {LIVE} AND g IN (SELECT k FROM u)")
            d.execute(f"INSERT INTO st SELECT 0, k, cnt, sm, {e}, {LIVE} FROM u WHERE cnt <> 0")
            d.unregister("u")
            d.execute(f"INSERT OR REPLACE INTO frontier VALUES (0, {e})")
        d.execute("COMMIT")
        seen.mark(s, e)

    def agg(df: Any) -> Any:
        return df.groupBy("k").agg(
            F.sum("_hw_w").alias("cnt"), F.sum(F.col("_hw_w") * F.col("v")).cast("long").alias("sm")
        )

    df = (
        spark.readStream.format("hw_changes")
        .option("root", str(root))
        .option("table", str(TABLE))
        .option("schema", SCHEMA)
        .option("max_epochs", "1")
        .load()
    )
    q = (
        agg(df)
        .writeStream.outputMode("update")
        .option("checkpointLocation", ck)
        .foreachBatch(sink2)
        .start()
    )
    seen.wait(w.write(10), 180)
    warm = w.epoch
    w.run(seconds, every_ms)
    done_at_end = max(seen.at) if seen.at else 0
    time.sleep(0.1)
    q.stop()
    lat = seen.latencies(w, range(warm + 1, w.epoch + 1))
    done = max(seen.at)
    bad = state.mismatches(w.churn.log, 0, "k", "true", list(range(1, done + 1)))
    backlog = w.epoch - done_at_end
    results.append(
        (
            "one epoch per micro-batch: Spark's stateful groupBy(k), update mode",
            ms(lat)
            + f"; backlog {backlog} epochs ({backlog * every_ms / 1000:.0f} s) when writes stopped",
            "1",
            f"{done} / {w.epoch}",
            f"{bad} of {done} epochs",
        )
    )
    log(f"b2 {ms(lat)} backlog {backlog}")
    del t_end
    out("| design | freshness | epochs per batch | epochs done / written | mismatches |")
    out("|---|---|---|---|---|")
    for r in results:
        out("| " + " | ".join(r) + " |")
    spark.stop()


def run_views(
    spark: Any,
    design: str,
    n: int,
    tmp: Path,
    wait_ms: float = 0,
    measure_idle: bool = False,
    loaded: bool = True,
) -> dict[str, Any]:
    """Start `design` with n views; measure spaced and loaded latency (and idle CPU)."""
    views = view_defs(n)
    tag = f"{design}-{n}-{int(wait_ms)}-{random.randrange(10**6)}"
    root = tmp / f"spool-{tag}"
    w, seen, state = Writer(root, Churn(50, 11)), Seen(), AggState()
    queries = []
    if design == "union":
        ck = ckpt(f"ck-{tag}")

        def sink(df: Any, bid: int) -> None:
            s, e = batch_range(ck, bid)
            t0 = time.monotonic()
            d = per_epoch_deltas(tagged_union(df, views))
            t1 = time.monotonic()
            state.apply(d, e, list(range(n)))
            seen.spark_s.append(t1 - t0)
            seen.duckdb_s.append(time.monotonic() - t1)
            seen.mark(s, e)

        queries.append(start_change_query(spark, root, ck, sink, wait_ms=wait_ms))
    elif design == "pump":
        ck = ckpt(f"ck-{tag}")
        db = duckdb.connect()

        def psink(df: Any, bid: int) -> None:
            s, e = batch_range(ck, bid)
            t1 = time.monotonic()
            batches = list(read_table_changes(root, TABLE, s, e))
            if batches:
                state.apply(
                    duckdb_deltas(db, pa.Table.from_batches(batches), views), e, list(range(n))
                )
            else:
                state.db.executemany(
                    "INSERT OR REPLACE INTO frontier VALUES (?, ?)", [(v, e) for v in range(n)]
                )
            seen.duckdb_s.append(time.monotonic() - t1)
            seen.mark(s, e)

        q = (
            spark.readStream.format("hw_epochs")
            .option("root", str(root))
            .option("wait_ms", str(wait_ms))
            .load()
            .writeStream.option("checkpointLocation", ck)
            .foreachBatch(psink)
            .start()
        )
        queries.append(q)
    elif design == "separate":
        seens = [Seen() for _ in range(n)]
        states = [AggState() for _ in range(n)]
        for i in range(n):
            ck = ckpt(f"ck-{tag}-{i}")

            def ssink(df: Any, bid: int, i: int = i, ck: str = ck) -> None:
                s, e = batch_range(ck, bid)
                states[i].apply(per_epoch_deltas(tagged_union(df, [views[i]])), e, [0])
                seens[i].mark(s, e)

            queries.append(start_change_query(spark, root, ck, ssink, wait_ms=wait_ms))

        def mark_all() -> None:  # an epoch is fresh when every view has it
            for e in list(seens[0].at):
                if all(e in s.at for s in seens):
                    seen.at.setdefault(e, max(s.at[e] for s in seens))

        class _Seen(Seen):
            def wait(self, epoch: int, timeout: float = 120.0) -> bool:
                ok = all(s.wait(epoch, timeout) for s in seens)
                mark_all()
                return ok

        seen = _Seen()
    t0 = time.monotonic()
    seen.wait(w.write(10), 300)
    res: dict[str, Any] = {"first": time.monotonic() - t0}
    time.sleep(1.0)
    res["spaced"] = spaced_latency(w, seen, 15, 0.3)
    res["split"] = seen.split()
    if loaded:
        warm = w.epoch
        w.run(8.0, 5.0)
        seen.wait(w.epoch, 120)
        if design == "separate":
            seen.wait(w.epoch)
        res["loaded"] = seen.latencies(w, range(warm + 1, w.epoch + 1))
    if measure_idle:
        time.sleep(2.0)
        res["idle"] = idle_cpu(10.0)
    check_views = [0, n - 1]
    st = states[0] if design == "separate" else state
    res["mismatches"] = sum(
        st.mismatches(
            w.churn.log,
            0 if design == "separate" else v,
            views[v][0],
            views[v][1],
            list(range(1, w.epoch + 1, max(1, w.epoch // 200))),
        )
        for v in (check_views[:1] if design == "separate" else check_views)
    )
    for q in queries:
        q.stop()
    return res


def section_sharing(master: str, tmp: Path) -> None:
    out("\n## (c) sharing Spark queries among N views (COUNT/SUM GROUP BY views of one table)\n")
    out("spaced: 10-row epochs written 0.3 s apart; loaded: an epoch every 5 ms for 8 s.\n")
    spark = spark_session(master)
    out("| design | views | first batch | freshness, spaced | freshness, loaded | mismatches |")
    out("|---|---|---|---|---|---|")
    plan = [
        ("separate", 1),
        ("separate", 4),
        ("union", 1),
        ("union", 10),
        ("union", 20),
        ("pump", 1),
        ("pump", 10),
        ("pump", 20),
    ]
    names = {
        "separate": "one query per view",
        "union": "one query, union of the views' plans (Spark batch ops in foreachBatch)",
        "pump": "one epoch-pump query, views advanced in the sink (DuckDB)",
    }
    for design, n in plan:
        log(f"sharing {design} {n}")
        r = run_views(spark, design, n, tmp)
        out(
            f"| {names[design]} | {n} | {r['first']:.1f} s | {ms(r['spaced'])} | "
            f"{ms(r.get('loaded', []))}; {r['split']} | {r['mismatches']} |"
        )
    spark.stop()


def section_idle(master: str, tmp: Path) -> None:
    out(
        "\n## (d) idle CPU with 20 views (share of one core, whole process tree,"
        " 10 s without writes)\n"
    )
    out("| design | pollingDelay | latestOffset waits | idle CPU | freshness, spaced |")
    out("|---|---|---|---|---|")
    spark = spark_session(master)
    for polling, wait_ms, design, n in [
        (10, 0, "separate", 4),
        (10, 0, "union", 20),
        (10, 250, "union", 20),
        (10, 0, "pump", 20),
        (10, 250, "pump", 20),
        (100, 0, "pump", 20),
    ]:
        spark.conf.set("spark.sql.streaming.pollingDelay", f"{polling}ms")
        log(f"idle {design} polling {polling} wait {wait_ms}")
        r = run_views(spark, design, n, tmp, wait_ms=wait_ms, measure_idle=True, loaded=False)
        label = f"{'one query per view' if design == 'separate' else design} ({n} views)"
        out(
            f"| {label} | {polling} ms | {wait_ms:.0f} ms | {r['idle'] * 100:.1f}% |"
            f" {ms(r['spaced'])} |"
        )
    spark.stop()


def section_engine(master: str, tmp: Path) -> None:
    """The chosen design as implemented: engine.Engine with 1/10/20 views."""
    out("\n## (f) the engine as built (engine/engine.py): freshness and idle CPU\n")
    out("Views cycle through GROUP BY with COUNT/SUM/AVG, MAX, COUNT(DISTINCT) and DISTINCT.\n")
    from headwater.catalog.catalog import Catalog
    from headwater.catalog.objects import Column, Table
    from headwater.catalog.types import INT4, ColumnType
    from headwater.engine.delta import ScanInfo
    from headwater.engine.engine import Engine
    from headwater.planner.ir import PlanBuilder
    from pglast import parse_sql

    cat = Catalog()
    cat.add_relation(
        Table(
            TABLE,
            "public",
            "t",
            (Column("k", ColumnType(INT4, -1)), Column("v", ColumnType(INT4, -1))),
        )
    )
    scans = {TABLE: ScanInfo(TABLE, ["k", "v"], ["INTEGER", "INTEGER"])}
    shapes = [
        "SELECT k % {m} AS g, count(*) AS n, sum(v) AS s, avg(v) AS a FROM t GROUP BY 1",
        "SELECT k, max(v) AS hi FROM t WHERE v % {m} <> 0 GROUP BY k",
        "SELECT k % {m} AS g, count(DISTINCT v % 10) AS d FROM t GROUP BY 1",
        "SELECT DISTINCT k % {m} AS g FROM t",
    ]
    spark = spark_session(master)
    polling = int(os.environ.get("HW_BENCH_POLLING_MS", "100"))
    wait_ms = int(os.environ.get("HW_BENCH_WAIT_MS", "0"))
    spark.conf.set("spark.sql.streaming.pollingDelay", f"{polling}ms")
    out(f"pollingDelay {polling} ms; the source's latestOffset waits up to {wait_ms} ms.\n")
    out("| views | freshness, spaced | freshness, an epoch every 5 ms | idle CPU | mismatches |")
    out("|---|---|---|---|---|")
    for n in (1, 10, 20):
        root = tmp / f"spool-f{n}"
        w, seen = Writer(root, Churn(50, 5)), Seen()
        w.write(10)
        engine = Engine(tmp / f"state-f{n}", root, master=master, wait_ms=wait_ms)
        for i in range(n):
            sql = shapes[i % len(shapes)].format(m=3 + i)
            plan = PlanBuilder(cat).build(parse_sql(sql)[0].stmt)
            engine.create_view(1000 + i, plan, scans, at_epoch=1)
        engine.on_advance.append(lambda end, seen=seen: seen.mark(max(seen.at or [0]), end))
        engine.start()
        seen.wait(w.write(10), 300)
        time.sleep(1.0)
        spaced = spaced_latency(w, seen, 15, 0.3)
        warm = w.epoch
        w.run(8.0, 5.0)
        seen.wait(w.epoch, 120)
        loaded = seen.latencies(w, range(warm + 1, w.epoch + 1))
        time.sleep(2.0)
        idle = idle_cpu(10.0)
        log(f"engine {n}: {ms(spaced)} / {ms(loaded)} / idle {idle * 100:.1f}%")
        engine.stop()
        # exactness: every epoch of the first view against recomputation
        db = duckdb.connect()
        db.execute("SET integer_division = true")
        db.register("lg", pa.concat_tables(w.churn.log))
        sql0 = shapes[0].format(m=3)
        bad = 0
        for e in range(1, w.epoch + 1, max(1, w.epoch // 100)):
            db.execute(
                "CREATE OR REPLACE TABLE t AS SELECT k, v FROM"
                f" (SELECT k, v, sum(_hw_w)::BIGINT AS n FROM lg WHERE _hw_epoch <= {e}"
                " GROUP BY k, v HAVING sum(_hw_w) > 0), range(n)"
            )
            exp = sorted(db.execute(sql0).fetchall())
            got = sorted(tuple(r.values()) for r in engine.read(1000, e).to_pylist())
            bad += int(
                [tuple(round(x, 6) if isinstance(x, float) else x for x in r) for r in exp]
                != [tuple(round(x, 6) if isinstance(x, float) else x for x in r) for r in got]
            )
        engine.close()
        out(f"| {n} | {ms(spaced)} | {ms(loaded)} | {idle * 100:.1f}% | {bad} |")
        log(f"engine {n}: {ms(spaced)} / {ms(loaded)} / idle {idle * 100:.1f}%")


def restart_child(root: str, ck: str, state_path: str, status: str) -> None:
    """The engine side of the restart figure: a stage with a DuckDB sink."""
    spark = spark_session("local[2]")
    state = AggState(state_path)
    views = [("k", "true"), ("k % 7", "v % 3 <> 0")]

    def sink(df: Any, bid: int) -> None:
        s, e = batch_range(ck, bid)
        state.apply(per_epoch_deltas(tagged_union(df, views)), e, [0, 1])
        Path(status).write_text(str(e))

    q = start_change_query(spark, Path(root), ck, sink, wait_ms=100)
    q.awaitTermination()


def section_restart(master: str, tmp: Path) -> None:
    out(
        "\n## (e) SIGKILL of the driver, restart from the checkpoint, idempotent epoch-keyed sink\n"
    )
    root, ck = tmp / "spool-e", ckpt("ck-e")
    state_path, status = ckpt("state-e.duckdb"), str(tmp / "status-e")
    w = Writer(root, Churn(40, 3))
    cmd = [sys.executable, __file__, "_restart_child", str(root), ck, state_path, status]

    def frontier() -> int:
        try:
            return int(Path(status).read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    child = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    w.write(10)
    while frontier() < 1:
        time.sleep(0.05)
    writer = threading.Thread(target=w.run, args=(12.0, 5.0))
    writer.start()
    time.sleep(5.0)
    killed_at_frontier = frontier()
    child.send_signal(signal.SIGKILL)
    child.wait()
    t_kill = time.monotonic()
    time.sleep(1.0)
    orphans = subprocess.run(["pgrep", "-f", ck], capture_output=True, text=True).stdout.split()
    child = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    writer.join()
    last = w.epoch
    while frontier() < last:
        time.sleep(0.05)
    recovered = time.monotonic() - t_kill
    child.send_signal(signal.SIGTERM)
    child.wait()
    state = AggState(state_path)
    epochs = list(range(1, last + 1))
    bad = state.mismatches(w.churn.log, 0, "k", "true", epochs)
    bad += state.mismatches(w.churn.log, 1, "k % 7", "v % 3 <> 0", epochs)
    out(
        f"- killed at frontier {killed_at_frontier} with writes going on;"
        f" {last} epochs written in all"
    )
    out(f"- processes left after SIGKILL (1 s later): {len(orphans)}")
    out(
        f"- from SIGKILL to the frontier reaching the last epoch: {recovered:.1f} s "
        "(new JVM, session, query restart, replay)"
    )
    out(f"- mismatches against recomputation at every epoch, 2 views: {bad} of {2 * last}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_writer":
        writer_proc(*sys.argv[2:10])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_restart_child":
        restart_child(*sys.argv[2:6])
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "section",
        nargs="?",
        default="all",
        choices=["all", "source", "exactness", "sharing", "idle", "restart", "engine"],
    )
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    sections = (
        ["source", "exactness", "sharing", "idle", "restart", "engine"]
        if args.section == "all"
        else [args.section]
    )
    out(
        f"# Engine candidates (Spark {__import__('pyspark').__version__}, master {args.master}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})"
    )
    for s in sections:
        if args.section == "all":
            # A fresh process per section: one SparkSession (and its settings) each.
            subprocess.run(
                [sys.executable, __file__, s, "--master", args.master], check=False, stdout=None
            )
            continue
        # The spool is a cache: tmpfs when there is one (docs/engine.md); checkpoints on disk.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        tmp = Path(tempfile.mkdtemp(prefix=f"hw-engine-{s}-", dir=shm))
        global CK_ROOT
        CK_ROOT = Path(tempfile.mkdtemp(prefix=f"hw-engine-ck-{s}-"))
        try:
            globals()[f"section_{s}"](args.master, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(CK_ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
