"""Reliability, Headwater next to PostgreSQL 15 on the same workload, and the long modes.

load   --connections (200) clients: 3 in 4 run point reads, 1 in 4 single-row INSERTs,
       while one more client COPYs --copy-rows rows into another table. Reported: read
       p50/p99, reads/s and INSERTs/s during the COPY, COPY rows/s, and the peak memory of
       the server's whole process tree (proportional set size, so PostgreSQL's shared
       buffers count once; Headwater's tree includes Spark's JVM when one runs).
crash  --writers clients insert rows for --crash-seconds; the server's whole process
       tree gets SIGKILL mid-write; it is started again on the same data. Reported: the
       time until it answers again, acknowledged rows missing (must be 0) and rows whose
       acknowledgement was lost in flight (present, never acknowledged: allowed).
long   the reliability tests in their long modes, each a pytest run of its own:
       SIGKILL cycles with views and SUBSCRIBE (HW_KILL_CYCLES=--cycles), SIGKILL cycles
       under writes, protocol fuzzing (--fuzz-messages), differential SQL fuzzing against
       PostgreSQL 15 (--fuzz-seeds seeds x --fuzz-statements), and the load test.
       Prints pass/fail, duration and each test's own figures.

    .venv/bin/python bench/reliability.py                       # load + crash
    .venv/bin/python bench/reliability.py --only long           # about an hour
    .venv/bin/python bench/reliability.py --only load --connections 100 --copy-rows 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import asyncpg
import psycopg

try:
    from bench import common
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


# --- the server's processes -----------------------------------------------------------


def listener_pid(port: int) -> int:
    """The process listening on 127.0.0.1:port (the postmaster, or headwater)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(proc.name)
    raise LookupError(f"nothing listens on port {port}")


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(proc.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def tree_pss_mb(root: int) -> float:
    total = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total / 1024


def port_of(dsn: str) -> int:
    return int(psycopg.conninfo.conninfo_to_dict(dsn)["port"])


# --- load -----------------------------------------------------------------------------


async def _load(dsn: str, args: argparse.Namespace) -> dict[str, float]:
    kw = common.asyncpg_kwargs(dsn)
    admin = await asyncpg.connect(**kw)
    await admin.execute("DROP TABLE IF EXISTS rl_small, rl_bulk")
    await admin.execute("CREATE TABLE rl_small (k int PRIMARY KEY, v int)")
    await admin.execute("CREATE TABLE rl_bulk (id bigint, name text, amount numeric(12,2))")
    await admin.execute("INSERT INTO rl_small SELECT g, g FROM generate_series(1, 1000) g")
    conns = [await asyncpg.connect(**kw) for _ in range(args.connections)]
    root = listener_pid(port_of(dsn))
    peak = [tree_pss_mb(root)]
    latencies: list[float] = []
    acked: list[int] = []
    done = asyncio.Event()

    async def reader(c: asyncpg.Connection, i: int) -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            await c.fetchval("SELECT v FROM rl_small WHERE k = $1", i % 1000 + 1)
            latencies.append(time.perf_counter() - t0)

    async def writer(c: asyncpg.Connection, i: int) -> None:
        n = 0
        while not done.is_set():
            key = 10_000 + i * 1_000_000 + n
            await c.execute("INSERT INTO rl_small VALUES ($1, $2)", key, i)
            acked.append(key)
            n += 1

    async def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], await asyncio.to_thread(tree_pss_mb, root))
            await asyncio.sleep(0.25)

    def bulk_copy() -> float:
        rows = args.copy_rows
        data = "".join(f"{i}\tname{i}\t{i % 1000}.25\n" for i in range(rows))
        t0 = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as c:
            with c.cursor().copy("COPY rl_bulk FROM STDIN") as cp:
                buf = io.StringIO(data)
                while chunk := buf.read(1 << 20):
                    cp.write(chunk)
        return time.perf_counter() - t0

    async def copy_then_stop() -> float:
        await asyncio.sleep(1.0)  # the small queries are running when the COPY starts
        try:
            return await asyncio.to_thread(bulk_copy)
        finally:
            done.set()

    t0 = time.perf_counter()
    tasks = [reader(c, i) if i % 4 else writer(c, i) for i, c in enumerate(conns)]
    copy_s, *_ = await asyncio.gather(copy_then_stop(), watch(), *tasks)
    elapsed = time.perf_counter() - t0
    present = {r[0] for r in await admin.fetch("SELECT k FROM rl_small WHERE k >= 10000")}
    missing = len(set(acked) - present)
    bulk = await admin.fetchval("SELECT count(*) FROM rl_bulk")
    for c in [admin, *conns]:
        await c.close()
    if missing or bulk != args.copy_rows:
        raise AssertionError(f"{missing} acknowledged INSERTs missing, COPY kept {bulk} rows")
    return {
        "p50": 1000 * statistics.median(latencies),
        "p99": 1000 * pct(latencies, 0.99),
        "reads": len(latencies) / elapsed,
        "writes": len(acked) / elapsed,
        "copy": args.copy_rows / copy_s,
        "peak": peak[0],
    }


