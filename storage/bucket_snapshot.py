"""Snapshots of a local directory tree in the object store: the files, then a manifest.

Under `{prefix}/{area}/`:

    files/{path}          a file whose name never holds other bytes (immutable)
    files/{path}@{sha}    any other file, named by its content (SHA-256, 20 hex digits)
    snapshot.json         the manifest: {"id", "written_at", "meta", "files": {path: key}}

`ship` uploads the files the bucket lacks, then PUTs the manifest (one PUT: a reader
sees the old manifest or the new one, never a mix), then deletes the objects under
`files/` the new manifest does not name. A crash before the manifest's PUT leaves
the previous snapshot whole (its files are deleted only once a newer manifest names
others) and some unnamed objects, deleted by the next `ship`. Immutable files (and
unchanged ones, by their content) are uploaded once, however many snapshots name them.

One writer per area: the server that holds SlateDB's writer epoch (the caller skips
`ship` once fenced).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.storage.object_store import ObjectStoreURL, filesystem, object_key

MANIFEST = "snapshot.json"
CHUNK = 8 << 20

log = logging.getLogger("headwater.storage")


class Fenced(Exception):
    """Another server took over the area while a snapshot was being shipped."""


@dataclass(frozen=True)
class Shipped:
    id: str
    files: int  # files the manifest names
    uploaded: int  # of them, uploaded by this ship
    uploaded_bytes: int
    deleted: int  # objects no manifest names any more


class BucketSnapshots:
    def __init__(self, store: ObjectStoreURL, area: str) -> None:
        self.store = store
        self.area = area
        self._present: set[str] | None = None  # keys under files/ (listed once, then tracked)

    def _name(self, rel: str) -> str:
        return f"{self.area}/{rel}"

    def ship(
        self,
        root: Path,
        files: Mapping[str, bool],
        meta: dict[str, Any],
        uploaded: Callable[[int, int], None] | None = None,
        writer: Callable[[], bool] = lambda: True,
    ) -> Shipped:
        """Make `root`'s `files` (relative path -> immutable) the area's snapshot.
        `uploaded(done, total)` is called after each upload (fault injection);
        `writer()` is asked before the manifest is written and before objects are
        deleted (False: another server writes this area now; Fenced is raised)."""
        from pyarrow import fs

        s3 = filesystem()
        if self._present is None:
            files_dir = object_key(self.store, self._name("files"))
            sel = fs.FileSelector(files_dir, allow_not_found=True, recursive=True)
            base = object_key(self.store, "")
            self._present = {
                i.path[len(base) :].lstrip("/")
                for i in s3.get_file_info(sel)
                if i.type == fs.FileType.File
            }
        keys = {rel: self._object(root / rel, rel, immutable) for rel, immutable in files.items()}
        todo = [(rel, key) for rel, key in keys.items() if key not in self._present]
        sent = 0
        for n, (rel, key) in enumerate(todo, 1):
            with (
                open(root / rel, "rb") as src,
                s3.open_output_stream(object_key(self.store, key)) as out,
            ):
                shutil.copyfileobj(src, out, CHUNK)
            sent += (root / rel).stat().st_size
            self._present.add(key)
            if uploaded is not None:
                uploaded(n, len(todo))
        if not writer():
            raise Fenced(f"another server writes {self.store.url}/{self.area}")
        sid = uuid.uuid4().hex
        body = {"id": sid, "written_at": time.time(), "meta": meta, "files": keys}
        with s3.open_output_stream(object_key(self.store, self._name(MANIFEST))) as out:
            out.write(json.dumps(body, sort_keys=True).encode())
        named = set(keys.values())
        stale = sorted(self._present - named) if writer() else []
        for key in stale:
            try:
                s3.delete_file(object_key(self.store, key))
            except FileNotFoundError:
                pass
            self._present.discard(key)
        return Shipped(sid, len(keys), len(todo), sent, len(stale))

    def _object(self, local: Path, rel: str, immutable: bool) -> str:
        if immutable:
            return self._name(f"files/{rel}")
        h = hashlib.sha256()
        with open(local, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
        return self._name(f"files/{rel}@{h.hexdigest()[:20]}")

    def manifest(self) -> dict[str, Any] | None:
        """The area's current manifest (None: no snapshot yet)."""
        from pyarrow import fs

        s3 = filesystem()
        key = object_key(self.store, self._name(MANIFEST))
        if s3.get_file_info(key).type == fs.FileType.NotFound:
            return None
        with s3.open_input_stream(key) as src:
            body: dict[str, Any] = json.loads(src.read())
        return body

    def fetch(self, into: Path, last: str) -> dict[str, Any] | None:
        """Download the current snapshot's files into `into` (the file `last` last, so
        that its presence says the rest is there); its manifest, None if there is none."""
        body = self.manifest()
        if body is None:
            return None
        s3 = filesystem()
        files: dict[str, str] = body["files"]
        for rel in sorted(files, key=lambda r: r == last):
            local = into / rel
            local.parent.mkdir(parents=True, exist_ok=True)
            part = local.with_name(local.name + ".part")
            with (
                s3.open_input_stream(object_key(self.store, files[rel])) as src,
                open(part, "wb") as out,
            ):
                shutil.copyfileobj(src, out, CHUNK)
            part.replace(local)
        return body
