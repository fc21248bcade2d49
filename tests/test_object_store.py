"""`headwater start --object-store s3://bucket/prefix` against moto's S3 server on loopback.

- Recovery: tables, a sequence and materialized views written under concurrent
  writers, the server SIGKILLed, its data directory deleted; a server started on an
  empty directory with the same bucket has every acknowledged row, the sequence goes
  on past every value handed out, and every view, whose state it fetched from the
  bucket (copied there every second here) and advanced from the change log, equals
  its query recomputed over the recovered tables.
- Outage: while the store is down a write waits (neither acknowledged nor failed) and
  the log names the endpoint; it completes once the store is back.
- Fencing: a second server on the same prefix fences the first, which stops with an
  error naming the fencing (exit code 1; its open session gets it as FATAL 57P01),
  and the second has every row the first acknowledged.
- Errors at start name the endpoint and what to set (bucket missing, plain http).
- Spark's side: with `--executor spark`, the bucket's snapshot holds the engine's
  database, the Parquet state files and Spark's checkpoint; a server that crashes in
  the middle of a snapshot's upload (fault injection) leaves the previous snapshot
  named, and a server on an empty directory restores it: the stage resumes after the
  restored checkpoint's batches, the Parquet state is listed, views are exact.

One server at a time, except the two short-lived ones of the fencing test (no views,
so no JVM).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from tests.hwserver import REPO, HeadwaterServer, free_port

BUCKET = "headwater-objtest"
WRITERS = 4


class MotoS3:
    """moto's S3 server on a loopback port; `stop` and `start` make an outage (the
    buckets live in this process, so they outlast it)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
        self._server: object | None = None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()  # type: ignore[attr-defined]
            self._server = None


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3]:
    """moto's S3 with one bucket; the AWS_* environment for it in os.environ."""
    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request
    moto = MotoS3()
    moto.start()
    saved = {k: os.environ.get(k) for k in moto.env}
    os.environ.update(moto.env)  # the servers this module starts inherit it
    boto3.client("s3", endpoint_url=moto.env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=BUCKET)
    try:
        yield moto
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        moto.stop()


def _server(data_dir: Path, prefix: str, executor: str = "auto") -> HeadwaterServer:
    data_dir.parent.mkdir(parents=True, exist_ok=True)  # (the log goes there)
    store = ["--object-store", f"s3://{BUCKET}/{prefix}"]
    # auto: views advance on DuckDB while the Spark stage starts (minutes under load)
    return HeadwaterServer(
        data_dir, args=[*store, "--metrics-address", "off", "--executor", executor]
    )


