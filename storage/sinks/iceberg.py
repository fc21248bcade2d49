"""INTO ICEBERG 'warehouse' WITH (namespace = 'ns', table = 't'): an Iceberg table
written with `pyiceberg`.

The catalog is pyiceberg's SQL catalog on a SQLite file in the warehouse
(`<warehouse>/headwater_iceberg.db`), or the one `catalog_uri` names: `http(s)://...` a
REST catalog, any other a SQL catalog's SQLAlchemy URL (`sqlite:///...`). A warehouse on object
storage (s3://...) needs a `catalog_uri` (a SQLite file cannot live in a bucket);
credentials come from the usual AWS_* environment.

Every batch is one Iceberg transaction, committed by one catalog update (the table's
metadata pointer swapped from the version the batch read): its last snapshot, always
an append (empty if need be), carries `headwater.sink_oid` and `headwater.epoch` in
its summary. Walking the current snapshot's ancestry to the newest such summary says
which epoch the table holds: the sink resumes after it. Mode 'changes' appends
(epoch, diff, cols...); mode 'mirror' deletes the batch's changed keys and appends
their new rows, or, without a key, overwrites the table with the source's rows. A
sink's first batch replaces whatever the table held.

Columns whose Arrow type Iceberg lacks (intervals, small or unsigned integers beyond
its own, UUIDs as DuckDB hands them, JSON) are written as their text or widened.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from functools import reduce
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
from headwater.storage.sinks.spec import NET_DIFF, BatchReader, SinkSpec, ThreadedTarget, hashable

log = logging.getLogger("headwater.sinks")

CATALOG_FILE = "headwater_iceberg.db"
CATALOG_NAME = "headwater"  # a SQL catalog's tables are kept under its name: readers use it
_CATALOG_INIT = threading.Lock()  # sinks sharing a new SQLite catalog would race to set it up

# pyiceberg warns of a delete matching nothing: a batch whose keys are all new does
warnings.filterwarnings("ignore", "Delete operation did not match any records")
SINK_OID, EPOCH_KEY = "headwater.sink_oid", "headwater.epoch"
# A batch is a snapshot and a metadata file: the table keeps the newest 20 metadata
# files, and every EXPIRE_EVERY batches snapshots older than KEEP_SNAPSHOTS_S are
# expired (their time travel dropped; pyiceberg leaves their data files in place).
TABLE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}
EXPIRE_EVERY, KEEP_SNAPSHOTS_S = 100, 3600.0


def local_warehouse(uri: str) -> str | None:
    """The directory of a local warehouse ('/path' or 'file:///path'), else None."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return os.path.abspath(parsed.path if parsed.scheme else uri)
    return None


def catalog_properties(warehouse: str, catalog_uri: str | None) -> dict[str, str]:
    """pyiceberg's load_catalog properties for a sink's warehouse and catalog."""
    local = local_warehouse(warehouse)
    location = f"file://{local}" if local is not None else warehouse
    if catalog_uri:
        kind = "rest" if catalog_uri.startswith(("http://", "https://")) else "sql"
        return {"type": kind, "uri": catalog_uri, "warehouse": location, **_s3_properties()}
    if local is None:
        raise ValueError(
            f"an Iceberg warehouse at {warehouse} needs catalog_uri"
            " (the default SQLite catalog lives in a local warehouse)"
        )
    return {"type": "sql", "uri": f"sqlite:///{local}/{CATALOG_FILE}", "warehouse": location}


def _s3_properties() -> dict[str, str]:
    """pyiceberg's S3 settings from the AWS_* environment (its file IO reads no
    endpoint from there)."""
    names = {
        "AWS_ENDPOINT_URL_S3": "s3.endpoint",
        "AWS_ENDPOINT_URL": "s3.endpoint",
        "AWS_REGION": "s3.region",
        "AWS_ACCESS_KEY_ID": "s3.access-key-id",
        "AWS_SECRET_ACCESS_KEY": "s3.secret-access-key",
        "AWS_SESSION_TOKEN": "s3.session-token",
    }
    out: dict[str, str] = {}
    for env, prop in names.items():
        if os.environ.get(env) and prop not in out:
            out[prop] = os.environ[env]
    return out


