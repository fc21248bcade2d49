"""`--object-store`: the engine's state and Spark's checkpoint, copied to the bucket.

The change log is in the bucket already (SlateDB); the engine's state is what a start
would otherwise rebuild by backfilling every view. Every 10 s (or ten times the last
copy's duration, if longer; `HEADWATER_ENGINE_SNAPSHOT_S` sets a fixed period) and at
shutdown, `ship` captures one consistent copy (engine/state_copy.py: the DuckDB
database, the Parquet files its manifest lists, Spark's checkpoint) and makes it the
bucket's snapshot (storage/bucket_snapshot.py: new files, then the manifest, then the
files no snapshot names are deleted). Nothing is copied when no batch, view or Parquet
generation changed since the last copy, and Parquet generations already in the bucket
are not uploaded again.

`restore` fetches the snapshot into an empty cache before the engine opens: the views
go on from their frontiers, Spark's stage from its checkpoint, the Spark executor
from its Parquet files, and the epochs after the frontiers are respooled from the
change log as after any restart (docs/storage.md "Object storage").
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.storage.bucket_snapshot import BucketSnapshots

from headwater import faults

if TYPE_CHECKING:
    from headwater.server.instance import Instance

log = logging.getLogger("headwater")

AREA = "engine"  # {prefix}/engine/ in the bucket
PERIOD_ENV = "HEADWATER_ENGINE_SNAPSHOT_S"  # seconds between copies (tests shorten it)
PERIOD = 10.0
DUTY = 10.0  # at least this many times a copy's duration between two copies
STAGING = "engine-snapshot"  # in the data directory, emptied by each copy
# fault injection (headwater/faults.py): while {data_dir}/faults/snapshot_crash exists, a
# copy SIGKILLs its own server once half of its new files are uploaded, before the
# manifest (tests/test_object_store.py: the previous snapshot stays usable)
CRASH_FAULT = "snapshot_crash"


class EngineSnapshots:
    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        store = instance.config.object_store
        self.bucket = BucketSnapshots(store, AREA) if store is not None else None
        self._lock = threading.Lock()  # one copy at a time (the loop's, shutdown's)
        self._fingerprint: tuple[Any, ...] | None = None  # of the last copy shipped
        self._took = 0.0  # seconds the last copy took

    # -- at start ----------------------------------------------------------------------
    def restore(self) -> None:
        """An empty cache: fetch the bucket's snapshot into the engine's state directory.
        A failed fetch leaves the directory empty: the views are then backfilled."""
        state_dir: Path = self.instance.matviews.state_dir
        if self.bucket is None or (state_dir / "engine.duckdb").exists():
            return
        from headwater.engine.state_copy import DATABASE, relocate

        shutil.rmtree(state_dir, ignore_errors=True)  # (what a fetch cut short left)
        try:
            body = self.bucket.fetch(state_dir, last=DATABASE)
            if body is None:
                return
            listed, unlisted = relocate(state_dir)
        except Exception as e:
            log.warning(
                "the views' state could not be fetched from %s: %s",
                self.bucket.store.url,
                e,
            )
            shutil.rmtree(state_dir, ignore_errors=True)
            return
        meta = body.get("meta", {})
        log.info(
            "fetched the views' state from %s (snapshot %s): %d files, frontiers %s, "
            "stage at epoch %s, Parquet state of %d tables%s",
            self.bucket.store.url,
            body["id"],
            len(body["files"]),
            meta.get("frontiers"),
            meta.get("last_epoch"),
            listed,
            f" ({unlisted} tables' files missing: exported again)" if unlisted else "",
        )

    # -- while running -----------------------------------------------------------------
    async def loop(self) -> None:
        """A copy every PERIOD seconds, or DUTY times the last copy's duration if that
        is longer (a large state is not copied back to back); a period set in
        PERIOD_ENV is kept as it is (tests: as often as possible)."""
        try:
            fixed: float | None = float(os.environ[PERIOD_ENV])
        except (KeyError, ValueError):
            fixed = None
        while True:
            await asyncio.sleep(fixed if fixed is not None else max(PERIOD, DUTY * self._took))
            await asyncio.to_thread(self.ship)

    def ship(self) -> None:
        """Copy the engine's state to the bucket, unless nothing changed. A fenced
        server neither copies nor writes the manifest nor deletes; a manifest racing the
        fencing is older than the new writer's, never wrong (its frontiers are epochs
        of the same log)."""
        engine = self.instance.matviews.engine
        if self.bucket is None or engine is None or self._fenced():
            return
        staging = self.instance.config.data_dir / STAGING
        with self._lock:
            t0 = time.monotonic()
            try:
                copy = engine.capture(staging, self._fingerprint)
                if copy is None:
                    return
                meta = {"last_epoch": copy.last_epoch, "frontiers": copy.frontiers}
                done = self.bucket.ship(
                    copy.root, copy.files, meta, self._injected, lambda: not self._fenced()
                )
                self._fingerprint = copy.fingerprint
                log.debug(
                    "views' state copied to %s (snapshot %s, frontiers %s): %d files, "
                    "%d uploaded (%d bytes), %d deleted, %.2fs",
                    self.bucket.store.url,
                    done.id,
                    copy.frontiers,
                    done.files,
                    done.uploaded,
                    done.uploaded_bytes,
                    done.deleted,
                    time.monotonic() - t0,
                )
            except Exception as e:
                log.warning(
                    "the views' state could not be copied to %s: %s", self.bucket.store.url, e
                )
            finally:
                self._took = time.monotonic() - t0  # (a failed copy costs as much)
                shutil.rmtree(staging, ignore_errors=True)

    def _fenced(self) -> bool:
        return self.instance.store.fenced is not None

    def _injected(self, done: int, total: int) -> None:
        if faults.injected(self.instance.config.data_dir, CRASH_FAULT):
            if done >= (total + 1) // 2:
                log.warning("fault injection: killed after uploading %d of %d files", done, total)
                os.kill(os.getpid(), signal.SIGKILL)
