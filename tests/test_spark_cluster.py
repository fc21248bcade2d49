"""Views maintained on a real Spark standalone cluster (issue 13).

A master and one worker are started from the pyspark wheel on loopback
(`spark-class org.apache.spark.deploy.master.Master` / `...deploy.worker.Worker`, the
worker with 2 cores and 768 MB); Headwater runs with `--spark-master spark://...
--executor spark`. Under churn every view equals PostgreSQL 15 after each write round,
and again at each of those epochs (`AS OF EPOCH`) at the end; the tasks ran on the
worker's executor, not in the driver: Spark's event log (every finished task names its
executor), the worker's own JSON (the application's executor on it) and
headwater_catalog.views' `spark_tasks` agree. One server for the module (its own:
it needs the cluster), plus the two cluster JVMs and the executor JVM.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import psycopg
import pyspark
import pytest

from tests.hwserver import HeadwaterServer, free_port
from tests.test_matviews_spark import random_writes

pytestmark = pytest.mark.oracle

SPARK_HOME = Path(pyspark.__file__).parent
SCHEMA = [
    "CREATE TABLE sc_t (id int PRIMARY KEY, a int, b int, s text)",
    "CREATE TABLE sc_u (id int PRIMARY KEY, a int, x int)",
]
VIEWS = {
    "sc_agg": "SELECT a, count(*) AS n, sum(b) AS sb, max(s) AS hi FROM sc_t GROUP BY a",
    "sc_join": "SELECT sc_t.id, sc_t.b, sc_u.x FROM sc_t JOIN sc_u ON sc_t.a = sc_u.a",
    "sc_distinct": "SELECT DISTINCT a, s FROM sc_t",
}
START_S = 600  # the cluster's JVMs start in 20-60 s on a quiet machine, minutes at load 30


@dataclass
class Cluster:
    url: str  # spark://127.0.0.1:port
    master_ui: str
    worker_ui: str
    event_dir: Path
    procs: list[subprocess.Popen[bytes]]

    def master_json(self) -> dict:
        return _get_json(self.master_ui + "/json/")

    def worker_json(self) -> dict:
        return _get_json(self.worker_ui + "/json/")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _cluster_env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_DAEMON_MEMORY": "256m",  # the master's and the worker's own heaps
        # no REST submission server (port 6066, which another test's cluster may hold)
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }


def start_cluster(
    root: Path, cores: int = 2, memory: str = "768m", timeout: float = START_S
) -> Cluster:
    """A standalone master and one worker on loopback, from the pyspark wheel; returns
    once the worker has registered (bench/executors.py uses it too)."""
    env = _cluster_env(root)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, mui, wui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def launch(name: str, *args: str) -> None:
        log = open(root / f"{name}.log", "ab")
        # spark-class execs the JVM: the pid is the JVM's
        procs.append(
            subprocess.Popen([spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
        )

    c = Cluster(url, f"http://127.0.0.1:{mui}", f"http://127.0.0.1:{wui}", root / "events", procs)
    c.event_dir.mkdir(exist_ok=True)
    try:
        launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(mui)),
        )
        launch(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            url,
            *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
            *("--webui-port", str(wui), "--work-dir", str(root / "work")),
        )
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError, ValueError):
                if c.master_json().get("aliveworkers") == 1:
                    return c
            for p in procs:
                assert p.poll() is None, (root / "master.log").read_text()[-3000:]
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail("the Spark cluster did not start")
            time.sleep(1)
    except BaseException:
        c.stop()
        raise


def driver_env(event_dir: Path | None, executor_memory: str) -> dict[str, str]:
    """What a driver (the server, or a bench) needs to run its jobs on the cluster."""
    submit = [
        # the executor fits the small worker; its tasks' Python is the driver's
        f"--conf spark.executor.memory={executor_memory}",
        f"--conf spark.pyspark.python={sys.executable}",
    ]
    if event_dir is not None:  # where each finished task says which executor ran it
        submit += [
            "--conf spark.eventLog.enabled=true",
            f"--conf spark.eventLog.dir=file://{event_dir}",
            "--conf spark.eventLog.compress=false",
            "--conf spark.eventLog.rolling.enabled=false",
        ]
    return {
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_SUBMIT_ARGS": " ".join([*submit, "pyspark-shell"]),
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = start_cluster(Path(tempfile.mkdtemp(prefix="headwater-spark-cluster-")))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def server(cluster: Cluster) -> Iterator[HeadwaterServer]:
    root = Path(tempfile.mkdtemp(prefix="headwater-spark-cluster-hw-"))
    env = driver_env(cluster.event_dir, "512m")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # HeadwaterServer passes os.environ to the server process
    try:
        metrics = free_port()
        srv = HeadwaterServer(
            root / "data",
            args=[
                *("--executor", "spark", "--spark-master", cluster.url),
                *("--spark-master-ui", cluster.master_ui, "--metrics-port", str(metrics)),
            ],
        ).start()
        srv.metrics_port = metrics  # type: ignore[attr-defined]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield srv
    srv.stop()


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn, autocommit=True) as c:  # type: ignore[attr-defined]
        yield c


def _norm(rows: list[tuple]) -> list[tuple]:
    def v(x: object) -> object:
        return float(x) if isinstance(x, Decimal) else x

    return sorted((tuple(v(x) for x in r) for r in rows), key=repr)


def _task_ends(event_dir: Path) -> tuple[list[dict], set[str]]:
    """Spark's event log: every finished task's info, and the executors added."""
    tasks: list[dict] = []
    added: set[str] = set()
    for f in sorted(p for p in event_dir.rglob("*") if p.is_file()):
        for line in f.read_text(errors="replace").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # the last line of a log still being written
            if e.get("Event") == "SparkListenerTaskEnd":
                tasks.append(e["Task Info"])
            elif e.get("Event") == "SparkListenerExecutorAdded":
                added.add(e["Executor ID"])
    return tasks, added


def test_views_on_standalone_cluster(
    cluster: Cluster, server: HeadwaterServer, pg: psycopg.Connection
) -> None:
    rng = random.Random(1313)
    with psycopg.connect(server.dsn, autocommit=True) as hw:
        hw.execute("SET headwater.freshness_timeout = '1200s'")  # Spark at load 30+
        assert hw.execute("SHOW headwater.executor").fetchone() == ("spark",)
        for sql in SCHEMA:
            pg.execute(sql.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
            hw.execute(sql)
        pg.execute("TRUNCATE sc_t, sc_u")
        random_writes(rng, hw, pg, 30, "sc", 60)
        for name, sql in VIEWS.items():
            hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        seen: list[tuple[int, dict[str, list[tuple]]]] = []
        for n in (0, 1, 25):
            random_writes(rng, hw, pg, n, "sc", 60)
            epoch = hw.execute("SELECT headwater_write_fence()").fetchone()[0]
            want = {name: _norm(pg.execute(sql).fetchall()) for name, sql in VIEWS.items()}
            for name in VIEWS:  # waits for the batch Spark runs for this epoch
                got = _norm(hw.execute(f"SELECT * FROM {name}").fetchall())
                assert got == want[name], f"{name} differs from PostgreSQL at epoch {epoch}"
            seen.append((epoch, want))
        for epoch, want in seen:  # each epoch checked, again, from the views' versions
            for name in VIEWS:
                got = _norm(hw.execute(f"SELECT * FROM {name} AS OF EPOCH {epoch}").fetchall())
                assert got == want[name], f"{name} AS OF EPOCH {epoch}"
        rows = hw.execute(
            "SELECT name, executor, spark_tasks FROM headwater_catalog.views WHERE name LIKE 'sc_%'"
        ).fetchall()
    assert {r[1] for r in rows} == {"spark"}, rows
    assert all(r[2] > 0 for r in rows), rows

    # the application runs on the cluster, with its executor on the worker
    apps = cluster.master_json()["activeapps"]
    assert [a["name"] for a in apps] == ["headwater-engine"], apps
    execs = cluster.worker_json()["executors"]
    assert [e["appid"] for e in execs] == [apps[0]["id"]], execs
    worker_exec = str(execs[0]["id"])

    # every task ran on that executor; none in the driver (which a local master would be)
    tasks, added = _task_ends(cluster.event_dir)
    by_executor: dict[str, int] = {}
    for t in tasks:
        by_executor[t["Executor ID"]] = by_executor.get(t["Executor ID"], 0) + 1
    assert worker_exec in added, added
    assert set(by_executor) == {worker_exec}, by_executor
    # the catalog counts the views' tasks; the stage's own epoch jobs come on top
    assert by_executor[worker_exec] >= sum(r[2] for r in rows), (by_executor, rows)


def test_status_page_lists_the_workers(cluster: Cluster, server: HeadwaterServer) -> None:
    """The status page (GET / on the metrics address) lists the workers the standalone
    master reports (server/status_page.py; tests/test_status.py loads it in Chromium)."""
    port = server.metrics_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as r:
        page = r.read().decode()
    worker = cluster.master_json()["workers"][0]
    assert f"master {cluster.url} (ALIVE): 1 alive worker(s)" in page, page
    row = f'<tr class="worker"><td>{worker["id"]}</td><td>127.0.0.1:{worker["port"]}</td>'
    assert row + "<td>ALIVE</td>" in page, page
