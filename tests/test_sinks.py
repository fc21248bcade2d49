"""CREATE SINK: a table and a materialized view sunk into Parquet, Delta, Iceberg and
PostgreSQL 15.

One server of this module's own (it is SIGKILLed), one PostgreSQL 15 as a target. Each
sink kind in both modes, over a view (an aggregate, keyed by its group in one sink and
keyless in another) and a table (keyed by its primary key), under churn: every target
read back (Parquet with DuckDB, Delta with the deltalake package, Iceberg with
pyiceberg's scan through the SQLite catalog, PostgreSQL with asyncpg) equals the source
at the epoch the target records (read AS OF that epoch); a 'changes' target, summed,
equals it too, and holds no (epoch, row) twice. Then the server is SIGKILLed while the
writers and the sinks run, restarted on the same data directory, churned again: every
target still equals its source at its recorded epoch (a change written twice or skipped
would show). A sink whose PostgreSQL is down says why and retries, while writes and
reads go on.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import duckdb
import psycopg
import pytest

from tests.hwserver import HeadwaterServer, free_port

WAIT = 600.0  # bound on the stage's start and the sinks' catch-up (a JVM: 10-70 s here)
VIEW = "SELECT g, count(*) AS n, sum(v) AS s FROM sk_t GROUP BY g"
MODES = ("mirror", "changes")


@pytest.fixture(scope="module")
def pg() -> Iterator[Any]:
    from tests.pg_oracle import ensure_postgres_installed, start_postgres

    try:
        ensure_postgres_installed()
    except RuntimeError as e:
        pytest.skip(str(e))
    server = start_postgres(user="headwater", dbname="sinks")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadwaterServer]:
    root = tmp_path_factory.mktemp("sinks")
    metrics = free_port()
    server = HeadwaterServer(root / "data", args=["--metrics-port", str(metrics)]).start()
    server.metrics_port = metrics  # type: ignore[attr-defined]
    yield server
    server.stop()


def _conn(hw: HeadwaterServer) -> psycopg.Connection[Any]:
    return psycopg.connect(hw.dsn, autocommit=True)


def _sinks() -> dict[str, tuple[str, str, str]]:
    """name -> (source, kind, mode)"""
    out = {}
    for mode in MODES:
        for kind in ("parquet", "delta", "iceberg", "postgres"):
            out[f"sk_v_{kind}_{mode}"] = ("sk_v", kind, mode)
    out["sk_v_postgres_keyless"] = ("sk_v", "postgres", "mirror")
    out["sk_v_delta_keyless"] = ("sk_v", "delta", "mirror")
    out["sk_v_iceberg_keyless"] = ("sk_v", "iceberg", "mirror")
    out["sk_t_postgres"] = ("sk_t", "postgres", "mirror")
    out["sk_t_delta"] = ("sk_t", "delta", "mirror")
    out["sk_t_parquet_changes"] = ("sk_t", "parquet", "changes")
    out["sk_t_iceberg"] = ("sk_t", "iceberg", "mirror")
    return out


def _create_sql(name: str, source: str, kind: str, mode: str, pg_dsn: str, root: Path) -> str:
    opts = [f"mode = '{mode}'", "interval = '0.2'"]
    if source == "sk_v" and "keyless" not in name:
        opts.append("key = 'g'")
    if kind == "postgres":
        into = f"POSTGRES '{pg_dsn}' TABLE sk.{name}"
    elif kind == "iceberg":  # one warehouse (and SQLite catalog) for all of them
        into = f"ICEBERG '{root / 'iceberg'}'"
        opts += ["namespace = 'sk'", f"table = '{name}'"]
    else:
        into = f"{kind.upper()} '{root / name}'"
    return f"CREATE SINK {name} FROM {source} INTO {into} WITH ({', '.join(opts)})"


# -- reading targets back ----------------------------------------------------------------
def _norm(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.normalize() if isinstance(v, Decimal) else v for v in row)


def _parquet(path: Path, mode: str) -> tuple[int, list[tuple[Any, ...]]]:
    glob = f"{path}/*/*.parquet"
    con = duckdb.connect()
    last = con.execute(
        f"SELECT max(upto_epoch) FROM read_parquet('{glob}', hive_partitioning = true)"
    ).fetchone()[0]
    if mode == "mirror":
        rows = con.execute(
            f"SELECT * EXCLUDE (upto_epoch) FROM read_parquet('{glob}', hive_partitioning = true)"
            " WHERE upto_epoch = ?",
            [last],
        ).fetchall()
    else:
        rows = con.execute(
            f"SELECT * FROM read_parquet('{path}/*/changes.parquet', hive_partitioning = false)"
        ).fetchall()
    return int(last), rows


def _delta(path: Path) -> tuple[int, list[tuple[Any, ...]]]:
    from deltalake import DeltaTable

    dt = DeltaTable(str(path))
    epoch = next(int(c["headwater.epoch"]) for c in dt.history() if "headwater.epoch" in c)
    table = dt.to_pyarrow_table()
    return epoch, [tuple(r.values()) for r in table.to_pylist()]


def _iceberg(warehouse: Path, name: str) -> tuple[int, list[tuple[Any, ...]]]:
    """The table as pyiceberg scans it, and the epoch its newest summary records."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "headwater",
        uri=f"sqlite:///{warehouse}/headwater_iceberg.db",
        warehouse=f"file://{warehouse}",
    )
    table = catalog.load_table(("sk", name))
    snap = table.current_snapshot()
    while "headwater.epoch" not in (snap.summary or {}).additional_properties:
        snap = table.snapshot_by_id(snap.parent_snapshot_id)
    epoch = int(snap.summary["headwater.epoch"])
    rows = table.scan(snapshot_id=table.current_snapshot().snapshot_id).to_arrow()
    return epoch, [tuple(r.values()) for r in rows.to_pylist()]