class IcebergTarget(ThreadedTarget):
    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec
        opts = spec.options
        self.identifier = (opts["namespace"], opts["table"])
        self.properties = catalog_properties(spec.target, opts.get("catalog_uri") or None)
        self._catalog: Any = None
        self._batches = 0

    # -- worker threads -----------------------------------------------------------
    def _cat(self) -> Any:
        if self._catalog is None:
            from pyiceberg.catalog import load_catalog

            local = local_warehouse(self.spec.target)
            if local is not None:
                os.makedirs(local, exist_ok=True)
            with _CATALOG_INIT:
                self._catalog = load_catalog(CATALOG_NAME, **self.properties)
        return self._catalog

    def _table(self) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self._cat().load_table(self.identifier)
        except NoSuchTableError:
            return None

    def _last_epoch(self) -> int | None:
        table = self._table()
        if table is None:
            return None
        snap = table.current_snapshot()
        while snap is not None:
            summary = snap.summary
            if summary is not None and summary.get(SINK_OID) is not None:
                if summary.get(SINK_OID) == str(self.spec.oid):
                    return int(summary[EPOCH_KEY])
                return None  # another sink wrote it since: this one starts anew
            snap = (
                table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
            )
        return None

    def _create(self, schema: pa.Schema) -> Any:
        cat = self._cat()
        cat.create_namespace_if_not_exists(self.identifier[0])
        return cat.create_table_if_not_exists(
            self.identifier, schema=schema, properties=TABLE_PROPERTIES
        )

    def _write(self, batch: BatchReader) -> int:
        rows = self._commit(batch)
        self._batches += 1
        if self._batches % EXPIRE_EVERY == 0:
            self._expire()
        return rows

    def _expire(self) -> None:
        from datetime import UTC, datetime, timedelta

        table = self._table()
        if table is None:
            return
        cutoff = datetime.now(UTC) - timedelta(seconds=KEEP_SNAPSHOTS_S)
        try:  # (the current snapshot, this sink's newest, is never expired)
            table.maintenance.expire_snapshots().older_than(cutoff).commit()
        except Exception as e:  # the batches are written: a failed cleanup waits for the next
            log.warning("sink %s: expiring Iceberg snapshots: %s", self.spec.name, e)

    def _commit(self, batch: BatchReader) -> int:
        spec = self.spec
        props = {
            SINK_OID: str(spec.oid),
            EPOCH_KEY: str(batch.upto),
            "headwater.sink": spec.name,
        }
        if spec.mode == "changes":
            data = _storable(batch.changes())
        elif batch.after is None or not spec.key:
            data = _storable(batch.state())
        else:
            data = None
        table = self._table()
        if table is None and batch.after is not None:  # dropped behind the sink's back:
            # the retry asks `last_epoch` again (None) and starts with a snapshot
            raise RuntimeError(f"Iceberg table {'.'.join(self.identifier)} is gone")
        if table is None:
            assert data is not None
            table = self._create(data.schema)
        with table.transaction() as tx:
            if data is not None and (batch.after is None or spec.mode == "mirror"):
                tx.overwrite(_fit(data, table), snapshot_properties=props)
                return data.num_rows
            if data is not None:
                tx.append(_fit(data, table), snapshot_properties=props)
                return data.num_rows
            net = _storable(batch.net())
            changed, upserts = _changed_keys(net, spec.key)
            if changed:
                tx.delete(_key_filter(spec.key, changed), snapshot_properties=props)
            tx.append(_fit(upserts, table), snapshot_properties=props)
            return net.num_rows


def _changed_keys(net: pa.Table, key: tuple[str, ...]) -> tuple[list[tuple[Any, ...]], pa.Table]:
    """The keys whose old row a batch's net changes remove, and the new rows. (The
    table holds the source at the batch's start: a key only added is not in it, so
    a batch of inserts deletes nothing and costs no rewrite of a data file.)"""
    keys: dict[Any, tuple[Any, ...]] = {}
    new: dict[Any, dict[str, Any]] = {}
    for r in net.to_pylist():
        k = tuple(r[c] for c in key)
        h = hashable(k)
        if r[NET_DIFF] > 0:
            new[h] = {c: v for c, v in r.items() if c != NET_DIFF}
        else:
            keys[h] = k
    schema = net.schema.remove(net.schema.get_field_index(NET_DIFF))
    return list(keys.values()), pa.Table.from_pylist(list(new.values()), schema=schema)


def _key_filter(key: tuple[str, ...], keys: list[tuple[Any, ...]]) -> Any:
    """A row filter matching exactly `keys` (NULL matching NULL, as the sink's key does)."""
    from pyiceberg.expressions import And, EqualTo, In, IsNull, Or

    def is_(col: str, v: Any) -> Any:
        return IsNull(col) if v is None else EqualTo(col, v)

    if len(key) == 1:
        values = [k[0] for k in keys if k[0] is not None]
        parts = [In(key[0], values)] if values else []
        if len(values) < len(keys):
            parts.append(IsNull(key[0]))
    else:
        parts = [reduce(And, [is_(c, v) for c, v in zip(key, k, strict=True)]) for k in keys]
    return _balanced(Or, parts)


def _balanced(op: Any, parts: list[Any]) -> Any:
    """op over parts as a balanced tree (a chain of thousands would recurse too deep)."""
    while len(parts) > 1:
        parts = [
            op(*parts[i : i + 2]) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return parts[0]


def _fit(data: pa.Table, table: Any) -> pa.Table:
    """`data` cast to the Iceberg table's own Arrow schema (its columns in its order)."""
    schema = table.schema().as_arrow()
    cols = [pc.cast(data.column(f.name), f.type) for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def _storable(table: pa.Table) -> pa.Table:
    """The table with every column of a type Iceberg stores (others as their text)."""
    for i, f in enumerate(table.schema):
        t = f.type
        target: pa.DataType | None = None
        if pa.types.is_int8(t) or pa.types.is_int16(t):
            target = pa.int32()
        elif pa.types.is_timestamp(t) and t.unit != "us":
            target = pa.timestamp("us", t.tz)
        elif pa.types.is_time(t) and t != pa.time64("us"):
            target = pa.time64("us")
        elif pa.types.is_large_string(t):
            target = pa.string()
        elif pa.types.is_large_binary(t):
            target = pa.binary()
        elif (
            pa.types.is_boolean(t)
            or pa.types.is_int32(t)
            or pa.types.is_int64(t)
            or pa.types.is_float32(t)
            or pa.types.is_float64(t)
            or pa.types.is_string(t)
            or pa.types.is_binary(t)
            or pa.types.is_date32(t)
            or (pa.types.is_decimal(t) and t.precision <= 38)
            or pa.types.is_timestamp(t)
            or pa.types.is_time(t)
        ):
            continue
        if target is not None:
            table = table.set_column(i, f.name, pc.cast(table.column(i), target))
            continue
        try:
            col = pc.cast(table.column(i), pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            col = pa.array([None if v is None else str(v) for v in table.column(i).to_pylist()])
        table = table.set_column(i, f.name, col)
    return table
