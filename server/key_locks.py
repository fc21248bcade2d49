"""Row locks for point writes: one per (table, primary key), held by a session.

A point UPDATE inside BEGIN ... COMMIT (server/point_writes.py) computes its new row
when it runs and is applied by the batcher at COMMIT. As in PostgreSQL's read
committed, a second writer of the row must wait until the first ends and then read
its result; else one of the two updates would be lost. So a point write takes the
row's lock until its transaction's changes are staged in the batcher (an autocommitted
one: until its batch is staged).

A general writing transaction (server/transactions.py begin_write) changes rows no
lock names, so it waits until no other session holds one, and while it waits or runs
no session that holds none may take one (`general`). Waits that close a cycle (two
sessions each waiting for the other's rows, or for the other to drain) fail with
40P01, as PostgreSQL's deadlock detector does; a wait lasts the session's lock
timeout at most (55P03) and ends at its CancelRequest (57014: server/waits.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.server.waits import Waits

from headwater.errors import LockNotAvailable, SQLError

Key = tuple[int, tuple[Any, ...]]  # (table oid, primary key values)


class KeyLocks:
    def __init__(self) -> None:
        self._owner: dict[Key, int] = {}
        self._held: dict[int, set[Key]] = {}  # owner -> its keys
        self._waits: dict[int, set[int]] = {}  # owner -> the owners it waits for
        self._waiting = 0  # waits in progress (none: a release wakes nobody)
        self._changed = asyncio.Condition()
        self.general = 0  # general writers waiting for rows or running

    @property
    def contended(self) -> bool:
        """Whether a session waits for a row lock or to drain them."""
        return self._waiting > 0

    def holds(self, owner: int) -> bool:
        return bool(self._held.get(owner))

    async def acquire(self, owner: int, key: Key, waiter: Waits) -> None:
        """Take `key` for `owner` (again: nothing), waiting for its holder to release it
        and, if the owner holds no lock yet, for general writers to end."""
        if self._take(owner, key):  # (the common case: no wait)
            return
        deadline = asyncio.get_running_loop().time() + waiter.lock_timeout()
        async with self._changed:
            while not self._take(owner, key):
                holder = self._owner.get(key)
                waits = {holder} if holder is not None else set()
                await self._wait(owner, waits, deadline, waiter)

    def _take(self, owner: int, key: Key) -> bool:
        """Take `key` if it is free for `owner` (or is the owner's already)."""
        holder = self._owner.get(key)
        if holder == owner:
            return True
        if holder is None and not (self.general and not self.holds(owner)):
            self._owner[key] = owner
            self._held.setdefault(owner, set()).add(key)
            return True
        return False

    async def drain(self, owner: int, waiter: Waits) -> None:
        """Wait until no other owner holds a lock (a general writer, counted in
        `general` until `end_general`). An owner that holds locks itself (a block whose
        point writes go to its writing transaction) does not wait: two such blocks would
        wait for each other (pgbench's TPC-B with FOREIGN KEYs: each holds its rows when
        it INSERTs into history); a row of another block it changes anyway fails that
        block's COMMIT with 40001 (the batcher's `_verify`, writes.apply_staged)."""
        self.general += 1
        deadline = asyncio.get_running_loop().time() + waiter.lock_timeout()
        try:
            async with self._changed:
                while not self.holds(owner) and (
                    others := {o for o, keys in self._held.items() if keys and o != owner}
                ):
                    await self._wait(owner, others, deadline, waiter)
        except BaseException:
            self.end_general()
            raise

    def end_general(self) -> None:
        self.general -= 1
        self._notify()

    def release(self, owner: int) -> None:
        for key in self._held.pop(owner, ()):
            del self._owner[key]
        self._notify()

    def _notify(self) -> None:
        if not self._waiting:
            return

        async def wake() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(wake())

    async def _wait(self, owner: int, waits: set[int], deadline: float, waiter: Waits) -> None:
        """Wait for a change (under the condition), after a deadlock check."""
        self._waits[owner] = waits
        self._waiting += 1
        try:
            if self._cycle(owner):
                raise SQLError(
                    "deadlock detected",
                    "40P01",
                    detail="Transactions wait for rows or writes each other holds.",
                    hint="Retry the transaction.",
                )
            try:
                left = deadline - asyncio.get_running_loop().time()
                await waiter.interruptible(asyncio.wait_for(self._changed.wait(), max(left, 0.0)))
            except TimeoutError:
                raise waiter.lock_timed_out(
                    LockNotAvailable(
                        "could not obtain a row lock: another transaction holds it",
                        hint="End open transactions with COMMIT or ROLLBACK.",
                    )
                ) from None
        finally:
            self._waiting -= 1
            self._waits.pop(owner, None)

    def _cycle(self, start: int) -> bool:
        seen: set[int] = set()
        todo = list(self._waits.get(start, ()))
        while todo:
            o = todo.pop()
            if o == start:
                return True
            if o not in seen:
                seen.add(o)
                todo.extend(self._waits.get(o, ()))
        return False