def run_load(args: argparse.Namespace) -> None:
    report = common.Report(
        title=f"{args.connections} connections of point reads and INSERTs during a bulk COPY",
        params={
            "connections": args.connections,
            "copy_rows": f"{args.copy_rows:,}",
            "load_avg_at_start": common.load_avg(),
        },
    )
    metrics = {
        "p50": report.metric("point read p50 during the COPY", "ms", higher_is_better=False),
        "p99": report.metric("point read p99 during the COPY", "ms", higher_is_better=False),
        "reads": report.metric("point reads/s", "1/s"),
        "writes": report.metric("single-row INSERTs/s", "1/s"),
        "copy": report.metric("COPY rows/s under that load", "rows/s"),
        "peak": report.metric("peak memory, server process tree (PSS)", "MB", False),
    }
    report.notes.append("client, both servers and the COPY share this machine's CPUs")
    limit = str(args.connections + 20)
    for side, factory in common.sides(
        args, [f"max_connections={limit}"], ["--max-connections", limit]
    ):
        common.log(f"load on {side}")
        try:
            with factory() as dsn:
                report.servers[side] = common.server_version(dsn)
                result = asyncio.run(_load(dsn, args))
        except Exception as e:
            common.log(f"{side} failed: {e}")
            for m in metrics.values():
                m.errors[side] = str(e)
            continue
        for key, m in metrics.items():
            m.values[side] = result[key]
    common.print_report(report)


# --- crash ----------------------------------------------------------------------------


