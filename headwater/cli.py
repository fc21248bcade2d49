"""The `headwater` command."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from headwater import __version__, status, verify
from headwater.server.settings import size_option

DESCRIPTION = """\
Headwater: a streaming SQL database that speaks the PostgreSQL wire protocol.

Connect with any PostgreSQL client once the server is up, for example:
    psql -h 127.0.0.1 -p 6544 -U headwater
`headwater status` shows its views, sinks and long work; its status page is at
http://127.0.0.1:9188/ (--metrics-address).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="headwater",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"headwater {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    start = sub.add_parser(
        "start",
        help="start a server in the foreground",
        description="Start a Headwater server in the foreground (Ctrl-C stops it). "
        "Data is kept in --data-dir: tables survive restarts and crashes.",
    )
    start.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data"),
        help="directory for the SlateDB store (default: ./data)",
    )
    start.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, loopback only)",
    )
    start.add_argument("--port", type=int, default=6544, help="TCP port (default: 6544)")
    start.add_argument(
        "--tls-cert", type=Path, help="TLS certificate (PEM); default: self-signed in --data-dir"
    )
    start.add_argument("--tls-key", type=Path, help="TLS private key (PEM) for --tls-cert")
    start.add_argument(
        "--no-tls", action="store_true", help="refuse TLS (SSLRequest is answered 'N')"
    )
    start.add_argument(
        "--hba",
        type=Path,
        help="pg_hba.conf-style rule file (default: trust on loopback, scram-sha-256 elsewhere)",
    )
    start.add_argument(
        "--min-free-space-mb",
        type=int,
        default=64,
        help="refuse writes (SQLSTATE 53100) while the data directory has less free space (64)",
    )
    start.add_argument(
        "--max-connections",
        type=int,
        default=100,
        help="client connections allowed at once, as PostgreSQL's max_connections (100)",
    )
    start.add_argument(
        "--max-message-size",
        type=size_option(10_000, 1 << 30),
        default="64MB",
        help="longest message a client may send (64MB; at most 1GB); COPY data may be larger",
    )
    start.add_argument(
        "--memory-limit",
        type=size_option(64 << 20),
        help="memory for tables and queries; beyond it they spill to --data-dir "
        "(SHOW work_mem; default: half the machine's memory)",
    )
    start.add_argument(
        "--spark-master",
        default="local[2]",
        help="Spark master for the materialized views' stage (local[2]; spark://host:7077)",
    )
    start.add_argument(
        "--spark-master-ui",
        metavar="URL",
        help="a spark:// master's web UI, whose workers the status page lists "
        "(default: http://MASTER-HOST:8080)",
    )
    start.add_argument(
        "--executor",
        default="auto",
        choices=["auto", "spark", "duckdb"],
        help="who runs the materialized views' maintenance: auto (bulk batches on Spark, "
        "small ones on DuckDB, all on DuckDB while Spark starts), spark (every batch as "
        "Spark jobs), duckdb (in the server); SHOW headwater.executor (auto)",
    )
    start.add_argument(
        "--spark-stall-timeout",
        default="120s",
        help="restart the materialized views' Spark stage (killing its JVM) when it has "
        "work and completes no batch for this long (120s)",
    )
    start.add_argument(
        "--retention",
        default="1h",
        help="history kept for AS OF and SUBSCRIBE ... AS OF (headwater.retention; 1h)",
    )
    start.add_argument(
        "--clock-tick",
        default="1s",
        help="while a materialized view has a temporal filter (now() in WHERE), close an "
        "empty epoch when none closed for this long, so its rows leave as time passes "
        "without writes (1s; 'off': only writes move its time)",
    )
    start.add_argument(
        "--metrics-address",
        default="127.0.0.1:9188",
        help="host:port serving Prometheus metrics at /metrics (127.0.0.1:9188; 'off': none)",
    )
    start.add_argument(
        "--metrics-port", type=int, help="the same on 127.0.0.1 (overrides --metrics-address)"
    )
    start.add_argument(
        "--object-store",
        metavar="s3://BUCKET/PREFIX",
        help="keep the database in this bucket (catalog, change log, sequences); --data-dir "
        "is then a cache that may start empty. Endpoint and credentials from AWS_ENDPOINT_URL, "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (AWS_ALLOW_HTTP=true for "
        "http://). One server per prefix: a second one fences the first, which stops",
    )
    start.add_argument(
        "--write-lock-timeout",
        default="30s",
        help="how long a write waits for another session's writing transaction or row lock "
        "before it fails with 55P03 (30s)",
    )
    start.add_argument(
        "--fsync",
        default="on",
        choices=["on", "off"],
        help="make each commit durable on disk before it is acknowledged, as PostgreSQL's "
        "fsync (on); off: commits survive a crash of the server, not of the machine",
    )
    start.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    status.add_parser(sub)
    verify.add_parser(sub)  # headwater verify VIEW (headwater/verify.py)
    args = parser.parse_args(argv)
    if args.command == "status":
        return status.run(args)
    if args.command == "verify":
        return verify.run(args)
    if args.command != "start":
        parser.print_help()
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from headwater.errors import SQLError
    from headwater.storage.object_store import check_reachable
    from headwater.storage.object_store import parse as parse_object_store

    object_store = None
    if args.object_store:
        try:
            object_store = parse_object_store(args.object_store)
            check_reachable(object_store)  # before the slow imports: a wrong setting fails fast
        except ValueError as e:
            print(f"headwater: {e}", file=sys.stderr)
            return 2
        except SQLError as e:
            _say_storage_error(e)
            return 1

    from headwater.server.instance import Config
    from headwater.server.metrics import parse_address
    from headwater.server.settings import seconds

    if args.metrics_address.lower() != "off":
        try:
            parse_address(args.metrics_address)
        except ValueError as e:
            print(f"headwater: {e}", file=sys.stderr)
            return 2

    config = Config(
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        tls=not args.no_tls,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        hba_file=args.hba,
        min_free_mb=args.min_free_space_mb,
        max_connections=args.max_connections,
        max_message_size=args.max_message_size,
        memory_limit=args.memory_limit,
        spark_master=args.spark_master,
        spark_master_ui=args.spark_master_ui,
        executor=args.executor,
        fsync=args.fsync == "on",
        write_lock_timeout=seconds(args.write_lock_timeout, "--write-lock-timeout"),
        spark_stall_timeout=seconds(args.spark_stall_timeout, "--spark-stall-timeout"),
        retention=seconds(args.retention, "headwater.retention"),
        clock_tick=(
            0.0 if args.clock_tick.lower() == "off" else seconds(args.clock_tick, "--clock-tick")
        ),
        metrics_address=(
            f"127.0.0.1:{args.metrics_port}"
            if args.metrics_port is not None
            else None
            if args.metrics_address.lower() == "off"
            else args.metrics_address
        ),
        object_store=object_store,
    )
    # The cycle collector's default thresholds (700, 10, 10) ran thousands of young
    # and a full collection every few large writes once a table's live rows were held
    # in Python (a full pass over 600 k rows ~120 ms, a third of a 4,000-row UPDATE:
    # issue 16); most of the server's objects die young or hold no cycle
    gc.set_threshold(*GC_THRESHOLDS)
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_serve(config))