def _postgres(pg: Any, name: str, dbname: str | None = None) -> tuple[int, list[tuple[Any, ...]]]:
    async def read() -> tuple[int, list[tuple[Any, ...]]]:
        conn = await asyncpg.connect(
            host=pg.host, port=pg.port, user=pg.user, database=dbname or pg.dbname
        )
        try:
            async with conn.transaction(isolation="repeatable_read"):
                epoch = await conn.fetchval(
                    "SELECT epoch FROM sk.headwater_sink_progress WHERE sink = $1",
                    f"public.{name} -> sk.{name}",
                )
                rows = await conn.fetch(f"SELECT * FROM sk.{name}")
            return int(epoch), [tuple(r.values()) for r in rows]
        finally:
            await conn.close()

    return asyncio.run(read())


def _target(pg: Any, root: Path, name: str, kind: str, mode: str) -> tuple[int, list[Any]]:
    if kind == "parquet":
        return _parquet(root / name, mode)
    if kind == "delta":
        return _delta(root / name)
    if kind == "iceberg":
        return _iceberg(root / "iceberg", name)
    return _postgres(pg, name)


def _check(c: psycopg.Connection[Any], pg: Any, root: Path, sinks: dict[str, Any]) -> None:
    """Every target equals its source at the epoch it records."""
    for name, (source, kind, mode) in sinks.items():
        epoch, rows = _target(pg, root, name, kind, mode)
        want = Counter(_norm(r) for r in c.execute(f"SELECT * FROM {source} AS OF EPOCH {epoch}"))
        if mode == "changes":
            seen = Counter((r[0], _norm(r[2:])) for r in rows)
            twice = [k for k, n in seen.items() if n > 1]
            assert not twice, f"{name}: (epoch, row) written twice: {twice[:5]}"
            assert all(r[0] <= epoch for r in rows), f"{name}: rows after epoch {epoch}"
            summed: Counter[tuple[Any, ...]] = Counter()
            for r in rows:
                summed[_norm(r[2:])] += r[1]
            got = +summed
            assert all(v >= 0 for v in summed.values()), f"{name}: negative multiplicity"
        else:
            got = Counter(_norm(r) for r in rows)
        assert got == want, f"{name} at epoch {epoch}: {sorted(got - want)[:5]} extra, " + (
            f"{sorted(want - got)[:5]} missing"
        )


