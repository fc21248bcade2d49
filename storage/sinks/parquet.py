"""INTO PARQUET 'dir': hive-partitioned files, one partition per batch of epochs.

    dir/_headwater_sink.json               which sink writes here (name, oid)
    dir/upto_epoch=000000000042/changes.parquet   mode 'changes': (epoch, diff, cols...)
                                                  of epochs (previous upto, 42]
    dir/upto_epoch=000000000042/mirror.parquet    mode 'mirror': every row at epoch 42

A file is written under a temporary name, synced, and renamed into place: its
appearance is the batch's commit, and the newest partition holding one is the epoch the
sink has written. A mirror keeps the newest two partitions (older ones are removed once
a newer one is in place) and is read as its newest partition:

    SELECT * EXCLUDE (upto_epoch) FROM read_parquet('dir/*/*.parquet', hive_partitioning = true)
    WHERE upto_epoch = (SELECT max(upto_epoch)
                        FROM read_parquet('dir/*/*.parquet', hive_partitioning = true))

Changes are read as `read_parquet('dir/*/changes.parquet', hive_partitioning = false)`;
summed per row, they give the source's contents.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
from headwater.storage.sinks.spec import BatchReader, SinkSpec, ThreadedTarget

PREFIX = "upto_epoch="
MARKER = "_headwater_sink.json"
TMP = ".tmp"


class ParquetTarget(ThreadedTarget):
    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec
        self.dir = Path(spec.target)
        self.file = "mirror.parquet" if spec.mode == "mirror" else "changes.parquet"

    # -- worker threads -----------------------------------------------------------
    def _mine(self) -> bool:
        try:
            marker = json.loads((self.dir / MARKER).read_text())
        except (OSError, ValueError):
            return False
        return bool(marker.get("oid") == self.spec.oid)

    def _partitions(self) -> list[tuple[int, Path]]:
        """Complete partitions (their file in place), oldest first."""
        out = []
        if not self.dir.is_dir():
            return out
        for d in self.dir.iterdir():
            if d.name.startswith(PREFIX) and (d / self.file).exists():
                try:
                    out.append((int(d.name[len(PREFIX) :]), d))
                except ValueError:
                    continue
        return sorted(out)

    def _last_epoch(self) -> int | None:
        if not self._mine():
            return None
        parts = self._partitions()
        return parts[-1][0] if parts else None

    def _write(self, batch: BatchReader) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        if batch.after is None and not self._mine():
            _atomic_write(
                self.dir / MARKER,
                json.dumps({"sink": self.spec.name, "oid": self.spec.oid}).encode(),
            )
        data = batch.state() if self.spec.mode == "mirror" else batch.changes()
        part = self.dir / f"{PREFIX}{batch.upto:012d}"
        part.mkdir(exist_ok=True)
        tmp = part / (self.file + TMP)
        pq.write_table(data, tmp)
        _fsync(tmp)
        os.replace(tmp, part / self.file)
        _fsync(part)
        _fsync(self.dir)
        if self.spec.mode == "mirror":  # keep the newest two: readers may be on the older
            parts = self._partitions()
            for _, old in parts[:-2]:
                shutil.rmtree(old, ignore_errors=True)
            if batch.after is None:  # a new mirror: no partition of an earlier one stays
                for d in self.dir.iterdir():
                    if d.name.startswith(PREFIX) and d != part:
                        shutil.rmtree(d, ignore_errors=True)
        return data.num_rows


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + TMP)
    tmp.write_bytes(data)
    _fsync(tmp)
    os.replace(tmp, path)
    _fsync(path.parent)
