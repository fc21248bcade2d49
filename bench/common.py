"""Shared helpers for Headwater benchmarks.

Every benchmark prints its figures side by side for a PostgreSQL 15 server and a
Headwater server on the same data. By default it starts both servers itself, one
after the other, in temporary directories on free loopback ports:

* PostgreSQL: ``initdb`` + ``pg_ctl start`` (as the ``postgres`` OS user through
  ``runuser`` when running as root), default settings (fsync on, synchronous_commit on),
  listening on 127.0.0.1 only;
* Headwater: ``.venv/bin/headwater start --data-dir TMP --host 127.0.0.1 --port P``.

Either side can instead target a running server with a DSN (``--pg-dsn``/``--hw-dsn``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

REPO = Path(__file__).resolve().parent.parent
PG_SIDE = "PostgreSQL"
ServerFactory = Callable[[], contextlib.AbstractContextManager[str]]
HW_SIDE = "Headwater"


def _stat(pid: int | str) -> tuple[int, float]:
    """A process's parent pid and CPU seconds used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes() -> dict[int, tuple[int, float]]:
    """Every process now: pid -> (parent pid, CPU seconds used)."""
    out: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                out[int(d.name)] = _stat(d.name)
    return out


def tree_cpu(root: int, procs: dict[int, tuple[int, float]] | None = None) -> dict[int, float]:
    """CPU seconds (user + system) of `root` and every descendant, by pid."""
    procs = processes() if procs is None else procs
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, float] = {}
    todo = [root]
    while todo:
        p = todo.pop()
        if p in procs:
            out[p] = procs[p][1]
        todo += children.get(p, [])
    return out


def server_pid(dsn: str) -> int:
    """The pid of the process listening on the DSN's TCP port (this machine)."""
    port = int(str(conninfo_to_dict(dsn).get("port") or 5432))
    inodes: set[str] = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(f).read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            parts = ln.split()
            if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[3] == "0A":
                inodes.add(parts[9])
    holders = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            for fd in (d / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    holders.append(int(d.name))
                    break
        except OSError:
            continue
    if not holders:
        raise RuntimeError(f"no process listens on port {port} (is the server on this machine?)")
    parents = {}
    for p in holders:
        with contextlib.suppress(OSError, ValueError, IndexError):
            parents[p] = _stat(p)[0]
    tops = [p for p in holders if parents.get(p) not in holders]
    return tops[0] if tops else holders[0]


# CPU seconds of every process when the bench started, and the servers it measures
# by DSN (their process trees): see `neighbours`
_STARTED = (time.monotonic(), processes() if sys.platform == "linux" else {})
_MEASURED: set[int] = set()


def neighbours(share: float = 0.02) -> list[str]:
    """Processes that were running when the bench started and have used more than
    `share` of a core since: a server left running beside the bench (an idle
    Headwater's Spark JVM uses 4-7% of a core) lowers every figure on 2 cores
    (docs/engine.md (p)). The bench itself and the servers it measures are not."""
    began, before = _STARTED
    elapsed = time.monotonic() - began
    if not before or elapsed <= 0:
        return []
    now = processes()
    ours = {os.getpid()}
    for root in _MEASURED:
        ours |= set(tree_cpu(root, now))
    out: list[tuple[float, str]] = []
    for pid, (_, cpu) in now.items():
        if pid in ours or pid not in before:
            continue
        used = (cpu - before[pid][1]) / elapsed
        if used <= share:
            continue
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            text = cmd.decode(errors="replace").strip()
            if text:  # (kernel threads have none)
                out.append((used, f"pid {pid} {used:.0%} of a core: {text[:80]}"))
    return [text for _, text in sorted(out, reverse=True)]


def log(msg: str) -> None:
    """Progress line on stderr (stdout carries the results)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def asyncpg_kwargs(dsn: str) -> dict[str, Any]:
    """Connection keyword arguments for asyncpg from a libpq DSN (URI or key=value)."""
    params = conninfo_to_dict(dsn)
    out: dict[str, Any] = {}
    for src, dst in (
        ("host", "host"),
        ("user", "user"),
        ("password", "password"),
        ("dbname", "database"),
    ):
        if params.get(src):
            out[dst] = str(params[src])
    if params.get("port"):
        out["port"] = int(str(params["port"]))
    return out


def server_version(dsn: str) -> str:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "?"
    except psycopg.Error as exc:
        return f"? ({exc.__class__.__name__})"


def wait_ready(
    dsn: str,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
    describe: Callable[[], str] = lambda: "",
) -> None:
    """Wait until `dsn` accepts a connection and answers SELECT 1."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"server exited before accepting connections\n{describe()}")
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as conn:
                conn.execute("SELECT 1").fetchall()
                return
        except (psycopg.Error, OSError) as exc:
            last = exc
        time.sleep(0.25)
    raise TimeoutError(f"{dsn} not ready after {timeout:.0f}s: {last}\n{describe()}")


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"    {line}" for line in text[-lines:])


# --- PostgreSQL -----------------------------------------------------------------------