def _wait_caught_up(c: psycopg.Connection[Any], names: list[str], epoch: int) -> None:
    deadline = time.time() + WAIT
    while True:
        rows = c.execute(
            "SELECT name, epoch_written, status, error FROM headwater_catalog.sinks"
        ).fetchall()
        state = {r[0]: r for r in rows if r[0] in names}
        behind = [r for n, r in state.items() if r[1] is None or r[1] < epoch]
        if len(state) == len(names) and not behind:
            return
        if time.time() > deadline:
            raise AssertionError(f"sinks behind epoch {epoch}: {behind}")
        time.sleep(0.3)


def _current_epoch(c: psycopg.Connection[Any]) -> int:
    return int(c.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()[0])


def _churn(c: psycopg.Connection[Any], rng: random.Random, rounds: int, base: int) -> None:
    for i in range(rounds):
        k = base + i
        c.execute(
            "INSERT INTO sk_t SELECT g, g %% 5, g * 0.25 FROM generate_series(%s, %s) AS s(g)",
            (k * 10, k * 10 + rng.randint(0, 9)),
        )
        c.execute("UPDATE sk_t SET v = v + 1 WHERE id %% 7 = %s", (rng.randint(0, 6),))
        c.execute("DELETE FROM sk_t WHERE id %% 11 = %s", (rng.randint(0, 10),))


def test_sinks_under_churn_and_sigkill(hw: HeadwaterServer, pg: Any) -> None:
    root = hw.data_dir.parent
    sinks = _sinks()
    rng = random.Random(17)
    with _conn(hw) as c:
        c.execute("CREATE TABLE sk_t (id bigint PRIMARY KEY, g int, v numeric(12,2))")
        c.execute("INSERT INTO sk_t SELECT g, g % 5, g * 0.5 FROM generate_series(1, 200) AS s(g)")
        c.execute(f"CREATE MATERIALIZED VIEW sk_v AS {VIEW}")
        for name, (source, kind, mode) in sinks.items():
            c.execute(_create_sql(name, source, kind, mode, pg.dsn, root))
        _churn(c, rng, 15, 100)
        _wait_caught_up(c, list(sinks), _current_epoch(c))
        _check(c, pg, root, sinks)

    # SIGKILL while writers and sinks run, restart on the same data directory
    stop = threading.Event()

    def writer() -> None:
        w_rng = random.Random(5)
        try:
            with _conn(hw) as w:
                k = 1000
                while not stop.is_set():
                    _churn(w, w_rng, 1, k)
                    k += 1
        except psycopg.Error:
            pass  # the server went away

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(3.0)
    hw.kill()
    stop.set()
    t.join(30)
    hw.start(timeout=120)
    with _conn(hw) as c:
        names = {r[0] for r in c.execute("SELECT name FROM headwater_catalog.sinks")}
        assert names == set(sinks)  # the definitions survived
        _churn(c, rng, 10, 3000)
        _wait_caught_up(c, list(sinks), _current_epoch(c))
        _check(c, pg, root, sinks)
        rows = c.execute("SELECT name, status, error FROM headwater_catalog.sinks").fetchall()
        assert all(r[1] == "running" for r in rows), rows


def test_sink_target_down(hw: HeadwaterServer) -> None:
    """A PostgreSQL target that refuses connections: the sink says why and retries;
    writes and reads go on; DROP SINK ends it."""
    port = free_port()
    with _conn(hw) as c:
        c.execute("CREATE TABLE sk_down (id int PRIMARY KEY)")
        c.execute(
            f"CREATE SINK sk_down_pg FROM sk_down INTO POSTGRES"
            f" 'host=127.0.0.1 port={port} user=headwater dbname=x' TABLE sk_down"
        )
        deadline = time.time() + 60
        while True:
            row = c.execute(
                "SELECT status, error FROM headwater_catalog.sinks WHERE name = 'sk_down_pg'"
            ).fetchone()
            if row[0] == "retrying":
                break
            if time.time() >= deadline:  # a hang guard, not a speed check
                pytest.fail(row)
            time.sleep(0.2)
        assert "retry" in row[1] and ("refused" in row[1] or "connect" in row[1].lower()), row
        c.execute("INSERT INTO sk_down VALUES (1), (2)")
        assert c.execute("SELECT count(*) FROM sk_down").fetchone()[0] == 2
        c.execute("DROP SINK sk_down_pg")
        gone = "SELECT count(*) FROM headwater_catalog.sinks WHERE name = 'sk_down_pg'"
        assert c.execute(gone).fetchone()[0] == 0


