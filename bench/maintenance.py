"""View maintenance throughput: Headwater against pg_ivm and REFRESH, on TPC-H.

The workload of issue 16: TPC-H at SF 0.1 (tpchgen-cli), three views
  q1        TPC-H Q1 (without its ORDER BY: neither pg_ivm nor a view set has one),
  q3        TPC-H Q3 without its ORDER BY ... LIMIT (every group),
  supp_mm   MIN/MAX of l_extendedprice (and count) per supplier over lineitem,
and three phases of --batches statements on lineitem, each changing exactly
--batch-rows rows (defaults: 20 x 4,000 = 80 k rows per phase):
  insert    new lines of existing orders (l_linenumber 8 + batch), one COPY FROM STDIN
            per batch (--insert values: one INSERT ... VALUES),
  update    UPDATE of line 1 of --batch-rows orders (quantity, price, discount, ship
            date and return flag: rows move across Q1's and Q3's filters and groups),
  delete    DELETE of line 2 of --batch-rows orders (MIN/MAX rows among them).
Each statement is its own transaction; after it, every view is read whole (Headwater's
read waits until the views include the session's writes; REFRESH MATERIALIZED VIEW of
each view precedes the read). Figure: changed rows (the statements' row counts) per
second of a phase, statements and reads included. The statements are planned from the
generated files, so every system receives the same bytes.

Columns, each on a fresh copy of the tables (its own schema), one after the other:
  Headwater             CREATE MATERIALIZED VIEW (incremental, in the engine),
  pg_ivm                pg_ivm 1.15 IMMVs (synchronous IVM in PostgreSQL 15, triggers),
  REFRESH               PostgreSQL materialized views refreshed after each batch,
  Headwater, no views / PostgreSQL, no views: the statements alone.
pg_ivm is built from ../shared/peers/pg_ivm-1.15.tar.gz on first use (bench/pg_ivm.py),
and the PostgreSQL the bench starts preloads it. At the end of each phase the views of
every system are compared with PostgreSQL's answer to their queries.

    .venv/bin/python bench/maintenance.py                  # SF 0.1, 20 x 4,000 rows
    .venv/bin/python bench/maintenance.py --batches 4 --batch-rows 1000 --json /tmp/m.json
    .venv/bin/python bench/maintenance.py --modes headwater,pg_ivm
    .venv/bin/python bench/maintenance.py --views topn   # top-N and window views (issue 14)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

try:
    from bench import common, pg_ivm, tpch
    from bench.matviews import settle
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]
    import pg_ivm  # type: ignore[no-redef]
    import tpch  # type: ignore[no-redef]
    from matviews import settle  # type: ignore[no-redef]

PG, HW = common.PG_SIDE, common.HW_SIDE
PHASES = ("insert", "update", "delete")
TABLES = ("customer", "orders", "lineitem")  # what the views read
WAIT = "600s"  # Headwater's freshness_timeout: the first read may wait for Spark's start


@dataclass(frozen=True)
class View:
    name: str
    sql: str
    keys: tuple[str, ...]  # group key: its rows are unique on it
    columns: tuple[str, ...]  # what a read selects (pg_ivm adds hidden __ivm_* columns)


VIEWS = (
    View(
        "q1",
        tpch.QUERIES["q1"].split(" order by ")[0],
        tpch.KEYS["q1"],
        (
            "l_returnflag",
            "l_linestatus",
            "sum_qty",
            "sum_base_price",
            "sum_disc_price",
            "sum_charge",
            "avg_qty",
            "avg_price",
            "avg_disc",
            "count_order",
        ),
    ),
    View(
        "q3",
        tpch.QUERIES["q3"],
        tpch.KEYS["q3"],
        ("l_orderkey", "revenue", "o_orderdate", "o_shippriority"),
    ),
    View(
        "supp_mm",
        "select l_suppkey, min(l_extendedprice) as min_price,"
        " max(l_extendedprice) as max_price, count(*) as lines"
        " from lineitem group by l_suppkey",
        ("l_suppkey",),
        ("l_suppkey", "min_price", "max_price", "lines"),
    ),
)
# --views topn (issue 14): a top-N view and a window-function view; pg_ivm refuses both
# (no ORDER BY/LIMIT, no window functions in an IMMV), so REFRESH is their peer
TOPN_VIEWS = (
    View(
        "top_orders",
        "select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue from lineitem"
        " group by l_orderkey order by revenue desc, l_orderkey limit 20",
        ("l_orderkey",),
        ("l_orderkey", "revenue"),
    ),
    View(
        "mode_rank",
        "select l_shipmode, l_suppkey, count(*) as lines, rank() over (partition by"
        " l_shipmode order by count(*) desc, l_suppkey) as rnk from lineitem"
        " group by l_shipmode, l_suppkey",
        ("l_shipmode", "l_suppkey"),
        ("l_shipmode", "l_suppkey", "lines", "rnk"),
    ),
)
VIEW_SETS = {"tpch": VIEWS, "topn": TOPN_VIEWS}


@dataclass(frozen=True)
class Mode:
    key: str  # --modes name, and the schema's suffix
    label: str  # the table's column
    side: str  # the server it runs on
    views: str  # "none", "headwater", "immv" (pg_ivm) or "refresh"


MODES = (  # in the order they run on their server: without views first
    Mode("postgres-plain", "PostgreSQL, no views", PG, "none"),
    Mode("refresh", "REFRESH", PG, "refresh"),
    Mode("pg_ivm", "pg_ivm", PG, "immv"),
    Mode("headwater-plain", "Headwater, no views", HW, "none"),
    Mode("headwater", "Headwater", HW, "headwater"),
)
COLUMNS = ("Headwater", "pg_ivm", "REFRESH", "Headwater, no views", "PostgreSQL, no views")
RATIOS = (("Headwater", "pg_ivm"), ("Headwater", "REFRESH"))
TARGET_VS_IVM = 10.0  # issue 16: >= 10x pg_ivm's changed rows/s in every phase

Rows = tuple[list[str], list[tuple[Any, ...]]]


# --- the workload ----------------------------------------------------------------------


def _date(rng: random.Random) -> dt.date:
    return dt.date(rng.randrange(1992, 1999), rng.randrange(1, 13), rng.randrange(1, 29))


def _first_fields(path: Path, n: int) -> list[list[int]]:
    """The first n fields (integers) of each line of a .tbl file."""
    with path.open("rb") as f:
        return [[int(x) for x in line.split(b"|", n)[:n]] for line in f]


@dataclass(frozen=True)
class Batch:
    """One transaction on lineitem: an SQL statement, or COPY FROM STDIN of `copy`."""

    sql: str
    copy: bytes | None = None


def _insert_batch(lines: list[tuple[Any, ...]], how: str) -> Batch:
    """New lineitem rows as one multi-row INSERT ... VALUES or one COPY (text format)."""
    if how == "copy":
        text = "".join("\t".join(map(str, line)) + "\n" for line in lines)
        return Batch("COPY lineitem FROM STDIN", text.encode())
    quoted = (
        ",".join(
            f"'{v}'" if isinstance(v, str) else f"date '{v}'" if isinstance(v, dt.date) else str(v)
            for v in line
        )
        for line in lines
    )
    return Batch("INSERT INTO lineitem VALUES " + ",".join(f"({q})" for q in quoted))


def plan(
    data: Path, seed: int, batches: int, rows: int, insert: str = "copy"
) -> dict[str, list[Batch]]:
    """Each phase's batches, from the generated files: every one changes `rows` rows."""
    rng = random.Random(seed)
    orders = [r[0] for r in _first_fields(data / "orders.tbl", 1)]
    with_line2 = sorted({r[0] for r in _first_fields(data / "lineitem.tbl", 4) if r[3] == 2})
    parts = sum(1 for _ in (data / "part.tbl").open("rb"))
    suppliers = sum(1 for _ in (data / "supplier.tbl").open("rb"))
    need = batches * rows
    if need > len(with_line2):
        raise ValueError(
            f"{batches} x {rows} rows: more than the {len(with_line2):,} orders with a line 2"
            " at this scale (fewer or smaller batches, or a larger --scale)"
        )
    out: dict[str, list[Batch]] = {p: [] for p in PHASES}
    for b in range(batches):
        lines: list[tuple[Any, ...]] = []
        for k in rng.sample(orders, rows):
            ship = _date(rng)
            lines.append(
                (
                    k,
                    rng.randrange(1, parts + 1),
                    rng.randrange(1, suppliers + 1),
                    8 + b,  # TPC-H orders have lines 1 to 7
                    rng.randrange(1, 51),
                    Decimal(rng.randrange(90000, 10500000)).scaleb(-2),
                    Decimal(rng.randrange(0, 11)).scaleb(-2),
                    Decimal(rng.randrange(0, 9)).scaleb(-2),
                    rng.choice("RAN"),
                    rng.choice("OF"),
                    ship,
                    ship + dt.timedelta(days=rng.randrange(-60, 60)),
                    ship + dt.timedelta(days=rng.randrange(1, 31)),
                    "NONE",
                    rng.choice(["MAIL", "SHIP", "AIR", "RAIL", "TRUCK", "FOB"]),
                    f"maintenance {b}",
                )
            )
        out["insert"].append(_insert_batch(lines, insert))
    updated = rng.sample(orders, need)
    for b in range(batches):
        keys = ",".join(map(str, sorted(updated[b * rows : (b + 1) * rows])))
        out["update"].append(
            Batch(
                "UPDATE lineitem SET l_quantity = l_quantity + 1,"
                f" l_extendedprice = l_extendedprice + {rng.randrange(-70000, 70000) / 100:.2f},"
                " l_discount = CASE WHEN l_discount >= 0.10 THEN 0.00 ELSE l_discount + 0.01 END,"
                f" l_shipdate = l_shipdate + {rng.choice([-90, -30, 30, 90])},"
                " l_returnflag = CASE WHEN l_returnflag = 'R' THEN 'A' ELSE 'R' END"
                f" WHERE l_linenumber = 1 AND l_orderkey IN ({keys})"
            )
        )
    deleted = rng.sample(with_line2, need)
    for b in range(batches):
        keys = ",".join(map(str, sorted(deleted[b * rows : (b + 1) * rows])))
        out["delete"].append(
            Batch(f"DELETE FROM lineitem WHERE l_linenumber = 2 AND l_orderkey IN ({keys})")
        )
    return out


