"""Freshness SLOs with named reasons (server/slo.py), against a real server.

`CREATE MATERIALIZED VIEW v WITH (freshness = '1s')`: the option validated (22023, as
PostgreSQL's bad storage parameters), kept across a restart, and shown in
headwater_catalog.views with slo_compliance and degraded_reason; a stage whose restarts
fail (HEADWATER_FAULT_INJECTION) gives SPARK_RESTARTING, a restart with views behind
gives RECOVERING; a view that fails gives ERROR; too tight a target BEHIND; in /metrics.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.request import urlopen

import psycopg
import pytest
from headwater.server.slo import REASONS, parse_interval, reason

from tests.hwserver import HeadwaterServer, free_port

FAULTS_ENV = "HEADWATER_FAULT_INJECTION"  # server/matviews.py: files in {data_dir}/faults/
BACKOFF_ENV = "HEADWATER_STAGE_BACKOFF"
WAIT = 240.0  # a JVM start takes 6-90 s on this machine, depending on its load


@pytest.fixture(scope="module")
def hw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadwaterServer]:
    root = tmp_path_factory.mktemp("slo")
    metrics = free_port()
    with pytest.MonkeyPatch.context() as mp:  # the server's environment
        mp.setenv(FAULTS_ENV, "1")
        mp.setenv(BACKOFF_ENV, "0.5")
        # --executor duckdb: views wait for the Spark stage, so its failures make them
        # late (under the default auto, DuckDB keeps them fresh while it restarts)
        args = ["--metrics-port", str(metrics), "--executor", "duckdb"]
        server = HeadwaterServer(root / "data", args=args).start()
    server.metrics_port = metrics  # type: ignore[attr-defined]
    (server.data_dir / "faults").mkdir()
    yield server
    server.stop()


def _conn(hw: HeadwaterServer) -> psycopg.Connection[Any]:
    return psycopg.connect(hw.dsn, autocommit=True)


def _views(c: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    cur = c.execute(
        "SELECT name, status, frontier, lag_epochs, freshness_target, slo_compliance,"
        " degraded_reason FROM headwater_catalog.views"
    )
    cols = [d.name for d in cur.description or ()]
    return {r[0]: dict(zip(cols, r, strict=True)) for r in cur.fetchall()}


def _wait(c: psycopg.Connection[Any], view: str, ok: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT
    while True:
        row = _views(c).get(view)
        if row is not None and ok(row):
            return row
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{view}: no {what} in {WAIT}s: {row}")
        time.sleep(0.2)


def _metrics(hw: HeadwaterServer) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    port = hw.metrics_port  # type: ignore[attr-defined]
    with urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_freshness_option_is_validated(hw: HeadwaterServer, pg_oracle: Any) -> None:
    """Bad values of freshness and unknown options fail with 22023 naming the option,
    as PostgreSQL's storage parameters do (an unknown one: PostgreSQL's message)."""
    with _conn(hw) as c:
        c.execute("CREATE TABLE slo_v (k int, x int)")
        for bad in ("'abc'", "'-1s'", "'0'", "'1 fortnight'", "''"):
            with pytest.raises(psycopg.Error) as e:
                c.execute(
                    f"CREATE MATERIALIZED VIEW slo_bad WITH (freshness = {bad}) AS "
                    "SELECT k FROM slo_v"
                )
            assert e.value.sqlstate == "22023", (bad, e.value)
            assert '"freshness"' in str(e.value), e.value
        sql = "CREATE MATERIALIZED VIEW slo_bad WITH (fresh = '1s') AS SELECT 1 AS one"
        with pytest.raises(psycopg.Error) as e:
            c.execute(sql)
        with psycopg.connect(pg_oracle.dsn, autocommit=True) as p:
            with pytest.raises(psycopg.Error) as pe:
                p.execute(sql)
        assert (
            (e.value.sqlstate, e.value.diag.message_primary)
            == (
                pe.value.sqlstate,
                pe.value.diag.message_primary,
            )
            == ("22023", 'unrecognized parameter "fresh"')
        )
        with pytest.raises(psycopg.Error) as e:  # PostgreSQL's, not Headwater's
            c.execute("CREATE MATERIALIZED VIEW slo_bad WITH (fillfactor = 50) AS SELECT 1")
        assert e.value.sqlstate == "0A000"
        assert "slo_bad" not in _views(c)
    assert parse_interval("1 minute 30 seconds") == 90.0
    assert parse_interval("500ms") == 0.5
    assert parse_interval("2") == 2.0


def test_alter_freshness(hw: HeadwaterServer) -> None:
    """ALTER MATERIALIZED VIEW ... SET (freshness = ...) / RESET (freshness); the target
    in pg_class.reloptions as PostgreSQL lists a relation's options."""
    with _conn(hw) as c:
        c.execute("CREATE TABLE slo_a (k int)")
        c.execute("CREATE MATERIALIZED VIEW slo_alt WITH (freshness = 2) AS SELECT k FROM slo_a")

        def shown() -> tuple[Any, Any]:
            opts = c.execute("SELECT reloptions FROM pg_class WHERE relname = 'slo_alt'")
            return _views(c)["slo_alt"]["freshness_target"], opts.fetchone()[0]

        assert shown() == (timedelta(seconds=2), ["freshness=2s"])
        c.execute("ALTER MATERIALIZED VIEW slo_alt SET (freshness = '500 milliseconds')")
        assert shown() == (timedelta(milliseconds=500), ["freshness=500ms"])
        for bad, state in (("freshness = 'x'", "22023"), ("bogus = 1", "22023")):
            with pytest.raises(psycopg.Error) as e:
                c.execute(f"ALTER MATERIALIZED VIEW slo_alt SET ({bad})")
            assert e.value.sqlstate == state, e.value
        assert shown() == (timedelta(milliseconds=500), ["freshness=500ms"])
        c.execute("ALTER MATERIALIZED VIEW slo_alt RESET (freshness)")
        assert shown() == (None, None)
        row = _views(c)["slo_alt"]
        assert (row["slo_compliance"], row["degraded_reason"]) == (None, None)
        c.execute("DROP MATERIALIZED VIEW slo_alt")


