"""Spark Declarative Pipelines (SDP) as the peer of Headwater's Spark executor.

What a Spark user would pick instead of Headwater: the same views as SDP SQL
`CREATE MATERIALIZED VIEW`s over Parquet directories that batches are appended to,
the pipeline run after each batch. Open-source Spark's SDP recomputes a materialized
view in full at every run. Run by bench/executors.py's `sdp` section, in a process of
its own (its Spark Connect server is a JVM; the bench starts one at a time):

    python bench/sdp.py --dir DIR --state 100000 --batch 10000 --batches 3 [--cli]

prints one JSON object per line after `MARK`: {"initial": s} (the first run: every view created),
then {"batch": i, "seconds": s, "rows": r} per batch (s: from the start of the
batch's Parquet write to the end of the pipeline run; r: sum(n) of the aggregate view
read back from its files, which must equal the source's rows).

Two ways to run the pipeline, both offline with the pyspark 4.3.0 wheel (it ships
spark-connect and spark-pipelines jars) and the Spark Connect client packages
(grpcio, grpcio-status, googleapis-common-protos, zstandard; pyproject's `bench`):
- default: its Python API (what `spark-pipelines run` calls) on one long-lived Spark
  Connect session (`SparkSession.builder.remote("local[2]")`): a new dataflow graph
  per run, the views kept in the session's catalog. SDP's best case: no JVM start.
- `--cli`: `spark-pipelines run` per batch, as the docs show it. Each run is a new
  JVM, so the views must outlive it: a Hive metastore (embedded Derby, from the wheel's
  jars; `--conf spark.sql.catalogImplementation=hive`), else the second run fails with
  LOCATION_ALREADY_EXISTS (the in-memory catalog forgot the view, its files remain).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.executors import VIEWS5, table_t, table_u  # noqa: E402

MARK = "hw-bench-sdp: "  # our result lines (SDP prints its events on stdout too)
SPEC = """name: hw_bench
storage: file://{storage}
libraries:
  - glob:
      include: transformations/**
"""


def write_pipeline(root: Path) -> Path:
    """The pipeline's spec and its SQL: the 5 views over the Parquet sources."""
    (root / "transformations").mkdir(parents=True, exist_ok=True)
    src = {name: f"parquet.`{root / 'src' / name}`" for name in ("t", "u")}
    sql = "".join(
        f"CREATE MATERIALIZED VIEW {name} AS {q.format(**src)};\n" for name, q in VIEWS5.items()
    )
    (root / "transformations" / "views.sql").write_text(sql)
    spec = root / "spark-pipeline.yml"
    spec.write_text(SPEC.format(storage=root / "storage"))
    return spec


def agg_rows(root: Path) -> int:
    """sum(n) of the aggregate view, from its files in the warehouse."""
    t = ds.dataset(root / "spark-warehouse" / "agg", format="parquet").to_table(columns=["n"])
    return int(t.column("n").to_numpy().sum()) if t.num_rows else 0


class ApiRunner:
    """The pipeline run through pyspark.pipelines' API on one Spark Connect session."""

    def __init__(self, root: Path, master: str) -> None:
        from pyspark.sql import SparkSession

        self.root = root
        self.sql = (root / "transformations" / "views.sql").read_text()
        self.spark: Any = SparkSession.builder.remote(master).getOrCreate()

    def run(self) -> None:
        from pyspark.pipelines.spark_connect_graph_element_registry import (
            SparkConnectGraphElementRegistry,
        )
        from pyspark.pipelines.spark_connect_pipeline import (
            create_dataflow_graph,
            handle_pipeline_events,
            start_run,
        )

        graph = create_dataflow_graph(
            self.spark, default_catalog=None, default_database=None, sql_conf={}
        )
        SparkConnectGraphElementRegistry(self.spark, graph).register_sql(
            self.sql, Path("transformations/views.sql")
        )
        events = start_run(
            self.spark,
            graph,
            full_refresh=[],
            full_refresh_all=False,
            refresh=[],
            dry=False,
            storage=f"file://{self.root / 'storage'}",
        )
        handle_pipeline_events(events)

    def close(self) -> None:
        self.spark.stop()


class CliRunner:
    """`spark-pipelines run` per batch (a JVM each), views kept in a Hive metastore."""

    def __init__(self, root: Path, master: str) -> None:
        self.root, self.master = root, master
        self.exe = str(Path(sys.executable).parent / "spark-pipelines")
        self.env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }

    def run(self) -> None:
        cmd = [self.exe, "run", "--spec", str(self.root / "spark-pipeline.yml")]
        cmd += ["--remote", self.master, "--conf", "spark.sql.catalogImplementation=hive"]
        subprocess.run(cmd, cwd=self.root, env=self.env, check=True, stdout=sys.stderr)

    def close(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--state", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cli", action="store_true", help="spark-pipelines run per batch")
    args = ap.parse_args()
    root: Path = args.dir.resolve()
    write_pipeline(root)
    for name, table in (("t", table_t(0, args.state)), ("u", table_u())):
        (root / "src" / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / "src" / name / "part-00000.parquet")
    os.chdir(root)  # the session's spark-warehouse (the views' files) and metastore
    runner = (CliRunner if args.cli else ApiRunner)(root, args.master)
    try:
        t0 = time.perf_counter()
        runner.run()
        print(MARK + json.dumps({"initial": time.perf_counter() - t0}), flush=True)
        first = args.state
        for i in range(1, args.batches + 1):
            batch = table_t(first, args.batch)
            first += args.batch
            t0 = time.perf_counter()
            pq.write_table(batch, root / "src" / "t" / f"part-{i:05d}.parquet")
            runner.run()
            dt = time.perf_counter() - t0
            print(
                MARK + json.dumps({"batch": i, "seconds": dt, "rows": agg_rows(root)}), flush=True
            )
    finally:
        runner.close()


if __name__ == "__main__":
    main()
