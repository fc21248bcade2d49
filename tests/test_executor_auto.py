"""`headwater start` without --executor is `--executor auto` (issue 13): views are
maintained on DuckDB while the Spark stage starts, so Spark's start is off the read path.

The acceptance of the issue, made deterministic: the server's Spark stage cannot start
(fault injection, `{data_dir}/faults/start`: every start fails while it exists). In one
session a table and a view over it are created, the table written, the view read with
the default freshness and `headwater.freshness_timeout = '5s'`: the read shows the write
(under `--executor duckdb` it would wait for a Spark stage that never comes and fail
with 57014), headwater_catalog.views says the batch ran on DuckDB because Spark is
starting, and no NOTICE says the read waits for the engine to start. Then the fault
is lifted, the stage starts, and the view stays exact at every epoch (AS OF) across
the hand-over from the interim DuckDB batches to the stage's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer

FAULTS_ENV = "HEADWATER_FAULT_INJECTION"  # server/matviews.py: files in {data_dir}/faults/
BACKOFF_ENV = "HEADWATER_STAGE_BACKOFF"
VIEW = "SELECT g, count(*) AS n, sum(x) AS s FROM ax_t GROUP BY g"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadwaterServer]:
    data = tmp_path_factory.mktemp("auto") / "data"
    with pytest.MonkeyPatch.context() as mp:  # the server's environment
        mp.setenv(FAULTS_ENV, "1")
        mp.setenv(BACKOFF_ENV, "1")
        srv = HeadwaterServer(data).start(timeout=120)  # no --executor: the default
    yield srv
    srv.stop()


def views(c: psycopg.Connection[Any]) -> dict[str, tuple[Any, ...]]:
    rows = c.execute(
        "SELECT name, executor, executor_reason, status, error, frontier"
        " FROM headwater_catalog.views"
    ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def check_epochs(c: psycopg.Connection[Any], first: int, last: int) -> None:
    """The view equals its query at every epoch of [first, last]."""
    for e in range(first, last + 1):
        got = sorted(c.execute(f"SELECT * FROM ax_v AS OF EPOCH {e}").fetchall())
        want = sorted(c.execute(f"{VIEW} AS OF EPOCH {e}").fetchall())
        assert got == want, f"epoch {e}: view {got}, query {want}"


def test_default_executor_is_auto_and_spark_start_is_off_the_read_path(
    server: HeadwaterServer,
) -> None:
    faults = server.data_dir / "faults"
    faults.mkdir()
    (faults / "start").touch()  # the Spark stage cannot start until this goes
    notices: list[str] = []
    with psycopg.connect(server.dsn, autocommit=True) as c:
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert c.execute("SHOW headwater.executor").fetchone() == ("auto",)
        c.execute("SET headwater.freshness_timeout = '5s'")
        c.execute("CREATE TABLE ax_t (id int PRIMARY KEY, g int, x int)")
        c.execute(f"CREATE MATERIALIZED VIEW ax_v AS {VIEW}")
        created = c.execute(
            "SELECT created_epoch FROM headwater_catalog.views WHERE name = 'ax_v'"
        ).fetchone()[0]
        c.execute("INSERT INTO ax_t VALUES (1, 1, 10), (2, 1, 5), (3, 2, 7)")
        # the default freshness: the read waits for the view to reflect the INSERT,
        # which only the interim DuckDB batches can do (Spark cannot start)
        assert sorted(c.execute("SELECT * FROM ax_v").fetchall()) == [(1, 2, 15), (2, 1, 7)]
        executor, reason, *_ = views(c)["ax_v"]
        assert executor == "duckdb" and "Spark is starting" in reason, (executor, reason)
        assert not [n for n in notices if "maintenance engine" in n], notices
        for sql in (
            "UPDATE ax_t SET x = x + 1 WHERE g = 1",
            "DELETE FROM ax_t WHERE id = 3",
            "INSERT INTO ax_t VALUES (4, 3, 1)",
        ):
            c.execute(sql)
            got = sorted(c.execute("SELECT * FROM ax_v").fetchall())
            assert got == sorted(c.execute(VIEW).fetchall()), sql
        row = views(c)["ax_v"]
        assert row[2] in ("restarting", "error") and "injected fault (start)" in row[3], row

        # the stage starts; the views go on from their frontiers, exact at every epoch
        (faults / "start").unlink()
        c.execute("SET headwater.freshness_timeout = '600s'")  # a JVM start under load
        deadline = time.monotonic() + 600
        while views(c)["ax_v"][2:4] != ("running", None):
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail(views(c))
            time.sleep(0.2)
        for i in range(5, 9):
            c.execute("INSERT INTO ax_t VALUES (%s, %s, %s)", (i, i % 3, i))
            got = sorted(c.execute("SELECT * FROM ax_v").fetchall())
            assert got == sorted(c.execute(VIEW).fetchall())
        executor, reason, *_ = views(c)["ax_v"]
        assert executor == "duckdb" and "Spark is starting" not in reason, reason
        last = int(c.info.parameter_status("headwater_epoch") or 0)
        check_epochs(c, created, last)
        print(f"\nlast batch: {executor} ({reason}); NOTICEs: {notices}")
