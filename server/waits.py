"""A session's waits, and their end at a CancelRequest.

A statement may wait for lagging views, a future epoch or SUBSCRIBE rows; a
CancelRequest (or statement_timeout) ends the waiting statement with 57014. Before a
long wait the statement may tell the client what it waits for (`notice`): the
connection sends that NOTICE at once, not with the statement's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from headwater.errors import SQLError


class Waits:
    def __init__(self) -> None:
        self._interrupted = asyncio.Event()  # a CancelRequest for the waiting statement
        self._waits = 0
        # sends a NoticeResponse now (set by the connection; None: nobody to tell)
        self.tell: Callable[[str | SQLError], None] | None = None

    def notice(self, message: str | SQLError) -> None:
        """Tell the client, before blocking, what the statement waits for."""
        if self.tell is not None:
            self.tell(message)

    def interrupt(self) -> None:
        """End the statement waiting now (when none waits: nothing)."""
        if self._waits:
            self._interrupted.set()

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
            raise SQLError("canceling statement due to user request", "57014")
        return work.result()
