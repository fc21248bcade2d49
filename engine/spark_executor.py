"""The Spark executor: one view's batch run as Spark SQL jobs over Parquet state.

`SparkExecutor.advance` does what `ViewProgram.advance` does on DuckDB, with the same
rule steps (engine/spark_batch.py `batch_steps`, rendered by engine/spark_sql.py):

1. inputs as Spark data: the batch's changes (the spool's Arrow tables, or a
   backfill's snapshot) written as Parquet; every engine table the steps read
   (operator states, output versions and change logs, an upstream view's change
   log) read from its Parquet directories (engine/parquet_state.py), exported from
   DuckDB first when the DuckDB executor changed it since;
2. the steps run on the SparkSession (each scratch table and state materialized);
3. every state the batch changed is written by Spark as a new Parquet generation
   (appended rows only, for states only appended to), and loaded into the engine's
   DuckDB copy of the table, with the manifest change, in the caller's transaction,
   the one that moves the view's frontier: state and frontier commit together.

Tasks run for each view are counted from Spark's status tracker (a job group per
batch). PostgreSQL's numeric division and avg of integers and numerics (a scale that
depends on the values) run as Arrow UDFs wrapping the DuckDB executor's own functions
(planner/pg_compat.py), registered on the session: their Python runs on the Spark
executors (the same interpreter: PYSPARK_PYTHON); so do json_agg & co.'s texts (DuckDB's
to_json of the ordered list, then planner/functions/json.py's text functions, `_json_list`).
Views whose rules need functions without a Spark form (NO_SPARK_FORM, or any hw_
function not in SPARK_UDFS: DuckDB's UDFs and macros) or INTERVAL columns are not
expressible: `expressible` says why, and their batches run on DuckDB.
"""

from __future__ import annotations

import logging
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from headwater.engine.delta import ViewProgram
from headwater.engine.parquet_state import MAX_PARTS, Manifest, write_arrow
from headwater.engine.rules.context import Append, BatchContext, Fill, Fixpoint, Run, Step
from headwater.engine.rules.output import output
from headwater.engine.spark_batch import SparkBatch, batch_steps, column_types
from headwater.engine.spark_sql import to_spark
from headwater.planner.functions import json as json_functions
from headwater.planner.functions import text_casts
from headwater.planner.ir import Project, walk
from sqlglot import exp

log = logging.getLogger("headwater.engine")

# functions the rendered rules may call that Spark does not have (no UDF registered)
NO_SPARK_FORM = ("hw_avg_w",)
_HW_CALL = re.compile(r"\b(hw_\w+)\s*\(", re.IGNORECASE)
_AVG_DECIMAL = "decimal(37,16)"  # what DuckDB's hw_avg_int / hw_avg_exact return


_JSON_UDFS = ("hw_json_agg_text", "hw_json_object_agg_text", "hw_json_merge_objects")
# the functions register_udfs gives Spark (all other hw_ functions are DuckDB's only)
SPARK_UDFS = frozenset(
    ("hw_avg_exact", "hw_numeric_div", "hw_json_list", "hw_jsonb_in", text_casts.UDF, *_JSON_UDFS)
)


def register_udfs(spark: Any) -> None:
    """PostgreSQL's numeric division and exact avg on a SparkSession, as Arrow UDFs
    over the DuckDB executor's functions: both executors compute the same values."""
    from headwater.planner import pg_compat
    from pyspark.sql.functions import ArrowUDFType, arrow_udf

    scalar = ArrowUDFType.SCALAR
    with warnings.catch_warnings():  # "prefer type hints": the functions are DuckDB's, as is
        warnings.simplefilter("ignore", UserWarning)
        avg = arrow_udf(pg_compat._avg_udf(16), _AVG_DECIMAL, scalar)
        # numeric / numeric: DuckDB's "//" overload (a quotient, DECIMAL(37,20))
        quotient = f"decimal(37,{pg_compat.QUOTIENT_SCALE})"
        div = arrow_udf(pg_compat._numeric_div_udf, quotient, scalar)
    spark.udf.register("hw_avg_exact", avg)
    spark.udf.register("hw_numeric_div", div)
    # json_agg & co.: DuckDB's JSON text of the ordered list, then the same text
    # functions as the DuckDB executor's (planner/functions/json.py)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        spark.udf.register("hw_json_list", arrow_udf(_json_list, "string", scalar))
        spark.udf.register("hw_jsonb_in", arrow_udf(pg_compat._jsonb_in_udf, "string", scalar))
        spark.udf.register(text_casts.UDF, arrow_udf(text_casts.pg_text, "string", scalar))
        for name in _JSON_UDFS:
            fn, params, _, strict = json_functions._UDFS[name]
            lifted = json_functions._lift(fn, pa.string, strict, len(params))
            spark.udf.register(name, arrow_udf(lifted, "string", scalar))


