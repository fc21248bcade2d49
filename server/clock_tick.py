"""Empty epochs that move temporal views' time when nothing is written.

A view with a temporal filter (`WHERE ts + interval '1 hour' > now()`,
planner/temporal.py) is exact at each epoch's close time, and epochs close when
transactions commit. Without writes its time would stand still and rows would never
leave it. While such a view exists, an epoch with no changes closes whenever none has
closed for `--clock-tick` (1 s: Materialize's default tick), as a transaction that
commits nothing would. Views without a clock are fresh across such epochs
(server/matviews.py `fresh_until`: no table under them changed), so only temporal
views do work, and reads of them wait for at most one tick's batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from headwater.storage.commit import Committer

log = logging.getLogger("headwater.clock")


async def tick(
    committer: Committer,
    every: float,
    wanted: Callable[[], bool],
    last_closed: Callable[[], float],
) -> None:
    """Close an empty epoch when `wanted()` (a temporal view exists) and no epoch
    has closed for `every` seconds (`last_closed()`: the newest one's close time)."""
    while True:
        idle = time.time() - last_closed()
        await asyncio.sleep(max(every - idle, every / 4))
        if time.time() - last_closed() < every or not wanted():
            continue
        try:  # a writer holding the lock commits an epoch of its own soon
            await asyncio.wait_for(committer.write_lock.acquire(), every)
        except TimeoutError:
            continue
        try:
            epoch = committer.begin_stamp()
            durable = committer.end_stamp(epoch, {})
        finally:
            committer.write_lock.release()
        try:
            if durable is not None:
                await durable
        except Exception as e:  # writes are refused (disk full, ...): the writers say why
            log.debug("clock tick at epoch %d not durable: %s", epoch, e)
            await asyncio.sleep(every)
