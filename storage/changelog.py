"""The durable layout in SlateDB: one atomic batch per epoch.

Keys (all big-endian hex so that byte order is numeric order):

    e/{epoch:016x}                    epoch header, JSON: closed_at, rows per table
    l/{table:08x}/{epoch:016x}/{n:04x} the table's change in that epoch: Arrow IPC
                                       stream of (_hw_rid, columns..., _hw_w), chunked
    c/{oid:08x}                       catalog object, JSON (deleted when dropped)
    m/catalog                         catalog meta, JSON: next_oid (written with DDL)

A change row is a Z-set entry: weight +1 insert, -1 delete; an UPDATE is the old
row at -1 and the new row at +1 under the same row id. Everything an epoch changes
is one SlateDB WriteBatch, so an epoch is either wholly durable or absent.

A table rewrite (ALTER TABLE changing its shape) is stored in the table's log at its
epoch under chunks from REWRITE_CHUNK on: every event of the table's history, each
with its own epoch (column _hw_epoch), in the new shape. It supersedes every entry of
the table at older epochs (those are deleted in the same batch; any still written by
an epoch in flight is ignored when read).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
from headwater.catalog.objects import CatalogObject, from_json, to_json
from headwater.storage.slate import SlateStore

RID = "_hw_rid"
WEIGHT = "_hw_w"
EVENT_EPOCH = "_hw_epoch"  # a rewrite's events carry their own epochs
REWRITE_CHUNK = 0x8000
RETAINED_FROM = b"hw_retained_from"  # a rewrite's metadata: the oldest epoch it holds fully
CHUNK_BYTES = 16 << 20  # keeps single values modest for SlateDB and readers
# An epoch's changes larger than this are encoded on a worker thread, not the event
# loop (a bulk COPY's took ~0.3 s under load, every session waiting meanwhile).
ENCODE_OFF_LOOP_BYTES = 1 << 20
# Larger chunks are written zstd-compressed (Arrow IPC buffer compression: readers need
# nothing else). SlateDB's CPU grows with the bytes it is given (WAL, then L0), so for a
# COPY this costs less than it saves (issue 16, 1 M rows: 71 MB -> 18 MB; encoding
# +0.04 s of CPU, SlateDB's write -0.6 s). Small epochs stay uncompressed: nothing to gain.
COMPRESS_FROM_BYTES = 256 << 10
_COMPRESSED = ipc.IpcWriteOptions(compression="zstd")
AHEAD_MAX = 2  # change tables encoded ahead and not yet taken by an epoch's batch


def epoch_key(epoch: int) -> bytes:
    return b"e/%016x" % epoch


def log_prefix(table_oid: int) -> bytes:
    return b"l/%08x/" % table_oid


def log_key(table_oid: int, epoch: int, chunk: int) -> bytes:
    return b"l/%08x/%016x/%04x" % (table_oid, epoch, chunk)


def catalog_key(oid: int) -> bytes:
    return b"c/%08x" % oid


META_KEY = b"m/catalog"


def encode_arrow(table: pa.Table) -> list[bytes]:
    """Arrow IPC stream blobs of at most ~CHUNK_BYTES each."""
    if table.get_total_buffer_size() < COMPRESS_FROM_BYTES:  # an epoch of a few rows
        # (its buffers' size bounds `nbytes`, which walks them: ~10 µs per call)
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return [sink.getvalue().to_pybytes()]
    blobs: list[bytes] = []
    rows_per_chunk = max(1, int(table.num_rows * CHUNK_BYTES / max(table.nbytes, 1)))
    for start in range(0, max(table.num_rows, 1), rows_per_chunk):
        part = table.slice(start, rows_per_chunk)
        sink = pa.BufferOutputStream()
        options = _COMPRESSED if part.nbytes >= COMPRESS_FROM_BYTES else None
        with ipc.new_stream(sink, part.schema, options=options) as writer:
            writer.write_table(part)
        blobs.append(sink.getvalue().to_pybytes())
    return blobs


def decode_arrow(blob: bytes) -> pa.Table:
    # (logs written before log_form carry a session's zone on some epochs)
    return log_form(ipc.open_stream(pa.py_buffer(blob)).read_all())


def log_form(t: pa.Table) -> pa.Table:
    """`t` as the log keeps change tables: timestamptz columns labelled UTC, an enum's
    labels as strings. DuckDB labels timestamptz with the writing session's TimeZone,
    the batcher with UTC; DuckDB gives an enum column as an Arrow dictionary, the
    batcher as strings. The values are the same, but Arrow refuses to concatenate
    columns whose types differ (an epoch's, a transaction's, a table's log at recovery)."""
    fields = list(t.schema)
    plain = [
        f.with_type(pa.timestamp(f.type.unit, "UTC"))
        if pa.types.is_timestamp(f.type) and f.type.tz not in (None, "UTC")
        else f.with_type(f.type.value_type)
        if pa.types.is_dictionary(f.type)
        else f
        for f in fields
    ]
    if plain == fields:
        return t
    return t.cast(pa.schema(plain, metadata=t.schema.metadata))


def consolidate_in_python(t: pa.Table) -> pa.Table:
    """consolidate_rows for a few rows of types Arrow cannot group (lists, intervals)."""
    sums: dict[tuple[Any, ...], int] = {}
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in t.to_pylist():
        key = tuple(_hashable(v) for k, v in row.items() if k != WEIGHT)
        sums[key] = sums.get(key, 0) + row[WEIGHT]
        rows.setdefault(key, row)
    kept = sorted((r | {WEIGHT: sums[k]} for k, r in rows.items() if sums[k]), key=lambda r: r[RID])
    return pa.Table.from_pylist(kept, schema=t.schema)


def _hashable(v: Any) -> Any:
    if isinstance(v, float):  # by its bits, as Arrow groups: -0.0 is not 0.0, NaN is NaN
        return (float, struct.pack("<d", v))
    if isinstance(v, list):
        return tuple(map(_hashable, v))
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def consolidate_rows(t: pa.Table) -> pa.Table:
    """Change rows with equal columns summed into one, those that cancel out dropped,
    in row-id order (Arrow's group_by: raises for types it cannot group)."""
    keys = [c for c in t.column_names if c != WEIGHT]
    summed = t.group_by(keys, use_threads=False).aggregate([(WEIGHT, "sum")])
    names = [WEIGHT if n == f"{WEIGHT}_sum" else n for n in summed.column_names]
    summed = summed.rename_columns(names).select(t.column_names)
    kept = summed.filter(pc.not_equal(summed.column(WEIGHT), 0))
    return kept.take(pc.sort_indices(kept.column(RID)))


def consolidate_pair(a: pa.Table, b: pa.Table) -> pa.Table | None:
    """consolidate_rows of a's and b's rows when both hold the same row ids in the same
    order, each once (an UPDATE's old and new versions; rows a transaction inserted and
    then deleted): row i of one can only cancel row i of the other, so equal pairs are
    found column by column instead of grouping on every column (an UPDATE of 4,000 rows
    of 16 columns: ~1 ms against 2.4 alone, 4-9 in the server). None when the tables
    are not such a pair, or hold a type Arrow cannot compare (then consolidate_rows)."""
    if a.num_rows != b.num_rows or a.schema != b.schema or not a.num_rows:
        return None
    ra, rb = a.column(RID), b.column(RID)
    if not ra.equals(rb) or pc.count_distinct(ra).as_py() != a.num_rows:
        return None
    same = None
    try:
        for name in a.column_names:
            if name in (RID, WEIGHT):
                continue
            eq = _identical(a.column(name), b.column(name))
            same = eq if same is None else pc.and_(same, eq)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    summed = pc.add(a.column(WEIGHT), b.column(WEIGHT))
    if same is None:  # (no column but the row id)
        same = pa.repeat(pa.scalar(True), a.num_rows)
    # equal pairs become a's row with the summed weight (dropped at 0); others stay two
    keep_a = pc.or_(pc.invert(same), pc.not_equal(summed, 0))
    weights = pc.if_else(same, summed, a.column(WEIGHT))
    first = a.set_column(a.schema.get_field_index(WEIGHT), WEIGHT, weights)
    out = pa.concat_tables([first.filter(keep_a), b.filter(pc.invert(same))])
    return out.take(pc.sort_indices(out.column(RID)))  # (stable: a's row before b's)


def _identical(x: pa.ChunkedArray, y: pa.ChunkedArray) -> pa.ChunkedArray:
    """Per row: the same value, or both NULL. Floats compare by their bits (NaN is NaN,
    -0.0 is not 0.0: PostgreSQL prints them apart)."""
    if pa.types.is_floating(x.type):
        bits = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[x.type.bit_width]
        x = pa.chunked_array([c.view(bits) for c in x.chunks], bits)
        y = pa.chunked_array([c.view(bits) for c in y.chunks], bits)
    eq = pc.equal(x, y)
    if not x.null_count and not y.null_count:
        return eq
    return pc.or_(pc.fill_null(eq, False), pc.and_(pc.is_null(x), pc.is_null(y)))


def _larger_than(tables: list[pa.Table], limit: int) -> bool:
    """Whether the tables' data add up to more than `limit` bytes (`nbytes` only when
    their buffers do: slices share the buffers of what they were cut from)."""
    if sum(t.get_total_buffer_size() for t in tables) <= limit:
        return False
    return sum(t.nbytes for t in tables) > limit


@dataclass
class EpochRecord:
    """Everything one epoch makes durable."""

    epoch: int
    changes: dict[int, pa.Table] = field(default_factory=dict)  # table oid -> change rows
    catalog: dict[int, CatalogObject | None] = field(default_factory=dict)
    dropped_logs: list[bytes] = field(default_factory=list)  # keys of dropped tables' logs
    meta: dict[str, Any] | None = None
    rewrites: dict[int, pa.Table] = field(default_factory=dict)  # table oid -> its history
    closed_at: float = 0.0

    def header(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "closed_at": self.closed_at,
            "rows": {str(oid): t.num_rows for oid, t in self.changes.items()},
            "ddl": sorted(self.catalog),
            **({"rewrites": sorted(self.rewrites)} if self.rewrites else {}),
        }


class ChangeLog:
    def __init__(self, store: SlateStore) -> None:
        self.store = store
        # change tables being encoded ahead of their epoch (`encode_ahead`), by id()
        self._ahead: dict[int, tuple[pa.Table, concurrent.futures.Future[list[bytes]]]] = {}
        self._ahead_lock = threading.Lock()
        self._encoder: concurrent.futures.ThreadPoolExecutor | None = None

    def encode_ahead(self, table: pa.Table) -> None:
        """Start encoding a large change table now, on a thread of its own, while its
        writer goes on (a COPY's DuckDB insert and commit): the epoch's batch takes the
        blobs if its change for the table is this very table (else it encodes its own).
        Encoding 1 M rows takes ~0.1-0.2 s, TPC-H SF 0.2's lineitem ~0.4 s."""
        with self._ahead_lock:
            if self._encoder is None:
                self._encoder = concurrent.futures.ThreadPoolExecutor(1, "hw-encode")
            self._ahead[id(table)] = (table, self._encoder.submit(encode_arrow, table))
            while len(self._ahead) > AHEAD_MAX:  # never taken (a rollback): forgotten
                del self._ahead[next(iter(self._ahead))]

    def _encoded(self, table: pa.Table) -> list[bytes]:
        with self._ahead_lock:
            ahead = self._ahead.pop(id(table), None)
        if ahead is not None and ahead[0] is table:
            return ahead[1].result()
        return encode_arrow(table)

    def _batch(self, rec: EpochRecord) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
        rec.closed_at = rec.closed_at or time.time()
        puts: list[tuple[bytes, bytes]] = [
            (epoch_key(rec.epoch), json.dumps(rec.header()).encode())
        ]
        deletes: list[bytes] = list(rec.dropped_logs)
        for oid, table in rec.changes.items():
            for n, blob in enumerate(self._encoded(table)):
                puts.append((log_key(oid, rec.epoch, n), blob))
        for oid, table in rec.rewrites.items():
            for n, blob in enumerate(encode_arrow(table)):
                puts.append((log_key(oid, rec.epoch, REWRITE_CHUNK + n), blob))
        for oid, obj in rec.catalog.items():
            if obj is None:
                deletes.append(catalog_key(oid))
            else:
                puts.append((catalog_key(oid), json.dumps(to_json(obj)).encode()))
        if rec.meta is not None:
            puts.append((META_KEY, json.dumps(rec.meta).encode()))
        return puts, deletes

    async def submit_epoch(self, rec: EpochRecord) -> Any:
        """Write the epoch's batch; await `store.await_durable(handle)` for durability."""
        tables = [*rec.changes.values(), *rec.rewrites.values()]
        if _larger_than(tables, ENCODE_OFF_LOOP_BYTES):
            puts, deletes = await asyncio.to_thread(self._batch, rec)  # a COPY's epoch
        else:
            puts, deletes = self._batch(rec)
        return await self.store.submit(puts, deletes)

    # -- recovery -----------------------------------------------------------------
    def load_catalog(self) -> tuple[list[CatalogObject], dict[str, Any]]:
        objs = [from_json(json.loads(v)) for _, v in self.store.scan_prefix_sync(b"c/")]
        raw = self.store.get_sync(META_KEY)
        return objs, (json.loads(raw) if raw else {})

    def epochs(self) -> list[dict[str, Any]]:
        return [json.loads(v) for _, v in self.store.scan_prefix_sync(b"e/")]

    def read_table_log(self, table_oid: int) -> list[tuple[int, pa.Table]]:
        """(epoch, change rows) for every epoch that changed the table, in order, from
        its latest rewrite on (a rewrite's rows have an _hw_epoch column; the entries
        of its own epoch are changes made after it)."""
        entries: list[tuple[int, int, bytes]] = []
        for key, blob in self.store.scan_prefix_sync(log_prefix(table_oid)):
            parts = key.split(b"/")
            entries.append((int(parts[2], 16), int(parts[3], 16), blob))
        since = max((e for e, chunk, _ in entries if chunk >= REWRITE_CHUNK), default=0)
        return [(e, decode_arrow(blob)) for e, _, blob in entries if e >= since]

    def log_keys(self, table_oid: int) -> list[bytes]:
        """Every key of the table's log (deleted when it is dropped or rewritten)."""
        return [k for k, _ in self.store.scan_prefix_sync(log_prefix(table_oid))]