_DUCK_TYPE = re.compile(r"[A-Za-z0-9_(), ]+")  # a plain DuckDB type name (no quoting)
_duck: list[duckdb.DuckDBPyConnection] = []  # one per Spark Python worker


def _json_list(lists: Any, kinds: Any, vtypes: Any) -> Any:
    """DuckDB's `CAST(to_json(list) AS VARCHAR)` of each Spark array (engine/spark_sql.py
    `collection_aggs`): the elements as DuckDB prints them in JSON, of their DuckDB type
    (`vtypes`, '' unknown: Arrow's); json_object_agg's (k, v) structs as one-key objects."""
    if not _duck:
        _duck.append(duckdb.connect())
    kind = kinds[0].as_py() if len(kinds) else "list"
    vtype = vtypes[0].as_py() if len(vtypes) else ""
    if not _DUCK_TYPE.fullmatch(vtype or ""):
        vtype = ""
    v = f"CAST(x.v AS {vtype})" if vtype else "x.v"
    if kind == "object":
        items = f"list_transform(l, lambda x: json_object(x.k, {v}))"
    else:
        items = f"CAST(l AS {vtype}[])" if vtype else "l"
    rows = pa.table({"l": lists, "i": pa.array(range(len(lists)), pa.int64())})
    cur = _duck[0].cursor()
    cur.register("_rows", rows)
    out = cur.sql(f"SELECT CAST(to_json({items}) AS VARCHAR) FROM _rows ORDER BY i")
    return out.to_arrow_table().column(0).combine_chunks()