def test_reasons() -> None:
    """The fixed set, by priority: the view's own failure, then what holds it back."""

    def why(**kw: Any) -> str:
        args = dict(
            status="running", stage="running", created_here=True, frontier=10, recovery_epoch=5
        )
        return reason(**{**args, **kw})

    assert why(status="error", stage="restarting") == "ERROR"
    assert why(status=None) == "BACKFILLING"
    assert why(stage="restarting", created_here=False, frontier=1) == "SPARK_RESTARTING"
    assert why(stage="error") == "SPARK_RESTARTING"
    assert why(created_here=False, frontier=3) == "RECOVERING"
    assert why(created_here=False, stage="starting") == "RECOVERING"
    assert why(stage="starting") == "BACKFILLING"
    assert why() == "BEHIND"
    assert set(REASONS) == {"BACKFILLING", "RECOVERING", "SPARK_RESTARTING", "BEHIND", "ERROR"}


def test_slo_compliance_and_reasons(hw: HeadwaterServer) -> None:
    """A view meets its target (1.0, no reason); its stage fails and cannot restart:
    SPARK_RESTARTING and compliance below 1, in the catalog and /metrics; a restart
    with the view behind: RECOVERING; the target survives the restart."""
    faults = hw.data_dir / "faults"
    with _conn(hw) as c:
        c.execute("CREATE TABLE slo_t (k int, x int)")
        c.execute("INSERT INTO slo_t VALUES (1, 1), (2, 2)")
        c.execute(
            "CREATE MATERIALIZED VIEW slo_m WITH (freshness = '1s') AS "
            "SELECT k, sum(x) AS s FROM slo_t GROUP BY k"
        )
        c.execute("CREATE MATERIALIZED VIEW slo_plain AS SELECT k FROM slo_t")
        c.execute("INSERT INTO slo_t VALUES (1, 10)")
        row = _wait(
            c, "slo_m", lambda r: r["status"] == "running" and r["lag_epochs"] == 0, "running view"
        )
        assert row["freshness_target"] == timedelta(seconds=1)
        plain = _views(c)["slo_plain"]
        assert (plain["freshness_target"], plain["slo_compliance"], plain["degraded_reason"]) == (
            None,
            None,
            None,
        )
        # (its first seconds may have been late: the stage's JVM starts)
        assert row["degraded_reason"] in (None, "BACKFILLING"), row

        # the stage fails and every restart fails: the view falls behind its target
        (faults / "start").touch()
        (faults / "batch").touch()
        c.execute("INSERT INTO slo_t VALUES (3, 3)")  # the batch that fails
        _wait(c, "slo_m", lambda r: r["status"] in ("restarting", "error"), "restarting stage")
        c.execute("INSERT INTO slo_t VALUES (4, 4)")
        row = _wait(
            c,
            "slo_m",
            lambda r: r["degraded_reason"] == "SPARK_RESTARTING" and r["lag_epochs"] > 0,
            "SPARK_RESTARTING",
        )
        assert 0.0 <= row["slo_compliance"] < 1.0, row
        m = _metrics(hw)
        v = (("view", "public.slo_m"),)
        assert m["headwater_view_freshness_target_seconds"][v] == 1.0
        assert m["headwater_view_slo_compliance"][v] < 1.0
        degraded = {
            dict(k)["reason"]: n
            for k, n in m["headwater_view_degraded"].items()
            if dict(k)["view"] == "public.slo_m"
        }
        assert degraded == {r: (1.0 if r == "SPARK_RESTARTING" else 0.0) for r in REASONS}
        assert not any(
            dict(k)["view"] == "public.slo_plain" for k in m["headwater_view_slo_compliance"]
        )
        # `headwater status` and the status page say it too
        out = subprocess.run(
            [sys.executable, "-m", "headwater.cli", "status", "--port", str(hw.port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        line = next(ln for ln in out.stdout.splitlines() if "public.slo_m " in ln)
        assert "SPARK_RESTARTING (target 1s)" in line, out.stdout
        with urlopen(f"http://127.0.0.1:{hw.metrics_port}/", timeout=60) as r:  # type: ignore[attr-defined]
            assert "SPARK_RESTARTING (target 1s)" in r.read().decode()

    # restart with the view behind: it recovers (the stage's JVM starts: seconds)
    hw.stop()
    (faults / "start").unlink()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(FAULTS_ENV, "1")
        hw.start()
    with _conn(hw) as c:
        row = _wait(c, "slo_m", lambda r: r["degraded_reason"] is not None, "a late sample")
        assert row["degraded_reason"] == "RECOVERING", row
        assert row["freshness_target"] == timedelta(seconds=1)
        row = _wait(
            c, "slo_m", lambda r: r["status"] == "running" and r["lag_epochs"] == 0, "recovery"
        )
        # caught up, but the window remembers why it was late
        assert row["degraded_reason"] == "RECOVERING" and row["slo_compliance"] < 1.0, row
        assert c.execute("SELECT k, s FROM slo_m ORDER BY k").fetchall() == [
            (1, 11),
            (2, 2),
            (3, 3),
            (4, 4),
        ]


def test_failed_view_is_error(hw: HeadwaterServer) -> None:
    """A view that fails at run time (division by zero): ERROR, other views unaffected."""
    with _conn(hw) as c:
        c.execute("CREATE TABLE slo_e (id int, a int, b int)")
        c.execute("INSERT INTO slo_e VALUES (1, 10, 2)")
        c.execute(
            "CREATE MATERIALIZED VIEW slo_err WITH (freshness = '1s') AS "
            "SELECT id, a / b AS q FROM slo_e"
        )
        c.execute("INSERT INTO slo_e VALUES (2, 1, 0)")
        row = _wait(c, "slo_err", lambda r: r["status"] == "error", "failed view")
        row = _wait(c, "slo_err", lambda r: r["degraded_reason"] == "ERROR", "ERROR")
        assert row["slo_compliance"] < 1.0, row
        m = _metrics(hw)
        assert m["headwater_view_degraded"][(("reason", "ERROR"), ("view", "public.slo_err"))] == 1


def test_too_tight_a_target_is_behind(hw: HeadwaterServer) -> None:
    """A target no batch can meet (1 ms) under steady writes, with the stage healthy:
    BEHIND (nothing else holds the view back)."""
    with _conn(hw) as c:
        c.execute("CREATE TABLE slo_b (k int)")
        c.execute(
            "CREATE MATERIALIZED VIEW slo_tight WITH (freshness = '1ms') AS SELECT k FROM slo_b"
        )
        deadline = time.monotonic() + WAIT
        while True:
            c.execute("INSERT INTO slo_b VALUES (1)")
            row = _views(c)["slo_tight"]
            if row["degraded_reason"] == "BEHIND":
                break
            assert row["degraded_reason"] in (None, "BACKFILLING", "BEHIND"), row
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail(row)
            time.sleep(0.05)
        assert row["status"] == "running" and row["slo_compliance"] < 1.0, row
