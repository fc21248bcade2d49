"""Write throughput, Headwater vs PostgreSQL 15, on the same data.

(a) COPY FROM STDIN (text format, psycopg) of N rows of
    (id bigint, name text, amount numeric(12,2), ts timestamp), generated in Python
    before the clock starts; rows/s from the start of COPY to its acknowledgement.
(b) Single-row INSERT transactions with C concurrent clients (autocommit, one row per
    statement, parameters bound; `--form orm`: a serial key returned and a created-at
    default, as ORMs insert; `--form orm-txn`: the same inside BEGIN ... COMMIT, as
    SQLAlchemy sessions and ActiveRecord send it; `--form orm-fk`: the ORM's INSERT into
    a table with a FOREIGN KEY to a 100-row parent; `--form orm-unique` / `orm-generated`:
    into a table with a unique index on lower(name) / a generated column; `--form
    update`: point UPDATEs by primary key of a 10,000-row table instead, as ORMs save a
    changed object; `--form update-unique`: the same into a table that also has such an
    index and a generated column; `--form upsert`: INSERT ... ON CONFLICT (id) DO
    UPDATE of keys of which half exist), for D
    seconds after a short warm-up; acknowledged
    INSERTs per second, plus per-statement latency and the CPU time the server's whole
    process tree spent per INSERT (user + system from /proc, measured while the clients
    are connected: the figure that load on the machine disturbs least).
(c) Multi-row INSERT ... VALUES: --values-statements statements of 1,000 rows of
    constants each (the same rows as COPY's, as literals), one after another from one
    client, in autocommit and inside BEGIN ... COMMIT (Headwater's autocommit INSERT
    of constants takes the batcher's fast path; in a block, the general one); rows/s.

Both results are checked with SELECT count(*) afterwards. Connections are not
encrypted unless --tls is given (the PostgreSQL the bench starts has no TLS; the
drivers would otherwise use TLS with Headwater only). Each run logs the load average.

    .venv/bin/python bench/write_throughput.py               # starts both servers
    .venv/bin/python bench/write_throughput.py --quick
    .venv/bin/python bench/write_throughput.py --repeat 3 --json /tmp/write.json
    .venv/bin/python bench/write_throughput.py --hw-dsn postgresql://headwater@127.0.0.1:6544/headwater
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

try:
    from bench import common
    from bench.reliability import listener_pid, port_of, process_tree
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]
    from reliability import listener_pid, port_of, process_tree  # type: ignore[no-redef]

COLUMNS = "id bigint, name text, amount numeric(12,2), ts timestamp"
# --form orm: what SQLAlchemy, Django and ActiveRecord send for a new object: a serial
# key and a created-at default, the key returned
ORM_COLUMNS = (
    "id bigserial PRIMARY KEY, name text, amount numeric(12,2), ts timestamp DEFAULT now()"
)
ORM_INSERT = "INSERT INTO {t} (name, amount) VALUES ($1, $2) RETURNING id"
# --form orm-fk: the same into a table whose rows belong to a parent (a FOREIGN KEY to
# one of FK_PARENTS rows), as most of an application's tables do
ORM_FK_INSERT = "INSERT INTO {t} (parent_id, name, amount) VALUES ($3, $1, $2) RETURNING id"
FK_PARENTS = 100
# --form orm-unique: the ORM's INSERT into a table whose name is unique case-insensitively
# (CREATE UNIQUE INDEX ... (lower(name))), each INSERT a new name; --form orm-generated:
# into a table with a generated column (amount * 2) STORED. Headwater's fast INSERT path
# has DuckDB compute the generated values, and Python the index keys
# (server/generated.py, server/fast_index_keys.py)
GENERATED_COLUMN = ", total numeric(14,2) GENERATED ALWAYS AS (amount * 2) STORED"
# --form update-unique: --form update's UPDATE of a table that also has a unique index on
# lower(name) and a generated column computed from name: point writes, as they set
# neither (server/point_writes.py `computed_inputs`)
UPDATE_UNIQUE_EXTRA = ", slug text GENERATED ALWAYS AS (lower(name)) STORED"
# --form upsert: an ORM's upsert (Rails upsert, SQLAlchemy on_conflict_do_update) of keys
# spread over 2 x UPDATE_ROWS: about half insert, half update (server/batcher.py `_upsert`)
UPSERT_SQL = (
    "INSERT INTO {t} AS t (id, name, amount, n) VALUES ($1, $2, $3, 1)"
    " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, amount = EXCLUDED.amount,"
    " n = t.n + 1"
)
# --form update: an ORM's save of a changed object plus a counter, by primary key, over
# UPDATE_ROWS rows (server/point_writes.py); the counters' sum checks the acks
UPDATE_COLUMNS = "id bigint PRIMARY KEY, name text, amount numeric(12,2), n bigint"
UPDATE_SQL = "UPDATE {t} SET amount = $1, n = n + 1 WHERE id = $2"
# --form balance: the same table's numeric(12,2) column moved by an amount (a balance, a
# stock level): numeric arithmetic in a point write (server/point_writes.py)
BALANCE_SQL = "UPDATE {t} SET amount = amount + $1, n = n + 1 WHERE id = $2"
UPDATE_ROWS = 10_000


def update_sql(form: str) -> str:
    """The point UPDATE of --form update, update-unique or balance."""
    return BALANCE_SQL if form == "balance" else UPDATE_SQL


# --form update-by: the same by a UNIQUE column that is not the key (a session token, an
# email): server/scanned_writes.py, no write lock (PostgreSQL: its unique index)
UPDATE_BY_COLUMNS = "id bigint PRIMARY KEY, name text UNIQUE, amount numeric(12,2), n bigint"
UPDATE_BY_SQL = "UPDATE {t} SET amount = $1, n = n + 1 WHERE name = $2"


def update_key(i: int) -> int:
    """A key spread over the table for the i-th statement of a client."""
    return 1 + (i * 2654435761) % UPDATE_ROWS


TS_BASE = dt.datetime(2024, 1, 1)
TLS = False  # --tls: the drivers' default (TLS when the server offers it)


def server_cpu(dsn: str) -> float:
    """CPU seconds (user + system) of the server listening for `dsn` and its descendants,
    threads included (0 when it does not run on this machine)."""
    try:
        root = listener_pid(port_of(dsn))
    except Exception:
        return 0.0
    ticks = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True, **({} if TLS else {"sslmode": "disable"}))


# --- data -----------------------------------------------------------------------------


def copy_chunks(rows: int, chunk_bytes: int = 1 << 20, seed: int = 42) -> list[bytes]:
    """COPY text-format rows, pre-encoded in ~chunk_bytes pieces."""
    rng = random.Random(seed)
    names = [f"customer_{rng.randrange(1 << 40):x}" for _ in range(1024)]
    chunks: list[bytes] = []
    buf: list[str] = []
    size = 0
    for i in range(1, rows + 1):
        cents = rng.randrange(100_000_000_000)
        ts = TS_BASE + dt.timedelta(
            seconds=rng.randrange(86400 * 365), microseconds=rng.randrange(1_000_000)
        )
        line = f"{i}\t{names[i & 1023]}\t{cents // 100}.{cents % 100:02d}\t{ts.isoformat(' ')}\n"
        buf.append(line)
        size += len(line)
        if size >= chunk_bytes:
            chunks.append("".join(buf).encode())
            buf, size = [], 0
    if buf:
        chunks.append("".join(buf).encode())
    return chunks


def table_name(kind: str) -> str:
    return f"bench_{kind}_{os.getpid()}_{int(time.time()) % 100000}"


def count_rows(dsn: str, table: str) -> int:
    with connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else -1


def create_table(dsn: str, table: str, columns: str = COLUMNS) -> None:
    with connect(dsn) as conn:
        conn.execute(f"CREATE TABLE {table} ({columns})")


def drop_table(dsn: str, table: str) -> None:
    try:
        with connect(dsn) as conn:
            conn.execute(f"DROP TABLE {table}")
    except psycopg.Error as exc:
        common.log(f"drop {table} failed: {exc}")


# --- (a) COPY -------------------------------------------------------------------------


def bench_copy(dsn: str, chunks: list[bytes], rows: int) -> float:
    table = table_name("copy")
    create_table(dsn, table)
    try:
        with connect(dsn) as conn, conn.cursor() as cur:
            t0 = time.perf_counter()
            with cur.copy(f"COPY {table} (id, name, amount, ts) FROM STDIN") as copy:
                for chunk in chunks:
                    copy.write(chunk)
            elapsed = time.perf_counter() - t0
        n = count_rows(dsn, table)
        if n != rows:
            raise AssertionError(f"COPY sent {rows} rows but count(*) = {n}")
        return rows / elapsed
    finally:
        drop_table(dsn, table)


# --- (c) multi-row INSERT ... VALUES ------------------------------------------------------

VALUES_ROWS = 1000  # rows per INSERT ... VALUES statement


def values_statements(table: str, statements: int) -> list[str]:
    rng = random.Random(7)
    out = []
    for s in range(statements):
        rows = []
        for i in range(VALUES_ROWS):
            n = s * VALUES_ROWS + i
            ts = TS_BASE + dt.timedelta(seconds=n)
            amount = f"{rng.randint(0, 10**8) / 100:.2f}"
            rows.append(f"({n}, 'name {n} ü', {amount}, '{ts:%Y-%m-%d %H:%M:%S}')")
        out.append(f"INSERT INTO {table} (id, name, amount, ts) VALUES {', '.join(rows)}")
    return out


def bench_values(dsn: str, statements: int, block: bool) -> float:
    table = table_name("values")
    create_table(dsn, table)
    try:
        sqls = values_statements(table, statements)
        with connect(dsn) as conn:
            t0 = time.perf_counter()
            for sql in sqls:
                if block:
                    with conn.transaction():
                        conn.execute(sql)
                else:
                    conn.execute(sql)
            elapsed = time.perf_counter() - t0
        n = count_rows(dsn, table)
        if n != statements * VALUES_ROWS:
            raise AssertionError(f"INSERT sent {statements * VALUES_ROWS} rows, count(*) = {n}")
        return n / elapsed
    finally:
        drop_table(dsn, table)


# --- (b) concurrent single-row INSERTs -------------------------------------------------

Insert = Callable[[int, str, Decimal, dt.datetime], Awaitable[Any]]


async def _connect_asyncpg(
    dsn: str, table: str, form: str = "plain"
) -> tuple[Insert, Callable[[], Awaitable[None]]]:
    import asyncpg

    conn = await asyncpg.connect(**common.asyncpg_kwargs(dsn), **({} if TLS else {"ssl": False}))
    sql = f"INSERT INTO {table} (id, name, amount, ts) VALUES ($1, $2, $3, $4)"
    orm_sql = (ORM_FK_INSERT if form == "orm-fk" else ORM_INSERT).format(t=table)
    point_sql = update_sql(form).format(t=table)
    update_by_sql = UPDATE_BY_SQL.format(t=table)
    upsert_sql = UPSERT_SQL.format(t=table)

    async def insert(i: int, name: str, amount: Decimal, ts: dt.datetime) -> Any:
        if form == "plain":
            return await conn.execute(sql, i, name, amount, ts)
        if form in ("upsert", "upsert-txn"):
            async with _in_transaction(conn, form):
                return await conn.execute(upsert_sql, 1 + i % (2 * UPDATE_ROWS), name, amount)
        if form in ("update", "update-unique", "balance"):
            return await conn.execute(point_sql, amount, update_key(i))
        if form == "update-by":
            return await conn.execute(update_by_sql, amount, f"row {update_key(i)}")
        if form == "orm-fk":
            return await conn.fetchval(orm_sql, name, amount, 1 + i % FK_PARENTS)
        if form == "orm-unique":
            return await conn.fetchval(orm_sql, f"User{i}@X.com", amount)
        async with _in_transaction(conn, form):
            return await conn.fetchval(orm_sql, name, amount)

    return insert, conn.close


async def _connect_psycopg(
    dsn: str, table: str, form: str = "plain"
) -> tuple[Insert, Callable[[], Awaitable[None]]]:
    conn = await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, **({} if TLS else {"sslmode": "disable"})
    )
    sql = f"INSERT INTO {table} (id, name, amount, ts) VALUES (%s, %s, %s, %s)"
    orm_sql = ORM_INSERT.format(t=table).replace("$1", "%s").replace("$2", "%s")
    fk_sql = ORM_FK_INSERT.format(t=table).replace("$3, $1, $2", "%s, %s, %s")
    point_sql = update_sql(form).format(t=table).replace("$1", "%s").replace("$2", "%s")
    update_by_sql = UPDATE_BY_SQL.format(t=table).replace("$1", "%s").replace("$2", "%s")
    upsert_sql = UPSERT_SQL.format(t=table)
    for n in (1, 2, 3):
        upsert_sql = upsert_sql.replace(f"${n}", "%s")

    async def insert(i: int, name: str, amount: Decimal, ts: dt.datetime) -> Any:
        if form == "plain":
            return await conn.execute(sql, (i, name, amount, ts))
        if form in ("upsert", "upsert-txn"):
            async with _in_transaction(conn, form):
                return await conn.execute(upsert_sql, (1 + i % (2 * UPDATE_ROWS), name, amount))
        if form in ("update", "update-unique", "balance"):
            return await conn.execute(point_sql, (amount, update_key(i)))
        if form == "update-by":
            return await conn.execute(update_by_sql, (amount, f"row {update_key(i)}"))
        if form == "orm-fk":
            return await (await conn.execute(fk_sql, (1 + i % FK_PARENTS, name, amount))).fetchone()
        if form == "orm-unique":
            return await (await conn.execute(orm_sql, (f"User{i}@X.com", amount))).fetchone()
        async with _in_transaction(conn, form):
            return await (await conn.execute(orm_sql, (name, amount))).fetchone()

    return insert, conn.close


def _in_transaction(conn: Any, form: str) -> Any:
    """The driver's BEGIN ... COMMIT around an `orm-txn` INSERT or an `upsert-txn`;
    nothing for the others."""
    return conn.transaction() if form.endswith("-txn") else contextlib.nullcontext()


async def _insert_run(
    dsn: str,
    table: str,
    clients: int,
    duration: float,
    warmup: float,
    driver: str,
    form: str = "plain",
) -> tuple[int, int, list[float], float]:
    """Returns (acks inside the measured window, all acks, window latencies in s, the
    server's CPU seconds over the window)."""
    opener = _connect_asyncpg if driver == "asyncpg" else _connect_psycopg
    conns = await asyncio.gather(*(opener(dsn, table, form) for _ in range(clients)))
    t_start = time.perf_counter() + 0.05
    t_measure = t_start + warmup
    t_end = t_measure + duration
    cpu: list[float] = []

    async def watch() -> None:  # the server's CPU time at the window's ends
        for t in (t_measure, t_end):
            await asyncio.sleep(max(0.0, t - time.perf_counter()))
            cpu.append(server_cpu(dsn))

    async def worker(cid: int, insert: Insert) -> tuple[int, int, list[float]]:
        rng = random.Random(cid)
        in_window = total = 0
        lat: list[float] = []
        seq = 0
        await asyncio.sleep(max(0.0, t_start - time.perf_counter()))
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                break
            seq += 1
            await insert(
                cid * 1_000_000_000 + seq,
                f"client_{cid}",
                Decimal(rng.randrange(100_000_000)) / 100,
                TS_BASE + dt.timedelta(microseconds=rng.randrange(10**12)),
            )
            t1 = time.perf_counter()
            total += 1
            if t0 >= t_measure and t1 <= t_end:
                in_window += 1
                lat.append(t1 - t0)
        return in_window, total, lat

    try:
        watcher = asyncio.ensure_future(watch())
        results = await asyncio.gather(*(worker(i, ins) for i, (ins, _) in enumerate(conns)))
        await watcher
    finally:
        await asyncio.gather(*(close() for _, close in conns), return_exceptions=True)
    lat_all = sorted(x for r in results for x in r[2])
    window_cpu = cpu[1] - cpu[0] if len(cpu) == 2 else 0.0
    return sum(r[0] for r in results), sum(r[1] for r in results), lat_all, window_cpu


def bench_insert(
    dsn: str, clients: int, duration: float, warmup: float, driver: str, form: str = "plain"
) -> tuple[float, float, float, float]:
    """Returns (acknowledged INSERT tps, p50 ms, p99 ms, server CPU ms per INSERT)."""
    table = table_name("insert")
    columns = {
        "plain": COLUMNS,
        "update": UPDATE_COLUMNS,
        "balance": UPDATE_COLUMNS,
        "update-by": UPDATE_BY_COLUMNS,
        "update-unique": UPDATE_COLUMNS + UPDATE_UNIQUE_EXTRA,
        "upsert": UPDATE_COLUMNS,
        "upsert-txn": UPDATE_COLUMNS,
    }.get(form, ORM_COLUMNS)
    updates = form in ("update", "balance", "update-by", "update-unique", "upsert", "upsert-txn")
    parent = f"{table}_parent"
    if form == "orm-fk":
        create_table(dsn, parent, "id bigint PRIMARY KEY, name text")
        with connect(dsn) as c:
            c.execute(
                f"INSERT INTO {parent} SELECT g, 'parent ' || g"
                f" FROM generate_series(1, {FK_PARENTS}) AS g"
            )
        columns += f", parent_id bigint NOT NULL REFERENCES {parent}"
    if form == "orm-generated":
        columns += GENERATED_COLUMN
    create_table(dsn, table, columns)
    if form in ("orm-unique", "update-unique"):
        with connect(dsn) as c:
            c.execute(f"CREATE UNIQUE INDEX {table}_lower ON {table} (lower(name))")
    if updates:
        with connect(dsn) as c:
            c.execute(
                f"INSERT INTO {table} SELECT g, 'row ' || g, 0, 0"
                f" FROM generate_series(1, {UPDATE_ROWS}) AS g"
            )
    try:
        in_window, total, lat, cpu = asyncio.run(
            _insert_run(dsn, table, clients, duration, warmup, driver, form)
        )
        if updates:
            with connect(dsn) as c:
                row = c.execute(f"SELECT sum(n) FROM {table}").fetchone()
            if row is None or row[0] != total:
                raise AssertionError(f"{total} UPDATEs acknowledged but sum(n) = {row}")
        elif (n := count_rows(dsn, table)) != total:
            raise AssertionError(f"{total} INSERTs acknowledged but count(*) = {n}")
        if not lat:
            raise AssertionError("no INSERT completed inside the measured window")
        p50 = lat[len(lat) // 2] * 1000
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        return in_window / duration, p50, p99, 1000 * cpu / in_window
    finally:
        drop_table(dsn, table)
        if form == "orm-fk":
            drop_table(dsn, parent)


# --- main -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=None, help="COPY rows (default 1,000,000)")
    p.add_argument(
        "--duration", type=float, default=None, help="seconds of measured INSERTs (default 10)"
    )
    p.add_argument("--warmup", type=float, default=None, help="INSERT warm-up seconds (1)")
    p.add_argument("--clients", type=int, default=16, help="concurrent INSERT clients (16)")
    p.add_argument(
        "--driver",
        choices=["asyncpg", "psycopg"],
        default="asyncpg",
        help="client library for the INSERT test (asyncpg)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="100,000 rows, 3 s of INSERTs (defaults for a fast check)",
    )
    p.add_argument(
        "--only", choices=["copy", "insert", "values"], help="run one of the three tests"
    )
    p.add_argument(
        "--values-statements", type=int, default=20, help="1,000-row INSERT ... VALUES (20)"
    )
    p.add_argument(
        "--form",
        choices=[
            "plain",
            "orm",
            "orm-txn",
            "orm-fk",
            "orm-unique",
            "orm-generated",
            "update",
            "balance",
            "update-unique",
            "upsert",
            "upsert-txn",
            "update-by",
        ],
        default="plain",
        help="the INSERT: every column a parameter (plain), or an ORM's (a serial key"
        " returned, a created-at default: " + ORM_INSERT.format(t="t") + "), or that"
        " inside BEGIN ... COMMIT (orm-txn), or into a table with a FOREIGN KEY (orm-fk: "
        + ORM_FK_INSERT.format(t="t")
        + "); or, instead of INSERTs, point UPDATEs of a"
        f" {UPDATE_ROWS:,}-row table by key (update: "
        + UPDATE_SQL.format(t="t")
        + "; balance: "
        + BALANCE_SQL.format(t="t")
        + ") or by a"
        " UNIQUE column (update-by: " + UPDATE_BY_SQL.format(t="t") + ")",
    )
    p.add_argument("--tls", action="store_true", help="let the drivers use TLS where offered")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each test per server; the median is reported (1)",
    )
    common.add_server_args(p)
    args = p.parse_args(argv)
    global TLS
    TLS = args.tls
    rows = args.rows if args.rows is not None else (100_000 if args.quick else 1_000_000)
    duration = args.duration if args.duration is not None else (3.0 if args.quick else 10.0)
    warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 1.0)

    report = common.Report(
        title="Write throughput",
        params={
            "copy_rows": f"{rows:,}",
            "insert_clients": args.clients,
            "insert_seconds": duration,
            "driver": args.driver,
            "repeat": args.repeat,
            "tls": args.tls,
            "load_avg_at_start": common.load_avg(),
        },
    )
    report.notes.append("client and server share this machine's CPUs")
    m_copy = report.metric("COPY FROM STDIN", "rows/s")
    form = {
        "orm": " (ORM form)",
        "orm-txn": " (ORM form, in BEGIN ... COMMIT)",
        "orm-fk": " (ORM form, a FOREIGN KEY to a parent)",
    }.get(args.form, "")
    if args.form in ("update", "update-unique", "balance"):
        form = f" (point UPDATE by key instead: {update_sql(args.form).format(t='t')})"
    if args.form == "update-by":
        form = f" (UPDATE by a UNIQUE column instead: {UPDATE_BY_SQL.format(t='t')})"
    if args.form in ("upsert", "upsert-txn"):
        form = " (INSERT ... ON CONFLICT (id) DO UPDATE instead, half of them updates)"
        form = form[:-1] + ", each in BEGIN ... COMMIT)" if args.form == "upsert-txn" else form
    m_tps = report.metric(f"INSERT x{args.clients} clients{form}", "tx/s")
    m_p50 = report.metric("INSERT latency p50", "ms", higher_is_better=False)
    m_p99 = report.metric("INSERT latency p99", "ms", higher_is_better=False)
    m_cpu = report.metric("INSERT: server CPU per INSERT", "ms", higher_is_better=False)
    m_values = {
        block: report.metric(
            f"INSERT VALUES x{VALUES_ROWS} rows, {'in BEGIN' if block else 'autocommit'}", "rows/s"
        )
        for block in (False, True)
    }

    chunks: list[bytes] = []
    if args.only in (None, "copy"):
        t0 = time.perf_counter()
        chunks = copy_chunks(rows)
        common.log(
            f"generated {rows:,} rows ({sum(map(len, chunks)) / 1e6:.1f} MB) in "
            f"{time.perf_counter() - t0:.1f}s"
        )

    for side, server in common.sides(args):
        try:
            with server() as dsn:
                report.servers[side] = f"{common.server_version(dsn)} at {dsn}"
                if args.only in (None, "copy"):
                    try:
                        runs = []
                        for k in range(args.repeat):
                            common.log(f"{side}: COPY {rows:,} rows (run {k + 1})")
                            runs.append(bench_copy(dsn, chunks, rows))
                            common.log(f"{side}: COPY {runs[-1]:,.0f} rows/s")
                        m_copy.values[side] = statistics.median(runs)
                    except Exception as exc:  # report and go on with the next test
                        m_copy.errors[side] = f"{type(exc).__name__}: {exc}"
                if args.only in (None, "values"):
                    for block, metric in m_values.items():
                        try:
                            vals = []
                            for _ in range(args.repeat):
                                vals.append(bench_values(dsn, args.values_statements, block))
                            metric.values[side] = statistics.median(vals)
                            common.log(
                                f"{side}: {metric.name} {metric.values[side]:,.0f} rows/s "
                                f"(load {common.load_avg()})"
                            )
                        except Exception as exc:
                            metric.errors[side] = f"{type(exc).__name__}: {exc}"
                if args.only in (None, "insert"):
                    try:
                        results = []
                        for k in range(args.repeat):
                            common.log(
                                f"{side}: INSERT, {args.clients} clients, "
                                f"{duration:g}s (run {k + 1})"
                            )
                            results.append(
                                bench_insert(
                                    dsn,
                                    args.clients,
                                    duration,
                                    warmup,
                                    args.driver,
                                    args.form,
                                )
                            )
                            tps, _, _, ms = results[-1]
                            common.log(
                                f"{side}: INSERT {tps:,.0f} tx/s, server CPU {ms:.2f} ms per "
                                f"INSERT (load {common.load_avg()})"
                            )
                        tps, p50, p99, cpu_ms = (
                            statistics.median(col) for col in zip(*results, strict=True)
                        )
                        m_tps.values[side], m_p50.values[side], m_p99.values[side] = (tps, p50, p99)
                        if cpu_ms:
                            m_cpu.values[side] = cpu_ms
                    except Exception as exc:
                        m_tps.errors[side] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # the server itself failed
            report.servers[side] = "failed to start"
            for m in (m_copy, m_tps, *m_values.values()):
                m.errors.setdefault(side, f"{type(exc).__name__}: {exc}")

    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
