"""SlateDB, opened once per server; reads, opening and closing run on its own thread.

The binding is asyncio-based but its generated glue copies bytes one at a time in a
Python loop (2-3 MB/s, ../shared/research/slatedb-python-binding.md); `_patch_copies`
swaps that loop for memmove. Blocking callers (startup, tools, sequences) use the
`*_sync` forms, which run on a private event loop in a dedicated thread. The epochs'
writes (`submit`) run on the caller's loop, the server's: each binding call is a Rust
future whose completion the binding posts to the loop that awaits it, so going through
the private loop added two thread hops per epoch, each a wake-up write and a loop turn,
and made the two threads take turns at the GIL (issue 16). A large batch (a COPY's) is
built on a worker thread: its values are copied into SlateDB's buffers.

SlateDB retries a write that fails (read-only file system, permission denied, no
space) until it succeeds, so a writer would wait without an answer: `probe()` is
checked before each epoch is submitted and `check_writable()` before opening.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

import slatedb.uniffi as sdb
from headwater.storage.object_store import ObjectStoreURL, check_reachable, endpoint
from headwater.storage.synchronous import set_synchronous
from slatedb.uniffi._slatedb_uniffi import slatedb as _gen

from headwater.errors import (
    AdminShutdown,
    DiskFull,
    InsufficientPrivilege,
    IOError_,
    SQLError,
    UndefinedFile,
)

T = TypeVar("T")

# Tuned per ../shared/research: the default compactor polls every 5 s and stalls
# memtable flushes on L0 backpressure for seconds.
_SETTINGS = {
    "flush_interval": '"2ms"',
    "compactor_options.poll_interval": '"100ms"',
    "compactor_options.worker.compactions_poll_interval": '"100ms"',
}
_FLUSH_WAL = sdb.FlushOptions(flush_type=sdb.FlushType.WAL)
# SlateDB notices a newer writer on its manifest poll (~1 s); this is how often the
# server asks it, so that an idle server stops too
FENCE_POLL = 0.5
# a write to an object store not durable after this long is logged (again every period):
# SlateDB retries an unreachable store without a word, and writers wait meanwhile
SLOW_WRITE_LOG = 10.0
# a batch whose values add up to more is built on a worker thread, not the server's loop
BUILD_OFF_LOOP_BYTES = 1 << 20

log = logging.getLogger("headwater.storage")


# the directories SlateDB writes to: each epoch's WAL, memtable flushes, manifests
_WRITTEN_DIRS = ("wal", "compacted", "manifest")
_STRERRORS = {
    code: os.strerror(code)
    for code in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EIO)
}


def check_writable(data_dir: Path) -> None:
    """Raise the SQLError for a data directory that cannot be written now (startup)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = data_dir / ".headwater-probe"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:  # a full disk fails here (local file systems reserve blocks at write);
            # no fsync: it can take 0.5 s on a busy disk
            if os.write(fd, bytes(64 << 10)) < 64 << 10:
                raise OSError(errno.ENOSPC, _STRERRORS[errno.ENOSPC])
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
        slate = data_dir / "slatedb"
        for d in (slate, *(slate / n for n in _WRITTEN_DIRS)):
            if d.is_dir() and not os.access(d, os.W_OK | os.X_OK):
                raise OSError(errno.EACCES, _STRERRORS[errno.EACCES], str(d))
    except OSError as exc:
        raise storage_error(exc, data_dir, starting=True) from None


