"""Materialized views, Headwater vs PostgreSQL 15, on the same data.

(1) Freshness: how long after an INSERT is acknowledged its effect shows in an
    aggregate view (`SELECT g, count(*), sum(v) FROM fr GROUP BY g` over a table
    prefilled with --fresh-rows rows), with 1 and with 10 views defined on the table.
    Headwater: a writer session inserts a row of a new group; a second session with
    `SET headwater.freshness = 'none'` (reads do not wait) polls the view every 5 ms
    until the group is there, while a third session inserts a row into the table every
    --epoch-ms ms (5: an epoch every 5 ms, issue 16's condition). PostgreSQL: REFRESH
    MATERIALIZED VIEW of every view after each write (the time of write + refreshes),
    and, as the other common practice, summary tables maintained by row triggers
    (visible at commit: the figure is the write's latency with the triggers). "write
    to visible" compares the time from sending the INSERT to its effect being readable.
(1b) topn: the same for a top-N view (`ORDER BY v DESC, id LIMIT 10`) and a window
    view (`rank() OVER (PARTITION BY g ORDER BY v DESC, id)`): a row that enters both
    is inserted; PostgreSQL: INSERT + REFRESH of both.
(2) Maintenance throughput: TPC-H 1, 3, 5, 6, 10, 12, 14 as views (3 and 10 without
    ORDER BY/LIMIT) over tpchgen-cli data, under batches of INSERT/UPDATE/DELETE on
    lineitem and orders (bench/tpch.py); changed rows (the statements' row counts)
    per second, each batch followed by every view being current: Headwater waits
    for the views with a read (freshness 'session'), PostgreSQL refreshes them.
    Also pipelined: every batch back to back, then the views current once.
    The views' final contents are compared between the two systems.
(3) Write throughput: single-row INSERTs from --clients clients (asyncpg), with no
    view and with 5 aggregate views on the table (PostgreSQL: 5 summary tables
    maintained by row triggers), two runs each in the order none, 5, 5, none; the
    ratio of the means, with views / without.
(4) Idle CPU: the server's process tree (Headwater: server + JVM + Python workers)
    with 20 views defined, over 10 s without writes, as a share of one core.

The machine's 1-minute load average is printed next to every figure: on a shared
machine, figures taken under load are noisy.

    .venv/bin/python bench/matviews.py               # starts both servers
    .venv/bin/python bench/matviews.py --quick
    .venv/bin/python bench/matviews.py --only freshness,idle --json /tmp/mv.json

The freshness section also draws each sample's freshness over time, Headwater next to
PostgreSQL, into a PNG (--plot; its path is printed at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

try:
    from bench import common, plots, tpch, write_throughput
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]
    import plots  # type: ignore[no-redef]
    import tpch  # type: ignore[no-redef]
    import write_throughput  # type: ignore[no-redef]

PG, HW = common.PG_SIDE, common.HW_SIDE
SECTIONS = ("writes", "freshness", "topn", "maintenance", "idle")
WAIT = "600s"  # freshness_timeout for reads that wait for views (Spark may be starting)


def load1() -> float:
    return os.getloadavg()[0]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))]


# --- results --------------------------------------------------------------------------


@dataclass
class Figure:
    value: float
    load: float  # 1-minute load average when the figure was taken
    note: str = ""


@dataclass
class Row:
    name: str
    unit: str
    lower_is_better: bool = False
    target: str = ""  # the target for Headwater, as text
    met: Callable[[float], bool] | None = None  # on Headwater's figure
    met_ratio: Callable[[float], bool] | None = None  # on Headwater / PostgreSQL
    pg: Figure | None = None
    hw: Figure | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def reached(self) -> bool | None:
        if self.met is not None and self.hw is not None:
            return self.met(self.hw.value)
        if self.met_ratio is not None and self.hw is not None and self.pg and self.pg.value:
            return self.met_ratio(self.hw.value / self.pg.value)
        return None


class Results:
    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.params: dict[str, Any] = {}
        self.servers: dict[str, str] = {}
        # freshness samples over time for the plot: case -> label -> [(s into run, s)]
        self.series: plots.Series = {}

    def sample(self, case: str, label: str, at: float, seconds: float) -> None:
        self.series.setdefault(case, {}).setdefault(label, []).append((at, seconds))

    def row(self, name: str, unit: str, **kw: Any) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        r = Row(name, unit, **kw)
        self.rows.append(r)
        return r

    def put(self, side: str, name: str, unit: str, value: float, note: str = "", **kw: Any) -> None:
        r = self.row(name, unit, **kw)
        fig = Figure(value, load1(), note)
        if side == PG:
            r.pg = fig
        else:
            r.hw = fig
        common.log(f"{side}: {name} = {common.fmt_value(value)} {unit} (load {fig.load:.1f})")

    def error(self, side: str, section: str, exc: BaseException) -> None:
        r = self.row(f"{section}: error", "")
        r.errors[side] = f"{type(exc).__name__}: {exc}"
        common.log(f"{side}: {section} failed: {r.errors[side]}")

    @property
    def failed(self) -> bool:
        return any(r.errors for r in self.rows)

    def print(self) -> None:
        head = ["metric", PG, "load", HW, "load", "HW/PG", "target (HW)", "reached"]
        out: list[list[str]] = []
        for r in self.rows:
            if r.errors:
                continue
            cells = [f"{r.name} ({r.unit})"]
            for fig in (r.pg, r.hw):
                cells += [common.fmt_value(fig.value), f"{fig.load:.1f}"] if fig else ["-", "-"]
            if r.pg and r.hw and r.pg.value:
                cells.append(f"{r.hw.value / r.pg.value:.2f}x")
            else:
                cells.append("-")
            cells.append(r.target or "-")
            ok = r.reached()
            cells.append("-" if ok is None else ("yes" if ok else "NO"))
            out.append(cells)
        widths = [max(len(c[i]) for c in [head, *out]) for i in range(len(head))]

        def line(cells: list[str]) -> str:
            return " | ".join(
                [
                    cells[0].ljust(widths[0]),
                    *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)),
                ]
            )

        print()
        print("Materialized views")
        print("  " + ", ".join(f"{k}={v}" for k, v in self.params.items()))
        for side, version in self.servers.items():
            print(f"  {side}: {version}")
        print(
            f"  machine: {os.cpu_count()} cpus, {platform.platform()}, "
            f"Python {platform.python_version()}; load = 1-minute load average"
        )
        print()
        print(line(head))
        print("-+-".join("-" * w for w in widths))
        for cells in out:
            print(line(cells))
        for r in self.rows:
            for side, fig in ((PG, r.pg), (HW, r.hw)):
                if fig and fig.note:
                    print(f"  {r.name}, {side}: {fig.note}")
            for side, err in r.errors.items():
                print(f"  ! {r.name} on {side}: {err}")
        for note in self.notes:
            print(f"  note: {note}")
        print(flush=True)

    def to_json(self, path: str) -> None:
        rows = []
        for r in self.rows:
            d = asdict(r)
            d.pop("met")
            d.pop("met_ratio")
            d["reached"] = r.reached()
            rows.append(d)
        payload = {
            "params": self.params,
            "servers": self.servers,
            "rows": rows,
            "notes": self.notes,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n")
        common.log(f"wrote {path}")


# --- helpers --------------------------------------------------------------------------


def connect(dsn: str, side: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    if side == HW:
        conn.execute(f"SET headwater.freshness_timeout = '{WAIT}'")
    return conn


def wait_fresh(conn: psycopg.Connection[Any], views: list[str]) -> float:
    """Headwater: one statement reading every view, at an epoch at which all of them
    reflect every acknowledged write (freshness 'latest'); returns the seconds waited."""
    t0 = time.perf_counter()
    conn.execute("SET headwater.freshness = 'latest'")
    conn.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM {v})" for v in views)).fetchall()
    conn.execute("SET headwater.freshness = 'session'")
    return time.perf_counter() - t0


def start_stage(conn: psycopg.Connection[Any], views: list[str], write: str, undo: str) -> float:
    """Headwater: `write`, `undo` (its removal), then wait until `views` include them;
    returns the seconds it took. The stage (Spark) starts at the first write after views
    are created, not at CREATE: without this its start (tens of seconds on a loaded
    machine) falls inside the first measured window or sample."""
    t0 = time.perf_counter()
    conn.execute(write)
    conn.execute(undo)
    wait_fresh(conn, views)
    settle(conn)
    return time.perf_counter() - t0


def settle(conn: psycopg.Connection[Any], timeout: float = 180.0) -> None:
    """Headwater on this machine: wait until its Spark stage has started (a JVM under the
    server) and the server's process tree is quiet (under 15% of a core for two seconds
    in a row). Under `--executor auto` views are fresh long before that (DuckDB advances
    them while the JVM starts, ~10 s of CPU): without this the JVM's start falls inside
    the first measured window. A remote server: no wait."""
    try:
        root = common.server_pid(f"host={conn.info.host} port={conn.info.port}")
    except (RuntimeError, OSError, ValueError):
        return
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        share, _ = idle_share(root, 1.0)
        jvm = any(_comm(p) == "java" for p in common.tree_cpu(root))
        quiet = quiet + 1 if jvm and share < 0.15 else 0


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


FR_PRIME = ("INSERT INTO fr VALUES (-1, -1, 0)", "DELETE FROM fr WHERE id = -1")


def trigger_sql(table: str, summary: str, keys: list[tuple[str, str]], value: str) -> str:
    """PostgreSQL: a summary table (keys..., n, s) = (GROUP BY keys: count(*),
    sum(value)) of `table`, kept by a row trigger on INSERT/UPDATE/DELETE. `keys`:
    (column, expression over the row with $ for NEW./OLD.), stored as text; no key:
    one row under k = '0'. Groups that drop to n = 0 stay (as zeros)."""
    keys = keys or [("k", "0")]
    names = ", ".join(k for k, _ in keys)
    new = ", ".join(f"({e.replace('$', 'NEW.')})::text" for _, e in keys)
    old = " AND ".join(f"{k} = ({e.replace('$', 'OLD.')})::text" for k, e in keys)
    cols = ", ".join(f"{k} text" for k, _ in keys)
    v_new, v_old = value.replace("$", "NEW."), value.replace("$", "OLD.")
    return f"""