def find_pg_bin(explicit: str | None = None) -> Path:
    """Directory holding PostgreSQL 15's initdb/pg_ctl/postgres."""
    candidates = [explicit, os.environ.get("PG_BIN"), "/usr/lib/postgresql/15/bin"]
    which = shutil.which("pg_ctl")
    if which:
        candidates.append(str(Path(which).resolve().parent))
    for cand in candidates:
        if cand and (Path(cand) / "pg_ctl").exists() and (Path(cand) / "initdb").exists():
            return Path(cand)
    raise FileNotFoundError(
        "PostgreSQL 15 binaries not found (run scripts/setup.sh, or pass --pg-bin/PG_BIN)"
    )


@contextlib.contextmanager
def postgres_server(
    pg_bin: str | None = None,
    keep: bool = False,
    timeout: float = 60.0,
    settings: Sequence[str] = (),
) -> Iterator[str]:
    """Start a throwaway PostgreSQL 15 on 127.0.0.1 with default settings; yield its DSN."""
    bindir = find_pg_bin(pg_bin)
    tmp = Path(tempfile.mkdtemp(prefix="hw-bench-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data = tmp / "data"
    logfile = tmp / "postgres.log"
    port = free_port()
    opts = (
        f"-c listen_addresses=127.0.0.1 -c port={port} "
        f"-c unix_socket_directories={shlex.quote(str(tmp))}"
    ) + "".join(f" -c {shlex.quote(s)}" for s in settings)
    started = False
    try:
        log(f"initdb {data}")
        subprocess.run(
            [
                *prefix,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        log(f"starting PostgreSQL on 127.0.0.1:{port}")
        subprocess.run(
            [
                *prefix,
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(logfile),
                "-w",
                "-t",
                str(int(timeout)),
                "-o",
                opts,
                "start",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        started = True
        dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        wait_ready(dsn, timeout, describe=lambda: tail(logfile))
        yield dsn
    except subprocess.CalledProcessError as exc:
        err = exc.stderr.decode(errors="replace") if exc.stderr else ""
        raise RuntimeError(f"PostgreSQL failed to start: {exc}\n{err}\n{tail(logfile)}") from exc
    finally:
        if started:
            log("stopping PostgreSQL")
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                check=False,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        if keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# --- Headwater ------------------------------------------------------------------------


def headwater_command(explicit: str | None = None) -> list[str]:
    """How to run `headwater`: the given console script, else this interpreter's
    `-m headwater.cli` (a git worktree's copied .venv/bin/headwater starts the main
    checkout's interpreter, so a bench run there would measure other code)."""
    if explicit:
        if not Path(explicit).exists():
            raise FileNotFoundError(f"headwater not found at {explicit}")
        return [explicit]
    return [sys.executable, "-m", "headwater.cli"]


def _stop_process_group(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM the process group we started (its leader is `proc`), then SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log("headwater did not stop after SIGTERM: SIGKILL")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # children left behind, if any
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@contextlib.contextmanager
def headwater_server(
    hw_bin: str | None = None,
    keep: bool = False,
    timeout: float = 180.0,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Start `headwater start` on a fresh data dir and free port; yield its DSN."""
    exe = headwater_command(hw_bin)
    tmp = Path(tempfile.mkdtemp(prefix="hw-bench-hw-"))
    data = tmp / "data"
    logfile = tmp / "headwater.log"
    port = free_port()
    cmd = [*exe, "start", "--data-dir", str(data), "--host", "127.0.0.1", "--port", str(port)]
    cmd += extra_args
    log(f"starting Headwater: {shlex.join(cmd)} (log {logfile})")
    with open(logfile, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        dsn = f"postgresql://headwater@127.0.0.1:{port}/headwater"
        t0 = time.monotonic()
        wait_ready(dsn, timeout, alive=lambda: proc.poll() is None, describe=lambda: tail(logfile))
        log(f"Headwater accepts connections after {time.monotonic() - t0:.1f}s")
        yield dsn
    finally:
        log("stopping Headwater")
        _stop_process_group(proc)
        if keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def external_server(dsn: str, timeout: float = 30.0) -> Iterator[str]:
    wait_ready(dsn, timeout)
    with contextlib.suppress(RuntimeError, OSError, ValueError):  # (another machine's)
        _MEASURED.add(server_pid(dsn))
    yield dsn


def add_server_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("servers")
    g.add_argument("--pg-dsn", help="use this running PostgreSQL instead of starting one")
    g.add_argument("--hw-dsn", help="use this running Headwater instead of starting one")
    g.add_argument("--skip-pg", action="store_true", help="do not benchmark PostgreSQL")
    g.add_argument("--skip-hw", action="store_true", help="do not benchmark Headwater")
    g.add_argument("--pg-bin", help="PostgreSQL bin directory (default: 15's)")
    g.add_argument("--hw-bin", help="headwater executable (default: .venv/bin/headwater)")
    g.add_argument(
        "--server-timeout",
        type=float,
        default=180.0,
        help="seconds to wait for a started server to accept connections",
    )
    g.add_argument("--keep", action="store_true", help="keep the servers' temp dirs")
    g.add_argument("--json", metavar="PATH", help="also write the results as JSON")


def sides(
    args: argparse.Namespace, pg_settings: Sequence[str] = (), hw_args: Sequence[str] = ()
) -> list[tuple[str, ServerFactory]]:
    """(side name, server context factory) for each side to run, PostgreSQL first;
    pg_settings ("name=value") and hw_args apply to servers started here."""
    out: list[tuple[str, ServerFactory]] = []
    if not args.skip_pg:
        if args.pg_dsn:
            out.append((PG_SIDE, lambda: external_server(args.pg_dsn)))
        else:
            out.append(
                (
                    PG_SIDE,
                    lambda: postgres_server(
                        args.pg_bin, args.keep, args.server_timeout, pg_settings
                    ),
                )
            )
    if not args.skip_hw:
        if args.hw_dsn:
            out.append((HW_SIDE, lambda: external_server(args.hw_dsn)))
        else:
            out.append(
                (
                    HW_SIDE,
                    lambda: headwater_server(args.hw_bin, args.keep, args.server_timeout, hw_args),
                )
            )
    return out


# --- results --------------------------------------------------------------------------


@dataclass
class Metric:
    name: str
    unit: str
    higher_is_better: bool = True
    values: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    loads: dict[str, float] = field(default_factory=dict)  # 1-minute load when taken

    def put(self, side: str, value: float) -> None:
        """Record `side`'s figure with the machine's 1-minute load average now."""
        self.values[side] = value
        self.loads[side] = os.getloadavg()[0]


@dataclass
class Report:
    title: str
    params: dict[str, Any] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    servers: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def metric(self, name: str, unit: str, higher_is_better: bool = True) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        m = Metric(name, unit, higher_is_better)
        self.metrics.append(m)
        return m

    @property
    def failed(self) -> bool:
        return any(m.errors for m in self.metrics)


def fmt_value(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:,.1f}"
    return f"{v:,.2f}"


def print_report(
    report: Report,
    labels: Sequence[str] = (PG_SIDE, HW_SIDE),
    ratios: Sequence[tuple[str, str]] = ((HW_SIDE, PG_SIDE),),
) -> None:
    """The metrics as a table: a column per label, then one per (numerator, denominator)
    ratio, then the 1-minute load averages the figures were taken at (when recorded)."""
    with_load = any(m.loads for m in report.metrics)
    short = {HW_SIDE: "HW", PG_SIDE: "PG"}
    header = ["metric", *labels]
    header += [f"ratio ({short.get(a, a)}/{short.get(b, b)})" for a, b in ratios]
    header += ["load"] if with_load else []
    rows: list[list[str]] = []
    shown = [m for m in report.metrics if m.values or m.errors]
    for m in shown:
        cells = [f"{m.name} ({m.unit})"]
        for side in labels:
            cells.append("error" if side in m.errors else fmt_value(m.values.get(side)))
        for a, b in ratios:
            num, den = m.values.get(a), m.values.get(b)
            if den and num is not None:
                ratio = num / den
                better = ratio >= 1 if m.higher_is_better else ratio <= 1
                cells.append(f"{ratio:.2f}x" + ("" if better else " (worse)"))
            else:
                cells.append("-")
        if with_load:
            loads = [m.loads[side] for side in labels if side in m.loads]
            lo, hi = (min(loads), max(loads)) if loads else (None, None)
            cells.append("-" if lo is None else f"{lo:.1f}" + (f"-{hi:.1f}" if hi != lo else ""))
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return " | ".join([first, *rest])

    print()
    print(report.title)
    print("  " + ", ".join(f"{k}={v}" for k, v in report.params.items()))
    for side, version in report.servers.items():
        print(f"  {side}: {version}")
    print(
        f"  machine: {os.cpu_count()} cpus, {platform.platform()}, "
        f"Python {platform.python_version()}"
        + ("; load = 1-minute load average(s) when taken" if with_load else "")
    )
    print()
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
    for m in shown:
        for side, err in m.errors.items():
            print(f"  ! {m.name} on {side}: {err}")
    busy = neighbours()
    if busy:  # (a report is printed once; the note goes to its JSON too)
        report.notes.append(
            "other processes used CPU during this run (figures may be low; measure with"
            f" nothing else running): {'; '.join(busy[:5])}"
        )
    for note in report.notes:
        print(f"  note: {note}")
    print(flush=True)


def side_failed(report: Report, side: str, e: Exception) -> None:
    """Log a server's failure and mark every metric of the report failed on its side."""
    log(f"{side} failed: {type(e).__name__}: {e}")
    for m in report.metrics:
        m.errors[side] = f"{type(e).__name__}: {e}"


def finish(report: Report, json_path: str | None) -> int:
    """Print the report (and write it as JSON when asked); the bench's exit status."""
    print_report(report)
    if json_path:
        write_json(report, json_path)
    return 1 if report.failed else 0


def load_avg() -> str:
    """The 1, 5 and 15-minute load averages, as the reports print them."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def write_json(report: Report, path: str) -> None:
    payload = asdict(report)
    payload["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    payload["time"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    Path(path).write_text(json.dumps(payload, indent=2) + "\n")
    log(f"wrote {path}")
