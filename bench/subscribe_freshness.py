"""SUBSCRIBE freshness, Headwater vs PostgreSQL 15, on the same data.

How long after a single-row INSERT is acknowledged its change reaches a subscriber,
(a) for the table itself and (b) for an aggregate materialized view
`SELECT g, count(*) AS n, sum(x) AS s FROM t GROUP BY g`, over a table prefilled
with --rows rows (100 groups). One writer inserts --inserts rows one at a time,
--interval ms apart (after --warmup unmeasured ones); p50, p99 and max are reported.

Headwater: two `COPY (SUBSCRIBE ... WITH (SNAPSHOT = false)) TO STDOUT` streams (the
table and the view), each on a connection and thread of its own; a row's epoch maps
it to the INSERT whose acknowledgement carried that epoch (ParameterStatus
`headwater_epoch`). The view figure includes the Spark stage's micro-batch.

PostgreSQL 15 has no SUBSCRIBE; its nearest equivalent is LISTEN/NOTIFY from AFTER
INSERT row triggers: one NOTIFY with the new row's id (table), one with the group's
count and sum recomputed in the trigger from an index on g (view). Notifications
are delivered at commit.

Times are taken in this process (writer and subscriber threads share one clock);
a change can arrive just before the writer thread sees its acknowledgement, so a
figure can be slightly negative. The machine's load average is printed: on a shared
machine, figures taken under load are noisy.

    .venv/bin/python bench/subscribe_freshness.py
    .venv/bin/python bench/subscribe_freshness.py --inserts 100 --interval 100
    .venv/bin/python bench/subscribe_freshness.py --skip-pg --hw-dsn postgresql://headwater@127.0.0.1:6544/headwater
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

try:
    from bench import common
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]

GROUPS = 100
TABLE = "CREATE TABLE sf_t (id int PRIMARY KEY, g int, x int)"
VIEW = "SELECT g, count(*) AS n, sum(x) AS s FROM sf_t GROUP BY g"
PG_TRIGGERS = [
    "CREATE INDEX sf_t_g ON sf_t (g)",
    """CREATE FUNCTION sf_row() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_notify('sf_rows', NEW.id::text); RETURN NULL; END $$""",
    """CREATE FUNCTION sf_group() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE n bigint; s bigint;
    BEGIN
        SELECT count(*), sum(x) INTO n, s FROM sf_t WHERE g = NEW.g;
        PERFORM pg_notify('sf_groups', NEW.id || ' ' || NEW.g || ' ' || n || ' ' || s);
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER sf_row AFTER INSERT ON sf_t FOR EACH ROW EXECUTE FUNCTION sf_row()",
    "CREATE TRIGGER sf_group AFTER INSERT ON sf_t FOR EACH ROW EXECUTE FUNCTION sf_group()",
]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