CREATE TABLE {summary} ({cols}, n bigint NOT NULL, s numeric NOT NULL, PRIMARY KEY ({names}));
CREATE FUNCTION {summary}_f() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO {summary} VALUES ({new}, 1, {v_new})
      ON CONFLICT ({names}) DO UPDATE SET n = {summary}.n + 1, s = {summary}.s + EXCLUDED.s;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE {summary} SET n = n - 1, s = s - {v_old} WHERE {old};
  END IF;
  RETURN NULL;
END $f$;
CREATE TRIGGER {summary}_t AFTER INSERT OR UPDATE OR DELETE ON {table}
  FOR EACH ROW EXECUTE FUNCTION {summary}_f();
"""


def idle_share(root: int, seconds: float) -> tuple[float, int]:
    """Share of one core the process tree used over `seconds`, and its process count.
    Processes that start during the window count whole; ones that end are lost."""
    a = common.tree_cpu(root)
    t0 = time.perf_counter()
    time.sleep(seconds)
    b = common.tree_cpu(root)
    wall = time.perf_counter() - t0
    used = sum(v - a.get(p, 0.0) for p, v in b.items())
    return used / wall, len(b)


# --- (1) freshness ---------------------------------------------------------------------


def fresh_views(n: int) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """n aggregate views over fr(id, g, v): (name, SELECT, trigger keys). View 0 is
    the measured one (GROUP BY g); the others group by other expressions of g."""
    out = [("fr_v0", "SELECT g, count(*) AS n, sum(v) AS s FROM fr GROUP BY g", [("g", "$g")])]
    for k in range(1, n):
        m = 3 + 7 * k
        out.append(
            (
                f"fr_v{k}",
                f"SELECT g % {m} AS b, count(*) AS n, sum(v) AS s FROM fr GROUP BY g % {m}",
                [("b", f"$g % {m}")],
            )
        )
    return out


def setup_fresh_table(conn: psycopg.Connection[Any], rows: int, table: str = "fr") -> None:
    conn.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, g int NOT NULL, v bigint NOT NULL)")
    rng = random.Random(7)
    payload = "".join(f"{i}\t{rng.randrange(1000)}\t{rng.randrange(10**6)}\n" for i in range(rows))
    with conn.cursor() as cur, cur.copy(f"COPY {table} (id, g, v) FROM STDIN") as cp:
        cp.write(payload.encode())


class EpochStream:
    """Background writes while freshness is sampled: a session inserting one row into
    fr (an existing group) every `every_ms` ms, each its own transaction, so that
    epochs arrive every few ms and the views have work in every batch (0: none)."""

    def __init__(self, dsn: str, side: str, every_ms: float, next_id: list[int]) -> None:
        self.every = every_ms / 1000.0
        self.writes = 0
        self.late = 0.0  # seconds the writer fell behind its schedule, at most
        self._stop = threading.Event()
        self._conn = connect(dsn, side) if every_ms > 0 else None
        self._ids = next_id
        self._thread = threading.Thread(target=self._run, daemon=True)
        if self._conn is not None:
            self._thread.start()

    def _run(self) -> None:
        assert self._conn is not None
        rng = random.Random(5)
        due = time.perf_counter()
        while not self._stop.is_set():
            i = self._ids[0]
            self._ids[0] += 1
            self._conn.execute("INSERT INTO fr VALUES (%s, %s, 1)", (i, rng.randrange(1000)))
            self.writes += 1
            due += self.every
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            else:
                self.late = max(self.late, now - due)

    def stop(self) -> str:
        """Stop; what was written, as a note."""
        if self._conn is None:
            return "no background writes"
        self._stop.set()
        self._thread.join()
        self._conn.close()
        return (
            f"{self.writes} background INSERTs, one every {self.every * 1000:g} ms"
            f" (the writer fell behind by up to {self.late * 1000:.0f} ms)"
        )


def freshness_run(
    side: str,
    dsn: str,
    nviews: int,
    samples: int,
    next_id: list[int],
    res: Results,
    every_ms: float = 0.0,
) -> None:
    views = fresh_views(nviews)
    case = f"{nviews} view" + ("s" if nviews > 1 else "")
    w = connect(dsn, side)
    try:
        if side == HW:
            for name, sql, _ in views:
                w.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            common.log(f"{side}: {nviews} views created; waiting for the stage")
            took = start_stage(w, [v[0] for v in views], *FR_PRIME)
            common.log(f"{side}: views fresh after {took:.1f}s")
            poll = connect(dsn, side)
            poll.execute("SET headwater.freshness = 'none'")
            fresh, write, total, timeouts = [], [], [], 0
            stream = EpochStream(dsn, side, every_ms, next_id)
            start = time.perf_counter()
            for _ in range(samples):
                i = next_id[0]
                next_id[0] += 1
                g = 1_000_000 + i
                t0 = time.perf_counter()
                w.execute("INSERT INTO fr VALUES (%s, %s, 1)", (i, g))
                t1 = time.perf_counter()
                while True:
                    if poll.execute("SELECT n FROM fr_v0 WHERE g = %s", (g,)).fetchone():
                        break
                    if time.perf_counter() - t1 > 60:
                        timeouts += 1
                        break
                    time.sleep(0.005)
                t2 = time.perf_counter()
                fresh.append(t2 - t1)
                res.sample(case, "Headwater (INSERT ack to visible)", t1 - start, t2 - t1)
                write.append(t1 - t0)
                total.append(t2 - t0)
                time.sleep(random.uniform(0.1, 0.3))
            streamed = stream.stop()
            poll.close()
            note = f"INSERT ack p50 {statistics.median(write) * 1000:.0f} ms"
            note += f"; {streamed}"
            if timeouts:
                note += f"; {timeouts} samples not visible after 60 s"
            for name, _, _ in reversed(views):
                w.execute(f"DROP MATERIALIZED VIEW {name}")
            put_fresh(res, side, nviews, fresh, total, note)
            return
        # PostgreSQL: REFRESH after each write, then trigger-maintained summaries
        for name, sql, _ in views:
            w.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        refresh: list[float] = []
        start = time.perf_counter()
        for _ in range(samples):
            i = next_id[0]
            next_id[0] += 1
            t0 = time.perf_counter()
            w.execute("INSERT INTO fr VALUES (%s, %s, 1)", (i, 1_000_000 + i))
            for name, _, _ in views:
                w.execute(f"REFRESH MATERIALIZED VIEW {name}")
            refresh.append(time.perf_counter() - t0)
            res.sample(case, "PostgreSQL REFRESH (INSERT + REFRESH)", t0 - start, refresh[-1])
            time.sleep(random.uniform(0.1, 0.3))  # Headwater's pace: the plot's times compare
        for name, _, _ in reversed(views):
            w.execute(f"DROP MATERIALIZED VIEW {name}")
        for name, _, keys in views:
            w.execute(trigger_sql("fr", f"{name}_sum", keys, "$v"))
        trig: list[float] = []
        start = time.perf_counter()
        for _ in range(samples):
            i = next_id[0]
            next_id[0] += 1
            t0 = time.perf_counter()
            w.execute("INSERT INTO fr VALUES (%s, %s, 1)", (i, 1_000_000 + i))
            trig.append(time.perf_counter() - t0)
            res.sample(case, "PostgreSQL triggers (INSERT, summary tables)", t0 - start, trig[-1])
            time.sleep(random.uniform(0.1, 0.3))
        row = w.execute(
            "SELECT n FROM fr_v0_sum WHERE g = %s", (str(1_000_000 + next_id[0] - 1),)
        ).fetchone()
        assert row and row[0] == 1, "trigger summary missed the last row"
        for name, _, _ in views:
            w.execute(f"DROP TABLE {name}_sum")
            w.execute(f"DROP FUNCTION {name}_sum_f() CASCADE")
        put_fresh(res, side, nviews, refresh, trig, "REFRESH of every view after each write")
    finally:
        w.close()


def put_fresh(
    res: Results, side: str, nviews: int, fresh: list[float], total: list[float], note: str
) -> None:
    """fresh: ack to visible (Headwater) or write+REFRESH (PostgreSQL); total: send to
    visible (Headwater) or the write's latency with triggers (PostgreSQL)."""
    v = f"{nviews} view" + ("s" if nviews > 1 else "")
    for q, tgt in ((0.5, 300.0), (0.99, 1000.0)):  # issue 16's targets
        res.put(
            side,
            f"freshness p{int(q * 100)}, {v}",
            "ms",
            pct(fresh, q) * 1000,
            note=note if q == 0.5 else "",
            lower_is_better=True,
            target=f"<= {tgt:g} ms",
            met=lambda x, t=tgt: x <= t,
        )
    for q in (0.5, 0.99):
        res.put(
            side,
            f"write to visible p{int(q * 100)}, {v} (PG: trigger summary)",
            "ms",
            pct(total, q) * 1000,
            lower_is_better=True,
        )


