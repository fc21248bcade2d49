"""Ad-hoc TPC-H: the 22 queries, read-only, Headwater next to PostgreSQL 15 (issue 16).

Both servers get the same tpchgen-cli data (8 tables, COPY FROM STDIN, primary keys as
in bench/tpch.py; PostgreSQL is ANALYZEd after the load, as any PostgreSQL user
would) and run bench/tpch22.py's queries (the specification's validation parameters,
ORDER BY and LIMIT kept) as plain SELECTs over one connection: one untimed run to
warm caches, then --runs timed runs; the figure is the median. Each query's answer
is compared between the servers (rows as text, numbers rounded to 2 places), so a
fast wrong answer shows as a mismatch, not a win.

    .venv/bin/python bench/tpch_adhoc.py              # SF 0.1 (seconds)
    .venv/bin/python bench/tpch_adhoc.py --sf 1       # the issue's figure (~10 min)
    .venv/bin/python bench/tpch_adhoc.py --only q1,q6 --runs 5

Printed: a row per query with each server's median ms, the ratio PostgreSQL /
Headwater (above 1: Headwater faster) and the 1-minute load average, then the
geometric mean of the ratios and how many queries Headwater answered faster.
"""

from __future__ import annotations

import argparse
import decimal
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import (
    common,  # noqa: E402
    tpch,  # noqa: E402
)
from bench.tpch22 import PARTSUPP, QUERIES  # noqa: E402

ALL_TABLES = {**tpch.TABLES, "partsupp": PARTSUPP}
ORDER = (*tpch.LOAD_ORDER, "partsupp")


def load(dsn: str, data: Path, analyze: bool) -> float:
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as c:
        tpch.load(c, data, ORDER, ALL_TABLES)
        if analyze:
            c.execute("ANALYZE")
    return time.perf_counter() - t0


def _norm(v: Any) -> Any:
    if isinstance(v, decimal.Decimal | float):
        return round(float(v), 2)
    return v if v is None or isinstance(v, int) else str(v).rstrip()


def run_queries(
    dsn: str, names: list[str], runs: int, timeout: float
) -> dict[str, tuple[float, list, float]]:
    """Each query: (median seconds, normalised rows, load average after its runs); a
    query over `timeout` seconds is infinite."""
    out: dict[str, tuple[float, list, float]] = {}
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT set_config('statement_timeout', %s, false)", (f"{timeout}s",))
        for name in names:
            sql = QUERIES[name]
            try:  # the warm-up run, whose answer is compared
                rows = [tuple(_norm(v) for v in r) for r in c.execute(sql).fetchall()]
            except psycopg.errors.QueryCanceled:
                out[name] = (math.inf, [], os.getloadavg()[0])
                common.log(f"{name}: over {timeout} s (statement_timeout)")
                continue
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                c.execute(sql).fetchall()
                times.append(time.perf_counter() - t0)
            out[name] = (statistics.median(times), rows, os.getloadavg()[0])
            common.log(f"{name}: {statistics.median(times) * 1e3:.1f} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", help="comma-separated query names (q1..q22)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a query may take")
    common.add_server_args(ap)
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(QUERIES)
    with tempfile.TemporaryDirectory(prefix="hw-tpch-adhoc-") as tmp:
        data = Path(tmp)
        common.log(f"tpchgen-cli -s {args.sf} into {data}")
        tpch.generate(data, args.sf, ORDER)
        results: dict[str, dict[str, tuple[float, list, float]]] = {}
        loads: dict[str, float] = {}
        for side, server in common.sides(args):
            with server() as dsn:
                secs = load(dsn, data, analyze=side == common.PG_SIDE)
                loads[side] = secs
                common.log(f"{side}: loaded SF {args.sf} in {secs:.1f} s")
                results[side] = run_queries(dsn, names, args.runs, args.timeout)
    pg, hw = results.get(common.PG_SIDE), results.get(common.HW_SIDE)
    print(f"\nTPC-H SF {args.sf}, ad-hoc, median of {args.runs} warm runs, one connection")
    print("  load (COPY of 8 tables): " + ", ".join(f"{s} {t:.1f} s" for s, t in loads.items()))
    print(
        f"\n{'query':6} {'PostgreSQL ms':>14} {'Headwater ms':>13} {'PG/HW':>7} {'load':>5}  answer"
    )
    ratios = []
    for name in names:
        p = pg[name] if pg else None
        h = hw[name] if hw else None
        ratio = p[0] / h[0] if p and h and math.isfinite(p[0] * h[0]) else None
        if ratio:
            ratios.append(ratio)
        same = "-" if not (p and h and ratio) else "same" if p[1] == h[1] else "DIFFERS"

        def ms(r: tuple[float, list, float] | None) -> str:
            return "-" if r is None else "timeout" if math.isinf(r[0]) else f"{r[0] * 1e3:.1f}"

        shown = f"{ratio:.2f}x" if ratio else ">1x" if h and p and math.isinf(p[0]) else "-"
        avg = (h or p)[2] if (h or p) else math.nan  # type: ignore[index]
        print(f"{name:6} {ms(p):>14} {ms(h):>13} {shown:>7} {avg:5.1f}  {same}")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        timeouts = sum(
            1 for n in names if pg and hw and math.isinf(pg[n][0]) and math.isfinite(hw[n][0])
        )
        faster = sum(r > 1 for r in ratios) + timeouts
        print(
            f"\ngeometric mean PG/HW {geo:.2f}x; Headwater faster on {faster} of"
            f" {len(ratios) + timeouts} queries ({timeouts} over PostgreSQL's timeout;"
            f" load average now {os.getloadavg()[0]:.1f})"
        )


if __name__ == "__main__":
    main()
