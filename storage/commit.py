"""Group commit: transactions join the open epoch; one durable SlateDB batch per epoch.

Writers are serialised by `write_lock` (held from a transaction's first write to its
commit), so at most one transaction stamps rows into the open epoch at a time. The
closer seals the open epoch as soon as the previous one is durable: while one batch
is being written, the next one fills, which is what makes commit cheap under
concurrency. A transaction is acknowledged only when its epoch is durable; if the
write fails, that epoch and every later one are undone in the replica and their
writers get the error.

Storage faults: SlateDB retries a failing write until it succeeds, so each epoch is
probed first (read-only, unwritable or nearly full data directory: a few µs) and
refused with PostgreSQL's error instead. An epoch that was submitted is never
reported as failed while it may still become durable: if the directory turns
unwritable during its write, its writers wait until it is writable again (the log
says why), and every later epoch is refused at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from headwater.catalog.objects import CatalogObject
from headwater.storage.changelog import (
    ChangeLog,
    EpochRecord,
    consolidate_in_python,
    consolidate_rows,
    log_form,
)
from headwater.storage.slate import storage_error

from headwater import faults
from headwater.errors import DiskFull, InternalError, LockNotAvailable, SQLError

log = logging.getLogger("headwater.commit")

MAX_IN_FLIGHT = 4  # epochs submitted to SlateDB and not yet durable
STALL_CHECK = 2.0  # seconds before a slow epoch's data directory is probed (and logged)
WRITE_AMPLIFICATION = 2  # an epoch is written to the WAL, then flushed again (L0)
# free space above the reserve beyond which an epoch's size is not summed: larger than
# any one epoch's writes in practice (a COPY is one epoch: 1 GB of rows writes ~2 GB)
SIZE_CHECK_MARGIN = 16 << 30
# fault injection (headwater/faults.py): the next epoch's record fails to assemble, once
ASSEMBLY_FAULT = "epoch_assembly"


def write_lock_timed_out(timeout: float) -> LockNotAvailable:
    """55P03 for a writer that waited `timeout` seconds for another's transaction."""
    return LockNotAvailable(
        f"could not obtain the write lock: another transaction has been writing for {timeout:g}s",
        hint="Headwater runs one writing transaction at a time; end open transactions "
        "with COMMIT or ROLLBACK.",
    )


