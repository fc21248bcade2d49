"""What a running server shows about itself: the status page (GET / on the metrics
address, loaded in a real headless Chromium during churn), `headwater status` over the
PostgreSQL protocol, and the progress of long work (a backfill, a COPY) on the console,
in headwater_catalog and in `headwater status`.

One server for the module, with fault injection on: `backfill_pause` in its faults/
directory holds a backfill after each input it read, so that its progress is seen
mid-way without depending on the machine's speed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import psycopg
import pytest

from tests.hwserver import HeadwaterServer, free_port

FAULTS_ENV = "HEADWATER_FAULT_INJECTION"  # server/matviews.py: files in {data_dir}/faults/
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# views of the page test; one name needs escaping in HTML
VIEWS = {
    "st_count": "SELECT g, count(*) AS n, sum(v) AS s FROM st_t GROUP BY g",
    "st_max": "SELECT g, max(v) AS m FROM st_t WHERE v > 10 GROUP BY g",
    "\"st <b>&amp; 'odd'\"": "SELECT count(*) AS n FROM st_t",
}


@pytest.fixture(scope="module")
def hw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadwaterServer]:
    root = tmp_path_factory.mktemp("status")
    metrics = free_port()
    server = HeadwaterServer(root / "data", args=["--metrics-port", str(metrics)])
    with pytest.MonkeyPatch.context() as mp:  # the server's environment
        mp.setenv(FAULTS_ENV, "1")
        server.start()
    server.metrics_port = metrics  # type: ignore[attr-defined]
    yield server
    server.stop()


def _conn(hw: HeadwaterServer) -> psycopg.Connection[Any]:
    return psycopg.connect(hw.dsn, autocommit=True)


def _status(hw: HeadwaterServer, *more: str) -> subprocess.CompletedProcess[str]:
    """`headwater status` against the server, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "headwater.cli", "status", "--port", str(hw.port), *more],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        msg = "chromium is not installed (scripts/setup.sh installs Debian's package)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def _dump_dom(url: str) -> str:
    """The page as a real browser built it (its DOM after parsing), headless."""
    exe = _chromium()
    with tempfile.TemporaryDirectory(prefix="hw-chromium-") as profile:
        out = subprocess.run(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


class Churn:
    """INSERTs into st_t from another session until stopped."""

    def __init__(self, hw: HeadwaterServer, first_id: int) -> None:
        self.hw, self.next = hw, first_id
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with _conn(self.hw) as c:
                while not self.stop.is_set():
                    i = self.next
                    c.execute("INSERT INTO st_t VALUES (%s, %s, %s)", (i, i % 7, i % 100))
                    self.next += 1
                    time.sleep(0.02)
        except BaseException as e:  # reported by finish()
            self.error = e

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(30)
        assert self.error is None, self.error
        return self.next


def test_status_page_in_chromium(hw: HeadwaterServer, tmp_path: Path) -> None:
    """GET / loaded in headless Chromium while rows are inserted: every view (with its
    frontier and a freshness sparkline), the sink, the local Spark master."""
    with _conn(hw) as c:
        c.execute("CREATE TABLE st_t (id int PRIMARY KEY, g int, v int)")
        c.execute("INSERT INTO st_t SELECT i, i % 7, i % 100 FROM generate_series(1, 500) s(i)")
        for name, sql in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        c.execute(f"CREATE SINK st_sink FROM st_count INTO PARQUET '{tmp_path / 'sink'}'")
        names = [
            f"{s}.{n}"
            for s, n in c.execute("SELECT schema, name FROM headwater_catalog.views").fetchall()
        ]
    assert len(names) == len(VIEWS)
    churn = Churn(hw, 1000)
    url = f"http://127.0.0.1:{hw.metrics_port}/"  # type: ignore[attr-defined]
    try:
        doms = []
        for _ in range(2):  # the second load has freshness samples for every view
            time.sleep(1.5)
            doms.append(_dump_dom(url))
    finally:
        end = churn.finish()
    assert end > 1000, "the churn inserted nothing"
    dom = doms[-1]
    for name in names:  # each view has a row, its name escaped
        row = re.search(
            rf'<tr class="view"><td>{re.escape(escape(name, quote=False))}</td>.*?</tr>', dom
        )
        assert row, f"view {name} not on the page:\n{dom}"
        assert "<svg" in row.group(0) or "no samples yet" in row.group(0)
    assert "<b>" not in dom  # a name's markup stays text: no <b> element was made
    assert dom.count('class="spark"') >= 1
    assert re.search(r'<tr class="sink"><td>public\.st_sink</td><td>public\.st_count</td>', dom)
    assert "local master (local[2])" in dom
    # the page is what a browser gets without Chromium too: HTML, UTF-8
    with urlopen(url, timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/html")


def test_workers_of_an_unreachable_master() -> None:
    """A spark:// master whose web UI does not answer: its workers are 'unknown'."""
    from headwater.server.status_page import Workers

    port = free_port()
    shown = Workers(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{port}").describe()
    assert shown["workers"] == []
    assert "workers unknown" in shown["summary"], shown


def test_status_cli(hw: HeadwaterServer, tmp_path: Path) -> None:
    """`headwater status`: views (frontier, lag, status, executor) and sinks (lag, rows,
    status) as tables; a server that is not there: exit 1 saying so."""
    with _conn(hw) as c:
        c.execute("CREATE TABLE st_cli (id int PRIMARY KEY, g int)")
        c.execute("INSERT INTO st_cli SELECT i, i % 3 FROM generate_series(1, 30) s(i)")
        c.execute("CREATE MATERIALIZED VIEW st_cli_v AS SELECT g, count(*) FROM st_cli GROUP BY g")
        c.execute(f"CREATE SINK st_cli_sink FROM st_cli INTO PARQUET '{tmp_path / 'cli'}'")
        c.execute("SET headwater.freshness = 'latest'")
        c.execute("SELECT * FROM st_cli_v").fetchall()  # the view is current
        frontier = c.execute(
            "SELECT frontier FROM headwater_catalog.views WHERE name = 'st_cli_v'"
        ).fetchone()
    assert frontier is not None
    out = _status(hw)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith(" view ") and "executor" in line for line in lines), out.stdout
    view = next(line for line in lines if "public.st_cli_v " in line)
    cells = [c.strip() for c in view.split("|")]
    assert cells[1] in ("running", "backfilling") and cells[2] != "", view
    assert int(cells[2]) >= frontier[0]
    sink = next(line for line in lines if "public.st_cli_sink " in line)
    assert "public.st_cli" in sink and "parquet" in sink, sink

    gone = subprocess.run(
        [sys.executable, "-m", "headwater.cli", "status", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gone.returncode == 1
    assert "cannot connect to a server at 127.0.0.1:" in gone.stderr, gone.stderr
    assert "Connection refused" in gone.stderr
    assert "headwater start" in gone.stderr


def _wait_for(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_backfill_progress(hw: HeadwaterServer) -> None:
    """A backfill held after its first input: the view is 'backfilling' with a
    progress between 0 and 100% in headwater_catalog.views and .progress, in
    `headwater status`, on the status page and on the server's console."""
    faults = hw.data_dir / "faults"
    faults.mkdir(exist_ok=True)
    with _conn(hw) as c:
        c.execute("CREATE TABLE st_a (id int PRIMARY KEY, k int)")
        c.execute("CREATE TABLE st_b (k int PRIMARY KEY, name text)")
        c.execute("INSERT INTO st_a SELECT i, i % 50 FROM generate_series(1, 300) s(i)")
        c.execute("INSERT INTO st_b SELECT i, 'n' || i FROM generate_series(0, 99) s(i)")
    hold = faults / "backfill_pause"
    hold.touch()
    errors: list[BaseException] = []

    def create() -> None:
        try:
            with _conn(hw) as c:
                c.execute(
                    "CREATE MATERIALIZED VIEW st_join AS SELECT b.name, count(*) AS n"
                    " FROM st_a a JOIN st_b b ON a.k = b.k GROUP BY b.name"
                )
        except BaseException as e:
            errors.append(e)

    creating = threading.Thread(target=create, daemon=True)
    creating.start()
    try:
        with _conn(hw) as c:
            row = _wait_for(
                "the backfill to read its first input",
                lambda: c.execute(
                    "SELECT status, progress, progress_phase, backfill_rows_done,"
                    " backfill_rows_total FROM headwater_catalog.views"
                    " WHERE name = 'st_join' AND progress_phase = 'reading inputs'"
                    " AND backfill_rows_done > 0"
                ).fetchone(),
            )
            status, pct, _, done, total = row
            assert status == "backfilling"
            assert total == 400 and done in (100, 300), row
            assert pct == pytest.approx(100.0 * done / total)
            work = c.execute(
                "SELECT kind, phase, done, total, unit FROM headwater_catalog.progress"
                " WHERE target = 'public.st_join'"
            ).fetchall()
            assert work == [("backfill", "reading inputs", done, 400, "rows")]
        out = _status(hw)
        assert out.returncode == 0, out.stderr
        view = next(line for line in out.stdout.splitlines() if "public.st_join " in line)
        assert f"reading inputs {pct:.0f}%" in view and "backfilling" in view, out.stdout
        assert f"backfill public.st_join: reading inputs {pct:.0f}% {done:,}/400 rows" in (
            out.stdout
        )
        page = urlopen(f"http://127.0.0.1:{hw.metrics_port}/", timeout=60).read().decode()  # type: ignore[attr-defined]
        assert 'id="progress"' in page and "public.st_join" in page
        # the console: a line with a bar once the backfill has run a second
        _wait_for(
            "a progress line on the console",
            lambda: re.search(
                r"backfill public\.st_join: reading inputs \[#*\.*\]\s+\d+% "
                rf"{done:,}/400 rows",
                hw.log_tail(200_000),
            ),
        )
    finally:
        hold.unlink(missing_ok=True)
        creating.join(120)
    assert not errors, errors
    assert _wait_for("the end on the console", lambda: "st_join: done in" in hw.log_tail(200_000))
    with _conn(hw) as c:
        after = c.execute(
            "SELECT status, progress, backfill_rows_done FROM headwater_catalog.views"
            " WHERE name = 'st_join'"
        ).fetchone()
        assert after == ("running", None, 400)
        assert not c.execute(
            "SELECT * FROM headwater_catalog.progress WHERE target = 'public.st_join'"
        ).fetchall()


def test_copy_progress(hw: HeadwaterServer) -> None:
    """A COPY FROM STDIN still sending: its lines received so far in
    headwater_catalog.progress and `headwater status`, and on the console."""
    with _conn(hw) as c, _conn(hw) as w:
        c.execute("CREATE TABLE st_copy (id int, s text)")
        sent = 0
        with w.cursor().copy("COPY st_copy FROM STDIN") as cp:

            def send(n: int = 5000) -> None:
                nonlocal sent
                cp.write("".join(f"{sent + i}\trow {sent + i}\n" for i in range(n)))
                sent += n

            def seen() -> Any:
                send()
                return c.execute(
                    "SELECT phase, done, unit FROM headwater_catalog.progress"
                    " WHERE kind = 'copy' AND target = 'st_copy' AND done > 0"
                ).fetchone()

            phase, done, unit = _wait_for("the COPY on the progress board", seen)
            assert (phase, unit) == ("receiving", "lines") and 0 < done <= sent
            out = _status(hw)
            assert out.returncode == 0, out.stderr
            assert re.search(r"copy st_copy: receiving [\d,]+ lines \([\d.]+ MB\)", out.stdout)

            def logged() -> Any:
                send(1000)
                return re.search(r"copy st_copy: receiving [\d,]+ lines", hw.log_tail(200_000))

            _wait_for("a COPY progress line on the console", logged)
        assert c.execute("SELECT count(*) FROM st_copy").fetchone() == (sent,)
        assert not c.execute("SELECT * FROM headwater_catalog.progress").fetchall()
