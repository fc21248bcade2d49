"""Prometheus metrics over HTTP: `headwater start --metrics-address 127.0.0.1:9188`.

GET / on the same address is the status page (server/status_page.py).

GET /metrics answers Prometheus' text format (prometheus-client), built at each scrape
from what headwater_catalog.views and headwater_catalog.sinks show:

    headwater_view_frontier_epoch{view}      newest epoch the view reflects
    headwater_view_lag_epochs{view}          epochs closed since, not reflected yet
    headwater_view_lag_seconds{view}         since the oldest unreflected epoch closed
    headwater_view_rows{view}, headwater_view_state_rows{view}
    headwater_view_status{view,status}       1 for the view's status
    headwater_view_slo_compliance{view}, headwater_view_freshness_target_seconds{view},
    headwater_view_degraded{view,reason}     the freshness SLO (server/slo.py)
    headwater_sink_epoch_written{sink}       newest epoch the sink's target holds
    headwater_sink_lag_epochs{sink}, headwater_sink_lag_seconds{sink}
    headwater_sink_rows_total{sink}, headwater_sink_batches_total{sink}
    headwater_sink_status{sink,status}
    headwater_sink_batch_seconds{sink}       histogram: a sink's batch read and written
    headwater_view_batch_seconds{executor}   histogram: a batch of view maintenance
                                             (executor duckdb | spark | both)
    headwater_view_freshness_seconds         histogram: an epoch closed -> the views
                                             reflect it (observed at each batch's end:
                                             the freshness SLO's measure)
    headwater_epochs_total                   epochs made durable (rate(): epochs/s)
    headwater_commit_seconds                 histogram: an epoch sealed -> durable
    headwater_stage_restarts_total           restarts of the views' Spark stage
    headwater_writes_total{path}             INSERT/UPDATE/DELETE/TRUNCATE statements by
                                             the path that ran them: insert, point,
                                             scanned (batched, no write lock), general (a
                                             writing transaction under the write lock)
    headwater_read_results_reused_total      reads answered from a result kept by any
                                             connection, nothing under it changed since
                                             (server/result_cache.py)
    headwater_connections                    client connections
    headwater_memory_rss_bytes               the server process' resident memory

The scrape runs on a worker thread (the views' sizes are a statement over their
state), served by a small asyncio HTTP responder on the server's event loop: no web
framework. It listens on loopback by default; the address is the operator's choice.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from headwater.server import hw_catalog, slo
from headwater.server.status_page import StatusPage
from headwater.storage.changelog import EpochRecord
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from headwater.server.instance import Instance

log = logging.getLogger("headwater.metrics")

DEFAULT_ADDRESS = "127.0.0.1:9188"
BATCH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


def parse_address(text: str) -> tuple[str, int]:
    """'host:port' (or ':port' / 'port': loopback) -> (host, port)."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"--metrics-address {text!r}: expected host:port") from None
    return host.strip("[]") or "127.0.0.1", number


class _Collector:
    def __init__(self, instance: Instance, connections: Any) -> None:
        self.instance = instance
        self.connections = connections

    def collect(self) -> Iterator[Metric]:
        inst = self.instance
        try:
            views = hw_catalog.views(inst).to_pylist()
        except Exception:  # the views' sizes failed: the scrape goes on without them
            log.exception("metrics: reading headwater_catalog.views")
            views = []
        yield from self._views(views)
        yield from slo.metrics(views)  # headwater_view_slo_compliance, _degraded, ...
        yield from self._sinks(inst.sinks.rows())
        epochs = CounterMetricFamily("headwater_epochs", "epochs made durable")
        committer = inst.committer
        epochs.add_metric([], committer.durable_epoch if committer is not None else 0)
        yield epochs
        restarts = CounterMetricFamily(
            "headwater_stage_restarts", "restarts of the views' Spark stage"
        )
        restarts.add_metric([], inst.matviews.stage_restarts)
        yield restarts
        reused = CounterMetricFamily(
            "headwater_read_results_reused", "reads answered from a kept result of the statement"
        )
        reused.add_metric([], inst.reads_reused)
        yield reused
        writes = CounterMetricFamily(
            "headwater_writes", "write statements by the path that ran them", labels=["path"]
        )
        for path in ("insert", "point", "scanned", "general"):
            writes.add_metric([path], inst.write_paths[path])
        yield writes
        conns = GaugeMetricFamily("headwater_connections", "client connections")
        conns.add_metric([], len(self.connections()))
        yield conns
        rss = GaugeMetricFamily("headwater_memory_rss_bytes", "resident memory of the server")
        rss.add_metric([], _rss_bytes())
        yield rss

    @staticmethod
    def _views(rows: list[dict[str, Any]]) -> Iterator[Metric]:
        label = ["view"]
        front = GaugeMetricFamily(
            "headwater_view_frontier_epoch", "newest epoch the view reflects", labels=label
        )
        lag = GaugeMetricFamily(
            "headwater_view_lag_epochs", "epochs the view does not reflect yet", labels=label
        )
        lag_s = GaugeMetricFamily(
            "headwater_view_lag_seconds",
            "time since the oldest epoch the view does not reflect closed",
            labels=label,
        )
        size = GaugeMetricFamily("headwater_view_rows", "rows of the view", labels=label)
        state = GaugeMetricFamily(
            "headwater_view_state_rows", "rows of state the view keeps", labels=label
        )
        status = GaugeMetricFamily(
            "headwater_view_status", "1 for the view's status", labels=["view", "status"]
        )
        for r in rows:
            name = [f"{r['schema']}.{r['name']}"]
            for family, value in (
                (front, r["frontier"]),
                (lag, r["lag_epochs"]),
                (size, r["rows"]),
                (state, r["state_rows"]),
            ):
                if value is not None:
                    family.add_metric(name, value)
            if r["lag_ms"] is not None:
                lag_s.add_metric(name, r["lag_ms"] / 1000.0)
            status.add_metric([*name, r["status"]], 1)
        yield from (front, lag, lag_s, size, state, status)

    @staticmethod
    def _sinks(rows: list[dict[str, Any]]) -> Iterator[Metric]:
        label = ["sink"]
        written = GaugeMetricFamily(
            "headwater_sink_epoch_written", "newest epoch the sink's target holds", labels=label
        )
        lag = GaugeMetricFamily(
            "headwater_sink_lag_epochs", "epochs the sink has not written yet", labels=label
        )
        lag_s = GaugeMetricFamily(
            "headwater_sink_lag_seconds",
            "time since the oldest epoch the sink has not written closed",
            labels=label,
        )
        written_rows = CounterMetricFamily(
            "headwater_sink_rows", "rows written since the server started", labels=label
        )
        batches = CounterMetricFamily(
            "headwater_sink_batches", "batches written since the server started", labels=label
        )
        status = GaugeMetricFamily(
            "headwater_sink_status", "1 for the sink's status", labels=["sink", "status"]
        )
        for r in rows:
            name = [f"{r['schema']}.{r['name']}"]
            if r["epoch_written"] is not None:
                written.add_metric(name, r["epoch_written"])
            if r["lag_epochs"] is not None:
                lag.add_metric(name, r["lag_epochs"])
            if r["lag_ms"] is not None:
                lag_s.add_metric(name, r["lag_ms"] / 1000.0)
            written_rows.add_metric(name, r["rows"])
            batches.add_metric(name, r["batches"])
            status.add_metric([*name, r["status"]], 1)
        yield from (written, lag, lag_s, written_rows, batches, status)


