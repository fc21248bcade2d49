"""`headwater status`: a running server's views, sinks and long work, as tables.

It talks to the server only over the PostgreSQL protocol (psycopg), as any client
would, reading headwater_catalog.views, .sinks and .progress. Connection options
default as psql's would for Headwater: 127.0.0.1:6544, user headwater; a password
comes from PGPASSWORD or ~/.pgpass (libpq's usual places).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from headwater.client_options import add_connection_options
from headwater.server.slo import slo_text

VIEWS = (
    "SELECT schema || '.' || name, status, frontier, lag_epochs, lag_ms, executor,"
    " progress, progress_phase, freshness_target, slo_compliance, degraded_reason, error"
    " FROM headwater_catalog.views ORDER BY 1"
)
SINKS = (
    "SELECT schema || '.' || name, source, target_kind, status, epoch_written, lag_epochs,"
    " lag_ms, rows, error FROM headwater_catalog.sinks ORDER BY 1"
)
PROGRESS = (
    "SELECT kind, target, phase, done, total, unit, percent, detail, elapsed_s"
    " FROM headwater_catalog.progress ORDER BY id"
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        add_help=False,  # -h is the host, as psql's
        help="show a running server's views, sinks and long work",
        description="Connect to a running Headwater server (PostgreSQL protocol) and print "
        "its materialized views (frontier, lag, status, executor, backfill progress), its "
        "sinks (lag, rows, status) and the backfills and COPYs running now.",
    )
    add_connection_options(p)
    p.add_argument(
        "--connect-timeout", type=int, default=5, help="seconds to wait for the server (5)"
    )


def run(args: argparse.Namespace) -> int:
    import psycopg

    try:
        conn = psycopg.connect(
            host=args.host,
            port=args.port,
            user=args.user,
            dbname=args.dbname or args.user,
            connect_timeout=args.connect_timeout,
            autocommit=True,
            application_name="headwater status",
        )
    except psycopg.OperationalError as e:
        # libpq's first line ends with the cause: '... port 6544 failed: Connection refused'
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        reason = first.rsplit("failed: ", 1)[-1]
        print(
            f"headwater status: cannot connect to a server at {args.host}:{args.port} as "
            f"{args.user}: {reason}\nIs it running (`headwater start`)? "
            "Otherwise pass its --host/--port.",
            file=sys.stderr,
        )
        return 1
    try:
        with conn:
            views = conn.execute(VIEWS).fetchall()
            sinks = conn.execute(SINKS).fetchall()
            work = conn.execute(PROGRESS).fetchall()
    except psycopg.Error as e:
        print(f"headwater status: {e}", file=sys.stderr)
        return 1
    print(f"server {args.host}:{args.port}")
    print(f"\nmaterialized views ({len(views)})")
    print(
        table(
            ["view", "status", "frontier", "lag", "lag ms", "executor", "progress", "SLO"],
            [
                [
                    name,
                    status,
                    frontier,
                    lag,
                    None if ms is None else f"{ms:.0f}",
                    executor,
                    _progress(pct, phase),
                    slo_text(target, slo, why),
                ]
                for name, status, frontier, lag, ms, executor, pct, phase, target, slo, why, _ in (
                    views
                )
            ],
            right={2, 3, 4},
        )
    )
    for name, *_, error in views:
        if error:
            print(f"  {name}: {error}")
    print(f"\nsinks ({len(sinks)})")
    print(
        table(
            ["sink", "from", "into", "status", "epoch written", "lag", "lag ms", "rows"],
            [
                [name, src, kind, status, written, lag, None if ms is None else f"{ms:.0f}", n]
                for name, src, kind, status, written, lag, ms, n, _ in sinks
            ],
            right={4, 5, 6, 7},
        )
    )
    for name, *_, error in sinks:
        if error:
            print(f"  {name}: {error}")
    if work:
        print(f"\nrunning now ({len(work)})")
        for kind, target, phase, done, total, unit, pct, detail, elapsed in work:
            count = f"{done:,}" if total is None else f"{done:,}/{total:,}"
            extra = f" ({detail})" if detail else ""
            print(
                f"  {kind} {target}: {_progress(pct, phase)} {count} {unit}{extra}, {elapsed:.1f}s"
            )
    return 0


def _progress(percent: float | None, phase: str | None) -> str:
    if phase is None:
        return ""
    return phase if percent is None else f"{phase} {percent:.0f}%"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: set[int]) -> str:
    """psql's aligned format: ' a | b ' with a rule under the header."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        return "|".join(
            f" {v.rjust(w) if i in right else v.ljust(w)} "
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    out = [line(list(header)), "+".join("-" * (w + 2) for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return "\n".join(out)
