"""The spool: every closed epoch's changes as Arrow IPC files, read by epoch.

The server owns SlateDB (one writer), and Spark's Python data sources run in Python
worker processes that Spark starts (measured: bench/engine_candidates.py), so they
cannot read the server's memory or SlateDB. The server therefore spools each durable
epoch's changes into a directory that the engine reads:

    {root}/{epoch:016x}.{table_oid}.arrows  the table's changes in that epoch: the Arrow
                                            IPC stream the change log already encoded,
                                            (_hw_rid, columns..., _hw_w); no file if the
                                            epoch did not change the table
    {root}/LATEST                           newest complete epoch: 20 decimal digits and
                                            a newline, overwritten in place (one pwrite)
                                            after the epoch's files

Readers look only at epochs <= LATEST, so they never see half an epoch. Spooling an
epoch costs one small file per changed table (0.03 ms on tmpfs, 0.3 ms on this
machine's disk) plus a 21-byte pwrite; a rename per epoch would cost 0.6-1.3 ms on
disk, so LATEST is not renamed into place. Put the spool on tmpfs when there is one.
The spool is a cache of the change log, not a source of truth: after a crash the
server re-spools from SlateDB every epoch newer than the oldest stage frontier, so
nothing here is fsynced. `truncate` drops epochs that every stage has committed.

In the server the spool is first memory: `SpoolWriter(root, memory_bytes=...)` keeps
each epoch's tables in the process (the engine runs there and reads them through
`reader()`) and writes files only for what exceeds that budget; LATEST is still
written per epoch, for the stage's offsets. The server spools on its event loop, once
per group commit: with single-row INSERTs from 4 clients the files' open/write/close
was 43% of the event loop's time (py-spy, docs/engine.md (i)).

Offsets of the streaming sources are epochs: `{"epoch": n}` means "every epoch <= n".
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
from headwater.storage.changelog import RID
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)

EPOCH = "_hw_epoch"
LATEST = "LATEST"


def table_file(root: Path, epoch: int, table: int) -> Path:
    return root / f"{epoch:016x}.{table}.arrows"


def encode(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


class SpoolWriter:
    """Writes closed epochs into the spool (the server calls this once per epoch).
    `memory_bytes`: keep up to that many bytes of change rows in memory rather than in
    files (0: files only; readers in this process see both through `reader()`)."""

    def __init__(self, root: str | os.PathLike[str], memory_bytes: int = 0) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._latest = os.open(self.root / LATEST, os.O_RDWR | os.O_CREAT, 0o644)
        self.memory_bytes = memory_bytes
        self._mem = MemorySpool(self.root, _has_epoch_files(self.root))

    def reader(self) -> MemorySpool:
        """What the engine reads epochs through (memory first, then files)."""
        return self._mem

    def write_epoch(self, epoch: int, changes: Mapping[int, pa.Table | bytes]) -> None:
        """Spool one epoch: table oid -> change rows, as a table or IPC stream bytes."""
        if self.memory_bytes and self._mem.keep(epoch, changes, self.memory_bytes):
            self.set_latest(epoch)
            return
        self._mem.spilling()
        try:
            for oid, rows in changes.items():
                data = rows if isinstance(rows, bytes) else encode(rows)
                with open(table_file(self.root, epoch, oid), "wb") as f:
                    f.write(data)
        finally:
            self._mem.spilled()
        self.set_latest(epoch)

    def set_latest(self, epoch: int) -> None:
        os.pwrite(self._latest, b"%020d\n" % epoch, 0)

    def close(self) -> None:
        os.close(self._latest)

    def truncate(self, upto: int) -> None:
        """Forget every epoch <= upto (all stages have committed them)."""
        seen = self._mem.forget(upto)
        if not self._mem.files:
            return  # (no file to look for: a listing per batch is not free)
        left = False
        for f in self.root.iterdir():
            head = f.name.split(".", 1)[0]
            if f.name.startswith(".") or f.name == LATEST or len(head) != 16:
                continue
            if int(head, 16) <= upto:
                f.unlink(missing_ok=True)
            else:
                left = True
        if not left:
            self._mem.no_files(seen)


class MemorySpool:
    """The epochs a `SpoolWriter` keeps in memory (epoch -> table -> rows), and the
    spool's files for the others. The writer adds (the event loop), the engine reads
    and forgets (its threads): a lock guards the map, never held while reading files."""

    def __init__(self, root: Path, files: bool) -> None:
        self.root = root
        self.files = files  # whether any epoch may be in a file (else none is looked for)
        self._epochs: dict[int, dict[int, pa.Table]] = {}
        self._sizes: dict[int, int] = {}  # epoch -> bytes kept
        self._bytes = 0
        # epochs whose files were begun, and written: a truncation's listing may miss a
        # file being written, so it clears `files` only if none was in flight
        self._spills = self._spilled = 0
        self._lock = threading.Lock()

    def spilling(self) -> None:
        """The writer is about to write an epoch's files (then calls `spilled`)."""
        with self._lock:
            self.files = True
            self._spills += 1

    def spilled(self) -> None:
        with self._lock:
            self._spilled += 1

    def no_files(self, seen: int) -> None:
        """A listing found no file left; `seen` (from `forget`, before the listing): the
        files begun then, all written (-1: one was in flight)."""
        with self._lock:
            if seen >= 0 and self._spills == seen:
                self.files = False

    def keep(self, epoch: int, changes: Mapping[int, pa.Table | bytes], budget: int) -> bool:
        """Keep an epoch's changes if they fit the budget; False: write files instead."""
        tables = {o: r if isinstance(r, pa.Table) else decode(r) for o, r in changes.items()}
        size = sum(t.nbytes for t in tables.values())
        with self._lock:
            if self._bytes + size > budget:
                return False
            self._epochs.setdefault(epoch, {}).update(tables)
            self._sizes[epoch] = self._sizes.get(epoch, 0) + size
            self._bytes += size
        return True

    def forget(self, upto: int) -> int:
        """Forget the epochs <= upto kept in memory; returns the epochs spilled to files
        so far (-1 while one is being written: see `no_files`)."""
        with self._lock:
            for e in [e for e in self._epochs if e <= upto]:
                del self._epochs[e]
                self._bytes -= self._sizes.pop(e)
            return self._spills if self._spilled == self._spills else -1

    def table(self, table: int, epoch: int) -> pa.Table | None:
        """The table's changes in the epoch (None: it did not change the table)."""
        with self._lock:
            t = self._epochs.get(epoch, {}).get(table)
        if t is not None or not self.files:
            return t
        return read_table(self.root, table, epoch)

    def epochs(self, table: int, start: int, end: int) -> list[int]:
        """Candidate epochs of (start, end] that may hold the table's changes."""
        if self.files:
            return list(range(start + 1, end + 1))
        with self._lock:
            return sorted(e for e, ts in self._epochs.items() if start < e <= end and table in ts)