def bench_freshness(side: str, dsn: str, args: argparse.Namespace, res: Results) -> None:
    with connect(dsn, side) as c:
        setup_fresh_table(c, args.fresh_rows)
    next_id = [args.fresh_rows + 1]
    for n in (1, 10):
        common.log(f"{side}: freshness with {n} view(s), {args.samples} samples")
        freshness_run(side, dsn, n, args.samples, next_id, res, args.epoch_ms)


# --- (1b) freshness of a top-N and a window-function view (issue 14) --------------------

TOPN_VIEWS = (
    ("ft_top", "SELECT id, v FROM ft ORDER BY v DESC, id LIMIT 10"),
    ("ft_rank", "SELECT id, g, v, rank() OVER (PARTITION BY g ORDER BY v DESC, id) AS r FROM ft"),
)


def bench_topn(side: str, dsn: str, args: argparse.Namespace, res: Results) -> None:
    """Each sample INSERTs a row that enters both views (the largest v: the top 10; a new
    g: its own partition of the ranking). Headwater: from the INSERT's acknowledgement
    until a reader sees it in both; PostgreSQL: INSERT + REFRESH of both views."""
    w = connect(dsn, side)
    try:
        setup_fresh_table(w, args.fresh_rows, "ft")
        for name, sql in TOPN_VIEWS:
            w.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        names = [n for n, _ in TOPN_VIEWS]
        poll = None
        if side == HW:
            took = start_stage(
                w, names, "INSERT INTO ft VALUES (-1, -1, 0)", "DELETE FROM ft WHERE id = -1"
            )
            common.log(f"{side}: top-N and window views fresh after {took:.1f}s")
            poll = connect(dsn, side)
            poll.execute("SET headwater.freshness = 'none'")
        times: list[float] = []
        for k in range(args.samples):
            i = args.fresh_rows + 1 + k
            t0 = time.perf_counter()
            w.execute("INSERT INTO ft VALUES (%s, %s, %s)", (i, 1_000_000 + i, 10**12 + i))
            t1 = time.perf_counter()
            if poll is None:
                for name in names:
                    w.execute(f"REFRESH MATERIALIZED VIEW {name}")
            else:
                while not poll.execute(
                    "SELECT (SELECT count(*) FROM ft_top WHERE id = %s)"
                    " + (SELECT count(*) FROM ft_rank WHERE id = %s) = 2",
                    (i, i),
                ).fetchone()[0]:  # type: ignore[index]
                    if time.perf_counter() - t1 > 60:
                        break
                    time.sleep(0.005)
            times.append(time.perf_counter() - (t1 if poll is not None else t0))
            time.sleep(random.uniform(0.1, 0.3))
        for q in (0.5, 0.99):
            res.put(
                side,
                f"top-N + window views, freshness p{int(q * 100)}",
                "ms",
                pct(times, q) * 1000,
                note="INSERT ack to visible in both" if side == HW else "INSERT + REFRESH of both",
                lower_is_better=True,
            )
        if poll is not None:
            poll.close()
        for name in reversed(names):
            w.execute(f"DROP MATERIALIZED VIEW {name}")
        w.execute("DROP TABLE ft")
    finally:
        w.close()


