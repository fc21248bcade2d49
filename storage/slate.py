"""SlateDB, opened once per server and driven from its own thread.

The binding is asyncio-based but its generated glue copies bytes one at a time in a
Python loop (2-3 MB/s, ../shared/research/slatedb-python-binding.md); `_patch_copies`
swaps that loop for memmove. All SlateDB calls run on a private event loop in a
dedicated thread so that Python-side work in the binding never stalls the server's
loop; callers on the server loop `await` thin wrappers, blocking callers (startup,
tools) use the `*_sync` forms.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

import slatedb.uniffi as sdb
from slatedb.uniffi._slatedb_uniffi import slatedb as _gen

T = TypeVar("T")

# Tuned per ../shared/research: the default compactor polls every 5 s and stalls
# memtable flushes on L0 backpressure for seconds.
_SETTINGS = {
    "flush_interval": '"2ms"',
    "compactor_options.poll_interval": '"100ms"',
    "compactor_options.worker.compactions_poll_interval": '"100ms"',
}


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

    builder.write = write
    builder._pack_into = pack_into
    _gen._UniffiRustBufferStream.read = read
    builder._headwater_patched = True


class SlateStore:
    """One SlateDB database: atomic durable batches, point reads and prefix scans."""

    def __init__(self, path: Path) -> None:
        _patch_copies()
        self.path = path
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
        self.path.mkdir(parents=True, exist_ok=True)
        self.run_sync(self._open())

    async def _open(self) -> None:
        store = sdb.ObjectStore.resolve("file:///")
        builder = sdb.DbBuilder(str(self.path.resolve()), store)
        settings = sdb.Settings.default()
        for key, value in _SETTINGS.items():
            settings.set(key, value)
        builder.with_settings(settings)
        self._db = await builder.build()

    def close_sync(self) -> None:
        if self._db is not None:
            try:
                self.run_sync(self._db.shutdown())
            finally:
                self._db = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- writes -------------------------------------------------------------------
    async def _submit_batch(
        self, puts: Iterable[tuple[bytes, bytes]], deletes: Iterable[bytes]
    ) -> Any:
        batch = sdb.WriteBatch()
        for key, value in puts:
            batch.put(key, value)
        for key in deletes:
            batch.delete(key)
        return await self._db.write(batch)

    async def submit(
        self, puts: Iterable[tuple[bytes, bytes]], deletes: Iterable[bytes] = ()
    ) -> Any:
        """Apply one atomic batch (not yet durable); returns its write handle.

        Batches become durable in submission order (one WAL), so awaiting a later
        batch's durability implies the earlier ones are durable too.
        """
        return await self.run(self._submit_batch(list(puts), list(deletes)))

    async def await_durable(self, handle: Any) -> None:
        await self.run(handle.await_durable())

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
