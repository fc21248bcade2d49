"""The maintenance bench at a tiny size, so that bench/ does not rot between the
sessions that run it in full: bench/maintenance.py on TPC-H SF 0.01, two batches of
each phase, Headwater's views and PostgreSQL's answer to their queries compared after
each phase (the bench exits non-zero if a view differs, a statement changed another
number of rows than planned, or a mode failed). No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import common

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "extra",
    [["--views", "tpch"], ["--views", "topn", "--insert", "values"]],
    ids=["tpch-views-copy", "topn-views-values"],
)
def test_maintenance_bench_runs_and_views_equal_postgres(  # type: ignore[no-untyped-def]
    hw_server, pg_oracle, extra: list[str]
) -> None:
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "maintenance.py"),
        "--scale", "0.01",
        "--batches", "2",
        "--batch-rows", "100",
        "--modes", "headwater,postgres-plain",
        "--hw-dsn", hw_server.dsn,
        "--pg-dsn", pg_oracle.dsn,
        *extra,
    ]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    for phase in ("insert", "update", "delete"):
        assert f"views at the end of {phase}: Headwater equal" in out, out[-4000:]
    for dsn in (hw_server.dsn, pg_oracle.dsn):  # the servers measured are no neighbours
        assert f"pid {common.server_pid(dsn)} " not in out, out[-4000:]


def test_bench_names_a_busy_neighbour(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that uses CPU beside a bench is named in its report's notes (an idle
    server left running took the maintenance bench's figures down by a third), unless
    it is a server the bench measures."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        monkeypatch.setattr(common, "_STARTED", (time.monotonic(), common.processes()))
        time.sleep(0.5)
        assert any(n.startswith(f"pid {busy.pid} ") for n in common.neighbours())
        monkeypatch.setattr(common, "_MEASURED", {busy.pid})
        assert not any(n.startswith(f"pid {busy.pid} ") for n in common.neighbours())
    finally:
        busy.kill()
        busy.wait()