class SparkExecutor:
    def __init__(self, state_dir: Path, spark: Callable[[], Any], manifest: Manifest) -> None:
        self.spark = spark  # the process's SparkSession (started on first call)
        self.manifest = manifest
        self.inputs = state_dir / "parquet" / "_in"
        self.tasks: dict[int | str, int] = {}  # program -> Spark tasks run so far
        # called after each step Spark ran: progress for the stage's stall watchdog (a
        # batch on Spark may take longer than its timeout while making progress)
        self.on_step: list[Callable[[], None]] = []
        self._seq = 0
        self._why_not: dict[int | str, str | None] = {}
        self._udfs: Any = None  # the session the UDFs are registered on

    def expressible(self, prog: ViewProgram, ctx: BatchContext) -> str | None:
        """None if Spark can run the program's rules, else why not (cached)."""
        if prog.view in self._why_not:
            return self._why_not[prog.view]
        why: str | None = None
        types = column_types(prog)
        if any("INTERVAL" in t.upper() for t in types.values()):
            why = "an INTERVAL column (Spark has no such column type)"
        elif any(t.upper().startswith("ENUM(") for t in types.values()):
            why = "an enum column (Spark has no enum type, ordered by its labels)"
        elif any(isinstance(n, Project) and n.expands for n in walk(prog.plan.root)):
            # (Spark's explode: one per SELECT, other empty-range rules than PostgreSQL's)
            why = "a set-returning function (unnest, generate_series) has no Spark form yet"
        else:
            try:
                for step in batch_steps(prog, ctx):
                    sql = " ".join(to_spark(s, types) for s in _spark_sqls(step))
                    bad = [f for f in NO_SPARK_FORM if f in sql]
                    if bad:
                        why = f"{bad[0]} has no Spark form yet (PostgreSQL's numeric scale)"
                        break
                    # a function installed in DuckDB only (hw_cardinality, hw_format, ...)
                    unknown = sorted({f.lower() for f in _HW_CALL.findall(sql)} - SPARK_UDFS)
                    if unknown:
                        why = f"{unknown[0]} has no Spark form yet"
                        break
            except (sqlglot.errors.SqlglotError, ValueError, KeyError) as e:
                why = f"its rules do not render as Spark SQL: {e}"
        self._why_not[prog.view] = why
        return why

    def forget(self, program: int | str) -> None:
        self._why_not.pop(program, None)

    def advance(
        self,
        cur: duckdb.DuckDBPyConnection,
        prog: ViewProgram,
        ctx: BatchContext,
        arrows: dict[str, pa.Table],
    ) -> int:
        """Run one batch of `prog` on Spark; the DuckDB copies of the states it changed
        and the manifest are updated on `cur` (the caller holds the transaction).
        Returns the number of output changes."""
        spark = self.spark()
        if self._udfs is not spark:
            register_udfs(spark)
            self._udfs = spark
        self._seq += 1
        group = f"headwater-{prog.view}-{self._seq}"
        sc = spark.sparkContext
        sc.setJobGroup(group, f"view {prog.view}: epochs ({ctx.frontier}, {ctx.end}]")
        registered: list[str] = []
        batch_in = self.inputs / str(self._seq)
        try:
            steps = batch_steps(prog, ctx)
            out = output(list(prog.plan.root.columns), "_", ctx)
            n_fold = len(out.fold)
            rule_steps, fold = steps[:-n_fold], steps[-n_fold:]
            runner = SparkBatch(spark, column_types(prog), eager=True)
            filled: set[str] = set()
            tables = _relations(cur)

            def bind_inputs(step: Step) -> None:
                sql = step.sql if isinstance(step, Run) else step.select
                names = _tables_read(sql) | ({step.table} if isinstance(step, Append) else set())
                if isinstance(step, Run):
                    names.add(_target(sql))
                for name in sorted(names - filled - set(registered)):
                    if name in arrows:
                        d = batch_in / name
                        write_arrow(arrows[name], str(d))
                        spark.read.parquet(str(d)).createOrReplaceTempView(name)
                    elif name in tables:
                        self._read_state(cur, spark, name, tables[name], batch_in)
                    else:
                        continue  # a CTE's name, or a table function
                    registered.append(name)

            def run(step: Step) -> None:
                bind_inputs(step)
                runner.step(step)
                for fn in self.on_step:
                    fn()
                if isinstance(step, Fill):
                    filled.add(step.table)

            for step in rule_steps:
                run(step)
            n = spark.table(steps[-n_fold - 1].table).count()  # type: ignore[union-attr]
            if n:
                for step in fold:
                    run(step)
            for table, parts in runner.changed.items():
                self._write_state(cur, spark, prog, table, parts)
            return int(n)
        finally:
            self._count_tasks(sc, group, prog.view)
            sc.setJobGroup(None, None)  # type: ignore[arg-type]
            for name in registered:
                spark.catalog.dropTempView(name)
            for name in filled:
                spark.catalog.dropTempView(name)
            shutil.rmtree(batch_in, ignore_errors=True)

    def _read_state(
        self, cur: duckdb.DuckDBPyConnection, spark: Any, name: str, kind: str, scratch: Path
    ) -> None:
        """An engine table as a Spark temp view, from its listed Parquet files (exported
        first if DuckDB changed it since Spark last wrote it)."""
        if kind != "BASE TABLE":  # a family member's view over its family's tables
            d = scratch / name
            write_arrow(cur.sql(f"SELECT * FROM {name}").to_arrow_table(), str(d))
            spark.read.parquet(str(d)).createOrReplaceTempView(name)
            return
        if name not in self.manifest.live:
            self.manifest.export(cur, name)
        spark.read.parquet(*self.manifest.live[name]).createOrReplaceTempView(name)

    def _write_state(
        self,
        cur: duckdb.DuckDBPyConnection,
        spark: Any,
        prog: ViewProgram,
        table: str,
        parts: list[Any] | None,
    ) -> None:
        """Spark writes the state's new rows (or all of it) as a new Parquet generation,
        the DuckDB copy takes them and the manifest lists them (caller's transaction)."""
        whole = parts is None or len(self.manifest.live.get(table, [])) >= MAX_PARTS
        d = self.manifest.new_dir(table)
        if whole:
            spark.table(table).write.parquet(d)
        else:
            df = parts[0]  # type: ignore[index]
            for p in parts[1:]:  # type: ignore[index]
                df = df.unionAll(p)
            df.write.parquet(d)
        files = sorted(str(p) for p in Path(d).glob("*.parquet"))
        if whole:
            cur.execute(f"DELETE FROM {table}")
        if files:
            cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet(?)", [files])
        if whole:
            self.manifest.replace(cur, table, d)
        else:
            self.manifest.add(cur, table, d)
        prog.states.pop(table, None)  # its row count for DuckDB's compaction: recounted

    def _count_tasks(self, sc: Any, group: str, program: int | str) -> None:
        tracker = sc.statusTracker()
        n = 0
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else []:
                st = tracker.getStageInfo(stage)
                if st is not None:
                    n += st.numCompletedTasks
        self.tasks[program] = self.tasks.get(program, 0) + n


def _spark_sqls(step: Step) -> list[str]:
    """The DuckDB SQL of a step that Spark runs (a Fixpoint's parts: engine/spark_batch.py)."""
    if isinstance(step, Fixpoint):
        ins = [rows.replace("{t}", "0") for _, rows in step.inputs]
        return [f"SELECT * FROM {x} AS _x" for x in (*ins, step.base, step.step)]
    return [step.sql if isinstance(step, Run) else step.select]


def _relations(cur: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The engine database's tables and views: name -> BASE TABLE | VIEW."""
    rows = cur.execute(
        "SELECT table_name, table_type FROM information_schema.tables"
        " WHERE table_catalog = current_database() AND table_schema = 'main'"
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def _tables_read(sql: str) -> set[str]:
    tree = sqlglot.parse_one(sql, read="duckdb")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return {t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes}


def _target(sql: str) -> str:
    tree = sqlglot.parse_one(sql, read="duckdb")
    return tree.this.name if not isinstance(tree.this, exp.Schema) else tree.this.this.name