def _rss_bytes() -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MetricsServer:
    def __init__(self, instance: Instance, connections: Any) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(instance, connections))  # type: ignore[arg-type]
        self.commit = Histogram(
            "headwater_commit_seconds",
            "an epoch sealed to durable",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.view_batch = Histogram(
            "headwater_view_batch_seconds",
            "a batch of view maintenance, by the executor that ran it",
            labelnames=["executor"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.freshness = Histogram(
            "headwater_view_freshness_seconds",
            "an epoch closed until the views reflect it (at the end of each batch)",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.sink_batch = Histogram(
            "headwater_sink_batch_seconds",
            "a sink's batch read from its source and written to its target",
            labelnames=["sink"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.instance = instance
        if instance.committer is not None:
            instance.committer.on_durable(self._durable)
        instance.matviews.batch_listeners.append(self._view_batch)
        instance.sinks.batch_listeners.append(self._sink_batch)
        self.page = StatusPage(instance)  # GET /
        self._server: asyncio.base_events.Server | None = None

    def _durable(self, rec: EpochRecord) -> None:
        import time

        if rec.closed_at:
            self.commit.observe(max(time.time() - rec.closed_at, 0.0))

    def _view_batch(self, end: int, seconds: float, executors: frozenset[str]) -> None:
        """After a batch of the views' stage (on its thread)."""
        import time

        label = "both" if len(executors) > 1 else next(iter(executors), "none")
        self.view_batch.labels(label).observe(seconds)
        closed = self.instance.epoch_closed_at(end)
        if closed:
            self.freshness.observe(max(time.time() - closed, 0.0))

    def _sink_batch(self, sink: str, seconds: float) -> None:
        self.sink_batch.labels(sink).observe(seconds)

    async def start(self, host: str, port: int) -> bool:
        """Listen; False (a warning logged) when the address cannot be bound: the
        database serves without metrics rather than not at all."""
        try:
            self._server = await asyncio.start_server(self._handle, host, port)
        except OSError as e:
            log.warning(
                "metrics: cannot listen on %s:%d (%s); serving without metrics", host, port, e
            )
            return False
        self.page.start()
        log.info("metrics on http://%s:%d/metrics, status page on http://%s:%d/", *(host, port) * 2)
        return True

    async def close(self) -> None:
        self.page.stop()
        if self._server is not None:
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            line = request.split(b"\r\n", 1)[0].decode("latin-1").split()
            method = line[0] if line else ""
            path = line[1].split("?", 1)[0] if len(line) > 1 else "/"
            if len(line) < 2 or method not in ("GET", "HEAD"):
                status, ctype, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
            elif path == "/metrics":
                body = await asyncio.to_thread(generate_latest, self.registry)
                status, ctype = "200 OK", CONTENT_TYPE_LATEST
            elif path == "/":
                body = await asyncio.to_thread(self.page.html)
                status, ctype = "200 OK", "text/html; charset=utf-8"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"see / or /metrics\n"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + (body if method != "HEAD" else b""))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:
            log.exception("metrics: answering a scrape")
        finally:
            writer.close()
