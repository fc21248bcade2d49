"""Storage faults: a full disk gives writers 53100 and a read-only data directory
42501, corrupt nothing, and writing resumes by itself once the directory is
writable again. The data directory lives on a small tmpfs (needs root to mount;
skipped otherwise). An epoch the committer fails to assemble (a bug, injected with
HEADWATER_FAULT_INJECTION) fails its writers with XX000 and nothing else."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from tests.hwserver import REPO, HeadwaterServer

HANG_GUARD = 120.0  # seconds: a write that waits longer has wedged the committer


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int = 0) -> None:
    """Fill the file system at `mnt` up to `leave` bytes free (a file named filler)."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while (free := shutil.disk_usage(mnt).free) > leave:
            os.write(fd, bytes(min(1 << 20, free - leave)))
    except OSError:
        pass  # full
    finally:
        os.close(fd)


def test_disk_full_refuses_writes_then_recovers(small_disk: Path) -> None:
    server = HeadwaterServer(
        small_disk / "data", args=["--min-free-space-mb", "8", "--no-tls"]
    ).start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE blobs (id int PRIMARY KEY, b text)")
            conn.execute("INSERT INTO blobs VALUES (0, 'first')")
            # random text: the change log compresses large epochs (storage/changelog.py)
            filler = base64.b64encode(os.urandom(3 << 18)).decode()  # 1 MB
            refused = None
            for i in range(1, 40):
                try:
                    conn.execute("INSERT INTO blobs SELECT %s, repeat(%s, 2)", (i, filler))
                except errors.DiskFull as e:
                    refused = i
                    assert "Free disk space" in (e.diag.message_hint or "")
                    break
            assert refused is not None, "the disk never filled up"
            # the refused write left nothing behind; reads and other sessions go on
            assert conn.execute(
                "SELECT count(*) FROM blobs WHERE id = %s", (refused,)
            ).fetchone() == (0,)
            with pytest.raises(errors.DiskFull):  # so is the same write again
                conn.execute("INSERT INTO blobs SELECT %s, repeat(%s, 2)", (refused, filler))
            # within the reserve even a small write is refused
            _fill(small_disk, leave=4 << 20)
            with pytest.raises(errors.DiskFull):
                conn.execute("INSERT INTO blobs VALUES (1000, 'small')")
            assert conn.execute("SELECT b FROM blobs WHERE id = 0").fetchone() == ("first",)
            # space returns: writes resume without a restart
            subprocess.run(["mount", "-o", "remount,size=96m", str(small_disk)], check=True)
            conn.execute("INSERT INTO blobs VALUES (1000, 'small')")
            acknowledged = conn.execute("SELECT count(*) FROM blobs").fetchone()
        server.stop()
        server = HeadwaterServer(small_disk / "data", port=server.port, args=server.args).start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM blobs").fetchone() == acknowledged
            assert conn.execute("SELECT b FROM blobs WHERE id = 1000").fetchone() == ("small",)
    finally:
        server.stop()