# --- one mode --------------------------------------------------------------------------


@dataclass
class PhaseResult:
    changed: int = 0
    seconds: float = 0.0
    writing: float = 0.0  # of `seconds`, in the statements (the rest: views current + read)
    load: float = 0.0
    miscounts: list[str] = field(default_factory=list)


def apply(conn: psycopg.Connection[Any], batch: Batch) -> int:
    """Run one batch (autocommit: its own transaction); the rows it changed."""
    if batch.copy is None:
        return conn.execute(batch.sql).rowcount
    with conn.cursor() as cur:
        with cur.copy(batch.sql) as cp:
            cp.write(batch.copy)
        return cur.rowcount


def read_view(conn: psycopg.Connection[Any], view: View) -> Rows:
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(view.columns)} FROM {view.name}")
        assert cur.description is not None
        return [d.name for d in cur.description], cur.fetchall()


def connect(dsn: str, side: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True, sslmode="disable")
    if side == HW:
        conn.execute(f"SET headwater.freshness_timeout = '{WAIT}'")
    return conn


def setup(conn: psycopg.Connection[Any], mode: Mode, data: Path, args: argparse.Namespace) -> None:
    """The mode's schema: the tables loaded, indexes (PostgreSQL), views current."""
    t0 = time.perf_counter()
    tpch.load(conn, data, TABLES)
    if mode.side == PG:
        if args.pg_suppkey_index:
            conn.execute("CREATE INDEX ON lineitem (l_suppkey)")
        conn.execute("ANALYZE")
    common.log(f"{mode.label}: tables loaded in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    views = VIEW_SETS[args.views]
    for v in views:
        if mode.views in ("headwater", "refresh"):
            conn.execute(f"CREATE MATERIALIZED VIEW {v.name} AS {v.sql}")
        elif mode.views == "immv":
            conn.execute("SELECT pgivm.create_immv(%s, %s)", (v.name, v.sql))
    # One change and its removal, then a read of every view: Headwater's stage (Spark)
    # starts and maintains once before the clock does. Under --executor auto the views
    # are current long before its JVM has started (~10 s of CPU): `settle` waits for
    # that too, so that the phases measure maintenance, not the JVM's start.
    for sql in tpch.PRIME:
        conn.execute(sql)
    if mode.views != "none":
        for v in views:
            if mode.views == "refresh":
                conn.execute(f"REFRESH MATERIALIZED VIEW {v.name}")
            read_view(conn, v)
        if mode.views == "headwater":
            settle(conn)
        common.log(f"{mode.label}: views created and current in {time.perf_counter() - t0:.1f}s")


def run_mode(
    dsn: str,
    mode: Mode,
    data: Path,
    work: dict[str, list[Batch]],
    args: argparse.Namespace,
    snapshots: dict[str, dict[str, dict[str, Rows]]],
) -> dict[str, PhaseResult]:
    """Every phase on a fresh schema; `snapshots[phase][view][label]` gets the views (or,
    on PostgreSQL without views, its answer to their queries) at the end of each phase."""
    schema = "mt_" + mode.key.replace("-", "_")
    views = VIEW_SETS[args.views]
    conn = connect(dsn, mode.side)
    try:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # (a kept server's last run)
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}, public")
        if mode.views == "immv":
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_ivm")
        setup(conn, mode, data, args)

        def current() -> None:
            for v in views:
                if mode.views == "refresh":
                    conn.execute(f"REFRESH MATERIALIZED VIEW {v.name}")
                read_view(conn, v)

        out: dict[str, PhaseResult] = {}
        for phase in PHASES:
            res = out[phase] = PhaseResult()
            for b, batch in enumerate(work[phase]):
                t0 = time.perf_counter()
                n = apply(conn, batch)
                t1 = time.perf_counter()
                if mode.views != "none":
                    current()
                t2 = time.perf_counter()
                res.changed += max(n, 0)
                res.writing += t1 - t0
                res.seconds += t2 - t0
                if n != args.batch_rows:
                    res.miscounts.append(f"batch {b}: {n} rows")
            res.load = os.getloadavg()[0]
            common.log(
                f"{mode.label}: {phase} {res.changed:,} rows in {res.seconds:.1f}s"
                f" = {res.changed / res.seconds:,.0f} rows/s (load {res.load:.1f})"
            )
            if mode.views != "none" or mode.side == PG:
                for v in views:
                    if mode.views == "none":  # PostgreSQL's own answer: the reference
                        with conn.cursor() as cur:
                            cur.execute(f"SELECT {', '.join(v.columns)} FROM ({v.sql}) AS q")
                            assert cur.description is not None
                            rows = [d.name for d in cur.description], cur.fetchall()
                    else:
                        rows = read_view(conn, v)
                    snapshots.setdefault(phase, {}).setdefault(v.name, {})[mode.label] = rows
        for v in reversed(views):
            if mode.views in ("headwater", "refresh"):
                conn.execute(f"DROP MATERIALIZED VIEW {v.name}")
            elif mode.views == "immv":
                conn.execute(f"DROP TABLE {v.name}")
        for t in reversed(TABLES):
            conn.execute(f"DROP TABLE {t}")
        return out
    finally:
        conn.close()