# --- (2) maintenance throughput --------------------------------------------------------


def bench_maintenance(
    side: str, dsn: str, args: argparse.Namespace, data: Path, res: Results, final: dict[str, Any]
) -> None:
    conn = connect(dsn, side)
    views = list(tpch.QUERIES)
    try:
        conn.execute("CREATE SCHEMA tpch")
        conn.execute("SET search_path TO tpch")
        t0 = time.perf_counter()
        loaded = tpch.load(conn, data)
        common.log(f"{side}: TPC-H SF {args.scale} loaded in {time.perf_counter() - t0:.1f}s")
        t0 = time.perf_counter()
        for name, sql in tpch.QUERIES.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        common.log(f"{side}: 7 views created in {time.perf_counter() - t0:.1f}s")
        if side == HW:
            common.log(f"{side}: views fresh after {start_stage(conn, views, *tpch.PRIME):.1f}s")

        def current() -> None:
            if side == HW:  # the writer's read waits until every view has its writes
                conn.execute(
                    "SELECT " + ", ".join(f"(SELECT count(*) FROM {v})" for v in views)
                ).fetchall()
            else:
                for v in views:
                    conn.execute(f"REFRESH MATERIALIZED VIEW {v}")

        def apply(stmts: list[str]) -> int:
            n = 0
            with conn.transaction():
                for s in stmts:
                    n += max(conn.execute(s).rowcount, 0)
            return n

        churn = tpch.Churn(args.seed, next_orderkey=loaded.max_orderkey + 1)
        changed, writing, t0 = 0, 0.0, time.perf_counter()
        for _ in range(args.batches):
            t1 = time.perf_counter()
            changed += apply(churn.batch(args.batch_size))
            writing += time.perf_counter() - t1
            current()
        took = time.perf_counter() - t0
        per = changed / args.batches
        share = 100 * per / loaded.rows["lineitem"]
        res.put(
            side,
            "maintenance, views current after each batch",
            "changed rows/s",
            changed / took,
            note=f"{args.batches} batches of ~{per:,.0f} changed rows ({share:.1f}% of lineitem's"
            f" {loaded.rows['lineitem']:,}), {took:.1f}s: writes"
            f" {writing:.1f}s, "
            + ("REFRESH of 7 views" if side == PG else "waiting for 7 views")
            + f" {took - writing:.1f}s",
            target=">= 10x PG",
            met_ratio=lambda x: x >= 10.0,
        )
        changed, t0 = 0, time.perf_counter()
        for _ in range(args.batches):
            changed += apply(churn.batch(args.batch_size))
        writing = time.perf_counter() - t0
        current()
        took = time.perf_counter() - t0
        res.put(
            side,
            "maintenance, batches back to back, views current at the end",
            "changed rows/s",
            changed / took,
            note=f"{args.batches} batches, {changed:,} changed rows, {took:.1f}s: writes"
            f" {writing:.1f}s, then views current {took - writing:.1f}s",
        )
        with conn.cursor() as cur:
            for v in views:
                cur.execute(f"SELECT * FROM {v}")
                assert cur.description is not None
                final.setdefault(v, {})[side] = ([d.name for d in cur.description], cur.fetchall())
        for v in reversed(views):
            conn.execute(f"DROP MATERIALIZED VIEW {v}")
    finally:
        conn.close()