def test_sink_ddl_errors(hw: HeadwaterServer, tmp_path: Path) -> None:
    with _conn(hw) as c:
        c.execute("CREATE TABLE sk_ddl (id int PRIMARY KEY, x text)")
        c.execute(f"CREATE SINK sk_ddl_p FROM sk_ddl INTO PARQUET '{tmp_path / 'p'}'")
        with pytest.raises(psycopg.errors.DuplicateObject):
            c.execute(f"CREATE SINK sk_ddl_p FROM sk_ddl INTO PARQUET '{tmp_path / 'p'}'")
        c.execute(f"CREATE SINK IF NOT EXISTS sk_ddl_p FROM sk_ddl INTO PARQUET '{tmp_path}'")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute(f"CREATE SINK sk_ddl_q FROM nope INTO PARQUET '{tmp_path / 'q'}'")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            c.execute(
                f"CREATE SINK sk_ddl_q FROM sk_ddl INTO DELTA '{tmp_path / 'q'}'"
                " WITH (mode = 'sideways')"
            )
        with pytest.raises(psycopg.errors.UndefinedColumn):
            c.execute(
                f"CREATE SINK sk_ddl_q FROM sk_ddl INTO DELTA '{tmp_path / 'q'}' WITH (key = 'z')"
            )
        with pytest.raises(psycopg.errors.SyntaxError):
            c.execute("CREATE SINK sk_ddl_q FROM sk_ddl INTO POSTGRES 'host=x'")
        with pytest.raises(psycopg.errors.SyntaxError):
            c.execute("CREATE SINK sk_ddl_q FROM sk_ddl INTO KAFKA 'x'")
        with pytest.raises(psycopg.errors.SyntaxError, match="namespace"):
            c.execute(
                f"CREATE SINK sk_ddl_q FROM sk_ddl INTO ICEBERG '{tmp_path}' WITH (table = 'q')"
            )
        with pytest.raises(psycopg.errors.SyntaxError, match="namespace"):
            c.execute(
                f"CREATE SINK sk_ddl_q FROM sk_ddl INTO DELTA '{tmp_path}' WITH (namespace = 'q')"
            )
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="catalog_uri"):
            c.execute(
                "CREATE SINK sk_ddl_q FROM sk_ddl INTO ICEBERG 's3://b/w'"
                " WITH (namespace = 'n', table = 'q')"
            )
        c.execute("CREATE TEMP TABLE sk_ddl_tmp (id int)")
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            c.execute(f"CREATE SINK sk_ddl_q FROM sk_ddl_tmp INTO PARQUET '{tmp_path / 'q'}'")
        c.execute("DROP SINK sk_ddl_p")
        with pytest.raises(psycopg.errors.UndefinedObject):
            c.execute("DROP SINK sk_ddl_p")
        c.execute("DROP SINK IF EXISTS sk_ddl_p")
        c.execute(f"CREATE SINK sk_ddl_r FROM sk_ddl INTO PARQUET '{tmp_path / 'r'}'")
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            c.execute("DROP TABLE sk_ddl")
        c.execute("DROP TABLE sk_ddl CASCADE")
        gone = "SELECT * FROM headwater_catalog.sinks WHERE name = 'sk_ddl_r'"
        assert not c.execute(gone).fetchall()


