"""What a sink target is given: its sink (`SinkSpec`) and one batch to write
(`BatchReader`), and what it answers (`Target`). See storage/sinks/__init__.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
from headwater.catalog.objects import Column

EPOCH, DIFF = "epoch", "diff"  # the leading columns of mode 'changes' (SUBSCRIBE's names)
NET_DIFF = "_hw_diff"  # the leading column of `BatchReader.net()`


@dataclass(frozen=True)
class SinkSpec:
    """What a target needs to know of its sink."""

    name: str  # qualified sink name, as it is recorded in the target
    oid: int  # tells this sink's records from those of an earlier sink of that name
    target: str
    table: str | None
    mode: str  # mirror | changes
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


class BatchReader(Protocol):
    """One batch of a source's changes. `after` None: the first batch, a snapshot at
    `upto` (its changes are every row at `upto`, counted, at epoch `upto`)."""

    after: int | None
    upto: int

    def changes(self) -> pa.Table:
        """(epoch, diff, cols...) consolidated per epoch, in epoch order."""

    def net(self) -> pa.Table:
        """(_hw_diff, cols...): the batch's changes summed over its epochs (nonzero)."""

    def state(self) -> pa.Table:
        """(cols...): every row of the source at `upto` (one row per copy)."""

    def python_rows(self, table: pa.Table) -> list[tuple[Any, ...]]:
        """`table`'s rows as Python values of the catalog's types (for text encoding)."""


class Target(Protocol):
    async def last_epoch(self) -> int | None:
        """The newest epoch this sink wrote to the target (None: nothing yet)."""

    async def write(self, batch: BatchReader) -> int:
        """Write a batch and its epoch atomically; returns the rows written."""

    async def close(self) -> None: ...


class ThreadedTarget:
    """A target whose client blocks (delta-rs, file writes): its calls run on a worker
    thread, off the event loop. Subclasses define `_last_epoch` and `_write`."""

    async def last_epoch(self) -> int | None:
        return await asyncio.to_thread(self._last_epoch)

    async def write(self, batch: BatchReader) -> int:
        return await asyncio.to_thread(self._write, batch)

    async def close(self) -> None:
        pass

    def _last_epoch(self) -> int | None:
        raise NotImplementedError

    def _write(self, batch: BatchReader) -> int:
        raise NotImplementedError


def hashable(v: Any) -> Any:
    """A value as a dict key (lists and structs of a row as tuples)."""
    if isinstance(v, list):
        return tuple(hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, hashable(x)) for k, x in v.items()))
    return v
