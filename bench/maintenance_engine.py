"""bench/maintenance.py's workload on the engine alone, in process: where a batch's time goes.

No server, no Spark: TPC-H customer, orders and lineitem (tpchgen-cli) are the views'
snapshot, each batch's lineitem changes are spooled as the server spools them, and
`Engine.advance` runs the batch, every DuckDB statement timed. Prints per phase the
seconds per batch and the statements that took the most time (by the rule and step
that made them), so that a change to the rules can be measured without the stage's
trigger, the wire or the write path around it.

    .venv/bin/python bench/maintenance_engine.py                      # 20 x 4,000 rows
    .venv/bin/python bench/maintenance_engine.py --batches 5 --top 15 --explain 2
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import (
    BPCHAR,
    DATE,
    INT4,
    NUMERIC,
    VARCHAR,
    ColumnType,
    numeric_typmod,
    varchar_typmod,
)
from headwater.engine.delta import ScanInfo
from headwater.engine.engine import Engine
from headwater.engine.rules.context import AFTER_PARAM, END_PARAM
from headwater.engine.spool import SpoolWriter
from headwater.planner.ir import PlanBuilder
from pglast import parse_sql

try:
    from bench import maintenance, tpch
except ImportError:  # run as a script: bench/ is sys.path[0]
    import maintenance  # type: ignore[no-redef]
    import tpch  # type: ignore[no-redef]

OIDS = {"customer": 20001, "orders": 20002, "lineitem": 20003}


def _type(decl: str) -> ColumnType:
    m = re.fullmatch(r"(\w+)(?:\((\d+)(?:,(\d+))?\))?", decl)
    assert m, decl
    name, a, b = m.groups()
    if name == "integer":
        return ColumnType(INT4, -1)
    if name == "date":
        return ColumnType(DATE, -1)
    if name == "numeric":
        return ColumnType(NUMERIC, numeric_typmod(int(a), int(b)))
    return ColumnType(BPCHAR if name == "char" else VARCHAR, varchar_typmod(int(a)))


def schema(name: str) -> list[tuple[str, ColumnType]]:
    out = []
    for part in tpch.TABLES[name].split(", "):
        words = part.split()
        if words[0] == "PRIMARY":
            break
        out.append((words[0], _type(words[1])))
    return out


def read_tbl(path: Path, cols: list[tuple[str, ColumnType]]) -> pa.Table:
    """A .tbl file (pipe-separated, a trailing '|') typed as the server stores it."""
    names = [c for c, _ in cols] + ["_end"]
    t = pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=names),
        parse_options=pacsv.ParseOptions(delimiter="|"),
    ).drop_columns(["_end"])
    db = duckdb.connect()
    db.register("_t", t)
    casts = ", ".join(f'CAST("{c}" AS {ct.duckdb()}) AS "{c}"' for c, ct in cols)
    out = db.sql(f"SELECT {casts} FROM _t").to_arrow_table()
    db.close()
    return out


class Timed:
    """A DuckDB connection whose statements are timed, by the step that made them; the
    engine's other cursors (one per view or family) are timed into the same figures."""

    def __init__(self, inner: duckdb.DuckDBPyConnection, root: Timed | None = None) -> None:
        self._inner = inner
        self.root = root or self
        if root is not None:
            self.times, self.cpu, self.sql, self.ran_on = (
                root.times,
                root.cpu,
                root.sql,
                root.ran_on,
            )
            return
        self.times: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, float] = defaultdict(float)  # process CPU (all threads)
        self.sql: dict[str, str] = {}
        self.ran_on: dict[str, Timed] = {}  # the cursor of each statement (its temp tables)
        self.on = False
        self.plan_cost = False  # also time EXPLAIN of each scratch fill's query (planning)

    def execute(self, statement: Any, *args: Any) -> Any:
        """`statement`: SQL, or DuckDB's parse of it (the engine keeps its statements')."""
        if not self.root.on:
            return self._inner.execute(statement, *args)
        sql = statement if isinstance(statement, str) else statement.query
        key = _label(sql)
        self.ran_on[key] = self
        fill = re.match(r"\s*INSERT INTO [_d]\S+ (.*)", sql, re.S)
        if self.root.plan_cost and fill is not None:
            c0 = time.process_time()
            self._inner.execute("EXPLAIN " + fill.group(1), *args).fetchall()
            self.cpu["plan: " + key] += time.process_time() - c0
            self.times["plan: " + key].append(0.0)
        t0, c0 = time.perf_counter(), time.process_time()
        out = self._inner.execute(statement, *args)
        self.times[key].append(time.perf_counter() - t0)
        self.cpu[key] += time.process_time() - c0
        self.sql.setdefault(key, sql)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _label(sql: str) -> str:
    """A statement's kind and the table it writes or the scratch it fills."""
    m = re.match(
        r"\s*(INSERT INTO|DELETE FROM|UPDATE|CREATE OR REPLACE TEMP TABLE|SELECT)\s+(\S+)?", sql
    )
    if not m:
        return sql[:60]
    kind, target = m.groups()
    target = target or ""
    return f"{kind.split()[0]} {target}"[:60]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--batch-rows", type=int, default=4000)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--top", type=int, default=12, help="statements listed per phase")
    p.add_argument("--explain", type=int, default=0, help="EXPLAIN ANALYZE the N slowest")
    p.add_argument("--data", type=Path, help="reuse this directory of .tbl files")
    p.add_argument("--views", default="q1,q3,supp_mm")
    p.add_argument("--threads", type=int, help="SET threads on the engine's DuckDB")
    p.add_argument("--units", type=int, help="the engine's unit threads (default: its own)")
    p.add_argument("--plan-cost", action="store_true", help="CPU of planning each fill")
    p.add_argument("--dump", type=Path, help="write the last batch's statements here")
    args = p.parse_args(argv)

    tmp = tempfile.TemporaryDirectory(prefix="hw-maint-engine-")
    data = args.data or Path(tmp.name) / "tpch"
    if not (data / "lineitem.tbl").exists():
        tpch.generate(data, args.scale)
    work = maintenance.plan(data, args.seed, args.batches, args.batch_rows)
    cat = Catalog()
    tables: dict[str, pa.Table] = {}
    scans: dict[int, ScanInfo] = {}
    for name, oid in OIDS.items():
        cols = schema(name)
        cat.add_relation(Table(oid, "public", name, tuple(Column(c, t) for c, t in cols)))
        tables[name] = read_tbl(data / f"{name}.tbl", cols)
        scans[oid] = ScanInfo(oid, [c for c, _ in cols], [t.duckdb() for _, t in cols])

    # lineitem as it changes, to derive each batch's Z-set (the server's spool rows)
    model = duckdb.connect()
    model.register("_l", tables["lineitem"])
    model.execute("CREATE TABLE lineitem AS SELECT * FROM _l")
    model.unregister("_l")

    root = Path(tmp.name)
    writer = SpoolWriter(root / "spool")
    engine = Engine(root / "state", root / "spool", snapshot=lambda oid, e: _snap(oid))
    if args.threads:
        engine._cur.execute(f"SET threads = {args.threads}")
    if args.units:
        engine.unit_threads = args.units
    timed = Timed(engine._cur)
    timed.plan_cost = args.plan_cost
    engine._cur = timed  # type: ignore[assignment]
    cursor = engine._cursor
    engine._cursor = lambda: Timed(cursor(), timed)  # type: ignore[assignment,method-assign,return-value]

    def _snap(oid: int) -> pa.Table:
        if oid == OIDS["lineitem"]:
            return model.sql("SELECT * FROM lineitem").to_arrow_table()
        return tables[next(n for n, o in OIDS.items() if o == oid)]

    t0 = time.perf_counter()
    chosen = [v for v in maintenance.VIEWS if v.name in args.views.split(",")]
    for i, v in enumerate(chosen):
        plan = PlanBuilder(cat, ("public",)).build(parse_sql(v.sql)[0].stmt)
        engine.create_view(
            30000 + i, plan, {o: scans[o] for o in plan.tables}, name=v.name, at_epoch=1
        )
    print(f"views created in {time.perf_counter() - t0:.1f}s", flush=True)

    epoch = 1
    lcols = [c for c, _ in schema("lineitem")]
    for phase in maintenance.PHASES:
        timed.times.clear()
        timed.cpu.clear()
        total = cpu = 0.0
        for batch in work[phase]:
            epoch += 1
            changes = _changes(model, batch, lcols)
            writer.write_epoch(epoch, {OIDS["lineitem"]: changes})
            timed.on = True
            t0, c0 = time.perf_counter(), time.process_time()
            engine.advance(epoch)
            total += time.perf_counter() - t0
            cpu += time.process_time() - c0
            timed.on = False
        n = len(work[phase])
        stmts = sum(len(x) for x in timed.times.values())
        print(
            f"\n{phase}: {total / n * 1000:.0f} ms per batch ({stmts / n:.0f} statements,"
            f" {sum(map(sum, timed.times.values())) / n * 1000:.0f} ms in them); CPU"
            f" {cpu / n * 1000:.0f} ms per batch; {args.batch_rows * n / total:,.0f} rows/s;"
            f" load {os.getloadavg()[0]:.1f}"
        )
        if engine.unit_threads > 1:
            print(f"  ({engine.unit_threads} unit threads: the views' statements overlap)")
        print("  wall ms/batch  CPU ms/batch  statements/batch")
        ranked = sorted(timed.times.items(), key=lambda kv: -sum(kv[1]) - timed.cpu[kv[0]])
        if args.dump:
            args.dump.write_text("".join(f"-- {k}\n{v};\n\n" for k, v in timed.sql.items()))
        for key, ts in ranked[: args.top]:
            print(
                f"  {sum(ts) / n * 1000:9.1f}  {timed.cpu[key] / n * 1000:9.1f}"
                f"  x{len(ts) / n:.0f}  {key}"
            )
        for key, _ in ranked[: args.explain]:
            sql = timed.sql[key]
            fill = re.match(r"\s*INSERT INTO [_d]\S+ (.*)", sql, re.S)
            if fill is None:
                continue  # (re-running a state update would change the state)
            sql = fill.group(1)
            cur = timed.ran_on[key]
            explain = "EXPLAIN ANALYZE " + sql
            # the batch's epoch bounds (engine/rules/context.py), as of the whole history
            bounds = {AFTER_PARAM: -1, END_PARAM: 2**62}
            names = cur.extract_statements(explain)[0].named_parameters
            try:
                plan_rows = cur.execute(explain, {n: bounds[n] for n in names} or None).fetchall()
            except duckdb.Error as e:  # e.g. it reads the batch's changes, or its bounds
                print(f"\n--- EXPLAIN ANALYZE {key}: no longer runs after the batch: {e}")
                continue
            print(f"\n--- EXPLAIN ANALYZE {key}\n{plan_rows[0][1]}")
    engine.close()
    tmp.cleanup()
    return 0