def _remount(mnt: Path, how: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{how}", str(mnt)], check=True)


def test_read_only_data_dir_refuses_writes_then_recovers(small_disk: Path) -> None:
    # the server's log (beside the data directory) must not be on the tmpfs: a file
    # open for writing makes `remount,ro` fail (busy)
    (small_disk / "data").mkdir()
    data = small_disk.parent / "data"
    data.symlink_to(small_disk / "data")
    server = HeadwaterServer(data, args=["--min-free-space-mb", "1", "--no-tls"]).start()
    try:
        with (
            psycopg.connect(server.dsn, autocommit=True) as conn,
            psycopg.connect(server.dsn, autocommit=True) as other,
        ):
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, b text)")
            conn.execute("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
            _remount(small_disk, "ro")
            with pytest.raises(errors.InsufficientPrivilege) as e:
                conn.execute("INSERT INTO t VALUES (3, 'three')")
            assert f'data directory "{data}": Read-only file system' in str(e.value)
            assert "writes resume by themselves" in (e.value.diag.message_hint or "")
            with pytest.raises(errors.InsufficientPrivilege):  # a transaction, as a whole
                with other.transaction():
                    other.execute("UPDATE t SET b = 'uno' WHERE id = 1")
                    other.execute("DELETE FROM t WHERE id = 2")
            with pytest.raises(errors.InsufficientPrivilege):
                with conn.cursor().copy("COPY t FROM STDIN") as copy:
                    copy.write_row((4, "four"))
            # nothing refused was kept; reads and other sessions go on
            rows = [(1, "one"), (2, "two")]
            assert other.execute("SELECT * FROM t ORDER BY id").fetchall() == rows
            assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == rows
            # writable again: writes resume without a restart (the same keys: undone)
            _remount(small_disk, "rw")
            conn.execute("INSERT INTO t VALUES (3, 'three')")
            other.execute("UPDATE t SET b = 'uno' WHERE id = 1")
            with conn.cursor().copy("COPY t FROM STDIN") as copy:
                copy.write_row((4, "four"))
            acknowledged = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
            assert acknowledged == [(1, "uno"), (2, "two"), (3, "three"), (4, "four")]
        server.stop()
        server = HeadwaterServer(data, port=server.port, args=server.args).start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == acknowledged
    finally:
        server.stop()


def test_start_refuses_unwritable_data_dir(small_disk: Path) -> None:
    """`headwater start` on a read-only or full data directory says so and exits 1."""
    start = [sys.executable, "-m", "headwater.cli", "start", "--port", "1", "--data-dir"]
    _remount(small_disk, "ro")
    out = subprocess.run(
        [*start, str(small_disk / "data")], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f'data directory "{small_disk / "data"}": Read-only file system' in out.stderr
    assert "HINT: Make the data directory writable" in out.stderr
    _remount(small_disk, "rw")
    _fill(small_disk)
    out = subprocess.run(
        [*start, str(small_disk / "data")], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "No space left on device" in out.stderr and "HINT: Free disk space" in out.stderr


def _answered(server: HeadwaterServer, fn: Callable[[], object]) -> object:
    """fn()'s result; if it does not return, the server is killed (freeing the
    connection fn waits on) and the test fails (a hang guard)."""
    out: list[object] = []

    def call() -> None:
        try:
            out.append(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 (re-raised in the test's thread)
            out.append(("error", e))

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(HANG_GUARD)
    if not out:
        server.kill()
        worker.join(HANG_GUARD)
        pytest.fail(f"no answer in {HANG_GUARD:g}s: the committer is wedged")
    how, value = out[0]  # type: ignore[misc]
    if how == "error":
        raise value  # type: ignore[misc]
    return value


def test_an_epoch_that_fails_to_assemble_fails_only_its_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug while the committer builds an epoch's record (19th session: Arrow refused to
    consolidate list columns) failed that epoch and then stopped the committer: every
    later write waited forever. Now that epoch's writers get XX000 naming it, it is
    undone, and writes go on; what was acknowledged survives a restart."""
    monkeypatch.setenv("HEADWATER_FAULT_INJECTION", "1")
    server = HeadwaterServer(tmp_path / "data", args=["--no-tls"]).start()
    fault = server.data_dir / "faults" / "epoch_assembly"  # storage/commit.py
    fault.parent.mkdir()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, b text, tags text[])")
            conn.execute("INSERT INTO t VALUES (1, 'one', '{a}')")
            for write in (
                "INSERT INTO t VALUES (2, 'two', '{b}')",  # the fast path (batcher)
                "UPDATE t SET b = 'uno' WHERE id = 1",  # a point write
                "INSERT INTO t SELECT 2, 'two', ARRAY['b']",  # a writing transaction
            ):
                fault.touch()
                with pytest.raises(errors.InternalError) as e:
                    _answered(server, lambda w=write: conn.execute(w))
                assert "could not write epoch" in str(e.value), write
                assert "injected fault" in str(e.value)
                assert "report it" in (e.value.diag.message_hint or "")
                assert not fault.exists()
                rows = _answered(
                    server, lambda: conn.execute("SELECT * FROM t ORDER BY id").fetchall()
                )
                assert rows == [(1, "one", ["a"])], write
            # writes go on, the same keys included (the failed epoch was undone)
            _answered(server, lambda: conn.execute("INSERT INTO t VALUES (2, 'two', '{b}')"))
            with conn.transaction():
                conn.execute("UPDATE t SET b = 'uno' WHERE id = 1")
                conn.execute("INSERT INTO t VALUES (3, 'three', '{}')")
            acknowledged = conn.execute("SELECT * FROM t ORDER BY id").fetchall()
            assert acknowledged == [(1, "uno", ["a"]), (2, "two", ["b"]), (3, "three", [])]
        server.stop()
        server = HeadwaterServer(server.data_dir, port=server.port, args=server.args).start()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == acknowledged
    finally:
        server.stop()
