"""Which executor runs a batch: the cost rule of `--executor auto` (docs/adr/003).

    choice = choose("auto", rows=2_000_000, why_not=None, spark_up=True,
                    local=False, state_bytes=lambda: 0, memory_limit=8 << 30)
    choice.executor, choice.reason   # ("spark", "auto: batch of 2000000 rows >= ...")

`duckdb` runs every batch in the server process; `spark` every batch as Spark SQL
jobs (tasks on the Spark executors), except the batches Spark cannot express
(functions without a Spark form, INTERVAL columns): those say why. `auto`
weighs what each costs on the figures of bench/executors.py: Spark's fixed cost per
batch is seconds (a job per rule step), DuckDB's is milliseconds, and on one
machine DuckDB was faster at every batch size measured (a 10 M-row backfill 32x, a
5 M-row COPY into 5 views 9.5x); so with a local master Spark gets only batches the
server cannot hold (the batch and the view's state beyond half of --memory-limit:
Spark spills and spreads them), and with a cluster master (its executors are other
machines' cores and memory) every batch of at least `SPARK_MIN_ROWS_CLUSTER` changed
rows. While Spark is starting (or restarting) every batch runs on DuckDB: Spark's start
is off the read path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

EXECUTORS = ("auto", "spark", "duckdb")
# rows changed in a batch from which `auto` sends it to Spark (env: tests lower them);
# none with a local master: there Spark pays only beyond the memory budget
_LOCAL = os.environ.get("HW_SPARK_MIN_ROWS_LOCAL")
SPARK_MIN_ROWS_LOCAL: int | None = int(_LOCAL) if _LOCAL else None
SPARK_MIN_ROWS_CLUSTER = int(os.environ.get("HW_SPARK_MIN_ROWS_CLUSTER", "100000"))
# below this many changed rows the state's size is not even looked up
STATE_CHECK_ROWS = 10_000
ROW_BYTES = 64  # a changed row's bytes, roughly, for the memory rule


@dataclass(frozen=True)
class Choice:
    executor: str  # "spark" | "duckdb"
    reason: str


def choose(
    mode: str,
    *,
    rows: int,
    why_not: str | None,
    spark_up: bool,
    local: bool,
    state_bytes: Callable[[], int],
    memory_limit: int | None,
    backfill: bool = False,
) -> Choice:
    """The executor of one batch of one program; `rows`: its inputs' changed rows
    (a backfill: the rows of its inputs), `why_not`: why Spark cannot express it."""
    what = "backfill" if backfill else "batch"
    if mode == "duckdb":
        return Choice("duckdb", "--executor duckdb")
    if why_not is not None:
        return Choice("duckdb", f"not expressible on Spark: {why_not}")
    if mode == "spark":
        return Choice("spark", "--executor spark")
    if not spark_up:
        return Choice("duckdb", f"auto: Spark is starting; the {what} runs on DuckDB meanwhile")
    floor = SPARK_MIN_ROWS_LOCAL if local else SPARK_MIN_ROWS_CLUSTER
    where = "a local master" if local else "a cluster master"
    if floor is not None and rows >= floor:
        return Choice("spark", f"auto: {what} of {rows} rows >= {floor} with {where}")
    if memory_limit and rows >= STATE_CHECK_ROWS:
        need = state_bytes() + rows * ROW_BYTES
        if need > memory_limit // 2:
            return Choice(
                "spark",
                f"auto: {what} and state (~{need >> 20} MB) beyond half of --memory-limit",
            )
    if floor is None:
        return Choice(
            "duckdb",
            f"auto: {what} of {rows} rows within the memory budget with {where}"
            " (there DuckDB is faster at every size measured)",
        )
    return Choice("duckdb", f"auto: {what} of {rows} rows < {floor} with {where}")