def _changes(model: duckdb.DuckDBPyConnection, batch: Any, cols: list[str]) -> pa.Table:
    """The batch applied to the model, as Z-set rows (columns..., _hw_w)."""
    sql = batch.sql
    if batch.copy is not None:
        rows = [line.split("\t") for line in batch.copy.decode().splitlines()]
        t = pa.table({c: pa.array([r[i] for r in rows]) for i, c in enumerate(cols)})
        model.register("_new", t)
        model.execute("INSERT INTO lineitem SELECT * FROM _new")
        keys = "(l_orderkey, l_linenumber) IN (SELECT l_orderkey::INT, l_linenumber::INT FROM _new)"
        new = model.sql(f"SELECT * FROM lineitem WHERE {keys}").to_arrow_table()
        old = model.sql("SELECT * FROM lineitem WHERE false").to_arrow_table()
        model.unregister("_new")
    else:
        where = sql[sql.index(" WHERE ") :]
        old = model.sql("SELECT * FROM lineitem" + where).to_arrow_table()
        if sql.startswith("UPDATE"):
            sets = sql[len("UPDATE lineitem SET ") : sql.index(" WHERE ")]
            model.execute(f"UPDATE lineitem SET {sets}{where}")
            model.register("_old", old)
            keys = "(l_orderkey, l_linenumber) IN (SELECT l_orderkey, l_linenumber FROM _old)"
            new = model.sql(f"SELECT * FROM lineitem WHERE {keys}").to_arrow_table()
            model.unregister("_old")
        else:
            model.execute("DELETE FROM lineitem" + where)
            new = model.sql("SELECT * FROM lineitem WHERE false").to_arrow_table()
    w = [pa.array([-1] * old.num_rows, pa.int32()), pa.array([1] * new.num_rows, pa.int32())]
    old = old.append_column("_hw_w", w[0])
    new = new.append_column("_hw_w", w[1])
    return pa.concat_tables([old, new])


if __name__ == "__main__":
    sys.exit(main())