@dataclass
class _OpenEpoch:
    epoch: int
    changes: dict[int, list[pa.Table]] = field(default_factory=lambda: defaultdict(list))
    catalog: dict[int, CatalogObject | None] = field(default_factory=dict)
    dropped_logs: list[bytes] = field(default_factory=list)
    rewrites: dict[int, pa.Table] = field(default_factory=dict)  # tables ALTER rewrote
    merge: set[int] = field(default_factory=set)  # tables whose parts are consolidated
    writers: int = 0  # transactions currently stamping rows with this epoch
    committed: int = 0  # transactions that joined it
    durable: asyncio.Future[None] | None = None
    visible: asyncio.Future[None] | None = None

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
        prepare: Callable[[int], Awaitable[None]] | None = None,
        data_dir: Path | None = None,
        min_free_bytes: int = 0,
    ) -> None:
        self.changelog = changelog
        self.write_lock = asyncio.Lock()
        self.durable_epoch = last_epoch  # newest epoch whose writes are acknowledged
        self.visible_epoch = last_epoch  # newest epoch readers may see (durable and applied)
        self._meta = meta
        self._on_undo = on_undo
        self._prepare = prepare  # readies the replica for the epoch while it is written
        self.data_dir = data_dir
        self.min_free_bytes = min_free_bytes
        self._resume_from = 0  # first epoch after the last undone failure
        self._failed_from = 0  # while `failed`: the first failed epoch (undone from there)
        self._submitted = 0  # epochs submitted to SlateDB whose outcome is not known yet
        self._open = self._new_epoch(last_epoch + 1)
        self._sealing: _OpenEpoch | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._durable_changed = asyncio.Condition()
        self._listeners: list[Callable[[EpochRecord], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._unfinished = 0  # sealed epochs not yet visible (or failed)
        self.failed: SQLError | None = None  # set when storage refused an epoch

    def _new_epoch(self, epoch: int) -> _OpenEpoch:
        loop = asyncio.get_running_loop()
        return _OpenEpoch(epoch, durable=loop.create_future(), visible=loop.create_future())

    def start(self) -> None:
        problem = self._refusal(None)
        if problem is not None:
            log.warning("writes are refused for now: %s", problem.message)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="epoch-closer")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def on_durable(self, fn: Callable[[EpochRecord], None]) -> None:
        """Call fn(the epoch's record) once each epoch is durable and visible, in order."""
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
        rewrites: dict[int, pa.Table] | None = None,
        merge: set[int] | None = None,
    ) -> asyncio.Future[None] | None:
        """Join `epoch` with these changes (None: the transaction aborted).

        `rewrites`: tables whose whole history the transaction rewrote (ALTER TABLE);
        each supersedes the changes of that table that joined the epoch before it.
        `merge`: tables whose change rows may retract rows another writer added in the
        same epoch (point writes): the epoch's rows of each are consolidated, since a
        replay pairs a row id's retraction only with a version of an earlier epoch.
        Returns the future that resolves once the epoch is durable.
        """
        ep = self._open if self._open.epoch == epoch else self._sealing
        assert ep is not None and ep.epoch == epoch, "stamped epoch vanished"
        ep.writers -= 1
        if changes is None:
            if ep.writers == 0:
                self._idle.set()
            return None
        for oid, t in (rewrites or {}).items():
            ep.changes.pop(oid, None)
            ep.rewrites[oid] = log_form(t)
        for oid, t in changes.items():
            if t.num_rows:
                ep.changes[oid].append(log_form(t))
        if merge:
            ep.merge.update(merge)
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
        """Seal epochs in order and submit each one's batch as soon as it is sealed.

        Up to MAX_IN_FLIGHT epochs await durability at once; they are marked durable
        strictly in order, so `durable_epoch` never skips a gap.
        """
        previous: tuple[asyncio.Future[None], asyncio.Future[None]] | None = None
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
            await self._in_flight.acquire()
            rec, handle, error = None, None, self.failed
            if error is None:  # nothing is submitted after a failure, until it is undone
                try:
                    rec = self._record(ep)
                except Exception as exc:  # a bug: this epoch fails, not every later write
                    log.exception("epoch %d could not be assembled", ep.epoch)
                    error = InternalError(
                        f"could not write epoch {ep.epoch}: {exc}",
                        detail="Nothing from this transaction was kept.",
                        hint="This is a bug in Headwater; please report it with the server log.",
                    )
                else:
                    error = self._refusal(rec)
                if rec is not None and error is None:
                    try:
                        handle = await self.changelog.submit_epoch(rec)
                        self._submitted += 1
                    except Exception as exc:
                        error = self._sql_error(exc)
                if error is not None:  # before the next epoch is sealed: it is not submitted
                    self._mark_failed(ep.epoch, error)
            self._unfinished += 1
            asyncio.get_running_loop().create_task(self._finish(ep, rec, handle, error, previous))
            assert ep.durable is not None and ep.visible is not None
            previous = (ep.durable, ep.visible)
            if not self._open.empty:
                self._wake.set()

    def _record(self, ep: _OpenEpoch) -> EpochRecord:
        if faults.injected(self.data_dir, ASSEMBLY_FAULT, consume=True):
            raise RuntimeError("injected fault (epoch_assembly)")
        return EpochRecord(
            epoch=ep.epoch,
            changes={oid: _combined(parts, oid in ep.merge) for oid, parts in ep.changes.items()},
            catalog=ep.catalog,
            dropped_logs=ep.dropped_logs,
            meta=self._meta() if ep.catalog else None,
            closed_at=time.time(),
            rewrites=ep.rewrites,
        )

    async def _finish(
        self,
        ep: _OpenEpoch,
        rec: EpochRecord | None,
        handle: Any,
        error: BaseException | None,
        previous: tuple[asyncio.Future[None], asyncio.Future[None]] | None,
    ) -> None:
        """Acknowledge `ep` once it and its predecessor are durable; then make it visible.

        Durability and visibility each advance in epoch order, but an epoch's
        acknowledgement never waits for an earlier epoch's replica work. Its in-flight
        slot is freed once it is durable (or failed), not visible: the replica applies
        staged rows lazily (server/batcher.py, every few ms or when a reader waits), and
        epochs waiting for that must not hold up the next epochs' writes (issue 16: one
        DuckDB apply per ~2.5 epochs, ~1 ms of CPU each, when they did).
        """
        assert ep.durable is not None
        prepared = (
            asyncio.ensure_future(self._prepare(ep.epoch)) if self._prepare is not None else None
        )
        slot = True  # this epoch's in-flight slot is still held
        try:
            if handle is not None:
                try:
                    await self._await_durable(ep.epoch, handle)
                except Exception as exc:
                    error = self._sql_error(exc)
                    self._mark_failed(ep.epoch, error)
                finally:
                    self._submitted -= 1
            # an epoch never submitted fails at once; one submitted is acknowledged in order
            if previous is not None and handle is not None:
                try:
                    await asyncio.shield(previous[0])
                except Exception as exc:
                    if ep.epoch < self._resume_from:  # else the predecessor was undone
                        error = error or exc
            if error is None and self.failed is not None and ep.epoch > self._failed_from:
                error = self.failed  # it saw the failed epoch's state
            if error is not None:
                if prepared is not None:
                    await asyncio.gather(prepared, return_exceptions=True)
                self._fail(ep, error)
                return
            self.durable_epoch = ep.epoch
            if not ep.durable.done():  # (cancelled only if a waiter was, at shutdown)
                ep.durable.set_result(None)  # acknowledge the writers
            slot = False
            self._in_flight.release()
            if prepared is not None:
                await prepared
            if previous is not None:
                await asyncio.gather(asyncio.shield(previous[1]), return_exceptions=True)
            self.visible_epoch = ep.epoch
            assert rec is not None  # (only a failed epoch has none)
            for fn in self._listeners:
                try:
                    fn(rec)
                except Exception:
                    log.exception("epoch listener failed at epoch %d", ep.epoch)
            async with self._durable_changed:
                self._durable_changed.notify_all()
        finally:
            assert ep.visible is not None
            if not ep.visible.done():
                ep.visible.set_result(None)
            self._unfinished -= 1
            if slot:
                self._in_flight.release()

    async def _await_durable(self, epoch: int, handle: Any) -> None:
        """Wait for SlateDB to make `epoch` durable, saying in the log why it takes long.

        SlateDB retries the write until it succeeds (a read-only, unwritable or full
        data directory), so the epoch may still become durable: its writers wait.
        """
        durable = asyncio.ensure_future(self.changelog.store.await_durable(handle))
        t0, said = time.monotonic(), ""
        try:
            while not (await asyncio.wait({durable}, timeout=STALL_CHECK))[0]:
                problem = self._refusal(None)
                if problem is not None and problem.message != said:
                    said = problem.message
                    log.error(
                        "epoch %d, written %.0fs ago, is not durable yet: %s; its transactions "
                        "wait until it is, once the data directory is writable again",
                        epoch,
                        time.monotonic() - t0,
                        said,
                    )
        finally:
            if not durable.done():
                durable.cancel()  # only when the server stops
        if said:
            log.info("epoch %d durable after %.0fs", epoch, time.monotonic() - t0)
        durable.result()

    def _refusal(self, rec: EpochRecord | None) -> SQLError | None:
        """Why epoch `rec` (None: any write) cannot be written now (None: it can).

        Checked before SlateDB sees the epoch (it would retry a failing write forever):
        a read-only or unwritable data directory gives 42501, too little free space
        (the reserve, plus what the epoch writes) 53100.
        """
        if self.data_dir is None:
            return None
        free, problem = self.changelog.store.probe()
        if problem is not None:
            return storage_error(problem, self.data_dir)
        if free < self.min_free_bytes + SIZE_CHECK_MARGIN and rec is not None:
            # the epoch's size is summed only near the reserve (a table's nbytes walks
            # every buffer: issue 16 found it ~3% of the commit path's time)
            tables = [*rec.changes.values(), *rec.rewrites.values()]
            need = WRITE_AMPLIFICATION * sum(t.nbytes for t in tables)
        else:
            need = 0
        if free < self.min_free_bytes + need:
            needs = f"; this write needs about {need >> 20} MB" if need >= 1 << 20 else ""
            return DiskFull(
                f'could not write to the data directory "{self.data_dir}": only '
                f"{free >> 20} MB free, {self.min_free_bytes >> 20} MB are kept in reserve" + needs,
                detail="Nothing from this transaction was kept.",
                hint="Free disk space; writes resume by themselves.",
            )
        return None

    def _sql_error(self, exc: BaseException) -> SQLError:
        if isinstance(exc, SQLError):
            return exc
        return storage_error(exc, self.data_dir or self.changelog.store.path.parent)

    def _mark_failed(self, epoch: int, error: SQLError) -> None:
        """Epochs from `epoch` on fail (none is submitted any more) until undone."""
        if self.failed is None:
            self.failed = error
            self._failed_from = epoch
            log.error("epoch %d could not be made durable: %s", epoch, error)
            asyncio.get_running_loop().create_task(self._undo_failure())
        else:
            self._failed_from = min(self._failed_from, epoch)

    def _fail(self, ep: _OpenEpoch, error: BaseException) -> None:
        """Storage refused an epoch: it and every later one are undone, writers told.

        Epochs sealed meanwhile fail too (their transactions saw the failed state).
        Once the undo is done, later epochs are written normally again.
        """
        assert ep.durable is not None
        err = self._sql_error(error)
        self._mark_failed(ep.epoch, err)
        if not ep.durable.done():
            ep.durable.set_exception(err)
            ep.durable.exception()  # retrieved: each waiter re-raises it

    async def _settled(self, everything: bool) -> None:
        """Until no submitted epoch (or, `everything`, no sealed one) is unfinished."""
        while self._unfinished if everything else self._submitted:
            await asyncio.sleep(0.02)

    async def _undo_failure(self) -> None:
        """With writers stopped, fail the open epoch, undo every failed epoch, resume.

        Submitted epochs settle first, without the write lock: while one waits for an
        unwritable directory, writers keep getting the error at once (their epochs are
        not submitted) instead of waiting for the lock.
        """
        await self._settled(everything=False)
        async with self.write_lock:
            await self._settled(everything=True)
            failed = self._open
            self._open = self._new_epoch(failed.epoch + 1)
            assert failed.durable is not None and self.failed is not None
            if not failed.empty:
                failed.durable.set_exception(self.failed)
                failed.durable.exception()
            first = self._failed_from
            await asyncio.to_thread(self._on_undo, first)
            self._resume_from = self._open.epoch  # its history no longer contains the failure
            self.failed = None
            log.info("epochs %d-%d undone; the next epoch is written again", first, failed.epoch)

    async def wait_visible(self, epoch: int, timeout: float | None = None) -> bool:
        """Wait until readers can see `epoch` (read-your-writes)."""
        if self.visible_epoch >= epoch:
            return True

        async def _wait() -> None:
            async with self._durable_changed:
                await self._durable_changed.wait_for(lambda: self.visible_epoch >= epoch)

        try:
            await asyncio.wait_for(_wait(), timeout)
            return True
        except TimeoutError:
            return False


def _combined(parts: list[pa.Table], merge: bool) -> pa.Table:
    if len(parts) == 1:
        return parts[0]
    t = pa.concat_tables(parts)
    if not merge:
        return t
    try:
        return consolidate_rows(t)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # (point writes' few rows)
        return consolidate_in_python(t)