GC_THRESHOLDS = (10_000, 20, 50)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop (libuv, in C) unless HW_EVENT_LOOP=asyncio."""
    if os.environ.get("HW_EVENT_LOOP", "uvloop") == "asyncio":
        return None
    import uvloop

    return uvloop.new_event_loop


def _say_storage_error(e: Exception) -> None:
    lines = [f"headwater: {e}"]
    for label in ("detail", "hint"):
        if getattr(e, label, None):
            lines.append(f"{label.upper()}: {getattr(e, label)}")
    print("\n".join(lines), file=sys.stderr)


async def _serve(config: object) -> int:
    from headwater.errors import SQLError
    from headwater.server.server import Server
    from headwater.storage.replica import keep_pandas_unimported
    from headwater.storage.slate import check_writable

    keep_pandas_unimported()

    try:
        check_writable(config.data_dir)  # type: ignore[attr-defined]  # read-only, full
        server = Server(config)  # type: ignore[arg-type]
    except (OSError, ValueError) as e:  # --hba rules, TLS certificate and key
        print(f"headwater: {e}", file=sys.stderr)
        return 1
    except SQLError as e:
        _say_storage_error(e)
        return 1
    try:
        await server.start()
    except SQLError as e:  # the data directory became unwritable meanwhile
        _say_storage_error(e)
        return 1
    except OSError as e:
        print(
            f"headwater: cannot listen on {config.host}:{config.port}: {e.strerror}. "  # type: ignore[attr-defined]
            "Is another server running? Choose another --port.",
            file=sys.stderr,
        )
        return 1
    print(
        f"headwater {__version__} ready: psql -h {config.host} -p {config.port} -U headwater",  # type: ignore[attr-defined]
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    serve = asyncio.create_task(server.serve_forever())
    fatal = asyncio.create_task(server.instance.stopping.wait())  # fenced by another server
    await asyncio.wait([asyncio.create_task(stop.wait()), fatal], return_when="FIRST_COMPLETED")
    serve.cancel()
    error = server.instance.fatal
    if error is not None:
        for conn in list(server.sessions.values()):
            conn.terminate(error)
    await server.stop()
    if error is not None:
        _say_storage_error(error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