# --- (3) write throughput ----------------------------------------------------------------

AGG = "count(*) AS n, sum(amount) AS s"
WRITE_VIEWS = [  # (name, SELECT over the table {t}, trigger keys for PostgreSQL)
    ("w_by_name", f"SELECT name, {AGG} FROM {{t}} GROUP BY name", [("name", "$name")]),
    ("w_total", f"SELECT {AGG} FROM {{t}}", []),
    (
        "w_by_bucket",
        f"SELECT id % 16 AS b, {AGG} FROM {{t}} GROUP BY id % 16",
        [("b", "$id % 16")],
    ),
    (
        "w_by_day",
        f"SELECT CAST(ts AS date) AS d, {AGG} FROM {{t}} GROUP BY CAST(ts AS date)",
        [("d", "CAST($ts AS date)")],
    ),
    (
        "w_by_name_bucket",
        f"SELECT name, id % 4 AS b, {AGG} FROM {{t}} GROUP BY name, id % 4",
        [("name", "$name"), ("b", "$id % 4")],
    ),
]


def bench_writes(side: str, dsn: str, args: argparse.Namespace, res: Results) -> None:
    """INSERT tx/s with no view and with 5, in the order none, 5, 5, none: a drift of
    the machine during the runs (on this one, the file system's first ~30 s after a
    large deletion, docs/storage.md "Figures") weighs on both sides alike."""
    runs: dict[int, list[float]] = {0: [], 5: []}
    notes: dict[int, list[str]] = {0: [], 5: []}
    for k, nviews in enumerate((0, 5, 5, 0)):
        table = f"w{nviews}_{k}"
        with connect(dsn, side) as c:
            c.execute(f"CREATE TABLE {table} ({write_throughput.COLUMNS})")
            for name, sql, keys in WRITE_VIEWS[:nviews]:
                if side == HW:
                    c.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql.format(t=table)}")
                else:
                    c.execute(trigger_sql(table, name, keys, "$amount"))
            if side == HW and nviews:
                took = start_stage(
                    c,
                    [v[0] for v in WRITE_VIEWS[:nviews]],
                    f"INSERT INTO {table} (id, name, amount) VALUES (-1, 'prime', 0)",
                    f"DELETE FROM {table} WHERE id = -1",
                )
                common.log(f"{side}: views fresh after {took:.1f}s")
        common.log(f"{side}: INSERT, {args.clients} clients, {nviews} views, {args.duration:g}s")
        in_window, total, lat, cpu = asyncio.run(
            write_throughput._insert_run(
                dsn, table, args.clients, args.duration, args.warmup, "asyncpg"
            )
        )
        runs[nviews].append(in_window / args.duration)
        with connect(dsn, side) as c:
            n = c.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert n and n[0] == total, f"{total} INSERTs acknowledged, count(*) = {n}"
            if nviews:
                if side == HW:
                    wait_fresh(c, ["w_total"])
                got = c.execute("SELECT n FROM w_total").fetchone()
                assert got and got[0] == total, f"the total view says {got}, {total} rows written"
                for name, _, _ in reversed(WRITE_VIEWS[:nviews]):
                    if side == HW:
                        c.execute(f"DROP MATERIALIZED VIEW {name}")
                    else:
                        c.execute(f"DROP TABLE {name}")
                        c.execute(f"DROP FUNCTION {name}_f() CASCADE")
            c.execute(f"DROP TABLE {table}")
        p50 = statistics.median(lat) * 1000 if lat else float("nan")
        cpu_ms = f", CPU {1000 * cpu / in_window:.2f} ms" if in_window else ""
        notes[nviews].append(f"{runs[nviews][-1]:,.0f} tx/s (p50 {p50:.1f} ms{cpu_ms})")
        common.log(f"{side}: {nviews} views: {notes[nviews][-1]}")
    for nviews in (0, 5):
        label = "no view" if not nviews else ("5 views" if side == HW else "5 trigger summaries")
        res.put(
            side,
            f"INSERT x{args.clients} clients, {'no view' if not nviews else '5 views'}",
            "tx/s",
            statistics.mean(runs[nviews]),
            note=f"{label}, mean of " + " and ".join(notes[nviews]) + " (server CPU per INSERT)",
        )
    res.put(
        side,
        "INSERT tx/s with 5 views / with none",
        "ratio",
        statistics.mean(runs[5]) / statistics.mean(runs[0]) if runs[0] else 0.0,
        target=">= 0.9",
        met=lambda x: x >= 0.9,
    )


