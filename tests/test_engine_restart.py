"""Exactly once across SIGKILL: the engine process is killed while epochs stream in,
restarted from its state and Spark's checkpoint, and every view then equals
PostgreSQL at every epoch (no change lost, none counted twice)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.test_engine_support import (
    Workload,
    arrow_rows,
    catalog,
    normalize,
    plan_of,
    replanner,
    scans,
)

pytestmark = pytest.mark.oracle

VIEWS = {
    50001: "SELECT a, count(*) AS n, sum(b) AS sb, max(s) AS ms FROM t GROUP BY a",
    50002: "SELECT t.id, u.x FROM t JOIN u ON t.a = u.a",
    50003: "SELECT a FROM t EXCEPT SELECT a FROM u",
}
REPO = Path(__file__).resolve().parent.parent


def child(state: str, spool: str) -> None:
    """The engine side: create the views on first start, then run the stage."""
    from headwater.engine.engine import Engine

    engine = Engine(state, spool, wait_ms=100, replan=replanner(VIEWS))
    cat, sc = catalog(), scans()
    for vid, sql in VIEWS.items():
        if vid not in engine.views:
            plan = plan_of(sql, cat)
            engine.create_view(vid, plan, {o: sc[o] for o in plan.tables}, at_epoch=0)

    def progress(end: int) -> None:
        low = min(engine.frontier(v) for v in VIEWS)
        Path(state, "frontier.tmp").write_text(str(low))
        os.replace(Path(state, "frontier.tmp"), Path(state, "frontier"))

    engine.on_advance.append(progress)
    engine.start()
    Path(state, "ready").write_text("1")
    while True:
        time.sleep(1)


def test_sigkill_in_the_middle_of_a_stream(pg_oracle: object, tmp_path: Path) -> None:
    state, spool = tmp_path / "state", tmp_path / "spool"
    state.mkdir()
    pg = psycopg.connect(pg_oracle.dsn)  # type: ignore[attr-defined]
    work = Workload(pg, spool, seed=7)
    expected: dict[int, dict[int, list[tuple]]] = {}

    def epoch() -> None:
        e = work.epoch()
        with pg.cursor() as cur:
            for vid, sql in VIEWS.items():
                cur.execute(sql)
                expected.setdefault(vid, {})[e] = normalize(cur.fetchall())
        pg.commit()

    cmd = [sys.executable, __file__, str(state), str(spool)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not (state / "ready").exists():
            assert proc.poll() is None, "engine process died at start"
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail("engine did not start")
            time.sleep(0.2)
        for _ in range(60):
            epoch()
            time.sleep(0.03)
        os.kill(proc.pid, signal.SIGKILL)  # a micro-batch is likely in flight
        proc.wait()
        for _ in range(40):  # writes go on while the engine is down
            epoch()
        (state / "ready").unlink()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(40):
            epoch()
            time.sleep(0.02)
        last = work.epoch_no
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, "engine process died after restart"
            if (state / "ready").exists():
                break
            time.sleep(0.2)
        # the engine holds its database: wait on its progress through a reader process
        while time.monotonic() < deadline:
            out = subprocess.run(
                [sys.executable, "-c", _PROBE, str(state)], capture_output=True, text=True, env=env
            ).stdout.strip()
            if out and int(out) >= last:
                break
            time.sleep(1.0)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    from headwater.engine.engine import Engine

    engine = Engine(state, spool, replan=replanner(VIEWS))
    assert min(engine.frontier(v) for v in VIEWS) >= last, "did not catch up after restart"
    bad = []
    for vid, per_epoch in expected.items():
        for e, rows in per_epoch.items():
            got = normalize(arrow_rows(engine.read(vid, e)))
            if got != rows:
                bad.append((VIEWS[vid], e, rows[:4], got[:4]))
    engine.close()
    pg.close()
    assert not bad, f"{len(bad)} mismatches after SIGKILL, first: {bad[0]}"


# A reader in another process cannot open the DuckDB file the engine holds; the
# engine process reports progress through a file instead (see child()).
_PROBE = """
import sys
from pathlib import Path
p = Path(sys.argv[1], "frontier")
print(p.read_text() if p.exists() else "")
"""


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    child(sys.argv[1], sys.argv[2])