class Arrivals:
    """First arrival time per key, from a subscriber thread."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def saw(self, key: int) -> None:
        now = time.perf_counter()
        with self.lock:
            self.first.setdefault(key, now)


def prefill(conn: psycopg.Connection, rows: int) -> None:
    with conn.cursor().copy("COPY sf_t (id, g, x) FROM STDIN") as cp:
        for i in range(rows):
            cp.write_row((i, i % GROUPS, i % 997))


def writer(
    conn: psycopg.Connection, first_id: int, n: int, interval: float, key: Callable[[int], int]
) -> dict[int, tuple[float, float]]:
    """n single-row INSERTs; key -> (sent, acknowledged)."""
    out: dict[int, tuple[float, float]] = {}
    for i in range(first_id, first_id + n):
        sent = time.perf_counter()
        conn.execute("INSERT INTO sf_t VALUES (%s, %s, %s)", [i, i % GROUPS, i % 997])
        acked = time.perf_counter()
        out[key(i)] = (sent, acked)
        time.sleep(interval)
    return out


def wait_all(arrivals: list[Arrivals], keys: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(keys <= a.first.keys() or a.error for a in arrivals):
            return
        time.sleep(0.05)


def figures(acks: dict[int, tuple[float, float]], arr: Arrivals) -> dict[str, Any]:
    lat = [(arr.first[k] - ack) * 1000 for k, (_, ack) in acks.items() if k in arr.first]
    return {
        "n": len(lat),
        "missing": len(acks) - len(lat),
        "p50": pct(lat, 0.5) if lat else None,
        "p99": pct(lat, 0.99) if lat else None,
        "max": max(lat) if lat else None,
    }


# -- Headwater -----------------------------------------------------------------------


def run_headwater(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET headwater.freshness_timeout = '600s'")
        c.execute(TABLE)
        prefill(c, args.rows)
        c.execute(f"CREATE MATERIALIZED VIEW sf_v AS {VIEW}")
        c.execute("INSERT INTO sf_t VALUES (-1, 0, 0)")
        t0 = time.perf_counter()
        c.execute("SELECT count(*) FROM sf_v").fetchall()  # the Spark stage is up
        common.log(f"Headwater: view current after {time.perf_counter() - t0:.1f}s")

    streams = {"table": Arrivals(), "view": Arrivals()}
    conns: list[psycopg.Connection] = []

    def subscribe(target: str, arr: Arrivals) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as s:
                conns.append(s)
                sql = f"COPY (SUBSCRIBE {target} WITH (SNAPSHOT = false)) TO STDOUT"
                with s.cursor().copy(sql) as cp:
                    arr.ready.set()
                    for data in cp:
                        for line in bytes(data).splitlines():
                            arr.saw(int(line.split(b"\t", 1)[0]))
        except psycopg.errors.QueryCanceled:
            pass
        except BaseException as e:
            arr.error = e
        finally:
            arr.ready.set()

    threads = [
        threading.Thread(target=subscribe, args=("sf_t", streams["table"]), daemon=True),
        threading.Thread(target=subscribe, args=("sf_v", streams["view"]), daemon=True),
    ]
    for t in threads:
        t.start()
    for a in streams.values():
        a.ready.wait(120)
    with psycopg.connect(dsn, autocommit=True) as w:

        def epoch(_: int) -> int:
            return int(w.info.parameter_status("headwater_epoch") or 0)

        writer(w, 1_000_000, args.warmup, args.interval / 1000, epoch)
        before = load()
        acks = writer(w, 2_000_000, args.inserts, args.interval / 1000, epoch)
        assert len(acks) == args.inserts, "two INSERTs shared an epoch"
    wait_all(list(streams.values()), set(acks), 120)
    after = load()
    for s in conns:
        with contextlib.suppress(Exception):
            s.cancel()
    for t in threads:
        t.join(30)
    for name, a in streams.items():
        if a.error:
            raise RuntimeError(f"Headwater {name} subscription failed: {a.error}")
    return {
        "table": figures(acks, streams["table"]),
        "view": figures(acks, streams["view"]),
        "insert_ms": statistics.median((ack - sent) * 1000 for sent, ack in acks.values()),
        "load": f"{before} -> {after}",
    }


# -- PostgreSQL ----------------------------------------------------------------------


def run_postgres(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(TABLE)
        prefill(c, args.rows)
        for sql in PG_TRIGGERS:
            c.execute(sql)
        c.execute("ANALYZE sf_t")

    streams = {"table": Arrivals(), "view": Arrivals()}
    stop = threading.Event()

    def listen(channel: str, arr: Arrivals) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as s:
                s.execute(f"LISTEN {channel}")
                arr.ready.set()
                while not stop.is_set():
                    for n in s.notifies(timeout=0.5):
                        arr.saw(int(n.payload.split(" ", 1)[0]))
        except BaseException as e:
            arr.error = e
        finally:
            arr.ready.set()

    threads = [
        threading.Thread(target=listen, args=("sf_rows", streams["table"]), daemon=True),
        threading.Thread(target=listen, args=("sf_groups", streams["view"]), daemon=True),
    ]
    for t in threads:
        t.start()
    for a in streams.values():
        a.ready.wait(60)
    with psycopg.connect(dsn, autocommit=True) as w:
        writer(w, 1_000_000, args.warmup, args.interval / 1000, lambda i: i)
        before = load()
        acks = writer(w, 2_000_000, args.inserts, args.interval / 1000, lambda i: i)
    wait_all(list(streams.values()), set(acks), 60)
    after = load()
    stop.set()
    for t in threads:
        t.join(30)
    for name, a in streams.items():
        if a.error:
            raise RuntimeError(f"PostgreSQL {name} listener failed: {a.error}")
    return {
        "table": figures(acks, streams["table"]),
        "view": figures(acks, streams["view"]),
        "insert_ms": statistics.median((ack - sent) * 1000 for sent, ack in acks.values()),
        "load": f"{before} -> {after}",
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=10_000, help="rows in the table first (10,000)")
    p.add_argument("--inserts", type=int, default=200, help="measured INSERTs (200)")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured INSERTs first (20)")
    p.add_argument("--interval", type=float, default=50.0, help="ms between INSERTs (50)")
    common.add_server_args(p)
    args = p.parse_args(argv)

    report = common.Report(
        title="SUBSCRIBE freshness: INSERT acknowledged -> change at the subscriber",
        params={
            "table_rows": f"{args.rows:,}",
            "inserts": args.inserts,
            "interval_ms": args.interval,
            "groups": GROUPS,
            "load_avg_1/5/15_at_start": load(),
        },
    )
    report.notes.append(
        "Headwater: COPY (SUBSCRIBE t | v WITH (SNAPSHOT = false)) TO STDOUT; PostgreSQL: "
        "LISTEN/NOTIFY from AFTER INSERT row triggers (the row's id; the group's count and "
        "sum recomputed in the trigger)"
    )
    report.notes.append("client and servers share this machine's CPUs")
    rows = [
        ("table", "p50"),
        ("table", "p99"),
        ("table", "max"),
        ("view", "p50"),
        ("view", "p99"),
        ("view", "max"),
    ]
    metrics = {
        (what, q): report.metric(
            f"{'table' if what == 'table' else 'aggregate view'} freshness {q}",
            "ms",
            higher_is_better=False,
        )
        for what, q in rows
    }
    m_insert = report.metric("INSERT latency p50", "ms", higher_is_better=False)
    for side, factory in common.sides(args):
        run = run_postgres if side == common.PG_SIDE else run_headwater
        common.log(f"{side}: starting")
        try:
            with factory() as dsn:
                report.servers[side] = common.server_version(dsn)
                result = run(dsn, args)
        except Exception as e:  # reported in the table
            common.log(f"{side} failed: {e}")
            for m in [*metrics.values(), m_insert]:
                m.errors[side] = str(e)
            continue
        for (what, q), m in metrics.items():
            value = result[what][q]
            if value is not None:
                m.values[side] = value
        m_insert.values[side] = result["insert_ms"]
        missing = {w: result[w]["missing"] for w in ("table", "view") if result[w]["missing"]}
        report.notes.append(
            f"{side}: load average (1/5/15 min) {result['load']} during the measured INSERTs"
            + (f"; changes never received: {missing}" if missing else "")
        )
    report.params["load_avg_1/5/15_at_end"] = load()
    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