def decode(data: bytes) -> pa.Table:
    return ipc.open_stream(pa.py_buffer(data)).read_all()


def _has_epoch_files(root: Path) -> bool:
    return any(len(f.name.split(".", 1)[0]) == 16 for f in root.iterdir())


def read_latest(root: Path) -> int:
    try:
        text = (root / LATEST).read_bytes()
    except FileNotFoundError:
        return 0
    if len(text) != 21 or not text.endswith(b"\n"):
        return 0  # not written yet
    return int(text)


def wait_latest(root: Path, after: int, wait_ms: float, poll_ms: float) -> int:
    """The newest spooled epoch, waiting up to `wait_ms` for one newer than `after`.

    Waiting inside the source's latestOffset keeps Spark's micro-batch loop from
    spinning when no epoch closes (idle CPU), at no cost in latency: the wait ends
    as soon as an epoch is spooled.
    """
    deadline = time.monotonic() + wait_ms / 1000.0
    while True:
        latest = read_latest(root)
        if latest > after or time.monotonic() >= deadline:
            return max(latest, after)
        time.sleep(poll_ms / 1000.0)


def read_table(root: Path, table: int, epoch: int) -> pa.Table | None:
    path = table_file(root, epoch, table)
    try:
        with pa.memory_map(str(path)) as source:
            return ipc.open_stream(source).read_all()
    except FileNotFoundError:
        return None


def read_table_changes(
    root: Path, table: int, start: int, end: int, mem: MemorySpool | None = None
) -> Iterator[pa.RecordBatch]:
    """The table's change rows of epochs (start, end], with an _hw_epoch column
    (and without _hw_rid, which no view needs); `mem`: the spool's memory, if any."""
    for t in read_table_epochs(root, table, start, end, mem)[0]:
        yield from t.to_batches()


