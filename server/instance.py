"""One running Headwater: storage, replica, catalog and the group committer.

`Instance.open()` recovers the state from the data directory: the catalog from its
keys, then every table's versions from its change log, so that the replica equals
the state after the last durable epoch (invariant 3).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Table
from headwater.planner.pg_compat import install_functions
from headwater.server import clock_tick
from headwater.server.batcher import InsertBatcher
from headwater.server.channels import Notifications
from headwater.server.engine_snapshots import EngineSnapshots
from headwater.server.key_locks import KeyLocks
from headwater.server.matviews import MaterializedViews
from headwater.server.progress import Board
from headwater.server.sequences import Sequences
from headwater.server.sinks import SinkManager
from headwater.server.slo import FreshnessSLO
from headwater.storage.changelog import EVENT_EPOCH, RETAINED_FROM, ChangeLog, EpochRecord
from headwater.storage.commit import Committer
from headwater.storage.object_store import ObjectStoreURL, claim_cache
from headwater.storage.replica import Replica
from headwater.storage.sequences import SequenceLog
from headwater.storage.slate import SlateStore

from headwater.errors import SQLError

log = logging.getLogger("headwater")


@dataclass
class Config:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 6544
    write_lock_timeout: float = 30.0  # seconds a writer waits for another's transaction
    memory_limit: int | None = None  # bytes for the DuckDB replica; None: half the memory
    max_message_size: int = 64 << 20  # longest Query/Parse/Bind/CopyData a client may send
    tls: bool = True  # answer SSLRequest; a self-signed certificate unless tls_cert is given
    tls_cert: Path | None = None
    tls_key: Path | None = None
    hba_file: Path | None = None  # pg_hba.conf-style rules; None: trust loopback, SCRAM else
    min_free_mb: int = 64  # writes are refused (53100) when the data dir has less free space
    max_connections: int = 100  # as PostgreSQL's max_connections (superusers get 3 more)
    spark_master: str = "local[2]"  # where the engine's Spark stage runs
    # the standalone master's web UI (the status page lists its workers); None: port 8080
    spark_master_ui: str | None = None
    executor: str = "auto"  # who runs views' batches: auto | spark | duckdb (engine/executors)
    # seconds the stage may have work and finish no batch before its JVM is killed
    spark_stall_timeout: float = 120.0
    retention: float = 3600.0  # seconds of history kept for AS OF and SUBSCRIBE ... AS OF
    clock_tick: float = 1.0  # seconds without an epoch before temporal views get an empty one
    metrics_address: str | None = None  # host:port of GET /metrics (server/metrics.py)
    # s3://bucket/prefix holding SlateDB (storage/object_store.py); data_dir is a cache
    object_store: ObjectStoreURL | None = None
    # a local data directory's writes are synchronous (PostgreSQL's fsync; storage/synchronous.py)
    fsync: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class Instance:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.store = SlateStore(config.data_dir / "slatedb", config.object_store, config.fsync)
        # why the server must stop (another server fenced it); `stopping` is then set
        self.fatal: SQLError | None = None
        self.stopping = asyncio.Event()
        self.changelog = ChangeLog(self.store)
        self.sequences = Sequences(SequenceLog(self.store))
        self.replica = Replica(
            config.memory_limit, config.data_dir / "duckdb_tmp", self._install_functions
        )
        self.catalog = Catalog()
        self.next_rid = 1
        # view oid -> oids of the relations its definition names (for DROP and 2BP01);
        # rebuilt lazily by binding the view when missing (e.g. after a restart)
        self.view_deps: dict[int, set[int]] = {}
        # ALTERs whose replica table is rewritten and whose catalog is not current yet:
        # a read that meets the new table with the old catalog waits and runs again
        self.reshaping = 0
        self.rebuilding: set[int] = set()  # materialized views rebuilt after an ALTER
        self.committer: Committer | None = None
        self.matviews = MaterializedViews(self)
        self.snapshots = EngineSnapshots(self)  # --object-store: the engine's state
        # epoch -> (closed at, rows changed per table oid): headwater_catalog.epochs
        self.epoch_history: dict[int, tuple[float, dict[int, int]]] = {}
        self.table_changed: dict[int, int] = {}  # table oid -> the last epoch that changed it
        self.reads_reused = 0  # reads answered from a kept result (server/result_cache.py)
        # (DuckDB SQL, parameters, TimeZone) -> (epoch read at, catalog, result, bytes),
        # least recently used first; and their bytes (server/result_cache.py)
        self.read_results: OrderedDict[tuple[str, str, str | None], Any] = OrderedDict()
        self.read_results_bytes = 0
        # INSERT/UPDATE/DELETE/TRUNCATE statements by the path that ran them (executor._write)
        self.write_paths: Counter[str] = Counter()
        self.retained_from = 0  # oldest epoch AS OF can read (history before it vacuumed)
        self._vacuum_task: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._clock_task: asyncio.Task[None] | None = None
        self._vacuum_lock = asyncio.Lock()  # one vacuum pass at a time (VACUUM, background)
        self.notifications = Notifications()  # LISTEN / NOTIFY (server/notify.py)
        self.sinks = SinkManager(self)  # CREATE SINK (server/sinks.py)
        self.progress = Board()  # backfills and COPYs running now (server/progress.py)
        self.slo = FreshnessSLO(self)  # WITH (freshness = ...) (server/slo.py)

    def _install_functions(self, db: Any) -> None:
        install_functions(db)
        self.sequences.install(db)

    def meta(self) -> dict[str, Any]:
        return {"next_oid": self.catalog.next_oid}

    def allocate_rids(self, n: int) -> int:
        first = self.next_rid
        self.next_rid += n
        return first

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self.store.on_fenced = lambda err: loop.call_soon_threadsafe(self._fenced, err)
        await asyncio.to_thread(self._recover)
        last = self._last_epoch
        self.batcher = InsertBatcher(self)
        self.key_locks = KeyLocks()  # row locks of point writes (server/key_locks.py)
        self.committer = Committer(
            self.changelog,
            last,
            self.meta,
            self._undo,
            data_dir=self.config.data_dir,
            min_free_bytes=self.config.min_free_mb << 20,
            prepare=self.batcher.applied,
        )
        self.committer.on_durable(self._record_epoch)
        self.committer.on_durable(self.matviews.spool_epoch)
        self.committer.on_durable(self.replica.keys.observe)  # point reads' cache
        self.matviews.start(asyncio.get_running_loop())
        self.committer.start()
        self._vacuum_task = asyncio.get_running_loop().create_task(self._vacuum_loop())
        if self.config.clock_tick > 0:
            self._clock_task = asyncio.get_running_loop().create_task(
                clock_tick.tick(
                    self.committer,
                    self.config.clock_tick,
                    self.matviews.has_temporal_views,
                    lambda: self.epoch_closed_at(self.committer.durable_epoch) or 0.0,
                )
            )
        if self.config.object_store is not None:
            self._snapshot_task = asyncio.get_running_loop().create_task(self.snapshots.loop())
        self.sinks.start()
        self.slo.start()

    def _fenced(self, err: SQLError) -> None:
        log.critical("%s. %s %s", err.message, err.detail, err.hint)
        self.fatal = err
        self.stopping.set()

    def _recover(self) -> None:
        t0 = time.time()
        claim_cache(self.config.data_dir, self.config.object_store)
        self.snapshots.restore()
        self.store.open_sync()
        objs, meta = self.changelog.load_catalog()
        self.catalog.load(objs, meta.get("next_oid", 0))
        self.sequences.recover()
        self.next_rid = 1
        epochs = self.changelog.epochs()
        self._last_epoch = epochs[-1]["epoch"] if epochs else 0
        for h in epochs:
            changed = {int(o): n for o, n in h.get("rows", {}).items()}
            self.epoch_history[h["epoch"]] = (h.get("closed_at", 0.0), changed)
            self.table_changed.update(dict.fromkeys(changed, h["epoch"]))
        rows = 0
        respool_after = self.matviews.recover_before_replica()
        for table in self.catalog.tables():
            table_log = self.changelog.read_table_log(table.oid)
            if respool_after is not None:  # (a rewrite is history, not an epoch's change)
                changes = [(e, t) for e, t in table_log if EVENT_EPOCH not in t.column_names]
                self.matviews.respool(table.oid, changes, respool_after)
            rows += self.replica.rebuild_table(table, table_log)
            for _, t in table_log:  # a rewrite holds no history vacuumed before it
                kept = (t.schema.metadata or {}).get(RETAINED_FROM)
                if kept is not None:
                    self.retained_from = max(self.retained_from, int(kept))
        # Row ids are not persisted separately: continue after the largest one kept.
        self.next_rid = self.replica.max_rid(t.oid for t in self.catalog.tables()) + 1
        self.matviews.recover_after_replica(self._last_epoch)
        log.info(
            "recovered %d tables, %d live rows, %d epochs (last %d) in %.2fs",
            sum(1 for _ in self.catalog.tables()),
            rows,
            len(epochs),
            self._last_epoch,
            time.time() - t0,
        )

    def _record_epoch(self, rec: EpochRecord) -> None:
        changed = {oid: t.num_rows for oid, t in rec.changes.items() if t.num_rows}
        self.epoch_history[rec.epoch] = (rec.closed_at, changed)
        for oid in changed:
            self.table_changed[oid] = rec.epoch

    def epoch_closed_at(self, epoch: int) -> float | None:
        h = self.epoch_history.get(epoch)
        return h[0] if h else None

    def _undo(self, first_epoch: int) -> None:
        self.batcher.discard_unapplied()
        self.batcher.forget()
        self.replica.undo_epochs([t.oid for t in self.catalog.tables()], first_epoch)

    # -- retention ------------------------------------------------------------------
    def retained_range(self) -> tuple[int, int]:
        """Epochs AS OF can read: [oldest retained, newest durable]."""
        assert self.committer is not None
        return self.retained_from, self.committer.durable_epoch

    def horizon(self, now: float) -> int:
        """The newest epoch closed more than `retention` ago: history older than it may
        go. Never beyond what a lagging view still has to read."""
        cutoff = now - self.config.retention
        h = 0
        for epoch, (closed_at, _) in self.epoch_history.items():
            if closed_at <= cutoff and epoch > h:
                h = epoch
        return self.sinks.clamp_horizon(self.matviews.clamp_horizon(h))

    async def _vacuum_loop(self) -> None:
        interval = min(max(self.config.retention / 10, 1.0), 60.0)
        while True:
            await asyncio.sleep(interval)
            await self.vacuum_now()

    async def vacuum_now(self) -> None:
        """Drop history older than the retention window: every `interval` in the
        background, and at VACUUM (server/maintenance.py); one pass at a time."""
        async with self._vacuum_lock:
            h = self.horizon(time.time())
            if h <= self.retained_from or self.committer is None:
                return
            try:  # old versions only: writers touch live and pending ones, never these
                removed = await asyncio.to_thread(self._vacuum, h)
            except Exception:
                log.exception("vacuum to epoch %d failed", h)
                return
            log.debug("vacuumed %d versions up to epoch %d", removed, h)

    def _vacuum(self, horizon: int) -> int:
        removed = self.replica.vacuum([t.oid for t in self.catalog.tables()], horizon)
        self.matviews.vacuum(horizon)
        self.retained_from = horizon
        for e in [e for e in self.epoch_history if e < horizon]:
            del self.epoch_history[e]
        return removed

    async def close(self) -> None:
        self.slo.close()
        if self._vacuum_task is not None:
            self._vacuum_task.cancel()
        if self._snapshot_task is not None:
            self._snapshot_task.cancel()
        if self._clock_task is not None:
            self._clock_task.cancel()
        await self.sinks.close()
        await asyncio.to_thread(self.matviews.close)
        await asyncio.to_thread(self.snapshots.ship)  # the stage stopped: its last frontiers
        if self.committer:
            await self.committer.stop()
        await asyncio.to_thread(self.store.close_sync)

    @property
    def visible_epoch(self) -> int:
        assert self.committer is not None
        return self.committer.visible_epoch

    def table(self, oid: int) -> Table | None:
        rel = self.catalog.by_oid(oid)
        return rel if isinstance(rel, Table) else None