# --- checks and report -----------------------------------------------------------------


def compare_views(
    snapshots: dict[str, dict[str, dict[str, Rows]]], views: tuple[View, ...]
) -> tuple[list[str], bool]:
    """Notes on each phase's views against the reference (PostgreSQL's answer, else its
    REFRESHed views), and whether they all agreed."""
    notes, ok = [], True
    ref_labels = ("PostgreSQL, no views", "REFRESH")
    for phase, by_view in snapshots.items():
        equal: dict[str, bool] = {}
        diffs: list[str] = []
        ref = next((r for r in ref_labels if all(r in s for s in by_view.values())), None)
        if ref is None:
            continue
        for view, by_label in by_view.items():
            for label, rows in by_label.items():
                if label == ref:
                    continue
                keys = next(v.keys for v in views if v.name == view)
                bad = tpch.compare(view, by_label[ref], rows, keys)
                equal[label] = equal.get(label, True) and not bad
                diffs += [f"{label}: {d}" for d in bad[:3]]
        if not equal:
            continue
        ok = ok and all(equal.values())
        notes.append(
            f"views at the end of {phase}: "
            + ", ".join(f"{lb} {'equal' if e else 'DIFFERENT'}" for lb, e in equal.items())
            + f" (reference: {ref})"
            + (f"; {diffs[:5]}" if diffs else "")
        )
    return notes, ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scale", type=float, default=0.1, help="TPC-H scale factor (0.1)")
    p.add_argument("--batches", type=int, default=20, help="statements per phase (20)")
    p.add_argument("--batch-rows", type=int, default=4000, help="rows per statement (4,000)")
    p.add_argument("--seed", type=int, default=16, help="workload seed (16)")
    p.add_argument(
        "--insert",
        choices=["copy", "values"],
        default="copy",
        help="the insert phase's batches as COPY FROM STDIN (default) or INSERT ... VALUES",
    )
    p.add_argument(
        "--views",
        choices=sorted(VIEW_SETS),
        default="tpch",
        help="tpch: q1, q3 (no LIMIT), supplier MIN/MAX (default); topn: the top 20 orders"
        " by revenue (ORDER BY ... LIMIT) and suppliers ranked per ship mode (rank() OVER)",
    )
    p.add_argument(
        "--modes",
        default=",".join(m.key for m in MODES),
        help=f"comma-separated subset of {', '.join(m.key for m in MODES)} (all)",
    )
    p.add_argument(
        "--pg-ivm-tarball",
        type=Path,
        help=f"pg_ivm source, built on first use (default ../shared/peers/{pg_ivm.TARBALL})",
    )
    p.add_argument(
        "--pg-suppkey-index",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="PostgreSQL: an index on lineitem(l_suppkey), as pg_ivm's documentation advises"
        " for MIN/MAX (it recomputes a group whose extreme is deleted from the base table);"
        " on by default, for a fair peer",
    )
    common.add_server_args(p)
    args = p.parse_args(argv)
    keys = args.modes.split(",")
    unknown = set(keys) - {m.key for m in MODES}
    if unknown:
        p.error(f"--modes: unknown {sorted(unknown)}")
    modes = [
        m
        for m in MODES
        if m.key in keys and not (m.side == PG and args.skip_pg or m.side == HW and args.skip_hw)
    ]

    report = common.Report(
        title=f"View maintenance: TPC-H SF {args.scale:g}, views "
        + ", ".join(v.name for v in VIEW_SETS[args.views])
        + "; changed rows/s with every view read after each batch",
        params={
            "scale": args.scale,
            "batches": args.batches,
            "batch_rows": f"{args.batch_rows:,}",
            "seed": args.seed,
            "insert": "COPY FROM STDIN" if args.insert == "copy" else "INSERT ... VALUES",
            "pg_suppkey_index": args.pg_suppkey_index,
            "load_avg_1/5/15_at_start": "/".join(f"{x:.1f}" for x in os.getloadavg()),
        },
    )
    metrics = {
        ph: report.metric(f"{ph}, {args.batches} x {args.batch_rows:,} rows", "rows/s")
        for ph in PHASES
    }
    tmp = tempfile.TemporaryDirectory(prefix="hw-bench-tpch-")
    t0 = time.perf_counter()
    data = tpch.generate(Path(tmp.name), args.scale)
    work = plan(data, args.seed, args.batches, args.batch_rows, args.insert)
    common.log(f"tpchgen-cli SF {args.scale} and the workload in {time.perf_counter() - t0:.1f}s")

    pg_settings: list[str] = []
    failed: dict[str, str] = {}  # label -> why it did not run
    if any(m.views == "immv" for m in modes) and not args.pg_dsn:
        try:
            pg_ivm.ensure_installed(common.find_pg_bin(args.pg_bin), args.pg_ivm_tarball)
            pg_settings.append(pg_ivm.PRELOAD)
        except Exception as exc:
            for m in modes:
                if m.views == "immv":
                    failed[m.label] = f"{type(exc).__name__}: {exc}"
    snapshots: dict[str, dict[str, dict[str, Rows]]] = {}
    details: list[str] = []
    for side, server in common.sides(args, pg_settings=pg_settings):
        on_side = [m for m in modes if m.side == side and m.label not in failed]
        if not on_side:
            continue
        try:
            with server() as dsn:
                report.servers[side] = f"{common.server_version(dsn)} at {dsn}"
                for mode in on_side:
                    try:
                        results = run_mode(dsn, mode, data, work, args, snapshots)
                    except Exception as exc:  # report and go on with the next mode
                        failed[mode.label] = f"{type(exc).__name__}: {exc}"
                        common.log(f"{mode.label} failed: {failed[mode.label]}")
                        continue
                    for phase, r in results.items():
                        m = metrics[phase]
                        m.values[mode.label] = r.changed / r.seconds
                        m.loads[mode.label] = r.load
                        details.append(
                            f"{mode.label}, {phase}: {r.seconds:.1f}s"
                            f" ({r.seconds / args.batches:.2f}s per batch; statements"
                            f" {r.writing:.1f}s, views current and read"
                            f" {r.seconds - r.writing:.1f}s)"
                            + (f"; ROW COUNTS OFF: {r.miscounts[:3]}" if r.miscounts else "")
                        )
        except Exception as exc:
            report.servers[side] = "failed to start"
            for mode in on_side:
                failed.setdefault(mode.label, f"server: {type(exc).__name__}: {exc}")
    tmp.cleanup()

    for label, why in failed.items():
        for m in metrics.values():
            m.errors[label] = why
    equal_notes, equal = compare_views(snapshots, VIEW_SETS[args.views])
    report.notes += equal_notes + details
    hw_vs_ivm = [
        (ph, m.values["Headwater"] / m.values["pg_ivm"])
        for ph, m in metrics.items()
        if m.values.get("Headwater") and m.values.get("pg_ivm")
    ]
    if hw_vs_ivm:
        report.notes.append(
            f"target (issue 16): Headwater >= {TARGET_VS_IVM:g}x pg_ivm in every phase: "
            + ", ".join(
                f"{ph} {r:.2f}x {'yes' if r >= TARGET_VS_IVM else 'NO'}" for ph, r in hw_vs_ivm
            )
        )
    report.notes.append(
        "each column runs on fresh tables, one after the other, on one machine with the"
        " client; PostgreSQL 15 with default settings (fsync on)"
        + (" and shared_preload_libraries = pg_ivm" if pg_settings else "")
    )
    report.params["load_avg_1/5/15_at_end"] = "/".join(f"{x:.1f}" for x in os.getloadavg())
    labels = [c for c in COLUMNS if any(c == m.label for m in modes)]
    common.print_report(report, labels, [r for r in RATIOS if set(r) <= set(labels)])
    if args.json:
        common.write_json(report, args.json)
    miscounted = any("ROW COUNTS OFF" in d for d in details)
    return 1 if report.failed or not equal or miscounted else 0


if __name__ == "__main__":
    sys.exit(main())
