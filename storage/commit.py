"""Group commit: transactions join the open epoch; one durable SlateDB batch per epoch.

Writers are serialised by `write_lock` (held from a transaction's first write to its
commit), so at most one transaction stamps rows into the open epoch at a time. The
closer seals the open epoch as soon as the previous one is durable: while one batch
is being written, the next one fills, which is what makes commit cheap under
concurrency. A transaction is acknowledged only when its epoch is durable; if the
write fails, that epoch and every later one are undone in the replica and their
writers get the error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from headwater.catalog.objects import CatalogObject
from headwater.errors import DiskFull, IOError_, SQLError
from headwater.storage.changelog import ChangeLog, EpochRecord

log = logging.getLogger("headwater.commit")


@dataclass
class _OpenEpoch:
    epoch: int
    changes: dict[int, list[pa.Table]] = field(default_factory=lambda: defaultdict(list))
    catalog: dict[int, CatalogObject | None] = field(default_factory=dict)
    dropped_logs: list[bytes] = field(default_factory=list)
    writers: int = 0  # transactions currently stamping rows with this epoch
    committed: int = 0  # transactions that joined it
    durable: asyncio.Future[None] | None = None

    @property
    def empty(self) -> bool:
        return self.committed == 0


class Committer:
    def __init__(
        self,
        changelog: ChangeLog,
        last_epoch: int,
        meta: Callable[[], dict[str, Any]],
        on_undo: Callable[[int], None],
    ) -> None:
        self.changelog = changelog
        self.write_lock = asyncio.Lock()
        self.durable_epoch = last_epoch  # newest epoch readers may see
        self.closed_at: dict[int, float] = {}
        self._meta = meta
        self._on_undo = on_undo
        self._open = self._new_epoch(last_epoch + 1)
        self._sealing: _OpenEpoch | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._durable_changed = asyncio.Condition()
        self._listeners: list[Callable[[int], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.failed: SQLError | None = None  # set when storage refused an epoch

    def _new_epoch(self, epoch: int) -> _OpenEpoch:
        return _OpenEpoch(epoch, durable=asyncio.get_running_loop().create_future())

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="epoch-closer")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def on_durable(self, fn: Callable[[int], None]) -> None:
        self._listeners.append(fn)

    # -- called by a writing transaction (holding write_lock) --------------------------
    def begin_stamp(self) -> int:
        """The epoch a transaction stamps its rows with; it must call end_stamp."""
        self._open.writers += 1
        return self._open.epoch

    def end_stamp(
        self,
        epoch: int,
        changes: dict[int, pa.Table] | None,
        catalog: dict[int, CatalogObject | None] | None = None,
        dropped_logs: list[bytes] | None = None,
    ) -> asyncio.Future[None] | None:
        """Join `epoch` with these changes (None: the transaction aborted).

        Returns the future that resolves once the epoch is durable.
        """
        ep = self._open if self._open.epoch == epoch else self._sealing
        assert ep is not None and ep.epoch == epoch, "stamped epoch vanished"
        ep.writers -= 1
        if changes is None:
            if ep.writers == 0:
                self._idle.set()
            return None
        for oid, t in changes.items():
            if t.num_rows:
                ep.changes[oid].append(t)
        if catalog:
            ep.catalog.update(catalog)
        if dropped_logs:
            ep.dropped_logs.extend(dropped_logs)
        ep.committed += 1
        if ep.writers == 0:
            self._idle.set()
        self._wake.set()
        assert ep.durable is not None
        return ep.durable

    # -- the closer ------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._open.empty:
                continue
            ep = self._open
            self._sealing = ep
            self._open = self._new_epoch(ep.epoch + 1)
            while ep.writers:
                self._idle.clear()
                await self._idle.wait()
            self._sealing = None
            await self._persist(ep)
            if not self._open.empty:
                self._wake.set()

    async def _persist(self, ep: _OpenEpoch) -> None:
        assert ep.durable is not None
        rec = EpochRecord(
            epoch=ep.epoch,
            changes={
                oid: pa.concat_tables(parts) if len(parts) > 1 else parts[0]
                for oid, parts in ep.changes.items()
            },
            catalog=ep.catalog,
            dropped_logs=ep.dropped_logs,
            meta=self._meta(),
            closed_at=time.time(),
        )
        try:
            await self.changelog.write_epoch(rec)
        except Exception as exc:  # storage refused: undo this epoch and everything after
            err = _storage_error(exc)
            log.error("epoch %d could not be made durable: %s", ep.epoch, err)
            self._on_undo(ep.epoch)
            ep.durable.set_exception(err)
            ep.durable.exception()  # mark retrieved; the waiters re-raise it
            later = self._open
            self._open = self._new_epoch(later.epoch + 1)
            if not later.empty and later.durable is not None:
                later.durable.set_exception(err)
                later.durable.exception()
            return
        self.closed_at[ep.epoch] = rec.closed_at
        self.durable_epoch = ep.epoch
        ep.durable.set_result(None)
        for fn in self._listeners:
            fn(ep.epoch)
        async with self._durable_changed:
            self._durable_changed.notify_all()

    async def wait_durable(self, epoch: int, timeout: float | None = None) -> bool:
        async def _wait() -> None:
            async with self._durable_changed:
                await self._durable_changed.wait_for(lambda: self.durable_epoch >= epoch)

        try:
            await asyncio.wait_for(_wait(), timeout)
            return True
        except TimeoutError:
            return False


def _storage_error(exc: Exception) -> SQLError:
    text = str(exc)
    if "No space left" in text or "ENOSPC" in text:
        return DiskFull(
            "could not write to the Headwater data directory: no space left on device",
            hint="Free disk space; the server resumes writing once space returns.",
        )
    return IOError_(
        f"could not make the write durable: {text}",
        hint="Check that the data directory is writable; nothing from this epoch was kept.",
    )
