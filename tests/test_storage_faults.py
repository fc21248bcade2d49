"""Storage faults: a full disk gives writers 53100, corrupts nothing, and writing
resumes by itself once space returns. The data directory lives on a small tmpfs
(needs root to mount; skipped otherwise)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from tests.hwserver import HeadwaterServer


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


def test_disk_full_refuses_writes_then_recovers(small_disk: Path) -> None:
    server = HeadwaterServer(
        small_disk / "data", args=["--min-free-space-mb", "8", "--no-tls"]
    ).start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE blobs (id int PRIMARY KEY, b text)")
            conn.execute("INSERT INTO blobs VALUES (0, 'first')")
            filler = "x" * (1 << 20)
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
