"""docker-compose.yml's topology, as processes on loopback (no Docker engine runs here).

The compose file is read, not paraphrased: each service started here runs the command,
environment and ports the file gives it, with its host names (`s3`, `postgres`,
`headwater:9188`) turned into 127.0.0.1 and free ports. Started: the S3 store (moto's
server, the version the compose file pins), its bucket (the `s3-bucket` service's PUT),
PostgreSQL 15 (initdb with the service's user and database), headwater (its exact
arguments, its data volume a temp dir); then deploy/demo.sql (a table sunk into the
PostgreSQL service, and into the bucket as a Delta table and an Iceberg table) is run,
the table churned, and every target read back equal to the table at the epoch it
records. Prometheus' scrape target from deploy/prometheus/prometheus.yml is scraped and
parsed, and every metric that deploy/prometheus/alerts.yml and the Grafana dashboard
name is in it.

Not started: spark-master and spark-worker (a JVM each; the demo has no materialized
view, so headwater starts no Spark job), prometheus and grafana themselves (no binary
here: their configuration is checked against the scrape instead).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.hwserver import REPO, free_port

COMPOSE = REPO / "docker-compose.yml"
DEPLOY = REPO / "deploy"
WAIT = 120.0


class Loopback:
    """Service ports of the compose file mapped to free loopback ports."""

    def __init__(self, services: dict[str, Any]) -> None:
        self.services = services
        self.ports: dict[tuple[str, int], int] = {}
        self.paths: dict[str, str] = {}  # a volume's path in its container -> here

    def container_ports(self, service: str) -> list[int]:
        return [int(str(p).split(":")[-1]) for p in self.services[service].get("ports", [])]

    def assign(self, service: str, container: int, port: int | None = None) -> int:
        self.ports[(service, container)] = port or free_port()
        return self.ports[(service, container)]

    def rewrite(self, text: str, service: str | None = None) -> str:
        """`svc:port`, libpq's `host=svc port=N`, and the service's own `0.0.0.0:port`
        as their loopback addresses; volumes' paths as their temp directories."""
        for inside, here in self.paths.items():
            text = text.replace(inside, here)
        for (svc, container), port in self.ports.items():
            text = text.replace(f"{svc}:{container}", f"127.0.0.1:{port}")
            text = re.sub(
                rf"host={re.escape(svc)} port={container}\b", f"host=127.0.0.1 port={port}", text
            )
            if svc == service:
                text = text.replace(f"0.0.0.0:{container}", f"127.0.0.1:{port}")
        return text