def _objects(prefix: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _object_text(key: str) -> str | None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    try:
        return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    except s3.exceptions.NoSuchKey:
        return None


def _manifest(prefix: str) -> dict | None:
    """The engine's snapshot manifest in the bucket (server/engine_snapshots.py)."""
    text = _object_text(f"{prefix}/engine/snapshot.json")
    return None if text is None else json.loads(text)


VIEWS = {
    "os_by_group": "SELECT g, count(*) AS n, sum(v) AS total FROM os_items GROUP BY g",
    "os_joined": "SELECT i.id, i.v, c.label FROM os_items i JOIN os_groups c ON c.g = i.g "
    "WHERE i.v > 10",
}


def _rows(cur: psycopg.Cursor, sql: str) -> list[tuple]:
    return sorted(cur.execute(sql).fetchall(), key=repr)


def test_recovery_from_an_empty_data_dir(
    s3: MotoS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEADWATER_ENGINE_SNAPSHOT_S", "1")  # the views' state to the bucket
    first = _server(tmp_path / "a" / "data", "recovery").start()
    acked: dict[int, tuple[int, Decimal]] = {}  # id -> (g, v) of every acknowledged insert
    gone: set[int] = set()  # ids whose DELETE was acknowledged
    handed_out: list[int] = []  # nextval values the clients received
    try:
        with psycopg.connect(first.dsn, autocommit=True) as c:
            c.execute("CREATE TABLE os_groups (g int PRIMARY KEY, label text NOT NULL)")
            c.execute("CREATE TABLE os_items (id int PRIMARY KEY, g int NOT NULL, v numeric(10,2))")
            c.execute("CREATE SEQUENCE os_seq")
            c.execute("INSERT INTO os_groups SELECT i, 'group ' || i FROM generate_series(0, 6) i")
            with c.cursor().copy("COPY os_items FROM STDIN") as cp:
                for i in range(1, 501):
                    cp.write_row((i, i % 7, Decimal(i) / 4))
            acked.update({i: (i % 7, Decimal(i) / 4) for i in range(1, 501)})
            with c.transaction():  # UPDATE and DELETE in one block
                c.execute("UPDATE os_items SET v = v + 100 WHERE id <= 20")
                c.execute("DELETE FROM os_items WHERE id BETWEEN 21 AND 30")
            for i in range(1, 21):
                acked[i] = (acked[i][0], acked[i][1] + 100)
            gone.update(range(21, 31))
            for name, query in VIEWS.items():
                c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
            handed_out += [c.execute("SELECT nextval('os_seq')").fetchone()[0] for _ in range(5)]

        stop = threading.Event()
        lock = threading.Lock()

        def writer(w: int) -> None:  # autocommit single-row INSERTs until the kill
            n = 0
            try:
                with psycopg.connect(first.dsn, autocommit=True) as wc:
                    while not stop.is_set():
                        i = 10_000 * (w + 1) + n
                        v = Decimal(n) + Decimal("0.5")
                        wc.execute("INSERT INTO os_items VALUES (%s, %s, %s)", (i, n % 7, v))
                        with lock:
                            acked[i] = (n % 7, v)
                        if n % 10 == 0:
                            s = wc.execute("SELECT nextval('os_seq')").fetchone()[0]
                            with lock:
                                handed_out.append(s)
                        n += 1
            except psycopg.Error:
                pass  # the server was killed under this writer

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for t in threads:
            t.start()
        time.sleep(5)
        first.kill()
        stop.set()
        for t in threads:
            t.join(timeout=30)
    finally:
        first.kill()

    assert _objects("recovery/slatedb"), "SlateDB wrote nothing to the bucket"
    assert _manifest("recovery"), "the views' state was not copied to the bucket"
    shutil.rmtree(tmp_path / "a" / "data")  # the local data directory is only a cache
    second = _server(tmp_path / "b" / "data", "recovery").start(timeout=120)
    try:
        with psycopg.connect(second.dsn, autocommit=True) as c:
            cur = c.cursor()
            have = {i: (g, v) for i, g, v in cur.execute("SELECT id, g, v FROM os_items")}
            lost = {i for i in acked if i not in gone and have.get(i) != acked[i]}
            assert not lost, f"acknowledged rows lost or changed: {sorted(lost)[:10]}"
            assert not (gone & have.keys()), "acknowledged DELETEs undone"
            assert len(have) >= len(acked) - len(gone)
            after = cur.execute("SELECT nextval('os_seq')").fetchone()[0]
            assert after > max(handed_out), "a sequence value was handed out twice"
            for name, query in VIEWS.items():
                assert _rows(cur, f"SELECT * FROM {name}") == _rows(cur, query), name
            # the views are maintained after the restart too
            cur.execute("INSERT INTO os_items VALUES (1000000, 3, 99)")
            for name, query in VIEWS.items():
                assert _rows(cur, f"SELECT * FROM {name}") == _rows(cur, query), name
            assert (tmp_path / "b" / "data" / "object-store").read_text().strip() == (
                f"s3://{BUCKET}/recovery"
            )
        log = second.log_tail(200_000)
        assert "fetched the views' state" in log and "backfilling" not in log, log
        print(next(ln for ln in log.splitlines() if "fetched the views' state" in ln))
    finally:
        second.stop()


def test_outage_then_a_second_writer_fences_the_first(s3: MotoS3, tmp_path: Path) -> None:
    first = _server(tmp_path / "one", "fencing").start()
    second = _server(tmp_path / "two", "fencing")
    try:
        with psycopg.connect(first.dsn, autocommit=True) as c:
            c.execute("CREATE TABLE os_fence (id int PRIMARY KEY)")
            c.execute("INSERT INTO os_fence SELECT generate_series(1, 100)")

            # the store goes away: a write waits (not acknowledged, not failed), the log
            # says why; once the store is back it completes
            s3.stop()
            done: list[object] = []

            def write() -> None:
                try:
                    with psycopg.connect(first.dsn, autocommit=True) as w:
                        w.execute("INSERT INTO os_fence VALUES (101)")
                    done.append("ok")
                except psycopg.Error as e:
                    done.append(e)

            writer = threading.Thread(target=write)
            writer.start()
            deadline = time.monotonic() + 60
            while "is not durable after" not in first.log_tail(20_000):
                if time.monotonic() >= deadline:  # a hang guard, not a speed check
                    pytest.fail(first.log_tail())
                time.sleep(0.5)
            assert not done, done
            assert s3.env["AWS_ENDPOINT_URL"] in first.log_tail(20_000)
            s3.start()
            writer.join(timeout=60)
            assert done == ["ok"], done

            idle = psycopg.connect(first.dsn, autocommit=True)  # open across the fencing
            second.start()
            assert first.proc is not None
            code = first.proc.wait(timeout=60)  # it stops by itself
            assert code == 1
            log = first.log_tail()
            assert "fenced" in log and f"s3://{BUCKET}/fencing" in log, log
            with pytest.raises(psycopg.OperationalError) as info:
                idle.execute("INSERT INTO os_fence VALUES (102)")
            assert "fenced" in str(info.value) or "closed" in str(info.value).lower()
            idle.close()
        with psycopg.connect(second.dsn, autocommit=True) as c:
            assert c.execute("SELECT count(*), max(id) FROM os_fence").fetchone() == (101, 101)
            c.execute("INSERT INTO os_fence VALUES (102)")
            assert c.execute("SELECT count(*) FROM os_fence").fetchone() == (102,)
    finally:
        first.kill()
        second.stop()


def _start_fails(data_dir: Path, url: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """A `headwater start` that must exit 1 at once (`_stderr` collects it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "headwater.cli", "start", "--data-dir", str(data_dir)]
        + ["--port", str(free_port()), "--metrics-address", "off", "--object-store", url],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stderr(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    return err


def test_unusable_store_says_what_to_do(s3: MotoS3, tmp_path: Path) -> None:
    missing = _start_fails(tmp_path / "d1", "s3://no-such-bucket/x", {})
    plain_http = _start_fails(tmp_path / "d2", f"s3://{BUCKET}/x", {"AWS_ALLOW_HTTP": ""})
    nobody = f"http://127.0.0.1:{free_port()}"
    refused = _start_fails(tmp_path / "d3", f"s3://{BUCKET}/x", {"AWS_ENDPOINT_URL": nobody})
    err = _stderr(missing)
    assert 'the bucket "no-such-bucket" does not exist' in err, err
    assert s3.env["AWS_ENDPOINT_URL"] in err, err
    err = _stderr(plain_http)
    assert "AWS_ALLOW_HTTP=true" in err, err
    err = _stderr(refused)
    assert nobody in err and "AWS_ENDPOINT_URL" in err, err


SPARK_VIEW = "SELECT g, count(*) AS n, sum(v) AS total FROM sp_items GROUP BY g"


def _batches(files: object) -> set[int]:
    """Batch ids in a checkpoint's offset log (relative paths or Paths)."""
    return {
        int(str(f).rsplit("/", 1)[-1])
        for f in files  # type: ignore[attr-defined]
        if "checkpoint/offsets/" in str(f) and str(f).rsplit("/", 1)[-1].isdigit()
    }


def _wait(what: str, ok: object, server: HeadwaterServer, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not ok():  # type: ignore[operator]
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"{what}: {server.log_tail()}")
        time.sleep(0.5)


def test_spark_state_and_checkpoint_from_the_bucket(
    s3: MotoS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEADWATER_ENGINE_SNAPSHOT_S", "1")
    monkeypatch.setenv("HEADWATER_FAULT_INJECTION", "1")
    data = tmp_path / "a" / "data"
    first = _server(data, "spark", executor="spark").start()
    try:
        with psycopg.connect(first.dsn, autocommit=True) as c:
            c.execute("SET headwater.freshness_timeout = '1200s'")  # Spark under load
            c.execute("CREATE TABLE sp_items (id int PRIMARY KEY, g int NOT NULL, v int)")
            c.execute("INSERT INTO sp_items SELECT i, i % 5, i FROM generate_series(1, 200) i")
            c.execute(f"CREATE MATERIALIZED VIEW sp_sum AS {SPARK_VIEW}")
            c.execute(
                "INSERT INTO sp_items SELECT i, i % 7, 2 * i FROM generate_series(201, 260) i"
            )
            assert _rows(c.cursor(), "SELECT * FROM sp_sum") == _rows(c.cursor(), SPARK_VIEW)
            (front,) = c.execute(
                "SELECT frontier FROM headwater_catalog.views WHERE name = 'sp_sum'"
            ).fetchone()

            def shipped() -> bool:  # a snapshot at the view's frontier, with Spark's files
                m = _manifest("spark")
                return bool(
                    m
                    and m["meta"]["frontiers"][0] >= front
                    and _batches(m["files"])
                    and any(f.startswith("parquet/") for f in m["files"])
                )

            _wait("a snapshot with the checkpoint and the Parquet state", shipped, first)
            # the next copy crashes its server half-way through its uploads
            (data / "faults").mkdir()
            (data / "faults" / "snapshot_crash").touch()
            before = _manifest("spark")
            assert before is not None
            with contextlib.suppress(psycopg.OperationalError):  # (a copy in flight)
                c.execute("DELETE FROM sp_items WHERE id % 10 = 0")
                c.execute("UPDATE sp_items SET v = v + 1 WHERE g = 2")
        assert first.proc is not None
        assert first.proc.wait(timeout=600) == -9, first.log_tail()
        assert "fault injection: killed after uploading" in first.log_tail(100_000)
    finally:
        first.kill()

    after = _manifest("spark")
    assert after == before, "a snapshot whose upload crashed replaced the previous one"
    named = set(before["files"].values())
    orphans = [k for k in _objects("spark/engine/files") if k[len("spark/") :] not in named]
    assert orphans, "the crashed copy uploaded nothing (no half-way state was tested)"
    offsets = {  # the restored checkpoint's offset log: batch -> its text
        n: _object_text(f"spark/{key}")
        for rel, key in before["files"].items()
        if rel.startswith("checkpoint/offsets/") and (n := rel.rsplit("/", 1)[-1]).isdigit()
    }
    assert offsets, before
    shutil.rmtree(data)

    second = _server(tmp_path / "b" / "data", "spark", executor="spark").start(timeout=120)
    try:
        log = second.log_tail(200_000)
        assert f"(snapshot {before['id']})" in log and "backfilling" not in log, log
        line = next(ln for ln in log.splitlines() if "fetched the views' state" in ln)
        assert "Parquet state of 0 tables" not in line and "missing" not in line, line
        print(line)
        ck = tmp_path / "b" / "data" / "engine" / "checkpoint"
        with psycopg.connect(second.dsn, autocommit=True) as c:
            c.execute("SET headwater.freshness_timeout = '1200s'")
            cur = c.cursor()
            # (the DELETE and UPDATE after the restored snapshot: a Spark batch from the
            # change log)
            assert _rows(cur, "SELECT * FROM sp_sum") == _rows(cur, SPARK_VIEW)
            (view_executor,) = c.execute(
                "SELECT executor FROM headwater_catalog.views WHERE name = 'sp_sum'"
            ).fetchone()
            assert view_executor == "spark"
        # the stage went on from the restored checkpoint: its last batch was committed
        # (restored, or replayed, the views skipping what they had), and the offsets
        # are the restored ones (a new checkpoint would start at batch 0 again with
        # the engine's last epoch, not the restored batch's)
        last = max(offsets, key=int)
        _wait("the restored batch committed", (ck / "commits" / last).exists, second)
        for n, text in offsets.items():
            assert (ck / "offsets" / n).read_text() == text, n
        later = _batches(ck.rglob("*")) - {int(n) for n in offsets}
        assert all(b > int(last) for b in later), later
    finally:
        second.stop()