def storage_error(exc: BaseException, data_dir: Path, *, starting: bool = False) -> SQLError:
    """The PostgreSQL error for a data directory that cannot be written.

    SQLSTATEs as PostgreSQL's errcode_for_file_access: EROFS, EACCES and EPERM are
    42501, ENOSPC 53100, EIO 58030. SlateDB's own errors carry only the OS message.
    """
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None:
        text = str(exc)
        code = next((c for c, m in _STRERRORS.items() if m in text), None)
        if code is None and "ENOSPC" in text:
            code = errno.ENOSPC
    reason = os.strerror(code) if code else str(exc)
    where = getattr(exc, "filename", None)
    message = f'could not write to the data directory "{data_dir}": {reason}'
    parts = [f'"{where}": {reason}.'] if where and Path(where) != data_dir else []
    if not starting:
        parts.append("Nothing from this transaction was kept.")
    detail = " ".join(parts) or None
    then = "; or choose another --data-dir." if starting else "; writes resume by themselves."
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = "Make the data directory writable (remount it read-write or fix its permissions)"
        return InsufficientPrivilege(message, detail=detail, hint=hint + then)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(message, detail=detail, hint="Free disk space" + then)
    if code == errno.ENOENT:
        return UndefinedFile(message, detail=detail, hint="Restore the data directory.")
    return IOError_(message, detail=detail, hint="Check the disk of the data directory" + then)


def _patch_copies() -> None:
    builder = _gen._UniffiRustBufferBuilder
    if getattr(builder, "_headwater_patched", False):
        return

    def write(self: Any, value: bytes) -> None:
        n = len(value)
        if self.rbuf.len + n > self.rbuf.capacity:
            self.rbuf = _gen._UniffiRustBuffer.reserve(self.rbuf, n)
        base = ctypes.cast(self.rbuf.data, ctypes.c_void_p).value or 0
        ctypes.memmove(base + self.rbuf.len, bytes(value), n)
        self.rbuf.len += n

    def pack_into(self: Any, size: int, fmt: str, value: Any) -> None:
        write(self, _gen.struct.pack(fmt, value))

    def read(self: Any, size: int) -> bytes:
        if self.offset + size > self.len:
            raise _gen.InternalError("read past end of rust buffer")
        base = ctypes.cast(self.data, ctypes.c_void_p).value or 0
        data = ctypes.string_at(base + self.offset, size)
        self.offset += size
        return data

    def lower_bytes(value: bytes) -> Any:
        # one buffer of the exact size and one copy, where the generated lowering asks
        # Rust for a buffer, then grows it twice (~25 µs per value; 2-3 per epoch)
        n = len(value)
        rbuf = _gen._UniffiRustBuffer.alloc(4 + n)
        base = ctypes.cast(rbuf.data, ctypes.c_void_p).value or 0
        ctypes.memmove(base, n.to_bytes(4, "big"), 4)
        ctypes.memmove(base + 4, bytes(value), n)
        rbuf.len = 4 + n
        return rbuf

    builder.write = write
    builder._pack_into = pack_into
    _gen._UniffiRustBufferStream.read = read
    _gen._UniffiFfiConverterBytes.lower = staticmethod(lower_bytes)
    builder._headwater_patched = True


def _diagnose(d: Path) -> OSError | None:
    """The OS error of writing into `d` (None: it is writable after all)."""
    probe = d / ".headwater-probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600))
        probe.unlink()
    except OSError as exc:
        return OSError(exc.errno, exc.strerror, str(d))  # name the directory
    return None