async def _write_until(dsn: str, writers: int, seconds: float) -> tuple[set[int], set[int]]:
    """(acknowledged ids, ids whose INSERT was sent), writers running until the kill."""
    kw = common.asyncpg_kwargs(dsn)
    acked: set[int] = set()
    sent: set[int] = set()
    stop = time.monotonic() + seconds

    async def writer(w: int) -> None:
        c = await asyncpg.connect(**kw)
        n = 0
        try:
            while True:
                key = w * 10_000_000 + n
                n += 1
                sent.add(key)
                await c.execute("INSERT INTO rl_crash VALUES ($1, $2)", key, w)
                acked.add(key)
                if time.monotonic() > stop + 60:
                    return
        except Exception:  # the server went away (asyncpg reports that in several ways)
            return

    async def killer() -> None:
        await asyncio.sleep(seconds)
        root = listener_pid(port_of(dsn))
        for pid in process_tree(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    await asyncio.gather(killer(), *(writer(w) for w in range(writers)))
    return acked, sent


def _restart(cmdline: list[str], user: str | None, log: Path) -> subprocess.Popen[bytes]:
    prefix = ["runuser", "-u", user, "--"] if user and os.geteuid() == 0 else []
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*prefix, *cmdline],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _crash_one(dsn: str, side: str, args: argparse.Namespace) -> dict[str, float]:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS rl_crash")
        c.execute("CREATE TABLE rl_crash (id bigint PRIMARY KEY, w int)")
    root = listener_pid(port_of(dsn))
    cmdline = Path(f"/proc/{root}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    cwd = os.readlink(f"/proc/{root}/cwd")
    acked, sent = asyncio.run(_write_until(dsn, args.writers, args.crash_seconds))
    common.log(f"{side}: killed with {len(acked)} acknowledged INSERTs")
    user = "postgres" if side == common.PG_SIDE else None
    # PostgreSQL refuses to start while its old postmaster's pid exists (until it is reaped)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{root}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.perf_counter()
    with contextlib.chdir(cwd):
        proc = _restart([a.decode() for a in cmdline], user, Path("/tmp/hw-bench-crash.log"))
    try:
        common.wait_ready(dsn, args.server_timeout, alive=lambda: proc.poll() is None)
        ready = time.perf_counter() - t0
        with psycopg.connect(dsn, autocommit=True) as c:
            present = {r[0] for r in c.execute("SELECT id FROM rl_crash").fetchall()}
    finally:
        if side != common.PG_SIDE:  # PostgreSQL's context stops it with pg_ctl
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    return {
        "acked": len(acked),
        "lost": len(acked - present),
        "in_flight": len((present - acked) & sent),
        "phantom": len(present - sent),
        "ready": ready,
    }


def run_crash(args: argparse.Namespace) -> None:
    report = common.Report(
        title="SIGKILL of the whole server under concurrent single-row INSERTs, then restart",
        params={
            "writers": args.writers,
            "seconds_before_kill": args.crash_seconds,
            "load_avg_at_start": common.load_avg(),
        },
    )
    metrics = {
        "acked": report.metric("INSERTs acknowledged before the kill", "rows"),
        "lost": report.metric("acknowledged rows missing after restart", "rows", False),
        "in_flight": report.metric("rows kept whose ack was lost in flight", "rows", False),
        "phantom": report.metric("rows never sent but present", "rows", False),
        "ready": report.metric("restart until the first answer", "s", False),
    }
    report.notes.append(
        "PostgreSQL: every postgres process killed, the postmaster started again with its "
        "command line (WAL replay); Headwater: server and JVM killed, `headwater start` again"
    )
    for side, factory in common.sides(args):
        common.log(f"crash on {side}")
        try:
            with factory() as dsn:
                report.servers[side] = common.server_version(dsn)
                result = _crash_one(dsn, side, args)
        except Exception as e:
            common.log(f"{side} failed: {e}")
            for m in metrics.values():
                m.errors[side] = str(e)
            continue
        for key, m in metrics.items():
            m.values[side] = result[key]
    common.print_report(report)


# --- long modes -----------------------------------------------------------------------


def _figures(output: str) -> list[str]:
    """The lines a reliability test prints about itself (`-s`)."""
    keep = re.compile(r"^(load:|fuzz:|sql fuzz:|durability:|\{'cycles')")
    return [line.strip() for line in output.splitlines() if keep.match(line.strip())]


def run_long(args: argparse.Namespace) -> bool:
    cycles, msgs = str(args.cycles), str(args.fuzz_messages)
    runs: list[tuple[str, str, dict[str, str]]] = [
        (
            "crash cycles with views + SUBSCRIBE",
            "tests/test_crash_views.py",
            {"HW_KILL_CYCLES": cycles},
        ),
        ("crash cycles under writes", "tests/test_durability.py", {"HW_KILL_CYCLES": cycles}),
        ("protocol fuzzing", "tests/test_fuzz_protocol.py", {"HW_FUZZ_MESSAGES": msgs}),
        ("load", "tests/test_load.py", {"HW_LOAD_SECONDS": "30"}),
    ]
    for seed in range(args.fuzz_seeds):
        runs.append(
            (
                f"SQL fuzzing, seed {seed}",
                "tests/test_fuzz_sql.py",
                {"HW_SEED": str(seed), "HW_FUZZ_STATEMENTS": str(args.fuzz_statements)},
            )
        )
    if args.long_tests:
        wanted = args.long_tests.split(",")
        runs = [r for r in runs if any(w in r[1] for w in wanted)]
    ok = True
    print("\nlong modes (pytest, each on servers of its own)")
    for name, path, env in runs:
        common.log(f"long mode: {name} ({' '.join(f'{k}={v}' for k, v in env.items())})")
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-s", "-p", "no:cacheprovider", path],
            cwd=common.REPO,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
        )
        passed = proc.returncode == 0
        ok &= passed
        print(
            f"  {name}: {'passed' if passed else 'FAILED'} in {time.monotonic() - t0:.0f}s "
            f"({' '.join(f'{k}={v}' for k, v in env.items())}), load {common.load_avg()}"
        )
        for line in _figures(proc.stdout):
            print(f"      {line}")
        if not passed:
            print("\n".join(f"      | {x}" for x in proc.stdout.splitlines()[-30:]))
        sys.stdout.flush()
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--only", default="load,crash", help="sections: load,crash,long")
    p.add_argument("--connections", type=int, default=200)
    p.add_argument("--copy-rows", type=int, default=500_000)
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--crash-seconds", type=float, default=10.0)
    p.add_argument("--cycles", type=int, default=100, help="SIGKILL cycles in the long mode")
    p.add_argument("--fuzz-messages", type=int, default=1_000_000)
    p.add_argument("--fuzz-seeds", type=int, default=5)
    p.add_argument("--fuzz-statements", type=int, default=4000)
    p.add_argument(
        "--long-tests",
        help="only these long-mode tests, e.g. crash_views,durability,fuzz_protocol,fuzz_sql,load",
    )
    common.add_server_args(p)
    args = p.parse_args(argv)
    sections = set(args.only.split(","))
    ok = True
    if "load" in sections:
        run_load(args)
    if "crash" in sections:
        run_crash(args)
    if "long" in sections:
        ok = run_long(args)
    return 0 if ok else 1


if __name__ == "__main__":
    threading.excepthook = lambda a: common.log(f"thread failed: {a.exc_value}")
    sys.exit(main())