def test_metrics_scrape(hw: HeadwaterServer, tmp_path: Path) -> None:
    """GET /metrics in Prometheus' text format: every view and sink, epochs, commits."""
    from urllib.request import urlopen

    from prometheus_client.parser import text_string_to_metric_families

    with _conn(hw) as c:
        c.execute("CREATE TABLE sk_m (id int PRIMARY KEY)")
        c.execute(f"CREATE SINK sk_m_p FROM sk_m INTO PARQUET '{tmp_path / 'm'}'")
        c.execute("INSERT INTO sk_m SELECT g FROM generate_series(1, 50) AS s(g)")
        _wait_caught_up(c, ["sk_m_p"], _current_epoch(c))
        c.execute("CREATE MATERIALIZED VIEW sk_m_v AS SELECT count(*) AS n FROM sk_m")
        c.execute("INSERT INTO sk_m VALUES (51)")  # a batch of the view
        c.execute("CREATE TABLE sk_w (id int PRIMARY KEY, v int)")
        c.execute("INSERT INTO sk_w VALUES (1, 1), (2, 2)")
        c.execute("UPDATE sk_w SET v = v + 1 WHERE v > 1")  # server/scanned_writes.py
        for _ in range(3):  # the first read runs; the next two reuse its result
            assert c.execute("SELECT n FROM sk_m_v", prepare=True).fetchone() == (51,)
        with _conn(hw) as other:  # and so does another connection's
            assert other.execute("SELECT n FROM sk_m_v", prepare=True).fetchone() == (51,)
        views = {
            f"{r[0]}.{r[1]}" for r in c.execute("SELECT schema, name FROM headwater_catalog.views")
        }
    port = hw.metrics_port  # type: ignore[attr-defined]
    with urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        assert r.status == 200
        text = r.read().decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            samples.setdefault(smp.name, {})[tuple(sorted(smp.labels.items()))] = smp.value
    assert samples["headwater_sink_rows_total"][(("sink", "public.sk_m_p"),)] >= 50
    assert samples["headwater_sink_lag_epochs"][(("sink", "public.sk_m_p"),)] >= 0
    assert samples["headwater_sink_status"][(("sink", "public.sk_m_p"), ("status", "running"))] == 1
    assert samples["headwater_epochs_total"][()] >= 3
    assert samples["headwater_commit_seconds_count"][()] >= 1
    assert samples["headwater_connections"][()] >= 0
    assert samples["headwater_read_results_reused_total"][()] >= 3
    by_path = samples["headwater_writes_total"]
    assert by_path[(("path", "insert"),)] >= 1 and by_path[(("path", "general"),)] >= 1
    assert by_path[(("path", "scanned"),)] >= 1
    assert samples["headwater_memory_rss_bytes"][()] > 0
    shown = {dict(k)["view"] for k in samples.get("headwater_view_status", {})}
    assert shown == views
    assert samples["headwater_sink_batch_seconds_count"][(("sink", "public.sk_m_p"),)] >= 1
    if views:  # (this test's view, and the churn test's)
        by_executor = samples["headwater_view_batch_seconds_count"]
        assert sum(by_executor.values()) >= 1, by_executor
        assert samples["headwater_view_freshness_seconds_count"][()] >= 1


def test_sink_target_comes_back(hw: HeadwaterServer, pg: Any) -> None:
    """A PostgreSQL target whose database does not exist yet: the sink retries, saying
    why; once it exists, the sink catches up with everything written meanwhile."""
    dsn = f"host={pg.host} port={pg.port} user={pg.user} dbname=sk_later"
    with _conn(hw) as c:
        c.execute("CREATE TABLE sk_back (id int PRIMARY KEY, x text)")
        c.execute("INSERT INTO sk_back SELECT g, 'a' || g FROM generate_series(1, 30) AS s(g)")
        c.execute(
            f"CREATE SINK sk_back_pg FROM sk_back INTO POSTGRES '{dsn}' TABLE sk.sk_back_pg"
            " WITH (interval = '0.2')"
        )
        deadline = time.time() + 60
        while True:
            status, error = c.execute(
                "SELECT status, error FROM headwater_catalog.sinks WHERE name = 'sk_back_pg'"
            ).fetchone()
            if status == "retrying":
                break
            if time.time() >= deadline:  # a hang guard, not a speed check
                pytest.fail((status, error))
            time.sleep(0.2)
        assert "sk_later" in error, error
        c.execute("UPDATE sk_back SET x = 'b' WHERE id <= 10")
        c.execute("DELETE FROM sk_back WHERE id > 25")
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute("CREATE DATABASE sk_later")
        _wait_caught_up(c, ["sk_back_pg"], _current_epoch(c))
        epoch, rows = _postgres(pg, "sk_back_pg", "sk_later")
        want = c.execute(f"SELECT * FROM sk_back AS OF EPOCH {epoch}").fetchall()
        assert sorted(rows) == sorted(want)
        status = c.execute(
            "SELECT status FROM headwater_catalog.sinks WHERE name = 'sk_back_pg'"
        ).fetchone()[0]
        assert status == "running"