class SlateStore:
    """One SlateDB database: atomic durable batches, point reads and prefix scans.

    On a local directory (`path`), or in a bucket (`object_store`: SlateDB's files under
    its prefix; `path` is then unused). Either way SlateDB fences: a second server that
    opens the same database bumps the writer epoch, and this one's writes fail from then
    on. `on_fenced` (set by the server) is told once, from SlateDB's thread.
    """

    def __init__(
        self, path: Path, object_store: ObjectStoreURL | None = None, fsync: bool = True
    ) -> None:
        _patch_copies()
        self.path = path
        self.object_store = object_store
        self.fsync = fsync  # a local directory's writes are synchronous (storage/synchronous.py)
        self._written = [str(path / name) for name in _WRITTEN_DIRS]  # for probe()
        self.on_fenced: Callable[[SQLError], None] | None = None
        self.fenced: SQLError | None = None
        self._watch: asyncio.Task[None] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="slatedb", daemon=True)
        self._thread.start()
        self._db: Any = None

    # -- plumbing -----------------------------------------------------------------
    def _submit(self, coro: Coroutine[Any, Any, T]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self._submit(coro))

    # -- lifecycle ----------------------------------------------------------------
    def open_sync(self) -> None:
        # SlateDB's open waits forever on an unwritable directory or unreachable store
        if self.object_store is not None:
            check_reachable(self.object_store)
        else:
            check_writable(self.path.parent)
            self.path.mkdir(parents=True, exist_ok=True)
            refused = set_synchronous(self.path, self.fsync)
            if refused is not None and self.fsync:
                log.warning(
                    "the file system of %s does not make writes synchronous (chattr +S: %s): "
                    "acknowledged commits survive a crash of the server, not a power loss "
                    "or a crash of the machine. Put --data-dir on ext4, XFS or btrfs for that",
                    self.path,
                    refused.strerror or refused,
                )
        self.run_sync(self._open())

    async def _open(self) -> None:
        if self.object_store is not None:
            store = sdb.ObjectStore.resolve(self.object_store.store_url)
            builder = sdb.DbBuilder(self.object_store.slatedb_path, store)
        else:
            store = sdb.ObjectStore.resolve("file:///")
            builder = sdb.DbBuilder(str(self.path.resolve()), store)
        settings = sdb.Settings.default()
        for key, value in _SETTINGS.items():
            settings.set(key, value)
        builder.with_settings(settings)
        self._db = await builder.build()
        self._watch = self._loop.create_task(self._watch_fencing())

    # -- fencing ----------------------------------------------------------------------
    def where(self) -> str:
        return self.object_store.url if self.object_store is not None else str(self.path)

    def _fenced_error(self) -> SQLError:
        return AdminShutdown(
            f'terminating: another Headwater server opened the database "{self.where()}" '
            "as its writer, so this server was fenced (SlateDB writer epoch) and stops",
            detail="Writes acknowledged before are kept; nothing after the fencing was "
            "written by this server.",
            hint="Connect to the server that took over. Run one server per "
            "--object-store prefix (or --data-dir).",
            severity="FATAL",
        )

    def _note_fenced(self) -> SQLError:
        """Record the fencing (once) and tell the server; returns the error to raise."""
        if self.fenced is None:
            self.fenced = self._fenced_error()
            if self.on_fenced is not None:
                self.on_fenced(self.fenced)
        return self.fenced

    def _is_fenced(self, exc: BaseException | None = None) -> bool:
        if isinstance(exc, sdb.Error.Closed):
            return exc.reason == sdb.CloseReason.FENCED
        db = self._db
        return db is not None and db.status().close_reason == sdb.CloseReason.FENCED

    async def _watch_fencing(self) -> None:
        while self._db is not None and self.fenced is None:
            await asyncio.sleep(FENCE_POLL)
            with contextlib.suppress(Exception):
                if self._is_fenced():
                    self._note_fenced()

    def close_sync(self) -> None:
        db, self._db = self._db, None  # (stops the fencing watch)
        if db is not None:
            try:
                self.run_sync(db.shutdown())
            except sdb.Error.Closed:
                if self.fenced is None:
                    raise  # fenced: nothing of this server's is left to flush
        if self._watch is not None:
            self._loop.call_soon_threadsafe(self._watch.cancel)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def probe(self) -> tuple[int, OSError | None]:
        """(bytes free, why SlateDB cannot write now or None): before each epoch.

        One statvfs and an access() per directory, ~5 µs (paths are str: pathlib
        would double that); a file is created only to name the OS error. In a bucket
        there is no disk to run out of: SlateDB retries a failing request, the
        committer's log says when an epoch takes long.
        """
        if self.object_store is not None:
            return 1 << 62, None
        try:
            st = os.statvfs(self._written[0])
            if st.f_flag & os.ST_RDONLY:
                return 0, OSError(errno.EROFS, _STRERRORS[errno.EROFS])
            for d in self._written:
                if not os.access(d, os.W_OK | os.X_OK) and os.path.exists(d):
                    return 0, _diagnose(Path(d))
        except OSError as exc:
            return 0, exc
        return st.f_bavail * st.f_frsize, None

    # -- writes -------------------------------------------------------------------
    @staticmethod
    def _build(puts: Iterable[tuple[bytes, bytes]], deletes: Iterable[bytes]) -> Any:
        batch = sdb.WriteBatch()
        for key, value in puts:
            batch.put(key, value)
        for key in deletes:
            batch.delete(key)
        return batch

    async def _submit_batch(self, batch: Any) -> asyncio.Task[None]:
        """Write `batch` from the running loop; returns the task of its durability."""
        if self.fenced is not None:
            raise self.fenced
        try:
            handle = await self._db.write(batch)
        except sdb.Error.Closed as exc:
            if self._is_fenced(exc):
                raise self._note_fenced() from None
            raise
        # the durability wait starts here rather than when the caller asks for it
        return asyncio.get_running_loop().create_task(self._durable(handle))

    async def _durable(self, handle: Any) -> None:
        """Until the write of `handle` is durable. The WAL is flushed at once rather
        than at the next `flush_interval` tick (~1 ms sooner, on average); if that
        fails, the handle's own wait decides (SlateDB retries a failing write)."""
        if self.object_store is None:  # the committer's probe explains a slow disk
            return await self._flush_and_wait(handle)
        durable = asyncio.ensure_future(self._flush_and_wait(handle))
        t0 = time.monotonic()
        while not (await asyncio.wait({durable}, timeout=SLOW_WRITE_LOG))[0]:
            log.warning(
                "a write to the object store %s is not durable after %.0fs; SlateDB retries "
                "it and its writers wait. Check that the endpoint %s is reachable and the "
                "credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)",
                self.where(),
                time.monotonic() - t0,
                endpoint(),
            )
        return durable.result()

    async def _flush_and_wait(self, handle: Any) -> None:
        with contextlib.suppress(Exception):
            await self._db.flush_with_options(_FLUSH_WAL)
        try:
            await handle.await_durable()
        except sdb.Error.Closed as exc:
            if self._is_fenced(exc):
                raise self._note_fenced() from None
            raise

    async def submit(
        self, puts: Iterable[tuple[bytes, bytes]], deletes: Iterable[bytes] = ()
    ) -> asyncio.Task[None]:
        """Apply one atomic batch (not yet durable), from the caller's loop; returns the
        task of its durability (for `await_durable`).

        Batches become durable in submission order (one WAL), so awaiting a later
        batch's durability implies the earlier ones are durable too.
        """
        puts, deletes = list(puts), list(deletes)
        if sum(len(v) for _, v in puts) > BUILD_OFF_LOOP_BYTES:
            batch = await asyncio.to_thread(self._build, puts, deletes)
        else:
            batch = self._build(puts, deletes)
        return await self._submit_batch(batch)

    def await_durable(self, handle: asyncio.Task[None]) -> asyncio.Future[None]:
        """Resolves once the batch of `handle` (from `submit`) is durable."""
        return handle

    async def _write_durable(self, puts: list[tuple[bytes, bytes]], deletes: list[bytes]) -> None:
        await (await self._submit_batch(self._build(puts, deletes)))

    def write_durable_sync(
        self, puts: Iterable[tuple[bytes, bytes]], deletes: Iterable[bytes] = ()
    ) -> None:
        """Apply one atomic batch and wait until it is durable (from any thread but
        SlateDB's own and the server loop's: sequences reserve values this way, outside
        any epoch)."""
        self.run_sync(self._write_durable(list(puts), list(deletes)))

    # -- reads --------------------------------------------------------------------
    async def _get(self, key: bytes) -> bytes | None:
        return await self._db.get(key)

    def get_sync(self, key: bytes) -> bytes | None:
        return self.run_sync(self._get(key))

    async def _scan_prefix(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        rng = sdb.KeyRange(start=None, start_inclusive=True, end=None, end_inclusive=False)
        it = await self._db.scan_prefix(prefix, rng)
        out: list[tuple[bytes, bytes]] = []
        while True:
            batch = await it.next_batch(256)
            if not batch:
                return out
            out.extend((kv.key, kv.value) for kv in batch)

    def scan_prefix_sync(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return self.run_sync(self._scan_prefix(prefix))