# --- (4) idle CPU ----------------------------------------------------------------------


def bench_idle(side: str, dsn: str, args: argparse.Namespace, res: Results) -> None:
    views = fresh_views(20)
    with connect(dsn, side) as c:
        if not c.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_name = 'fr'"
        ).fetchone():
            setup_fresh_table(c, args.fresh_rows)
        for name, sql, _ in views:
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        if side == HW:
            took = start_stage(c, [v[0] for v in views], *FR_PRIME)
            common.log(f"{side}: 20 views fresh after {took:.1f}s")
    time.sleep(2.0)  # let the last batch and the connection's close settle
    pid = common.server_pid(dsn)
    share, procs = idle_share(pid, args.idle_seconds)
    res.put(
        side,
        "idle CPU, 20 views, no writes",
        "% of a core",
        share * 100,
        note=f"{procs} processes in the server's tree, {args.idle_seconds:g}s",
        lower_is_better=True,
        target="<= 10%",
        met=lambda x: x <= 10.0,
    )
    with connect(dsn, side) as c:
        for name, _, _ in reversed(views):
            c.execute(f"DROP MATERIALIZED VIEW {name}")


# --- main -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="a short run (fewer samples, SF 0.01)")
    p.add_argument("--only", help=f"comma-separated sections of {', '.join(SECTIONS)}")
    p.add_argument("--samples", type=int, help="freshness samples per case (40; quick 12)")
    p.add_argument("--fresh-rows", type=int, help="rows in the freshness table (100,000)")
    p.add_argument(
        "--epoch-ms",
        type=float,
        default=5.0,
        help="Headwater freshness: a background INSERT (an epoch) every N ms (5; 0: none)",
    )
    p.add_argument("--scale", type=float, help="TPC-H scale factor (0.05; quick 0.01)")
    p.add_argument("--batches", type=int, help="churn batches per mode (10; quick 4)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=1,
        help="churn batch size factor (1: ~0.7%% of lineitem per batch)",
    )
    p.add_argument("--seed", type=int, default=42, help="churn seed (42)")
    p.add_argument("--clients", type=int, default=4, help="INSERT clients (4)")
    p.add_argument("--duration", type=float, help="seconds of INSERTs per run (10; quick 4)")
    p.add_argument("--warmup", type=float, help="INSERT warm-up seconds (1; quick 0.5)")
    p.add_argument("--idle-seconds", type=float, default=10.0, help="idle window (10)")
    p.add_argument(
        "--plot",
        type=Path,
        default=Path(tempfile.gettempdir()) / "headwater-matviews-freshness.png",
        help="PNG of freshness over time, Headwater next to PostgreSQL (freshness section; "
        "default: %(default)s)",
    )
    common.add_server_args(p)
    args = p.parse_args(argv)
    q = args.quick
    args.samples = args.samples or (12 if q else 40)
    args.fresh_rows = args.fresh_rows or 100_000
    args.scale = args.scale or (0.01 if q else 0.05)
    args.batches = args.batches or (4 if q else 10)
    args.duration = args.duration or (4.0 if q else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if q else 1.0)
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    if only - set(SECTIONS):
        p.error(f"--only: unknown section(s) {sorted(only - set(SECTIONS))}")

    res = Results()
    res.params = {
        "freshness_samples": args.samples,
        "fresh_table_rows": f"{args.fresh_rows:,}",
        "tpch_scale": args.scale,
        "churn_batches": args.batches,
        "batch_size": args.batch_size,
        "insert_clients": args.clients,
        "insert_seconds": args.duration,
        "idle_seconds": args.idle_seconds,
    }
    res.notes.append(
        "freshness: Headwater from INSERT acknowledgement to the row's group in the view"
        " (a reader with headwater.freshness = 'none' polling every 5 ms); PostgreSQL:"
        " INSERT + REFRESH MATERIALIZED VIEW of every view. 'write to visible': Headwater"
        " from sending the INSERT; PostgreSQL with trigger-maintained summary tables"
        " (visible at commit)"
    )
    res.notes.append("client and servers share this machine's CPUs")
    data = None
    tmp = tempfile.TemporaryDirectory(prefix="hw-bench-tpch-")
    if "maintenance" in only:
        t0 = time.perf_counter()
        data = tpch.generate(Path(tmp.name), args.scale)
        common.log(f"tpchgen-cli SF {args.scale} in {time.perf_counter() - t0:.1f}s")
    final: dict[str, Any] = {}
    for side, server in common.sides(args):
        try:
            with server() as dsn:
                res.servers[side] = f"{common.server_version(dsn)} at {dsn}"
                # writes first: on Headwater, before any view starts the Spark stage
                for section in SECTIONS:
                    if section not in only:
                        continue
                    try:
                        if section == "writes":
                            bench_writes(side, dsn, args, res)
                        elif section == "freshness":
                            bench_freshness(side, dsn, args, res)
                        elif section == "topn":
                            bench_topn(side, dsn, args, res)
                        elif section == "maintenance":
                            assert data is not None
                            bench_maintenance(side, dsn, args, data, res, final)
                        else:
                            bench_idle(side, dsn, args, res)
                    except Exception as exc:  # report and go on with the next section
                        res.error(side, section, exc)
        except Exception as exc:
            res.servers[side] = "failed to start"
            res.error(side, "server", exc)
    tmp.cleanup()
    diffs = []
    for v, by_side in final.items():
        if PG in by_side and HW in by_side:
            diffs += tpch.compare(v, by_side[PG], by_side[HW])
    if final and all(len(s) == 2 for s in final.values()):
        res.notes.append(
            "TPC-H views after the churn: "
            + ("equal on both systems" if not diffs else f"{len(diffs)} DIFFERENCES: {diffs[:3]}")
        )
    res.print()
    if res.series:
        title = (
            f"Freshness over time: {args.fresh_rows:,} rows, an epoch every {args.epoch_ms:g} ms"
            f" (Headwater); load {load1():.1f} on {os.cpu_count()} cpus"
        )
        print(f"freshness plot: {plots.freshness_png(res.series, args.plot, title)}", flush=True)
    if args.json:
        res.to_json(args.json)
    return 1 if res.failed or diffs else 0


if __name__ == "__main__":
    sys.exit(main())
