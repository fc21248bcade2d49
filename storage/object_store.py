"""`--object-store s3://bucket/prefix`: where the durable state lives instead of the disk.

SlateDB writes its WAL, SSTs and manifests under `{prefix}/slatedb/` in the bucket
(credentials, region and endpoint from the usual AWS_* environment, read by SlateDB's
object_store crate: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION, AWS_ALLOW_HTTP for an http:// endpoint). The catalog, the change log and
the sequences are SlateDB keys, so everything acknowledged is in the bucket; the local
data directory only caches what can be derived from it (the engine's state, the spool,
DuckDB's spill files), docs/storage.md "Object storage".

SlateDB retries an unreachable store forever (its open would wait without a word), so
`check_reachable` asks the bucket once, with short timeouts, before SlateDB opens it and
turns what it hears into an error that names the endpoint and the variables to check.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from headwater.errors import IOError_, SQLError

# the environment SlateDB's S3 client reads (named in error messages)
ENV_VARS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "AWS_ALLOW_HTTP",
)
CONNECT_TIMEOUT = 5.0  # seconds, the reachability check at start
REQUEST_TIMEOUT = 10.0
# the local data directory remembers which store it caches; a cache of another store
# (or of none) is dropped at start
CACHE_MARK = "object-store"
CACHED_DIRS = ("engine", "spool")

log = logging.getLogger("headwater.storage")


@dataclass(frozen=True)
class ObjectStoreURL:
    """`s3://bucket/prefix`, split; `path` is where SlateDB keeps its files."""

    url: str
    bucket: str
    prefix: str

    @property
    def store_url(self) -> str:  # what SlateDB's ObjectStore.resolve accepts: no path
        return f"s3://{self.bucket}"

    @property
    def slatedb_path(self) -> str:
        return f"{self.prefix}/slatedb" if self.prefix else "slatedb"


def parse(url: str) -> ObjectStoreURL:
    """The bucket and prefix of `--object-store`; ValueError says what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(
            f"--object-store {url!r}: expected s3://bucket/prefix "
            "(S3 or an S3-compatible store such as MinIO; endpoint from AWS_ENDPOINT_URL)"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"--object-store {url!r}: no query or fragment allowed")
    prefix = parts.path.strip("/")
    return ObjectStoreURL(f"s3://{parts.netloc}/{prefix}".rstrip("/"), parts.netloc, prefix)


def endpoint() -> str:
    """The endpoint requests go to, as the error messages name it."""
    ep = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if ep:
        return ep
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return f"https://s3.{region}.amazonaws.com"


def _unreachable(store: ObjectStoreURL, why: str, hint: str | None = None) -> SQLError:
    settings = ", ".join(f"{v}={'set' if os.environ.get(v) else 'unset'}" for v in ENV_VARS)
    return IOError_(
        f'could not use the object store "{store.url}" at {endpoint()}: {why}',
        detail=f"Environment: {settings}.",
        hint=hint
        or "Check that the endpoint is up and reachable (AWS_ENDPOINT_URL), that the bucket "
        "exists, and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).",
    )


def filesystem() -> Any:
    """pyarrow's S3 client on the same endpoint, region and credentials as SlateDB's."""
    from pyarrow import fs

    return fs.S3FileSystem(
        endpoint_override=os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL"),
        region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        connect_timeout=CONNECT_TIMEOUT,
        request_timeout=REQUEST_TIMEOUT,
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=2),
    )


def object_key(store: ObjectStoreURL, name: str) -> str:
    return "/".join(p for p in (store.bucket, store.prefix, name) if p)


def check_reachable(store: ObjectStoreURL) -> None:
    """Raise the error that says what to fix when the bucket cannot be used now."""
    ep = endpoint()
    if ep.startswith("http://") and os.environ.get("AWS_ALLOW_HTTP", "").lower() != "true":
        raise _unreachable(
            store,
            "the endpoint is plain http",
            "Set AWS_ALLOW_HTTP=true to allow it (S3-compatible stores on a private "
            "network, tests), or use an https:// endpoint.",
        )
    from pyarrow import fs

    try:
        s3 = filesystem()
        info = s3.get_file_info(store.bucket)
    except OSError as exc:
        raise _unreachable(store, str(exc).split("; Details:")[0]) from None
    if info.type == fs.FileType.NotFound:
        raise _unreachable(
            store,
            f'the bucket "{store.bucket}" does not exist',
            "Create the bucket (aws s3 mb s3://BUCKET, or the store's console), or name "
            "another one in --object-store.",
        )


def claim_cache(data_dir: Path, store: ObjectStoreURL | None) -> None:
    """Make the data directory a cache of `store` (None: the disk holds the truth).

    What the directory caches (the engine's state, the spool) was derived from one
    store's change log; from another store (or from the local SlateDB) it would be
    wrong, so it is dropped and rebuilt from the store at start."""
    mark = data_dir / CACHE_MARK
    want = store.url if store is not None else ""
    try:
        have = mark.read_text().strip()
    except FileNotFoundError:
        have = None if store is not None else ""
    if store is not None and (data_dir / "slatedb").is_dir():
        log.warning(
            "%s holds a database of its own (slatedb/), which --object-store %s does not "
            "use: its tables are not copied into the bucket",
            data_dir,
            store.url,
        )
    if have == want:
        return
    for name in CACHED_DIRS:
        shutil.rmtree(data_dir / name, ignore_errors=True)
    if store is None:
        mark.unlink(missing_ok=True)
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        mark.write_text(want + "\n")
