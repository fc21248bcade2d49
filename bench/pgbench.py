"""pgbench, PostgreSQL's own benchmark, on Headwater next to PostgreSQL 15.

`pgbench -i -s SCALE` (COPY ... FREEZE of 100,000 x SCALE accounts, primary keys),
then each built-in script for --seconds with --clients connections:

tpcb     the default TPC-B-like transaction: BEGIN; UPDATE accounts; SELECT;
         UPDATE tellers; UPDATE branches; INSERT history; END
simple   -N: BEGIN; UPDATE accounts; SELECT; INSERT history; END
select   -S: one SELECT of an account by its key

Reported: transactions per second and the average latency pgbench prints, with the
1-minute load average (client and servers share this machine's CPUs), and the
initialization's time. pgbench comes with PostgreSQL (`--pg-bin`). Connections are
not encrypted (PGSSLMODE=disable unless set: the PostgreSQL started here has no TLS).

    .venv/bin/python bench/pgbench.py
    .venv/bin/python bench/pgbench.py --clients 8 --seconds 20 --only tpcb,select
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from psycopg.conninfo import conninfo_to_dict

try:
    from bench import common
except ImportError:  # run as a script: bench/ is sys.path[0]
    import common  # type: ignore[no-redef]

SCRIPTS = {"tpcb": [], "simple": ["-N"], "select": ["-S"]}


def pgbench(exe: str, dsn: str, *args: str, timeout: float = 600) -> str:
    """pgbench's output (stdout then stderr); raises with its error when it fails."""
    p = dsn_parts(dsn)
    cmd = [exe, "-h", p["host"], "-p", p["port"], "-U", p["user"], *args, p["dbname"]]
    # no TLS: the PostgreSQL started here has none, and libpq would use Headwater's
    env = {**os.environ, "PGSSLMODE": os.environ.get("PGSSLMODE", "disable")}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)}: {out.stderr.strip()[-500:]}")
    return out.stdout + out.stderr


def dsn_parts(dsn: str) -> dict[str, str]:
    """host, port, user, dbname of a postgresql:// URL or a key=value DSN."""
    info = conninfo_to_dict(dsn)
    defaults = {"host": "127.0.0.1", "port": "5432", "user": "postgres", "dbname": "postgres"}
    return {k: str(info.get(k) or v) for k, v in defaults.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--only", default=",".join(SCRIPTS), help="scripts: " + ",".join(SCRIPTS))
    common.add_server_args(p)
    args = p.parse_args(argv)
    exe = str(common.find_pg_bin(args.pg_bin) / "pgbench")
    scripts = [s for s in args.only.split(",") if s]
    report = common.Report(
        title="pgbench",
        params={
            "scale": args.scale,
            "clients": args.clients,
            "seconds": args.seconds,
            "load_avg_at_start": common.load_avg(),
        },
    )
    report.notes.append("client and servers share this machine's CPUs")
    init = report.metric("pgbench -i (initialization)", "s", higher_is_better=False)
    metrics = {
        s: (
            report.metric(f"{s}: transactions/s", "1/s"),
            report.metric(f"{s}: latency average", "ms", higher_is_better=False),
        )
        for s in scripts
    }
    for side, server in common.sides(args):
        try:
            with server() as dsn:
                report.servers[side] = common.server_version(dsn)
                began = time.monotonic()
                pgbench(exe, dsn, "-i", "-s", str(args.scale), "-q")
                init.put(side, time.monotonic() - began)
                for s in scripts:
                    out = pgbench(
                        exe,
                        dsn,
                        "-c",
                        str(args.clients),
                        "-j",
                        str(min(args.clients, os.cpu_count() or 1)),
                        "-T",
                        f"{args.seconds:g}",
                        *SCRIPTS[s],
                    )
                    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))  # type: ignore[union-attr]
                    lat = float(re.search(r"latency average = ([\d.]+)", out).group(1))  # type: ignore[union-attr]
                    failed = re.search(r"number of failed transactions: (\d+)", out)
                    if failed and int(failed.group(1)):
                        report.notes.append(f"{side} {s}: {failed.group(1)} failed transactions")
                    metrics[s][0].put(side, tps)
                    metrics[s][1].put(side, lat)
                    common.log(
                        f"{side} {s}: {tps:,.1f} tps, {lat:.2f} ms (load {common.load_avg()})"
                    )
        except Exception as e:
            common.log(f"{side} failed: {type(e).__name__}: {e}")
            init.errors[side] = f"{type(e).__name__}: {e}"
    return common.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