def _wait_port(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.time() + WAIT
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after {WAIT}s")


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.pg_oracle import ensure_postgres_installed, start_postgres

    try:
        ensure_postgres_installed()
    except RuntimeError as e:
        pytest.skip(str(e))
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    for name in ("headwater", "postgres", "s3", "s3-bucket", "prometheus", "spark-master"):
        assert name in services, f"docker-compose.yml has no service {name}"
    net = Loopback(services)
    root = tmp_path_factory.mktemp("topology")
    procs: list[subprocess.Popen[bytes]] = []
    pg = None
    try:
        # postgres: the image's POSTGRES_USER / POSTGRES_DB, initdb'd here
        env = services["postgres"]["environment"]
        pg = start_postgres(user=env["POSTGRES_USER"], dbname=env["POSTGRES_DB"])
        net.assign("postgres", net.container_ports("postgres")[0], pg.port)
        # s3: moto's server, the version the compose file installs
        shell = services["s3"]["command"][-1]
        pinned = re.search(r"moto\[server\]==([\w.]+)", shell)
        assert pinned and pinned.group(1) == version("moto"), (shell, version("moto"))
        argv = shlex.split(shell.split("&&")[-1])
        (s3_port,) = (net.assign("s3", p) for p in net.container_ports("s3"))
        argv = [str(Path(sys.executable).parent / argv[0]), *argv[1:]]
        argv[argv.index("-H") + 1] = "127.0.0.1"
        argv[argv.index("-p") + 1] = str(s3_port)
        log = open(root / "s3.log", "wb")
        procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        _wait_port(s3_port, procs[-1])
        # s3-bucket: its PUT
        args = services["s3-bucket"]["command"]
        url = net.rewrite(next(a for a in args if a.startswith("http")))
        method = args[args.index("-X") + 1]
        urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30).close()
        # headwater: its arguments, with loopback addresses and a temp data directory
        hw = services["headwater"]
        ports = {c: net.assign("headwater", c) for c in net.container_ports("headwater")}
        for volume in hw.get("volumes", []):
            net.paths[volume.split(":")[1]] = str(root / "data")
        argv = [net.rewrite(str(a), "headwater") for a in hw["command"]]
        assert argv[0] == "headwater"
        argv[:1] = [sys.executable, "-m", "headwater.cli"]
        argv[argv.index("--host") + 1] = "127.0.0.1"
        port_at = argv.index("--port") + 1
        argv[port_at] = str(ports[int(argv[port_at])])
        assert argv[argv.index("--data-dir") + 1] == str(root / "data"), "not a volume"
        hw_env = {k: net.rewrite(str(v)) for k, v in hw.get("environment", {}).items()}
        log = open(root / "headwater.log", "wb")
        procs.append(
            subprocess.Popen(
                argv,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **hw_env, "PYTHONUNBUFFERED": "1"},
            )
        )
        _wait_port(int(argv[port_at]), procs[-1])
        yield {
            "net": net,
            "pg": pg,
            "dsn": f"host=127.0.0.1 port={argv[port_at]} user=headwater dbname=headwater",
            "aws": hw_env,
            "log": root / "headwater.log",
            "data": root / "data",
        }
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        if pg is not None:
            pg.stop()


def _norm(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.normalize() if isinstance(v, Decimal) else v for v in row)


def _caught_up(c: psycopg.Connection[Any], names: set[str], log: Path) -> None:
    epoch = c.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()[0]
    deadline = time.time() + WAIT
    while True:
        rows = c.execute("SELECT name, epoch_written, status, error FROM headwater_catalog.sinks")
        behind = [r for r in rows if r[0] in names and (r[1] is None or r[1] < epoch)]
        if not behind:
            return
        if time.time() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{behind}\n{log.read_text()[-3000:]}")
        time.sleep(0.3)


def _pg_target(pg: Any, dbname: str) -> tuple[int, list[tuple[Any, ...]]]:
    import asyncpg

    async def read() -> tuple[int, list[tuple[Any, ...]]]:
        conn = await asyncpg.connect(host=pg.host, port=pg.port, user=pg.user, database=dbname)
        try:
            async with conn.transaction(isolation="repeatable_read"):
                epoch = await conn.fetchval(
                    "SELECT epoch FROM public.headwater_sink_progress WHERE sink = $1",
                    "public.orders_pg -> public.orders",
                )
                rows = await conn.fetch("SELECT * FROM public.orders")
            return int(epoch), [tuple(r.values()) for r in rows]
        finally:
            await conn.close()

    return asyncio.run(read())


def _lake_target(aws: dict[str, str]) -> tuple[int, Counter[tuple[Any, ...]]]:
    """The Delta changes table in the bucket, summed: (its epoch, rows)."""
    from deltalake import DeltaTable

    dt = DeltaTable("s3://headwater-lake/orders", storage_options=aws)
    epoch = next(int(c["headwater.epoch"]) for c in dt.history() if "headwater.epoch" in c)
    summed: Counter[tuple[Any, ...]] = Counter()
    for r in dt.to_pyarrow_table().to_pylist():
        summed[_norm(tuple(r.values())[2:])] += r["diff"]
    return epoch, +summed


