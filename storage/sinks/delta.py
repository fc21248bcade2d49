"""INTO DELTA 'path-or-uri': a Delta Lake table written with the `deltalake` package.

Every batch is one Delta commit whose commit info carries `headwater.sink_oid` and
`headwater.epoch` (the batch's last epoch): the newest such commit in the table's
history is where the sink resumes. Mode 'changes' appends (epoch, diff, cols...);
mode 'mirror' merges the batch into the table by the sink's key (upsert, delete), or,
without a key, overwrites the table with the source's rows at the batch's epoch.
Object store URIs (s3://...) take their credentials from the usual AWS_* environment.

Columns whose Arrow type Delta cannot store (time of day, intervals, unsigned or
over-wide numbers, UUIDs) are written as their text.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from headwater.storage.sinks.spec import NET_DIFF, BatchReader, SinkSpec, ThreadedTarget, hashable

OP = "_hw_op"  # the merge source's column: 'upsert' or 'delete'


class DeltaTarget(ThreadedTarget):
    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec

    # -- worker threads -----------------------------------------------------------
    def _table(self) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.spec.target)
        except TableNotFoundError:
            return None

    def _last_epoch(self) -> int | None:
        dt = self._table()
        if dt is None:
            return None
        for commit in dt.history():  # newest first
            if str(commit.get("headwater.sink_oid")) == str(self.spec.oid):
                return int(commit["headwater.epoch"])
        return None

    def _commit(self, epoch: int) -> Any:
        from deltalake import CommitProperties

        meta = {
            "headwater.sink": self.spec.name,
            "headwater.sink_oid": str(self.spec.oid),
            "headwater.epoch": str(epoch),
        }
        return CommitProperties(custom_metadata=meta)

    def _write(self, batch: BatchReader) -> int:
        from deltalake import write_deltalake

        spec = self.spec
        props = self._commit(batch.upto)
        if spec.mode == "changes":
            data = _storable(batch.changes())
            write_deltalake(spec.target, data, mode="append", commit_properties=props)
            return data.num_rows
        if batch.after is None or not spec.key:
            data = _storable(batch.state())
            write_deltalake(
                spec.target,
                data,
                mode="overwrite",
                schema_mode="overwrite",
                commit_properties=props,
            )
            return data.num_rows
        source = _storable(_upserts_and_deletes(batch.net(), spec.key))
        dt = self._table()
        assert dt is not None  # written by the first batch
        cols = spec.column_names
        on = " AND ".join(f"t.{_q(k)} IS NOT DISTINCT FROM s.{_q(k)}" for k in spec.key)
        values = {_q(c): f"s.{_q(c)}" for c in cols}
        (
            dt.merge(
                source,
                predicate=on,
                source_alias="s",
                target_alias="t",
                commit_properties=props,
            )
            .when_matched_delete(predicate=f"s.{OP} = 'delete'")
            .when_matched_update(updates=values, predicate=f"s.{OP} = 'upsert'")
            .when_not_matched_insert(updates=values, predicate=f"s.{OP} = 'upsert'")
            .execute()
        )
        return source.num_rows


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _upserts_and_deletes(net: pa.Table, key: tuple[str, ...]) -> pa.Table:
    """From a batch's net changes (diff, cols...) of a relation keyed by `key`: each
    changed key once, with its new row ('upsert') or its old one ('delete')."""
    rows = net.to_pylist()
    by_key: dict[Any, dict[str, Any]] = {}
    for r in rows:
        k = tuple(hashable(r[c]) for c in key)
        if r[NET_DIFF] > 0:
            by_key[k] = {**r, OP: "upsert"}
        elif k not in by_key:
            by_key[k] = {**r, OP: "delete"}
    schema = net.schema.remove(net.schema.get_field_index(NET_DIFF)).append(
        pa.field(OP, pa.string())
    )
    out = [{f.name: r[f.name] for f in schema} for r in by_key.values()]
    return pa.Table.from_pylist(out, schema=schema)


def _storable(table: pa.Table) -> pa.Table:
    """The table with columns Delta cannot store as their text."""
    for i, f in enumerate(table.schema):
        t = f.type
        ok = (
            pa.types.is_boolean(t)
            or pa.types.is_signed_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_date32(t)
            or (pa.types.is_decimal(t) and t.precision <= 38)
            or pa.types.is_timestamp(t)
            or pa.types.is_list(t)
            or pa.types.is_struct(t)
        )
        if ok:
            if pa.types.is_timestamp(t) and t.unit != "us":
                table = table.set_column(
                    i, f.name, pc.cast(table.column(i), pa.timestamp("us", t.tz))
                )
            continue
        try:
            col = pc.cast(table.column(i), pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            col = pa.array([None if v is None else str(v) for v in table.column(i).to_pylist()])
        table = table.set_column(i, f.name, col)
    return table
