"""Sink targets: where a sink's rows go, and where it records how far it got.

Each target writes one batch of epochs `(after, upto]` atomically together with `upto`
(Delta: the commit's info; Iceberg: the snapshot's summary; Parquet: the file's name,
renamed into place; PostgreSQL: a row of a bookkeeping table in the same transaction),
so that after a crash
`last_epoch()` says exactly which epochs the target holds: the sink resumes after it,
with no change written twice or skipped.

A batch is read lazily through `BatchReader` (server/sinks.py reads the source's
changes the way SUBSCRIBE does): each target asks only for the shape it needs.

    mode 'changes'  every epoch's consolidated changes, appended: (epoch, diff, cols...)
    mode 'mirror'   the target equals the source at `upto`: keyed by `key` (upsert and
                    delete), or rewritten whole / matched by whole row when there is none
"""

from __future__ import annotations

from headwater.storage.sinks.spec import (
    DIFF,
    EPOCH,
    NET_DIFF,
    BatchReader,
    SinkSpec,
    Target,
)

__all__ = ["DIFF", "EPOCH", "NET_DIFF", "BatchReader", "SinkSpec", "Target", "open_target"]


def open_target(kind: str, spec: SinkSpec) -> Target:
    if kind == "parquet":
        from headwater.storage.sinks.parquet import ParquetTarget

        return ParquetTarget(spec)
    if kind == "delta":
        from headwater.storage.sinks.delta import DeltaTarget

        return DeltaTarget(spec)
    if kind == "iceberg":
        from headwater.storage.sinks.iceberg import IcebergTarget

        return IcebergTarget(spec)
    from headwater.storage.sinks.postgres import PostgresTarget

    return PostgresTarget(spec)
