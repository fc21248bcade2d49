"""Protocol behaviours: cancellation, portals with row limits, settings, startup errors."""

from __future__ import annotations

import asyncio
import threading

import asyncpg
import psycopg
import pytest
from psycopg import errors


def test_cancel_request_stops_a_running_query(hw_server) -> None:  # type: ignore[no-untyped-def]
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        timer = threading.Timer(0.5, conn.cancel)
        timer.start()
        with pytest.raises(errors.QueryCanceled):  # (uncancelled it would run for hours)
            conn.execute("SELECT count(*) FROM range(1000000000000) AS a(x) WHERE x % 7 = 3")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on


def test_execute_row_limit_suspends_portal(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        conn = await asyncpg.connect(
            host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
        )
        await conn.execute(f"CREATE TABLE {table_name} (x int)")
        await conn.execute(
            f"INSERT INTO {table_name} SELECT g FROM generate_series(1, 100) AS t(g)"
        )
        async with conn.transaction():
            cur = await conn.cursor(f"SELECT x FROM {table_name} ORDER BY x")
            first = await cur.fetch(30)  # Execute with a row limit: PortalSuspended
            second = await cur.fetch(100)
        assert [r[0] for r in first] == list(range(1, 31))
        assert [r[0] for r in second] == list(range(31, 101))
        await conn.close()

    asyncio.run(run())


def test_schemas_truncate_and_search_path(conn: psycopg.Connection, table_name: str) -> None:
    s = f"{table_name}_s"
    conn.execute(f"CREATE SCHEMA {s}")
    with pytest.raises(errors.DuplicateSchema):
        conn.execute(f"CREATE SCHEMA {s}")
    conn.execute(f"CREATE TABLE {s}.items (x int)")
    conn.execute(f"INSERT INTO {s}.items VALUES (1), (2)")
    with pytest.raises(errors.UndefinedTable):
        conn.execute("SELECT * FROM items")
    conn.execute(f"SET search_path = {s}, public")
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (2,)
    assert conn.execute("TRUNCATE items").statusmessage == "TRUNCATE TABLE"
    assert conn.execute("SELECT count(*) FROM items").fetchone() == (0,)
    conn.execute("RESET search_path")
    with pytest.raises(errors.DependentObjectsStillExist):
        conn.execute(f"DROP SCHEMA {s}")
    conn.execute(f"DROP SCHEMA {s} CASCADE")


def test_set_show_and_parameter_status(hw_server) -> None:  # type: ignore[no-untyped-def]
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        assert conn.info.parameter_status("server_version") == "15.0"
        assert conn.info.parameter_status("integer_datetimes") == "on"
        assert conn.execute("SHOW DateStyle").fetchone() == ("ISO, MDY",)
        conn.execute("SET extra_float_digits = 0")
        assert conn.execute("SHOW extra_float_digits").fetchone() == ("0",)
        with pytest.raises(errors.UndefinedObject):
            conn.execute("SET no_such_setting = 1")
        conn.execute("SET application_name = 'probe'")
        assert conn.execute("SHOW application_name").fetchone() == ("probe",)


def test_write_reports_epoch_token(conn: psycopg.Connection, table_name: str) -> None:
    conn.execute(f"CREATE TABLE {table_name} (x int)")
    conn.execute(f"INSERT INTO {table_name} VALUES (1)")
    first = int(conn.info.parameter_status("headwater_epoch") or 0)
    conn.execute(f"INSERT INTO {table_name} VALUES (2)")
    assert int(conn.info.parameter_status("headwater_epoch") or 0) > first > 0


def test_unknown_database_is_3d000(hw_server) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(psycopg.OperationalError, match='database "nope" does not exist'):
        psycopg.connect(f"host={hw_server.host} port={hw_server.port} user=headwater dbname=nope")


def test_malformed_bytes_close_only_that_connection(hw_server) -> None:  # type: ignore[no-untyped-def]
    import socket
    import struct

    with psycopg.connect(hw_server.dsn, autocommit=True) as healthy:
        with socket.create_connection((hw_server.host, hw_server.port)) as s:
            s.sendall(struct.pack("!ii", 8, 12345678))  # unknown protocol version
            s.settimeout(5)
            data = s.recv(4096)
            assert data[:1] == b"E"
        assert healthy.execute("SELECT 1").fetchone() == (1,)


def test_startup_options_set_parameters(hw_server) -> None:  # type: ignore[no-untyped-def]
    """libpq's options (PGOPTIONS): -c name=value and --name=value, as PostgreSQL applies them."""
    opts = r"-c headwater.freshness_timeout=600s -cstatement_timeout=5s --application-name=a\ b"
    with psycopg.connect(hw_server.dsn, options=opts, autocommit=True) as c:
        assert c.execute("SHOW headwater.freshness_timeout").fetchone() == ("600s",)
        assert c.execute("SHOW statement_timeout").fetchone() == ("5s",)
        assert c.execute("SHOW application_name").fetchone() == ("a b",)
