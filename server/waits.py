"""A session's waits, and their end at a CancelRequest.

A statement may wait for lagging views, a future epoch or SUBSCRIBE rows, and a
writer for another session's row locks or writing transaction; a CancelRequest (or
statement_timeout) ends the waiting statement with 57014, as PostgreSQL's interrupts
end a lock wait. A lock wait lasts `lock_timeout()` at most (then 55P03). Before a
long wait the statement may tell the client what it waits for (`notice`): the
connection sends that NOTICE at once, not with the statement's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from headwater.errors import SQLError

T = TypeVar("T")


def canceled() -> SQLError:
    return SQLError("canceling statement due to user request", "57014")


class Waits:
    def __init__(
        self, lock_timeout_ms: Callable[[], float] = lambda: 0.0, write_lock_timeout: float = 30.0
    ) -> None:
        self._interrupted = asyncio.Event()  # a CancelRequest for the waiting statement
        self._waits = 0
        # sends a NoticeResponse now (set by the connection; None: nobody to tell)
        self.tell: Callable[[str | SQLError], None] | None = None
        self._setting = lock_timeout_ms  # the session's lock_timeout (0: unset)
        self._default = write_lock_timeout  # the server's --write-lock-timeout
        # ends the lock wait in progress (`interruptible`, the batcher's queue)
        self.on_interrupt: Callable[[], None] | None = None

    def notice(self, message: str | SQLError) -> None:
        """Tell the client, before blocking, what the statement waits for."""
        if self.tell is not None:
            self.tell(message)

    def lock_timeout(self) -> float:
        """Seconds a lock wait lasts: the session's lock_timeout, else the server's."""
        ms = self._setting()
        return ms / 1000 if ms else self._default

    def lock_timed_out(self, error: SQLError) -> SQLError:
        """55P03 for a lock wait that lasted `lock_timeout()`: PostgreSQL's message where
        the session's lock_timeout ended it, else `error` (what waited, what to do)."""
        if self._setting():
            return SQLError("canceling statement due to lock timeout", "55P03")
        return error

    def interrupt(self) -> None:
        """End the statement waiting now (when none waits: nothing)."""
        if self.on_interrupt is not None:
            self.on_interrupt()
        if self._waits:
            self._interrupted.set()

    async def interruptible(self, aw: Awaitable[T]) -> T:
        """Await `aw`, a lock wait of the running task, so that a CancelRequest ends it
        with 57014: the task is cancelled at this await (`aw` cleans up as on any
        cancellation); where `aw` finished first, the statement goes on."""
        task = asyncio.current_task()
        assert task is not None
        hit = False

        def stop() -> None:
            nonlocal hit
            hit = True
            task.cancel()

        self.on_interrupt = stop
        try:
            result = await aw
        except asyncio.CancelledError:
            if not hit:
                raise
            task.uncancel()
            raise canceled() from None
        finally:
            self.on_interrupt = None
        if hit:
            task.uncancel()
        return result

    async def wait(self, aw: Any) -> Any:
        """Await `aw` unless a CancelRequest comes first (then 57014)."""
        if not self._waits:
            self._interrupted.clear()
        self._waits += 1
        work = asyncio.ensure_future(aw)
        stop = asyncio.ensure_future(self._interrupted.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waits -= 1
            stop.cancel()
            if not work.done():
                work.cancel()
        if not work.done() or work.cancelled():
            raise canceled()
        return work.result()