def read_table_epochs(
    root: Path, table: int, start: int, end: int, mem: MemorySpool | None = None
) -> tuple[list[pa.Table], list[int]]:
    """The table's change rows of epochs (start, end] as in `read_table_changes`, one
    table per epoch that changed it, and those epochs (ascending)."""
    parts: list[pa.Table] = []
    epochs: list[int] = []
    mem = mem or MemorySpool(root, True)
    for epoch in mem.epochs(table, start, end):
        t = mem.table(table, epoch)
        if t is None or not t.num_rows:
            continue
        if RID in t.column_names:
            t = t.drop_columns([RID])
        parts.append(t.append_column(EPOCH, pa.array([epoch] * t.num_rows, pa.int64())))
        epochs.append(epoch)
    return parts, epochs


def spooled_epochs(root: Path, table: int, start: int, end: int) -> list[int]:
    return [e for e in range(start + 1, end + 1) if table_file(root, e, table).exists()]


# -- Spark Python data sources --------------------------------------------------------
class _EpochRange(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end


class _ChangeReader(DataSourceStreamReader):
    """Partitioned reader: epoch ranges read in Spark's Python workers as Arrow batches."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.root = Path(options["root"])
        self.table = int(options["table"])
        self.wait_ms = float(options.get("wait_ms", "0"))
        self.poll_ms = float(options.get("poll_ms", "2"))
        self.max_partitions = int(options.get("partitions", "2"))
        self.first = int(options.get("start_epoch", "0"))
        self.max_epochs = int(options.get("max_epochs", "0"))  # 0: every spooled epoch

    def initialOffset(self) -> dict:
        return {"epoch": self.first}

    def latestOffset(self, start: dict | None = None, limit: object | None = None) -> dict:
        after = int(start["epoch"]) if start else self.first
        latest = wait_latest(self.root, after, self.wait_ms, self.poll_ms)
        if self.max_epochs:
            latest = min(latest, after + self.max_epochs)
        return {"epoch": latest}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = int(start["epoch"]), int(end["epoch"])
        epochs = spooled_epochs(self.root, self.table, s, e)
        if not epochs:
            return []
        n = min(self.max_partitions, len(epochs))
        cuts = [epochs[len(epochs) * i // n] - 1 for i in range(n)] + [e]
        return [_EpochRange(cuts[i], cuts[i + 1]) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _EpochRange)
        yield from read_table_changes(self.root, self.table, partition.start, partition.end)

    def commit(self, end: dict) -> None:
        pass


class _SimpleChangeReader(SimpleDataSourceStreamReader):
    """Simple reader: reads on the source runner process, rows as tuples (small batches)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.inner = _ChangeReader(options)

    def initialOffset(self) -> dict:
        return self.inner.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        end = self.inner.latestOffset(start)
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        rows: list[tuple] = []
        for b in read_table_changes(
            self.inner.root, self.inner.table, int(start["epoch"]), int(end["epoch"])
        ):
            rows.extend(zip(*(c.to_pylist() for c in b.columns), strict=True))
        return iter(rows)

    def commit(self, end: dict) -> None:
        pass


class ChangeSource(DataSource):
    """`spark.readStream.format("hw_changes").option("root", ...).option("table", oid)
    .option("schema", "a int, b string, _hw_w int, _hw_epoch long")`; option
    `reader` = "partitioned" (default) or "simple"."""

    @classmethod
    def name(cls) -> str:
        return "hw_changes"

    def schema(self) -> str:
        return self.options["schema"]

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        if self.options.get("reader", "partitioned") == "simple":
            from pyspark.errors import PySparkNotImplementedError

            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
            )
        return _ChangeReader(self.options)

    def simpleStreamReader(self, schema: object) -> SimpleDataSourceStreamReader:
        return _SimpleChangeReader(self.options)


class _EpochReader(SimpleDataSourceStreamReader):
    """Offsets only: one row per spooled epoch in the batch (the stage reads the files)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.inner = _ChangeReader({**options, "table": "0"})

    def initialOffset(self) -> dict:
        return self.inner.initialOffset()

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        end = self.inner.latestOffset(start)
        return self.readBetweenOffsets(start, end), end

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        s, e = int(start["epoch"]), int(end["epoch"])
        return iter([(s, e)] if e > s else [])

    def commit(self, end: dict) -> None:
        pass


class EpochSource(DataSource):
    """`spark.readStream.format("hw_epochs").option("root", ...)`: a stream whose
    offsets are epochs and whose micro-batches are one row each, (start, end]: the
    batch's epoch range. The stage's foreachBatch reads the epochs' changes itself; the query's
    plan does not depend on the views, so views come and go without restarting it."""

    @classmethod
    def name(cls) -> str:
        return "hw_epochs"

    def schema(self) -> str:
        return "start_epoch long, end_epoch long"

    def simpleStreamReader(self, schema: object) -> SimpleDataSourceStreamReader:
        return _EpochReader(self.options)