def _iceberg_target(net: Loopback, aws: dict[str, str]) -> tuple[int, list[tuple[Any, ...]]]:
    """The Iceberg mirror in the bucket, through the catalog deploy/demo.sql names."""
    from headwater.storage.sinks.iceberg import catalog_properties
    from pyiceberg.catalog import load_catalog

    demo = net.rewrite((DEPLOY / "demo.sql").read_text())
    uri = re.search(r"catalog_uri = '([^']+)'", demo).group(1)  # type: ignore[union-attr]
    saved = dict(os.environ)
    os.environ.update(aws)  # (the sink's own AWS_* environment: its S3 settings)
    try:
        props = catalog_properties("s3://headwater-lake/warehouse", uri)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    table = load_catalog("headwater", **props).load_table(("shop", "orders"))
    epoch = int(table.current_snapshot().summary["headwater.epoch"])
    return epoch, [tuple(r.values()) for r in table.scan().to_arrow().to_pylist()]


def test_compose_topology(topology: dict[str, Any]) -> None:
    net: Loopback = topology["net"]
    pg = topology["pg"]
    demo = net.rewrite((DEPLOY / "demo.sql").read_text())
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", demo).split(";") if s.strip()]
    with psycopg.connect(topology["dsn"], autocommit=True) as c:
        for sql in statements:
            c.execute(sql)
        sinks = {"orders_pg", "orders_lake", "orders_iceberg"}
        for round_ in range(3):
            c.execute("UPDATE orders SET amount = amount + 1 WHERE id %% 13 = %s", (round_,))
            c.execute("DELETE FROM orders WHERE id %% 17 = %s", (round_,))
            c.execute(
                "INSERT INTO orders SELECT g, 'n', 1 FROM generate_series(%s, %s) AS s(g)",
                (2000 + round_ * 10, 2009 + round_ * 10),
            )
        _caught_up(c, sinks, topology["log"])
        dbname = net.services["postgres"]["environment"]["POSTGRES_DB"]
        epoch, rows = _pg_target(pg, dbname)
        want = Counter(_norm(r) for r in c.execute(f"SELECT * FROM orders AS OF EPOCH {epoch}"))
        assert Counter(_norm(r) for r in rows) == want
        epoch, summed = _lake_target(topology["aws"])
        want = Counter(_norm(r) for r in c.execute(f"SELECT * FROM orders AS OF EPOCH {epoch}"))
        assert summed == want
        epoch, rows = _iceberg_target(net, topology["aws"])
        want = Counter(_norm(r) for r in c.execute(f"SELECT * FROM orders AS OF EPOCH {epoch}"))
        assert Counter(_norm(r) for r in rows) == want
        status = dict(c.execute("SELECT name, status FROM headwater_catalog.sinks").fetchall())
        assert status == dict.fromkeys(sinks, "running"), status

    # Prometheus' scrape target, scraped; the alert rules' and dashboard's metrics in it
    from prometheus_client.parser import text_string_to_metric_families

    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    for rules in config["rule_files"]:
        assert (DEPLOY / "prometheus" / rules).exists(), rules
    (job,) = config["scrape_configs"]
    (target,) = job["static_configs"][0]["targets"]
    url = f"http://{net.rewrite(target)}{job.get('metrics_path', '/metrics')}"
    with urllib.request.urlopen(url, timeout=60) as r:
        text = r.read().decode()
    names: set[str] = set()
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        names.add(fam.name)
        for s in fam.samples:
            names.add(s.name)
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    for sink in ("public.orders_pg", "public.orders_lake", "public.orders_iceberg"):
        assert values[("headwater_sink_rows_total", (("sink", sink),))] > 0
        assert values[("headwater_sink_batch_seconds_count", (("sink", sink),))] >= 1
    exprs = [
        rule["expr"]
        for group in yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
    ]
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "headwater.json").read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\bheadwater_[a-z_]+", e)}
    base = {re.sub(r"_(bucket|count|sum|total)$", "", m) for m in names}
    missing = {
        m for m in used if m not in names and re.sub(r"_(bucket|count|sum)$", "", m) not in base
    }
    assert not missing, f"alerts/dashboard name metrics /metrics lacks: {sorted(missing)}"
